"""claims.md's verdicts at the demo's design, simulated, and the power of the printed MDE.

    python perf/claims_calibration.py [--reps 2000] [--power-reps 2000]

First table: every claim's true difference on the boundary of its claim (tests/test_claims_calibration.py's
model and design: the world's case counts, the regimes' arms and seeds), the share of files with any
decisive verdict (holds or contradicted: on the boundary either is wrong), with the file's Bonferroni-
simultaneous intervals and with unadjusted 95% intervals (what claims.md used to print), and the largest
per-finding rate.

Second table: the crossed design (seed and case random effects, normal outcomes, 5 seeds x 600 cases):
the size of the paired t test, the power at the MDE computed from the true variance components, and
the power at the MDE a run prints (its own estimate), each by simulation, beside the power the
formula predicts for a printed MDE (stats.power_of_test at each run's estimate, averaged).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from mosaictool.analysis import stats  # noqa: E402
from mosaictool.console import console_logging
from test_claims_calibration import family_wise  # noqa: E402  the test's own model and design


def crossed(rng, reps: int, seeds: int, cases: int, seed_sd: float, case_sd: float, err_sd: float, delta):
    """(mean, noisy part, known part, df) of `reps` differences d[s, i] = delta + u_s + v_i + e_si."""
    delta = np.broadcast_to(np.asarray(delta, dtype=np.float64), (reps,))
    out = []
    for start in range(0, reps, 500):
        step = delta[start:start + 500]
        r = len(step)
        d = (step[:, None, None] + rng.normal(0, seed_sd, (r, seeds, 1)) + rng.normal(0, case_sd, (r, 1, cases))
             + rng.normal(0, err_sd, (r, seeds, cases)))
        a, b, df = stats.variance_parts(d)
        out.append((d.mean(axis=(1, 2)), a, b))
    return *(np.concatenate(parts) for parts in zip(*out)), df


def power_row(rng, reps: int, seeds: int, cases: int, seed_sd: float, case_sd: float, err_sd: float = 0.5) -> str:
    a_true = (err_sd ** 2 + cases * seed_sd ** 2) / (seeds * cases)  # E[MS_seed] / (S I)
    b_true = case_sd ** 2 / cases  # (E[MS_case] - E[MS_err]) / (S I)
    df = float(seeds - 1)
    mde = stats.minimal_detectable_effect(a_true, b_true, df)
    m0, a0, b0, _ = crossed(rng, reps, seeds, cases, seed_sd, case_sd, err_sd, 0.0)
    size = float(np.mean(stats.t_test(m0, a0, b0, df) < 0.05))
    m1, a1, b1, _ = crossed(rng, reps, seeds, cases, seed_sd, case_sd, err_sd, mde)
    power_true = float(np.mean(stats.t_test(m1, a1, b1, df) < 0.05))
    printed = np.array([stats.minimal_detectable_effect(x, y, df) for x, y in zip(a0, b0)])  # each null run's printed MDE
    m2, a2, b2, _ = crossed(rng, reps, seeds, cases, seed_sd, case_sd, err_sd, printed)  # a new run at that effect
    power_printed = float(np.mean(stats.t_test(m2, a2, b2, df) < 0.05))
    predicted = float(np.mean([stats.power_of_test(e, a_true, b_true, df) for e in printed]))
    return (f"| {seeds} | {cases} | {a_true / (a_true + b_true):.2f} | {size:.3f} | {mde:.3f} | {power_true:.3f} | "
            f"{np.median(printed) / mde:.2f} | {np.mean(printed < mde):.2f} | {power_printed:.3f} | {predicted:.3f} |")


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000, help="null files per setting of the first table")
    parser.add_argument("--power-reps", type=int, default=2000, help="runs per setting of the second table")
    args = parser.parse_args()
    print("| seeds | seed SD | case SD | findings | any wrong verdict (simultaneous) | any (unadjusted 95%) | "
          "largest per finding |")
    print("|---|---|---|---|---|---|---|")
    for seeds, seed_sd, item_sd in ((5, 0.02, 0.02), (5, 0.0, 0.0), (5, 0.0, 0.1), (10, 0.02, 0.02)):
        rng = np.random.default_rng(seeds * 100 + int(1000 * (seed_sd + item_sd)))
        rate, unadjusted, per_finding, m = family_wise(rng, args.reps, seeds, seed_sd, item_sd)
        print(f"| {seeds} | {100 * seed_sd:.0f} pts | {100 * item_sd:.0f} pts | {m} | {rate:.3f} | {unadjusted:.3f} | "
              f"{per_finding.max():.4f} |", flush=True)
    print()
    print("| seeds | cases | seed share | size 0.05 | MDE (true parts) | power at it | printed MDE / true (median) | "
          "share printed below true | power at the printed MDE | formula at the printed MDE |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seed_sd, case_sd in ((0.1, 0.0), (0.05, 0.3), (0.05, 0.6), (0.05, 1.2), (0.0, 1.0)):
        rng = np.random.default_rng(int(1000 * (seed_sd + case_sd)))
        print(power_row(rng, args.power_reps, 5, 600, seed_sd, case_sd), flush=True)


if __name__ == "__main__":
    main()
