"""Paired comparisons of two models over seeds and test cases, and the power they have.

A demo result is a matrix of outcomes per (seed, case): seed s of method A and seed s of method B
start from the same base with the same data order, and answer the same test cases. Both are drawn
at random (a new seed, a new world would give others), so the difference of the means carries two
kinds of noise: training noise (seeds) and the choice of test cases (items). With d[s, i] = A - B,
the two-way random-effects ANOVA (one observation per cell) gives

    MS_seed = I * var_s(mean_i d),  MS_item = S * var_i(mean_s d),  MS_err = the interaction's mean square
    Var(mean d) = sigma2_seed / S + sigma2_item / I + sigma2_err / (S * I)
                = [max(MS_seed - MS_err, 0) + max(MS_item - MS_err, 0) + MS_err] / (S * I)

(variance components truncated at zero, as usual), with Satterthwaite's degrees of freedom. The
test is Student's t on that standard error (scipy), and the minimal detectable effect (MDE) at
power 1 - beta and two-sided level alpha is (t_{1-alpha/2} + t_{1-beta}) * SE. One seed leaves the
seed term unmeasured: the SE is then the items' alone, and `seed_variance_measured` says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Paired:
    """A - B over seeds x cases (fractions; x100 for points)."""

    diff: float  # mean of A - B
    se: float  # its standard error, seeds and cases both random
    df: float  # Satterthwaite's degrees of freedom of se
    p: float  # two-sided p of H0: no difference
    mde: float  # the smallest |diff| this design detects with 80% power at alpha 0.05 (two-sided)
    seeds: int
    cases: int
    seed_variance_measured: bool

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        half = stats.t.ppf(0.5 + level / 2, self.df) * self.se
        return self.diff - half, self.diff + half


def mean_squares(d: np.ndarray) -> tuple[float, float, float]:
    """(MS_seed, MS_item, MS_err) of a seeds x cases matrix (two-way ANOVA, one value per cell)."""
    d = np.asarray(d, dtype=np.float64)
    s, i = d.shape
    grand = d.mean()
    by_seed, by_item = d.mean(axis=1), d.mean(axis=0)
    ms_seed = i * np.sum((by_seed - grand) ** 2) / (s - 1) if s > 1 else float("nan")
    ms_item = s * np.sum((by_item - grand) ** 2) / (i - 1) if i > 1 else float("nan")
    resid = d - by_seed[:, None] - by_item[None, :] + grand
    ms_err = np.sum(resid ** 2) / ((s - 1) * (i - 1)) if s > 1 and i > 1 else float("nan")
    return float(ms_seed), float(ms_item), float(ms_err)


def paired(a: np.ndarray, b: np.ndarray, alpha: float = 0.05, power: float = 0.8) -> Paired:
    """Compare A and B given their outcomes per (seed, case) (same shape; row s = seed s of each)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] < 2:
        raise ValueError(f"paired: two seeds x cases matrices of the same shape, at least 2 cases (got {a.shape}, {b.shape})")
    d = a - b
    s, i = d.shape
    if s == 1:  # the training noise is not measured: cases alone
        terms = [(float(np.var(d[0], ddof=1)) * s, i - 1, 1.0)]
    else:
        ms_seed, ms_item, ms_err = mean_squares(d)
        c_err = 1.0 - (ms_seed > ms_err) - (ms_item > ms_err)
        terms = [(ms_err, (s - 1) * (i - 1), c_err)]
        terms += [(ms, df, 1.0) for ms, df in ((ms_seed, s - 1), (ms_item, i - 1)) if ms > ms_err]
    total = sum(c * ms for ms, _, c in terms)
    var = total / (s * i)
    if total > 0:
        df = total ** 2 / sum((c * ms) ** 2 / df for ms, df, c in terms if c * ms != 0)
    else:  # A and B agree on every case of every seed
        df = float(s * i - 1)
    se = float(np.sqrt(max(var, 0.0)))
    diff = float(d.mean())
    if se > 0:
        p = float(2 * stats.t.sf(abs(diff) / se, df))
    else:
        p = 1.0 if diff == 0 else 0.0
    return Paired(diff=diff, se=se, df=float(df), p=p, mde=minimal_detectable_effect(se, df, alpha, power),
                  seeds=s, cases=i, seed_variance_measured=s > 1)


def minimal_detectable_effect(se: float, df: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The true difference a two-sided t-test at `alpha` detects with probability `power`, given the
    standard error of the estimate (the normal-approximation formula with t quantiles)."""
    return float((stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * se)
