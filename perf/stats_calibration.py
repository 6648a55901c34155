"""The demo's paired test at its design, simulated: false-positive rate at alpha 0.05 and 0.01 under
the null, and power at the MDE the test reports, for seeds x cases of binary outcomes with seed and
method x case effects (tests/test_stats_calibration.py asserts the same, at fewer settings).

    python perf/stats_calibration.py [--reps 4000]

Prints one markdown row per setting: the seed share of the variance, size at 0.05 / 0.01, the MDE
and the power at it; and the rule this replaced (the seed term pooled when MS_seed <= MS_err,
Satterthwaite df) at 0.01 for comparison.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from mosaictool.analysis import stats  # noqa: E402
from mosaictool.console import console_logging
from test_stats_calibration import _simulate, pooled_rule_rejects, shift_for  # noqa: E402  the test's own outcome model


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4000)
    args = parser.parse_args()
    print("| seeds | cases | seed SD | case SD | seed share | size 0.05 | size 0.01 | MDE (pts) | power at MDE | pooled rule, size 0.01 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seeds in (5, 10):
        for cases in (1200, 2400):
            for seed_sd, item_sd in ((0.0, 0.0), (0.01, 0.02), (0.02, 0.02), (0.04, 0.05), (0.0, 0.1), (0.01, 0.25)):
                rng = np.random.default_rng(seeds * 1000 + cases + int(1000 * (seed_sd + item_sd)))
                diff, noisy, known, df = _simulate(rng, args.reps, seeds, cases, seed_sd, item_sd)
                p = stats.t_test(diff, noisy, known, df)
                a, b = float(noisy.mean()), float(known.mean())
                mde = stats.minimal_detectable_effect(a, b, df)
                d1, n1, k1, _ = _simulate(rng, args.reps, seeds, cases, seed_sd, item_sd,
                                          delta=shift_for(rng, mde, seeds, cases, seed_sd, item_sd))
                power = float(np.mean(stats.t_test(d1, n1, k1, df) < 0.05))
                old = pooled_rule_rejects(rng, args.reps, seeds, cases, seed_sd, item_sd)
                print(f"| {seeds} | {cases} | {100 * seed_sd:.0f} pts | {100 * item_sd:.0f} pts | {a / (a + b):.2f} | "
                      f"{np.mean(p < 0.05):.3f} | {np.mean(p < 0.01):.4f} | {100 * mde:.2f} | {power:.3f} | {old:.4f} |", flush=True)


if __name__ == "__main__":
    main()
