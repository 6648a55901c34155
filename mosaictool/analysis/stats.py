"""Paired comparisons of two models over seeds and test cases, and the power they have.

A demo result is a matrix of outcomes per (seed, case): seed s of method A and seed s of method B
start from the same base with the same data order, and answer the same test cases. Both are drawn
at random (a new seed, a new world would give others), so the difference of the means carries two
kinds of noise: training noise (seeds) and the choice of test cases (items). With d[s, i] = A - B,
the two-way random-effects ANOVA (one observation per cell) has

    E[MS_seed] = s2_err + I s2_seed,   E[MS_item] = s2_err + S s2_item,   E[MS_err] = s2_err
    Var(mean d) = s2_seed / S + s2_item / I + s2_err / (S I)
                = (E[MS_seed] + E[MS_item] - E[MS_err]) / (S I)

and we estimate it by (MS_seed + max(MS_item - MS_err, 0)) / (S I): the seed mean square always
enters as it is (never pooled into the error when it happens to fall below MS_err: that pooling
turned 5 seeds into a z-test and doubled the false positives), the case component is truncated at
zero (it has I - 1 >= hundreds of degrees of freedom, so the truncation is rare and harmless).

The test is Student's t with S - 1 degrees of freedom, those of the seed mean square: exact when
the seed term dominates the variance, conservative when the case term does (its own df are many).
Satterthwaite's df, which adapt to the mix, were liberal at 5 seeds (about 1.5% false positives at
a nominal 1%): when MS_seed comes out small by chance the df grow exactly when the SE shrinks.
tests/test_stats_calibration.py checks the size and the power by simulation at the demo's design.

The minimal detectable effect (MDE) is computed for this very test: the true difference that it
rejects with probability 1 - beta at two-sided level alpha, when the variance components are the
ones estimated here. With SE^2 = A + B, A = a X / nu (X ~ chi2(nu), the noisy seed part) and B = b
(the case part, known to its many df), the power at an effect delta is

    E_X[ P(|N(delta, a + b)| > t_{1-alpha/2, nu} sqrt(a X / nu + b)) ]

integrated over X numerically (no simulation noise); with b = 0 it is the noncentral t's power.
The MDE is an estimate (its variance components come from this run's S seeds), and is called so.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

# p-values below this are printed as "p < 1e-4": with a handful of seeds the t tail beyond it rests
# on the normal model's far tail, which no simulation at our design has checked.
P_FLOOR = 1e-4
_QUADRATURE_POINTS = 2000  # midpoints in probability of chi2(nu): the power integral to ~1e-6


@dataclass(frozen=True)
class Paired:
    """A - B over seeds x cases (fractions; x100 for points)."""

    diff: float  # mean of A - B
    se: float  # its standard error, seeds and cases both random
    df: float  # degrees of freedom of the t test: S - 1 (the cases' I - 1 with one seed)
    p: float  # two-sided p of H0: no difference
    mde: float  # estimated MDE: the |diff| this test detects with 80% power at alpha 0.05 (two-sided)
    seeds: int
    cases: int
    seed_variance_measured: bool
    noisy_part: float = 0.0  # SE^2's part with df degrees of freedom (the seeds'; the cases' with one seed)
    case_part: float = 0.0  # SE^2's case part, taken as known

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        half = stats.t.ppf(0.5 + level / 2, self.df) * self.se
        return self.diff - half, self.diff + half


def mean_squares(d: np.ndarray):
    """(MS_seed, MS_item, MS_err) of a seeds x cases matrix (two-way ANOVA, one value per cell); over
    the last two axes of a stack of such matrices (arrays then; floats for one matrix)."""
    d = np.asarray(d, dtype=np.float64)
    s, i = d.shape[-2:]
    grand = d.mean(axis=(-2, -1))
    by_seed, by_item = d.mean(axis=-1), d.mean(axis=-2)
    nan = np.full(grand.shape, np.nan)
    ms_seed = i * np.sum((by_seed - grand[..., None]) ** 2, axis=-1) / (s - 1) if s > 1 else nan
    ms_item = s * np.sum((by_item - grand[..., None]) ** 2, axis=-1) / (i - 1) if i > 1 else nan
    # residual sum of squares without materialising the residual matrix
    sse = np.sum(d ** 2, axis=(-2, -1)) - i * np.sum(by_seed ** 2, axis=-1) - s * np.sum(by_item ** 2, axis=-1) + s * i * grand ** 2
    ms_err = sse / ((s - 1) * (i - 1)) if s > 1 and i > 1 else nan
    if d.ndim == 2:
        return float(ms_seed), float(ms_item), float(ms_err)
    return ms_seed, ms_item, ms_err


def variance_parts(d: np.ndarray):
    """(a, b, nu): Var(mean d) estimated as a + b, where a has nu degrees of freedom (the seed mean
    square's S - 1) and b (the case component) is taken as known. One seed: the training noise is
    not measured, a is the cases' variance of the mean with I - 1 df and b = 0. Over the last two
    axes of a stack of matrices (arrays then)."""
    d = np.asarray(d, dtype=np.float64)
    s, i = d.shape[-2:]
    if s == 1:
        noisy, known = np.var(d[..., 0, :], axis=-1, ddof=1) / i, np.zeros(d.shape[:-2])
        df = float(i - 1)
    else:
        ms_seed, ms_item, ms_err = mean_squares(d)
        noisy, known = np.asarray(ms_seed) / (s * i), np.maximum(np.asarray(ms_item) - ms_err, 0.0) / (s * i)
        df = float(s - 1)
    if d.ndim == 2:
        return float(noisy), float(known), df
    return noisy, known, df


# A variance of the estimate below this (an SE of 1e-6) is float rounding of equal scores, which live in [0, 1]
# or near it, not noise.
NO_VARIANCE = 1e-12


def t_test(diff, noisy, known, df: float):
    """Two-sided p of H0: no difference, for the estimate `diff` with SE^2 = noisy + known (vectorised).
    A comparison with no variance at all is untestable and gets p 1: equal models, or a few seeds whose
    coarse scores (a handful of cases) differ by the same amount, which measures no noise (t would be
    infinite, a certainty no run can give)."""
    diff, variance = np.asarray(diff, dtype=np.float64), np.asarray(noisy) + np.asarray(known)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * stats.t.sf(np.abs(diff) / np.sqrt(variance), df)
    p = np.where(variance > NO_VARIANCE, p, 1.0)
    return float(p) if p.ndim == 0 else p


def paired(a: np.ndarray, b: np.ndarray, alpha: float = 0.05, power: float = 0.8) -> Paired:
    """Compare A and B given their outcomes per (seed, case) (same shape; row s = seed s of each)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] < 2:
        raise ValueError(f"paired: two seeds x cases matrices of the same shape, at least 2 cases (got {a.shape}, {b.shape})")
    d = a - b
    s, i = d.shape
    noisy, known, df = variance_parts(d)
    diff = float(d.mean())
    return Paired(diff=diff, se=math.sqrt(noisy + known), df=df, p=t_test(diff, noisy, known, df),
                  mde=minimal_detectable_effect(noisy, known, df, alpha, power), seeds=s, cases=i,
                  seed_variance_measured=s > 1, noisy_part=noisy, case_part=known)


def seed_paired(a, b, alpha: float = 0.05, power: float = 0.8) -> Paired:
    """A - B when each seed gives one value per model (a column's accuracy, a tree-score): the paired
    t test over seeds (S - 1 df), with the same fields as `paired` (cases = 1)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.ndim != 1 or d.shape[0] < 2:
        raise ValueError(f"seed_paired: one value per seed for each model, at least 2 seeds (got {d.shape})")
    s = d.shape[0]
    noisy, df = float(np.var(d, ddof=1)) / s, float(s - 1)
    diff = float(d.mean())
    return Paired(diff=diff, se=math.sqrt(noisy), df=df, p=t_test(diff, noisy, 0.0, df),
                  mde=minimal_detectable_effect(noisy, 0.0, df, alpha, power), seeds=s, cases=1,
                  seed_variance_measured=True, noisy_part=noisy, case_part=0.0)


def power_of_test(effect: float, noisy: float, known: float, df: float, alpha: float = 0.05) -> float:
    """The probability that `paired`'s two-sided test at `alpha` rejects when the true difference is
    `effect` and the variance parts are (noisy, known, df) as in variance_parts (normal model)."""
    total = noisy + known
    if total <= 0:
        return 1.0 if effect != 0 else alpha
    crit = stats.t.ppf(1 - alpha / 2, df)
    threshold = crit * np.sqrt(noisy * _chi2_grid(df) / df + known)
    sd = math.sqrt(total)
    reject = stats.norm.sf((threshold - effect) / sd) + stats.norm.cdf((-threshold - effect) / sd)
    return float(reject.mean())


@functools.lru_cache(maxsize=64)
def _chi2_grid(df: float) -> np.ndarray:
    """Midpoints in probability of chi2(df): the nodes of power_of_test's integral."""
    return stats.chi2.ppf((np.arange(_QUADRATURE_POINTS) + 0.5) / _QUADRATURE_POINTS, df)


def minimal_detectable_effect(noisy: float, known: float, df: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true |difference| that `paired`'s test detects with probability `power` (see
    power_of_test); 0 when the comparison has no variance."""
    total = noisy + known
    if total <= 0:
        return 0.0
    sd = math.sqrt(total)
    high = 2 * sd
    while power_of_test(high, noisy, known, df, alpha) < power:
        high *= 2
    return float(optimize.brentq(lambda e: power_of_test(e, noisy, known, df, alpha) - power, 0.0, high, xtol=1e-9 * sd))


def format_p(p: float, floor: float = P_FLOOR) -> str:
    """A p-value as the report prints it: two significant digits, "p < 1e-4" below the floor."""
    return f"p < {floor:g}" if p < floor else f"p = {p:.2g}"


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (statsmodels' multipletests)."""
    from statsmodels.stats.multitest import multipletests

    if not pvalues:
        return []
    return [float(p) for p in multipletests(pvalues, method="holm")[1]]
