"""Shares of the gap from NegCLIP to MosaiCLIP that no order of changes decides (val split): Shapley
values over a 2^k factorial of the ladder's main changes.

The ladder makes one change at a time, so a change's step depends on which changes came before it
(an effect can need, or undo, another). Here every combination of the K main changes is trained
(2^K cells, each at the demo's seeds and lr, each image's batch as its cell says), and each change's
share is its Shapley value (Shapley 1953): its effect averaged over every order in which the changes
can be made. The shares add up to the whole gap exactly (the all-changes cell minus the none cell)
and none is privileged by a place in a list.

A Shapley value is a fixed linear contrast of the cells' outcomes (cell T weighs +w(|T|-1) for each
change in T and -w(|T|) for each change not in it, w(s) = s!(K-s-1)!/K!), so per seed and test case
it is one number, and it is tested as every difference in the report is (analysis.stats.paired:
seeds and cases both random, t with seeds - 1 df); recognition, a column of one value per seed, by
seed. The p-values are exploratory, Holm-adjusted over the table.

The none cell is NegCLIP re-expressed in MosaiCLIP's method (one caption positive, one NegCLIP swap,
no containment, mean weighting: the ladder's rung that trains the same weights as the NegCLIP row)
with the NegCLIP row's mined hard images; the all-changes cell is the table's MosaiCLIP row (the
same runs).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mosaictool.analysis.stats import Paired, format_p, holm, paired, seed_paired
from mosaictool.atomic import write_text
from mosaictool.demo.config import COLUMNS, METHODS
from mosaictool.demo.evaluation import column_value
from mosaictool.demo.experiments import Context, Section
from mosaictool.demo.experiments.common import Variant, finetune_variants, method_variant, score_on_val
from mosaictool.demo.significance import CASE_COLUMNS, hit_matrix

NAME = "attribution"
HELP = ("MosaiCLIP − NegCLIP shared among its 4 main changes by Shapley values over every combination of them "
        "(16 cells; the ladder's shares without its order) (val)")
PLACE = 25  # HELP: its line in `demo --help` and docs/demo.md; PLACE: its place in those lists
FILES = ("attribution.md",)  # what it writes in the demo folder

# (name, what it changes: off -> on). On is MosaiCLIP's setting, off NegCLIP's.
FACTORS = (
    ("no hard images", "NegCLIP's mined hard images (16 images + their neighbours per step) -> none (32 images)"),
    ("graph negatives", "one NegCLIP swap of the caption -> up to max_neg graph negatives (App. B sampler)"),
    ("sub-graph positives", "the caption alone -> the caption + up to max_pos − 1 sub-graph texts"),
    ("MosaiCLIP's loss", "mean weighting, P(i) the text's own image, no curriculum -> P(i) by containment, the "
     "paper's weighting, the curriculum (Sec. 3.5-3.6)"),
)
TABLE_COLUMNS = ("relation", "order", "attribute", "rel group trained", "recognition")
MOSAICLIP_ROW = "MosaiCLIP"


def cell_name(on: tuple[bool, ...]) -> str:
    changes = [name for (name, _), flag in zip(FACTORS, on) if flag]
    return "NegCLIP in MosaiCLIP's method" if not changes else "+ " + " + ".join(changes)


def cells(k: int = len(FACTORS)) -> list[tuple[bool, ...]]:
    """Every combination of k changes, the none cell first and the all-changes cell last."""
    return sorted(itertools.product((False, True), repeat=k), key=lambda on: (sum(on), on[::-1]))


def _options(ctx: Context, on: tuple[bool, ...]) -> dict:
    _hard, graph, positives, loss = on
    return {"negatives": "graph" if graph else "negclip", "max_neg": ctx.cfg.max_neg if graph else 1,
            "max_pos": ctx.cfg.max_pos if positives else 1, "containment": loss,
            "loss_weighting": "paper" if loss else "mean", "curriculum": loss}


def variants(ctx: Context) -> list[Variant]:
    """One fine-tuning row per cell, at the NegCLIP row's lr (the ladder's rule); the all-changes cell is the table's
    MosaiCLIP row."""
    rows = {label: (method, options) for label, method, options in METHODS}
    out = []
    for k, on in enumerate(cells()):
        if all(on):
            method, options = rows[MOSAICLIP_ROW]
            out.append(Variant(cell_name(on), MOSAICLIP_ROW, method, dict(options), lr_row=MOSAICLIP_ROW))
            continue
        out.append(method_variant(ctx, cell_name(on), f"attribution {k}", "mosaiclip", _options(ctx, on),
                                  hard_images="none" if on[0] else "all", lr=ctx.cfg.lr_for("NegCLIP")))
    return out


def shapley_weights(k: int) -> np.ndarray:
    """cells() x factors: the weight of each cell's outcome in each factor's Shapley value."""
    w = np.zeros((2 ** k, k))
    for c, on in enumerate(cells(k)):
        size = sum(on)
        for f in range(k):
            if on[f]:
                w[c, f] = math.factorial(size - 1) * math.factorial(k - size) / math.factorial(k)
            else:
                w[c, f] = -math.factorial(size) * math.factorial(k - size - 1) / math.factorial(k)
    return w


def shapley(values: np.ndarray) -> np.ndarray:
    """Shapley values of the factors from the cells' outcomes (cells() order on axis 0; any trailing axes: seeds,
    cases), by the contrast weights."""
    k = int(round(math.log2(values.shape[0])))
    return np.tensordot(shapley_weights(k).T, values, axes=1)


def shares(rows: list[dict], groups: dict[str, list[str]], names: list[str]) -> dict[str, list[Paired]]:
    """Per column: each factor's Shapley value, tested (paired by seed and case for the case columns, by seed for
    recognition)."""
    out = {}
    for col, sub, metric in COLUMNS:
        if col not in TABLE_COLUMNS:
            continue
        if col in CASE_COLUMNS:
            hits = [hit_matrix(rows, groups[n], sub) for n in names]
            if any(h is None for h in hits):
                continue
            values = shapley(np.stack(hits))
            out[col] = [paired(v, np.zeros_like(v)) for v in values]
        else:
            per_seed = np.array([[column_value(rows, m, sub, metric) for m in groups[n]] for n in names])
            values = shapley(per_seed)
            out[col] = [seed_paired(v, np.zeros_like(v)) for v in values]
    return out


def run(ctx: Context) -> Section:
    from mosaictool.demo.experiments.ladder import raise_different_lrs

    if ctx.cfg.lr_for("NegCLIP") != ctx.cfg.lr_for(MOSAICLIP_ROW):
        raise_different_lrs()
    cell_rows = variants(ctx)
    runs = finetune_variants(ctx, cell_rows)
    rows, groups = score_on_val(ctx, runs, NAME)
    names = [v.name for v in cell_rows]
    found = shares(rows, groups, names)
    table = attribution_markdown(rows, groups, names, found, ctx.cfg.seeds)
    write_text(ctx.out / FILES[0], table + "\n")
    return Section("MosaiCLIP − NegCLIP shared among its changes, whatever their order (val)", table, [ctx.out / FILES[0]])


def attribution_markdown(rows: list[dict], groups: dict[str, list[str]], names: list[str], found: dict[str, list[Paired]],
                         seeds: int) -> str:
    cols = [c for c in TABLE_COLUMNS if c in found]
    keys = [(c, f) for c in cols for f in range(len(FACTORS))]
    adjusted = dict(zip(keys, holm([found[c][f].p for c, f in keys])))
    lines = ["| change | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for f, (name, _) in enumerate(FACTORS):
        values = []
        for c in cols:
            r = found[c][f]
            lo, hi = r.ci()
            values.append(f"{100 * r.diff:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] ({format_p(adjusted[c, f])})")
        lines.append(f"| {name} | " + " | ".join(values) + " |")
    sub = {c: (s, m) for c, s, m in COLUMNS}

    def mean(name: str, col: str) -> float:
        return 100 * float(np.mean([column_value(rows, m, *sub[col]) for m in groups[name]]))

    lines.append("| **the whole gap** (sum) | " + " | ".join(f"{mean(names[-1], c) - mean(names[0], c):+.1f}" for c in cols) + " |")
    cell_lines = ["| cell | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    cell_lines += [f"| {n} | " + " | ".join(f"{mean(n, c):.1f}" for c in cols) + " |" for n in names]
    why = "\n".join(f"- **{name}**: {what}" for name, what in FACTORS)
    return ("Each change's Shapley value (Shapley 1953): its effect on the val column averaged over every order in which "
            f"the {len(FACTORS)} changes can be made, from every combination of them trained at {seeds} seeds "
            f"({len(names)} cells); [95% CI] paired by seed and test case (recognition by seed), p Holm-adjusted over "
            "this table (exploratory). The values add up to the whole gap, the all-changes cell (the table's MosaiCLIP) "
            "minus the none cell (NegCLIP in MosaiCLIP's method with the NegCLIP row's mined hard images).\n\n"
            + "\n".join(lines) + "\n\nThe changes (off -> on):\n\n" + why
            + "\n\nEvery cell's mean over seeds:\n\n" + "\n".join(cell_lines))
