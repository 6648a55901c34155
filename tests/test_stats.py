"""The paired-comparison statistics (mosaictool.analysis.stats) against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mosaictool.analysis import stats


def test_mean_squares_and_paired_test_by_hand():
    # d = a - b = [[1, 0, 0], [1, 0, 1]]: grand mean 1/2, seed means 1/3 and 2/3, case means 1, 0, 1/2
    a = np.array([[1, 1, 0], [1, 0, 1]])
    b = np.array([[0, 1, 0], [0, 0, 0]])
    ms_seed, ms_item, ms_err = stats.mean_squares(a - b)
    assert ms_seed == pytest.approx(3 * (1 / 36 + 1 / 36))  # I * sum (seed mean - grand)^2 / (S - 1) = 1/6
    assert ms_item == pytest.approx(2 * (0.25 + 0.25 + 0) / 2)  # S * sum (case mean - grand)^2 / (I - 1) = 1/2
    assert ms_err == pytest.approx(2 * (1 / 36 + 1 / 36 + 1 / 9) / 2)  # residuals +-1/6, +-1/6, -+1/3 over 2 df = 1/6
    r = stats.paired(a, b)
    # the seed mean square enters as it is, even though it equals MS_err here (no pooling):
    # Var = [MS_seed + (MS_item - MS_err)] / (S I) = (1/6 + 1/3) / 6 = 1/12, with S - 1 = 1 df
    assert r.diff == pytest.approx(0.5)
    assert r.se == pytest.approx(math.sqrt(1 / 12))
    assert r.noisy_part == pytest.approx(1 / 36) and r.case_part == pytest.approx(1 / 18)
    assert r.df == 1.0
    # t = sqrt(3) with 1 df (Cauchy): P(|T| > sqrt 3) = 1 - (2/pi) atan(sqrt 3) = 1/3
    assert r.p == pytest.approx(1 / 3)
    assert stats.power_of_test(r.mde, r.noisy_part, r.case_part, r.df) == pytest.approx(0.8, abs=1e-6)
    lo, hi = r.ci(0.95)
    assert (lo + hi) / 2 == pytest.approx(0.5) and hi - lo == pytest.approx(2 * 12.706204736174707 * math.sqrt(1 / 12))
    assert r.seeds == 2 and r.cases == 3 and r.seed_variance_measured


def test_seed_term_is_never_pooled_into_the_error():
    """A seed mean square below MS_err used to be dropped and the df jumped to I - 1 (a z-test on
    5 seeds); now the df stay S - 1 and the seed mean square stays in the SE."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        d = rng.normal(0, 1, (5, 300))  # no seed effect: MS_seed < MS_err about half the time
        ms_seed, ms_item, ms_err = stats.mean_squares(d)
        r = stats.paired(d, np.zeros_like(d))
        assert r.df == 4
        assert r.se ** 2 == pytest.approx((ms_seed + max(ms_item - ms_err, 0)) / d.size)


def test_standard_error_equals_statsmodels_mixedlm():
    """Balanced crossed design, both components positive: the ANOVA estimate is REML's, so the SE of
    the mean equals statsmodels' MixedLM (seeds and cases as crossed variance components)."""
    pd = pytest.importorskip("pandas")
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(0)
    s, i = 5, 40
    d = rng.normal(0, 1, (s, i)) + rng.normal(0, 0.6, (s, 1)) + rng.normal(0, 0.8, (1, i)) + 0.3
    frame = pd.DataFrame({"y": d.ravel(), "seed": np.repeat(np.arange(s), i), "item": np.tile(np.arange(i), s), "g": 1})
    fit = smf.mixedlm("y ~ 1", frame, groups="g", vc_formula={"seed": "0 + C(seed)", "item": "0 + C(item)"}).fit(reml=True)
    r = stats.paired(d, np.zeros_like(d))
    assert r.diff == pytest.approx(fit.params["Intercept"], rel=1e-9)
    assert r.se == pytest.approx(fit.bse["Intercept"], rel=1e-4)


def test_power_integral_is_the_noncentral_t_when_the_seeds_carry_all_the_noise():
    """With no case part the test is an ordinary t test: its power is the noncentral t's (scipy)."""
    from scipy import stats as sp

    for df, effect in ((4, 0.5), (4, 2.0), (9, 1.0), (1, 3.0)):
        crit = sp.t.ppf(0.975, df)
        exact = sp.nct.sf(crit, df, effect) + sp.nct.cdf(-crit, df, effect)
        assert stats.power_of_test(effect, 1.0, 0.0, df) == pytest.approx(exact, abs=2e-4)
    # the case part (known to its many df) alone: a normal statistic against t's critical value with
    # the seeds' df, which the test keeps (conservative when the cases carry the noise)
    crit = sp.t.ppf(0.975, 4)
    assert stats.power_of_test(3.0, 1e-12, 1.0, 4) == pytest.approx(sp.norm.sf(crit - 3.0) + sp.norm.cdf(-crit - 3.0), abs=1e-6)
    assert stats.power_of_test(0.0, 1.0, 0.0, 4) == pytest.approx(0.05, abs=1e-4)


def test_mde_gives_the_power_asked_and_grows_with_alpha_strictness():
    r = stats.paired(np.random.default_rng(1).integers(0, 2, (5, 200)), np.random.default_rng(2).integers(0, 2, (5, 200)))
    assert stats.power_of_test(r.mde, r.noisy_part, r.case_part, r.df) == pytest.approx(0.8, abs=1e-6)
    strict = stats.minimal_detectable_effect(r.noisy_part, r.case_part, r.df, alpha=0.01)
    assert strict > r.mde
    # the old normal-approximation formula (t_{1-a/2} + t_{power}) * SE undershoots at 4 df
    from scipy import stats as sp

    assert r.mde > (sp.t.ppf(0.975, 4) + sp.t.ppf(0.8, 4)) * r.se * 0.999


def test_p_floor_and_holm():
    assert stats.format_p(3e-5) == "p < 0.0001"
    assert stats.format_p(0.0123) == "p = 0.012"
    # Holm: sorted p_(k) * (m - k + 1), running maximum, capped at 1
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([]) == []


def test_one_seed_uses_the_cases_alone_and_says_so():
    r = stats.paired(np.array([[1, 1, 1, 1]]), np.array([[0, 1, 0, 0]]))  # d = 1, 0, 1, 1
    assert r.diff == pytest.approx(0.75) and r.se == pytest.approx(math.sqrt(0.25 / 4)) and r.df == 3
    assert r.p == pytest.approx(0.05766888562243)  # two-sided t = 3, 3 df
    assert not r.seed_variance_measured
    assert stats.power_of_test(r.mde, r.noisy_part, r.case_part, r.df) == pytest.approx(0.8, abs=1e-6)


def test_seed_noise_widens_the_interval():
    """The same case-level disagreement, plus a seed that moves every case: the seed term enters the SE
    (a pooled test over seeds x cases, e.g. McNemar on the pooled table, would not see it)."""
    rng = np.random.default_rng(0)
    b = rng.integers(0, 2, size=(4, 400))
    flip = rng.random((4, 400)) < 0.1
    a_quiet = np.where(flip, 1 - b, b)
    shift = np.array([0.0, 0.3, 0.0, 0.3])[:, None]  # two seeds of A gain 30% of their cases
    a_noisy = np.where(rng.random((4, 400)) < shift, 1, a_quiet)
    quiet, noisy = stats.paired(a_quiet, b), stats.paired(a_noisy, b)
    assert noisy.se > 3 * quiet.se
    assert noisy.mde > quiet.mde


def test_identical_models_and_bad_shapes():
    same = np.ones((3, 5))
    r = stats.paired(same, same)
    assert r.diff == 0 and r.se == 0 and r.p == 1.0
    steady = stats.seed_paired([0.2, 0.2, 0.2], [0.1, 0.1, 0.1])  # the same gain on every seed: no noise measured
    assert steady.diff == pytest.approx(0.1) and steady.se < 1e-6 and steady.p == 1.0
    with pytest.raises(ValueError, match="same shape"):
        stats.paired(np.ones((2, 5)), np.ones((3, 5)))


def test_seed_paired_is_scipys_paired_t_test():
    from scipy import stats as sp

    a, b = [0.61, 0.70, 0.66, 0.72], [0.60, 0.64, 0.65, 0.61]
    r = stats.seed_paired(a, b)
    ref = sp.ttest_rel(a, b)
    assert r.p == pytest.approx(ref.pvalue) and r.diff == pytest.approx(np.mean(np.subtract(a, b)))
    lo, hi = r.ci()
    assert (lo, hi) == pytest.approx(tuple(ref.confidence_interval(0.95)))
    assert stats.power_of_test(r.mde, r.noisy_part, 0.0, r.df) == pytest.approx(0.8, abs=1e-6)
    with pytest.raises(ValueError):
        stats.seed_paired([0.5], [0.4])
