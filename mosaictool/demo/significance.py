"""What the demo can see: the positive control (NegCLIP over CLIP, the field's best-replicated
effect), the confirmatory headline, and the power of every comparison, from the outcome of every
test case of every seed.

The columns scored case by case (attribute, relation, order: ARO's binary choices; the relation-form
columns: an image's choice, or a (image, twin) pair's group score, bench/relforms.py) are compared
with mosaictool.analysis.stats.paired: seed s of each method against seed s of the reference, over
the same cases, seeds and cases both random, a t test with S - 1 degrees of freedom. In the world
every VG-Relation predicate has the same number of cases, so the relation column's macro accuracy
equals the mean of its cases' outcomes.

Multiplicity: the positive control (two tests, both must pass: an intersection-union test, so its
level is CONTROL_ALPHA with no correction) and the headline (the method under study against the
control's winner on the trained forms' group score, at HEADLINE_ALPHA) are fixed before any run: confirmatory. Every other
comparison the report prints is exploratory and its p is Holm-adjusted over the family it is printed
in (`holm_family`).
"""

from __future__ import annotations

import math

import numpy as np

from mosaictool.analysis.stats import Paired, format_p, holm, minimal_detectable_effect, paired
from mosaictool.demo.config import COLUMNS

# column -> the world subtask whose cases it is the mean of: the table's ARO and relation-form columns (binary outcomes)
CASE_COLUMNS = {col: sub for col, sub, _ in COLUMNS if sub.startswith(("aro/", "relforms/"))}
ARO_CASE_COLUMNS = tuple(col for col, sub in CASE_COLUMNS.items() if sub.startswith("aro/"))
# Yuksekgonul et al. (ICLR 2023, Table 6) and Singh et al. (EMNLP 2023, Table 1): NegCLIP > CLIP
# fine-tuned without negatives, on VG-Relation and on COCO-Order.
CONTROL_TREATED, CONTROL_REFERENCE, CONTROL_COLUMNS = "NegCLIP", "CLIP", ("order", "relation")
CONTROL_ALPHA = 0.01
# The confirmatory headline: the method this toolkit is named after against the control's winner on
# relation (Singh et al. 2023, Table 1: 82.6 vs 81.7 after COCO fine-tuning), measured where the placement
# prior cannot win it and neither method's sentence form weighs more (docs/demo.md, "headline measure",
# chosen on val before any test run): Winoground's group score (Thrush et al. 2022) on (image, twin) x
# (caption, swap) in the copular form (NegCLIP's swaps of the plain captions) and the sub-graph form
# (MosaiCLIP's texts) pooled. A reader blind to the image scores 0 on it whatever prior it knows. The
# held-out forms' group score, declared first, sat at a floor for every row on val (base included).
HEADLINE_METHOD, HEADLINE_REFERENCE, HEADLINE_COLUMN, HEADLINE_ALPHA = "MosaiCLIP", "NegCLIP", "rel group trained", 0.05
POWER_GOAL = 0.03  # the largest MDE the demo aims for on the case columns


def hit_matrix(rows: list[dict], models: list[str], subtask: str) -> np.ndarray | None:
    """seeds x cases outcomes (the engine's "hits" rows) of `models` (one per seed), or None when
    a model lacks them."""
    found = {r["model"]: r["hits"] for r in rows if r.get("metric") == "hits" and r["subtask"] == subtask}
    if not models or any(m not in found for m in models):
        return None
    lengths = {len(found[m]) for m in models}
    if len(lengths) != 1:
        raise ValueError(f"{subtask}: models scored on different cases ({sorted(lengths)})")
    return np.array([[c == "1" for c in found[m]] for m in models], dtype=np.float64)


def case_matrix(rows: list[dict], groups: dict[str, list[str]], label: str, columns=ARO_CASE_COLUMNS) -> np.ndarray | None:
    """seeds x cases outcomes of `label` over the cases of every column in `columns`, side by side
    (ARO's cases of all three columns: a mean weighted by cases, not the mean of the columns)."""
    parts = [hit_matrix(rows, groups.get(label, []), CASE_COLUMNS[c]) for c in columns]
    return None if any(p is None for p in parts) else np.concatenate(parts, axis=1)


def compare(rows: list[dict], groups: dict[str, list[str]], method: str, reference: str) -> dict[str, Paired]:
    """method - reference on every case column where both have every seed's outcomes; a reference of
    one model (a base every seed starts from) is paired with each of the method's seeds."""
    out = {}
    for col, sub in CASE_COLUMNS.items():
        a, b = hit_matrix(rows, groups.get(method, []), sub), hit_matrix(rows, groups.get(reference, []), sub)
        if a is not None and b is not None and b.shape[0] == 1 < a.shape[0]:
            b = np.repeat(b, a.shape[0], axis=0)
        if a is not None and b is not None and a.shape == b.shape and a.shape[1] > 1:
            out[col] = paired(a, b)
    return out


def mde_at(r: Paired, alpha: float, power: float = 0.8) -> float:
    """The MDE of comparison `r` for a test at `alpha` (the control's 0.01, not the tables' 0.05)."""
    return minimal_detectable_effect(r.noisy_part, r.case_part, r.df, alpha, power)


def positive_control(rows: list[dict], groups: dict[str, list[str]]) -> dict:
    """{"passed", "columns": {col: Paired}, "verdict": one line}: passed when NegCLIP beats CLIP on
    every control column with p < CONTROL_ALPHA (two-sided; the difference must also point the way
    the papers found)."""
    found = compare(rows, groups, CONTROL_TREATED, CONTROL_REFERENCE)
    missing = [c for c in CONTROL_COLUMNS if c not in found]
    if missing:
        return {"passed": False, "columns": found,
                "verdict": f"POSITIVE CONTROL NOT RUN: no {CONTROL_TREATED} and {CONTROL_REFERENCE} outcomes for {', '.join(missing)}"}
    failed = [c for c in CONTROL_COLUMNS if not (found[c].diff > 0 and found[c].p < CONTROL_ALPHA)]
    parts = ", ".join(f"{c} {100 * found[c].diff:+.1f} pts ({format_p(found[c].p)}; MDE at α = {CONTROL_ALPHA:g}: "
                      f"{100 * mde_at(found[c], CONTROL_ALPHA):.1f})" for c in CONTROL_COLUMNS)
    if failed:
        verdict = (f"POSITIVE CONTROL FAILED: {CONTROL_TREATED} − {CONTROL_REFERENCE}: {parts}; not significantly "
                   f"positive at p < {CONTROL_ALPHA:g} on {', '.join(failed)}. This run cannot tell methods apart: "
                   "read no conclusion from it.")
    else:
        verdict = f"positive control passed: {CONTROL_TREATED} − {CONTROL_REFERENCE}: {parts} (each p < {CONTROL_ALPHA:g})"
    return {"passed": not failed, "columns": found, "verdict": verdict}


def headline(rows: list[dict], groups: dict[str, list[str]]) -> dict | None:
    """The confirmatory headline: {"result": Paired, "verdict": one line}, or None without its rows."""
    r = compare(rows, groups, HEADLINE_METHOD, HEADLINE_REFERENCE).get(HEADLINE_COLUMN)
    if r is None:
        return None
    lo, hi = r.ci()
    if r.p >= HEADLINE_ALPHA:
        word = "no difference detected"
    else:
        word = f"{HEADLINE_METHOD} {'ahead' if r.diff > 0 else 'behind'}"
    verdict = (f"headline (confirmatory): {HEADLINE_METHOD} − {HEADLINE_REFERENCE} on {HEADLINE_COLUMN}: "
               f"{100 * r.diff:+.1f} pts [{100 * lo:+.1f}, {100 * hi:+.1f}] ({format_p(r.p)}; MDE {100 * r.mde:.1f}): "
               f"{word} at α = {HEADLINE_ALPHA:g}")
    return {"result": r, "verdict": verdict}


def comparisons(rows: list[dict], groups: dict[str, list[str]], reference: str = CONTROL_REFERENCE) -> dict[str, dict[str, Paired]]:
    """{method: {col: Paired}} for every fine-tuned method against the reference."""
    return {m: got for m in groups if m != reference and (got := compare(rows, groups, m, reference))}


def holm_family(found: dict[str, dict[str, Paired]]) -> dict[tuple[str, str], float]:
    """Holm-adjusted p of every (method, column) comparison in `found`, one family."""
    keys = [(m, c) for m, by_col in found.items() for c in by_col]
    return dict(zip(keys, holm([found[m][c].p for m, c in keys])))


def comparisons_markdown(found: dict[str, dict[str, Paired]], reference: str = CONTROL_REFERENCE,
                         adjusted: dict[tuple[str, str], float] | None = None) -> str:
    """Each method − reference per case column: difference, 95% CI, p (Holm-adjusted where `adjusted`
    gives it), and the MDE of that comparison."""
    cols = [c for c in CASE_COLUMNS if any(c in v for v in found.values())]
    if not cols:
        return ""
    lines = [f"| method − {reference} | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for method, by_col in found.items():
        cells = []
        for c in cols:
            r = by_col.get(c)
            if r is None:
                cells.append("–")
                continue
            lo, hi = r.ci()
            p = adjusted.get((method, c), r.p) if adjusted else r.p
            cells.append(f"{100 * r.diff:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] ({format_p(p)}; MDE {100 * r.mde:.1f})")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def power_by_column(found: dict[str, dict[str, Paired]]) -> dict[str, float]:
    """Per case column, the largest MDE over the comparisons: a difference this large is detected
    (80% power, alpha 0.05) whichever method is compared with the reference."""
    out: dict[str, float] = {}
    for by_col in found.values():
        for c, r in by_col.items():
            out[c] = max(out.get(c, 0.0), r.mde)
    return out


def power_markdown(mde: dict[str, float], seeds: int, cases: dict[str, int]) -> str:
    if not mde:
        return ""
    cells = [f"{c}: {100 * v:.1f} pts ({cases.get(c, 0)} cases × {seeds} seeds)" + ("" if v <= POWER_GOAL else " (above the 3-pt goal)")
             for c, v in mde.items() if not math.isnan(v)]
    random = (f"seeds and cases both random, t with {seeds - 1} df" if seeds > 1 else
              "cases random; with 1 seed the training noise is NOT measured and the MDE is too small")
    return ("Estimated minimal detectable effect (the true difference the test detects with 80% power at α = 0.05, "
            f"two-sided; {random}; from the variance components estimated in this run, so itself uncertain; the "
            "largest over the methods' comparisons with CLIP): " + "; ".join(cells) + ".")
