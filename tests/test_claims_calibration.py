"""claims.md keeps its promise: at the demo's design, with every claim's true difference on the boundary
of its claim (0 for "improves", -1 point for "within 1%", a 10% drop for "> 10% hit" and for
"similar"), the chance that the file prints any decisive verdict (holds or contradicted) is at most
5%. On the boundary either verdict is as wrong as it can be (a true difference a hair on either side
makes one of them wrong), so this bounds the family-wise rate of a wrong "holds" or "contradicted".

The design is read from the code: the world's test cases per ARO column (world.generate's sizes at
the demo's eval scale), the scratch regime's seeds (DemoConfig), the regimes' arms and the claims
they make (mosaictool.demo.experiments), and every comparison goes through mosaictool's own
variance estimate (stats.variance_parts) and verdict (claims.simultaneous_interval, claims.verdict).
Outcomes follow tests/test_stats_calibration.py's model: case i has a base rate pi_i ~ U(0.25, 0.75)
shared by a regime's arms; arm m on seed s answers it with probability pi_i + c_mi + e_ms + shift_m.
Every regime's control is taken as passed (all 19 findings get a verdict: the worst case).
"""

from __future__ import annotations

import numpy as np
from scipy import stats as sp

from mosaictool.analysis import stats
from mosaictool.demo import claims as cl
from mosaictool.demo.config import DemoConfig
from mosaictool.demo.experiments import efficiency, noisy

CHUNK = 50  # replicates simulated at once (memory: CHUNK x seeds x 5,100 cases x float32 per arm)
ARO = ("relation", "attribute", "order")


def case_counts(cfg: DemoConfig | None = None) -> dict[str, int]:
    """Test cases per ARO column of the world the demo generates (world.generate at cfg's eval scale)."""
    from mosaictool.world import splits
    from mosaictool.world.generate import eval_sizes
    from mosaictool.world.vocab import RELATIONS

    n = eval_sizes((cfg or DemoConfig()).eval_scale)
    return {"relation": n["relation_per_predicate"] * len(RELATIONS),
            "attribute": n["attribution_per_group"] * len(splits.attribution_groups()), "order": n["order_images"]}


def _arms(rng, r: int, seeds: int, cases: int, shifts: dict[str, np.ndarray | float], seed_sd: float, item_sd: float):
    """{arm: r x seeds x cases hits (float32)} on shared cases, and the cases' base rates (r x 1 x cases)."""
    pi = rng.uniform(0.25, 0.75, (r, 1, cases)).astype(np.float32)
    out = {}
    for arm, shift in shifts.items():
        shift = shift(pi) if callable(shift) else shift
        p = pi + rng.normal(0, item_sd, (r, 1, cases)).astype(np.float32) + rng.normal(0, seed_sd, (r, seeds, 1)).astype(np.float32)
        out[arm] = (rng.random((r, seeds, cases), dtype=np.float32) < np.clip(p + shift, 0, 1)).astype(np.float32)
    return out


def _cols(arm: np.ndarray, counts: dict[str, int], columns) -> np.ndarray:
    """The cases of `columns` of an arm simulated over the ARO columns side by side (relation, attribute, order)."""
    edges = np.cumsum([0] + [counts[c] for c in ARO])
    return np.concatenate([arm[..., edges[ARO.index(c)]:edges[ARO.index(c) + 1]] for c in columns], axis=-1)


def _case_test(d: np.ndarray):
    noisy_part, known, df = stats.variance_parts(d)
    return d.mean(axis=(1, 2), dtype=np.float64), np.sqrt(noisy_part + known), df


def _seed_test(rng, r: int, seeds: int, sd: float = 0.01):
    """A claim read as one value per seed (productivity R@1, recognition, tree-score, CREPE unseen)."""
    d = rng.normal(0, sd, (r, seeds))
    return d.mean(axis=1), d.std(axis=1, ddof=1) / np.sqrt(seeds), float(seeds - 1)


def simulate_findings(rng, r: int, seeds: int, seed_sd: float, item_sd: float, counts: dict[str, int] | None = None,
                      scratch_seeds: int | None = None):
    """Every finding of claims.md on `r` null replicates: [(name, test, diff, se, df, margin)], arrays of r."""
    counts = counts or case_counts()
    scratch_seeds = scratch_seeds or DemoConfig().scratch_seeds
    total = sum(counts[c] for c in ARO)
    out = []
    # the table's regime: MosaiCLIP, its variants and NegCLIP from the demo's base; less data at the -1 point boundary
    shifts = {"NegCLIP": 0.0, "MosaiCLIP": 0.0, "no curriculum": 0.0, "WiSE-FT": 0.0,
              "0.3x": -efficiency.MARGIN, "0.5x": -efficiency.MARGIN}
    arms = _arms(rng, r, seeds, total, shifts, seed_sd, item_sd)
    for col in ARO:
        out.append((f"table: MosaiCLIP − NegCLIP, {col}", "superiority",
                    *_case_test(_cols(arms["MosaiCLIP"] - arms["NegCLIP"], counts, (col,))), 0.0))
    out.append(("table: curriculum, ARO", "superiority", *_case_test(arms["MosaiCLIP"] - arms["no curriculum"]), 0.0))
    out.append(("table: WiSE-FT − NegCLIP, ARO", "superiority", *_case_test(arms["WiSE-FT"] - arms["NegCLIP"]), 0.0))
    for frac in ("0.3x", "0.5x"):
        out.append((f"efficiency: {frac} − NegCLIP, ARO", "non-inferiority", *_case_test(arms[frac] - arms["NegCLIP"]),
                    efficiency.MARGIN))
    for name in ("productivity", "recognition", "tree-score"):
        out.append((f"table: {name}", "superiority", *_seed_test(rng, r, seeds), 0.0))
    # the teaching regime (its own base) and pretraining from scratch (its own seeds)
    arms = _arms(rng, r, seeds, total, {"NegCLIP": 0.0, "MosaiCLIP": 0.0}, seed_sd, item_sd)
    for col in ARO:
        out.append((f"teach: MosaiCLIP − NegCLIP, {col}", "superiority",
                    *_case_test(_cols(arms["MosaiCLIP"] - arms["NegCLIP"], counts, (col,))), 0.0))
    arms = _arms(rng, r, scratch_seeds, total, {"NegCLIP": 0.0, "MosaiCLIP": 0.0}, seed_sd, item_sd)
    for col in ("relation", "attribute"):
        out.append((f"scratch: MosaiCLIP − NegCLIP, {col}", "superiority",
                    *_case_test(_cols(arms["MosaiCLIP"] - arms["NegCLIP"], counts, (col,))), 0.0))
    out.append(("scratch: unseen", "superiority", *_seed_test(rng, r, scratch_seeds), 0.0))
    # noisy captions: each noisy arm drops exactly 10% of the clean arm's expected accuracy on these cases
    drop = lambda pi: -noisy.HIT * pi.mean(axis=-1, keepdims=True)  # noqa: E731
    arms = _arms(rng, r, seeds, total, {"NegCLIP clean": 0.0, "NegCLIP noisy": drop, "MosaiCLIP clean": 0.0,
                                        "MosaiCLIP noisy": drop}, seed_sd, item_sd)
    for row, test in (("NegCLIP", "superiority"), ("MosaiCLIP", "equivalence")):
        margin = noisy.HIT * arms[f"{row} clean"].mean(axis=(1, 2), dtype=np.float64)  # noisy.run's margin
        out.append((f"noisy: {row} clean − noisy", test, *_case_test(arms[f"{row} clean"] - arms[f"{row} noisy"]), margin))
    # the towers: (MosaiCLIP − NegCLIP | text tower only) − (... | image tower only), relation and attribute cases
    arms = _arms(rng, r, seeds, counts["relation"] + counts["attribute"],
                 {"NegCLIP text": 0.0, "MosaiCLIP text": 0.0, "NegCLIP image": 0.0, "MosaiCLIP image": 0.0}, seed_sd, item_sd)
    out.append(("towers: text gain − image gain", "superiority",
                *_case_test(arms["MosaiCLIP text"] - arms["NegCLIP text"] - arms["MosaiCLIP image"] + arms["NegCLIP image"]), 0.0))
    return out


def decisive(findings, alpha: float) -> np.ndarray:
    """reps x findings: whether each finding's verdict is holds or contradicted, its interval at 1 − alpha."""
    cols = []
    for _, test, diff, se, df, margin in findings:
        words = cl.verdict(*cl.simultaneous_interval(diff, se, df, alpha), test, margin)
        cols.append(np.isin(words, (cl.HOLDS, cl.CONTRADICTED)))
    return np.stack(cols, axis=1)


def family_wise(rng, reps: int, seeds: int, seed_sd: float, item_sd: float) -> tuple[float, float, np.ndarray, int]:
    """(the file's rate of any wrong verdict, the same with unadjusted 95% intervals, per-finding rates, m)."""
    new, old = [], []
    for start in range(0, reps, CHUNK):
        findings = simulate_findings(rng, min(CHUNK, reps - start), seeds, seed_sd, item_sd)
        m = len(findings)
        new.append(decisive(findings, cl.finding_alpha(m)))
        old.append(decisive(findings, 0.05))
    new, old = np.concatenate(new), np.concatenate(old)
    return float(new.any(axis=1).mean()), float(old.any(axis=1).mean()), new.mean(axis=0), m


def test_the_files_family_wise_rate_is_at_most_five_percent():
    """5 seeds (the claims run's), the world's case counts, seed and case effects of 2 points: the file's
    19 findings give a wrong verdict together at most 5% of the time (binomial 99% bound of 1,000
    replicates); the unadjusted 95% intervals the file used to print would give one in most files."""
    reps = 1000
    rate, unadjusted, per_finding, m = family_wise(np.random.default_rng(0), reps, 5, 0.02, 0.02)
    assert m == 19
    assert rate <= sp.binom.ppf(0.995, reps, cl.ALPHA) / reps, f"family-wise rate {rate:.3f}"
    assert unadjusted > 0.4
    assert per_finding.max() <= sp.binom.ppf(0.995, reps, cl.ALPHA / m) / reps + 1e-9


def test_design_is_read_from_the_code():
    counts = case_counts()
    assert counts == {"relation": 2400, "attribute": 1500, "order": 1200}
    assert DemoConfig().scratch_seeds == 3
