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
    # seed component truncated (MS_seed = MS_err), case component kept: Var = MS_item / (S I) = 1/12, df = 2
    assert r.diff == pytest.approx(0.5)
    assert r.se == pytest.approx(math.sqrt(1 / 12))
    assert r.df == pytest.approx(2.0)
    # t = sqrt(3) with 2 df: P(|T| > t) = 1 - t / sqrt(t^2 + 2)
    assert r.p == pytest.approx(1 - math.sqrt(3) / math.sqrt(5))
    assert r.mde == pytest.approx((4.302652729749464 + 1.0606601717798212) * math.sqrt(1 / 12))
    lo, hi = r.ci(0.95)
    assert (lo + hi) / 2 == pytest.approx(0.5) and hi - lo == pytest.approx(2 * 4.302652729749464 * math.sqrt(1 / 12))
    assert r.seeds == 2 and r.cases == 3 and r.seed_variance_measured


def test_one_seed_uses_the_cases_alone_and_says_so():
    r = stats.paired(np.array([[1, 1, 1, 1]]), np.array([[0, 1, 0, 0]]))  # d = 1, 0, 1, 1
    assert r.diff == pytest.approx(0.75) and r.se == pytest.approx(math.sqrt(0.25 / 4)) and r.df == 3
    assert r.p == pytest.approx(0.05766888562243)  # two-sided t = 3, 3 df
    assert not r.seed_variance_measured


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
    with pytest.raises(ValueError, match="same shape"):
        stats.paired(np.ones((2, 5)), np.ones((3, 5)))
