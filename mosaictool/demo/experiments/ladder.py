"""From NegCLIP to MosaiCLIP one change at a time (val split): where MosaiCLIP's gap comes from.

Every difference between the two rows' training is on exactly one rung, and the rungs accumulate:
rung 1 is the table's NegCLIP row (its hard images mined as its paper mined them: each image's 3
nearest neighbours in the base's image space, Yuksekgonul et al. 2023, App. C.2) and the last rung
the table's MosaiCLIP row (the same settings, so the same runs), and each rung is paired with the
one before it by seed and test case. The rungs' differences of means add up to the whole gap
exactly (they telescope over the same seeds and cases). Rung 0 comes before the table's NegCLIP:
NegCLIP given each image's world twin as its hard image, an oracle (a minimal pair aimed at the
test, which no real data set offers), so that the hard images' step is read as twins -> mined ->
none.

The order: first the batch (a setting of the training loop, not of the method), then NegCLIP
re-expressed inside MosaiCLIP's method (the same training step for step: a rung that must cost
nothing, and tests/test_ladder.py shows it trains the same weights), then what the images are
contrasted against (which negative, how many), then what they are pulled towards (sub-graph
positives), then how the loss treats several positives (P(i) by containment, the paper's
weighting), and last the schedule (the curriculum), which exists only once its two stages differ.

Per rung and seed the report also measures the text tower alone: the cosine between a val case's
true caption and its relation swap, its word-order shuffles and its attribute swap
(mosaictool.analysis.text_separation), and the tree-score of the text tower over the val captions
(Murty et al. 2023; Singh et al. 2023, Fig. 4b).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from mosaictool.analysis.stats import format_p, holm
from mosaictool.atomic import write_text
from mosaictool.demo.config import COLUMNS, METHODS
from mosaictool.demo.evaluation import column_value
from mosaictool.demo.experiments import Context, Section
from mosaictool.demo.experiments.common import Variant, finetune_variants, method_variant, score_on_val
from mosaictool.demo.report import paired_diff
from mosaictool.demo.significance import ARO_CASE_COLUMNS, CASE_COLUMNS, compare

logger = logging.getLogger(__name__)

NAME = "ladder"
HELP = "from NegCLIP to MosaiCLIP one change at a time, each rung paired with the one before (val)"
PLACE = 20  # HELP: its line in `demo --help` and docs/demo.md; PLACE: its place in those lists
FILES = ("ladder.md", "ladder.png")  # what it writes in the demo folder

# (name, what the rung changes, method, the options it trains with, hard images, their source: None
# the demo's). Options are the method's; those equal to the method's defaults are left out
# (finetune_all adds the demo's max_pos / max_neg), so that the last rung is the table's MosaiCLIP
# row option for option.
_NEGCLIP_IN_MOSAICLIP = {"max_pos": 1, "max_neg": 1, "negatives": "negclip", "containment": False, "loss_weighting": "mean"}
RUNGS: list[tuple[str, str, str, dict, str | None, str | None]] = [
    ("NegCLIP, twin hard images (oracle)", "the caption + one NegCLIP swap, each image with its world twin (an oracle)",
     "negclip", {}, None, "twin-oracle"),
    ("NegCLIP", "the table's NegCLIP row: each image with one of its 3 nearest neighbours in the base's image space, "
     "mined as its paper did (ARO App. C.2)", "negclip", {}, None, "mined"),
    ("− hard images", "32 images per step, no hard images (MosaiCLIP's batch)", "negclip", {}, "none", None),
    ("NegCLIP in MosaiCLIP's method", "the same training in mosaiclip's code (must cost nothing)", "mosaiclip",
     dict(_NEGCLIP_IN_MOSAICLIP), "none", None),
    ("one graph negative", "the swap replaced by one graph negative (App. B sampler, p_obj 0.15)", "mosaiclip",
     {**_NEGCLIP_IN_MOSAICLIP, "negatives": "graph"}, "none", None),
    ("6 graph negatives", "up to 6 graph negatives per image", "mosaiclip",
     {**_NEGCLIP_IN_MOSAICLIP, "negatives": "graph", "max_neg": 6}, "none", None),
    ("sub-graph positives", "the caption + up to 2 sub-graph texts as positives (P(i): equal texts)", "mosaiclip",
     {**_NEGCLIP_IN_MOSAICLIP, "negatives": "graph", "max_neg": 6, "max_pos": 3}, "none", None),
    ("P(i) by containment", "a text is a positive of every image whose graph contains it", "mosaiclip",
     {"containment": True, "max_neg": 6, "max_pos": 3, "loss_weighting": "mean"}, "none", None),
    ("paper's loss weighting", "the paper's sums: t2i weighs |P(i)| times i2t", "mosaiclip",
     {"max_neg": 6, "max_pos": 3}, "none", None),
    ("MosaiCLIP", "+ the curriculum: the table's MosaiCLIP row", "mosaiclip", {"curriculum": True}, None, None),
]
TABLE_ROWS = ("NegCLIP", "MosaiCLIP")  # the rungs that are the table's rows (their labels, so their runs)
FROM = 1  # the table's NegCLIP: the whole gap is the last rung minus this one
CHART_COLUMNS = ("relation", "order", "attribute", "recognition")


def variants(ctx: Context) -> list[Variant]:
    """The rungs as fine-tuning rows; the table's rows keep the table's labels (and runs)."""
    rows = {label: (method, options) for label, method, options in METHODS}
    out = []
    for k, (name, _, method, options, hard, source) in enumerate(RUNGS):
        if name in TABLE_ROWS:
            method, options = rows[name]
            out.append(Variant(name, name, method, dict(options), hard_images=hard, hard_image_source=source, lr_row=name))
            continue
        out.append(method_variant(ctx, name, f"ladder {k}", method, options, hard_images=hard, hard_image_source=source,
                                  lr=ctx.cfg.lr_for("NegCLIP")))
    return out


def run(ctx: Context) -> Section:
    if ctx.cfg.lr_for("NegCLIP") != ctx.cfg.lr_for("MosaiCLIP"):
        raise_different_lrs()
    rungs = variants(ctx)
    runs = finetune_variants(ctx, rungs)
    rows, groups = score_on_val(ctx, runs, "ladder")
    names = [v.name for v in rungs]
    steps = ladder_steps(rows, groups, names)
    text_measures = measure_text_towers(ctx, runs)
    markdown, chart = (ctx.out / f for f in FILES)
    plot_waterfall(steps, names, chart)
    table = ladder_markdown(steps, names, text_measures)
    write_text(markdown, table + "\n")
    return Section("From NegCLIP to MosaiCLIP, one change at a time (val)", table, [markdown, chart])


def raise_different_lrs() -> None:
    from mosaictool.errors import MosaicError

    raise MosaicError("the ladder needs NegCLIP and MosaiCLIP at one learning rate (--finetune-lr): with --select-on-val "
                      "their lrs differ and the lr would be a rung of its own")


def ladder_steps(rows: list[dict], groups: dict[str, list[str]], names: list[str]) -> dict:
    """Per column: the rungs' means and each rung minus the one before ({diff, lo, hi, p}), with
    Holm's adjustment over every step of every column (one family); and the whole gap (the last rung
    minus rung FROM, the table's NegCLIP)."""
    means = {col: [float(np.mean([column_value(rows, m, sub, metric) for m in groups[n]])) for n in names]
             for col, sub, metric in COLUMNS if col in CHART_COLUMNS}
    deltas: dict[tuple[str, int], dict] = {}
    for k in range(1, len(names)):
        found = compare(rows, groups, names[k], names[k - 1])
        for col in CHART_COLUMNS:
            if col in CASE_COLUMNS and col in found:
                r = found[col]
                lo, hi = r.ci()
                deltas[col, k] = {"diff": r.diff, "lo": lo, "hi": hi, "p": r.p}
            elif col not in CASE_COLUMNS:  # recognition: a seed-level column, paired by seed
                sub, metric = next((s, m) for c, s, m in COLUMNS if c == col)
                d, half, p = paired_diff([column_value(rows, m, sub, metric) for m in groups[names[k - 1]]],
                                         [column_value(rows, m, sub, metric) for m in groups[names[k]]])
                if d == 0 and half == 0:  # equal on every seed (a rung that re-expresses its predecessor)
                    p = 1.0
                deltas[col, k] = {"diff": d, "lo": d - half, "hi": d + half, "p": p}
    keys = [k for k, v in deltas.items() if not math.isnan(v["p"])]
    for key, adjusted in zip(keys, holm([deltas[k]["p"] for k in keys])):
        deltas[key]["p_holm"] = adjusted
    whole = compare(rows, groups, names[-1], names[FROM])
    return {"means": means, "deltas": deltas, "whole": whole}


def measure_text_towers(ctx: Context, runs: dict[str, list[Path]], split: str = "val") -> dict[str, dict[str, float]]:
    """Per rung, the mean over seeds of text_tower_measures (the base's as well: the first entry)."""
    measured = text_tower_measures(ctx, {"base": [ctx.base], **runs}, split)
    return {name: {k: float(np.mean([m[k] for m in per_seed])) for k in per_seed[0]} for name, per_seed in measured.items()}


def text_tower_measures(ctx: Context, runs: dict[str, list[Path]], split: str = "val") -> dict[str, list[dict[str, float]]]:
    """Per checkpoint: the text tower's mean cosine between each case's true caption and its false
    ones (relation swap, order shuffles, attribute swap) and its tree-score over the first
    TREE_CAPTIONS order cases' captions, on the world's `split`."""
    from mosaictool.analysis import tree_score
    from mosaictool.analysis.text_separation import false_caption_cosines
    from mosaictool.bench import get
    from mosaictool.bench.engine import load_items
    from mosaictool.model.openclip import load_checkpoint

    items = load_items(get("world" if split == "test" else "world-val"), ctx.world, subtasks=["aro"])
    by_sub = {col: [it for it in items if it.meta["subtask"] == CASE_COLUMNS[col].split("/", 1)[1]] for col in ARO_CASE_COLUMNS}
    captions = [{"id": k, "caption": it.texts[it.meta["correct"]]} for k, it in enumerate(by_sub["order"][:TREE_CAPTIONS])]
    logger.info(f"text towers of {sum(len(v) for v in runs.values())} checkpoints on {split} (cosines, tree-score)")

    def one(path: Path) -> dict[str, float]:
        bundle = load_checkpoint(path)
        out = {col: float(false_caption_cosines(bundle, its).mean()) for col, its in by_sub.items()}
        scored = [r["tscore"] for r in tree_score.score_records(captions, bundle, label=str(path)) if r["tscore"] is not None]
        out["tree-score"] = float(np.mean(scored))
        return out

    return {name: [one(p) for p in finals] for name, finals in runs.items()}


TREE_CAPTIONS = 300  # val captions the tree-score is averaged over (each a few words: ~1 s a checkpoint)


def ladder_markdown(steps: dict, names: list[str], text_measures: dict[str, dict[str, float]]) -> str:
    cols = [c for c in CHART_COLUMNS if c in steps["means"]]
    lines = ["| rung | " + " | ".join(cols) + " | text cos: relation swap / shuffle / attribute swap | tree-score |",
             "|---|" + "---|" * len(cols) + "---|---|"]
    base = text_measures.get("base")
    if base:
        lines.append("| base (before fine-tuning) | " + " | ".join("" for _ in cols)
                     + f" | {base['relation']:.3f} / {base['order']:.3f} / {base['attribute']:.3f} | {base['tree-score']:.2f} |")
    for k, name in enumerate(names):
        cells = []
        for col in cols:
            mean = 100 * steps["means"][col][k]
            if k == 0:
                cells.append(f"{mean:.1f}")
                continue
            d = steps["deltas"].get((col, k))
            cells.append(f"{mean:.1f}" if d is None else
                         f"{mean:.1f} ({100 * d['diff']:+.1f}, {format_p(d.get('p_holm', d['p']))})")
        t = text_measures.get(name, {})
        text = (f"{t['relation']:.3f} / {t['order']:.3f} / {t['attribute']:.3f} | {t['tree-score']:.2f}" if t else "– | –")
        lines.append(f"| {k}. {name} | " + " | ".join(cells) + f" | {text} |")
    whole = steps["whole"]
    sums = {col: sum(steps["deltas"][col, k]["diff"] for k in range(FROM + 1, len(names)) if (col, k) in steps["deltas"])
            for col in cols}
    gap = ", ".join(f"{col} {100 * (steps['means'][col][-1] - steps['means'][col][FROM]):+.1f} (rungs {FROM + 1}-"
                    f"{len(names) - 1} sum {100 * sums[col]:+.1f})" for col in cols)
    oracle = ", ".join(f"{col} {100 * (steps['means'][col][FROM] - steps['means'][col][0]):+.1f}" for col in cols)
    tests = ", ".join(f"{col} {format_p(r.p)}" for col, r in whole.items())
    why = "\n".join(f"{k}. **{name}**: {what}" for k, (name, what, *_rest) in enumerate(RUNGS))
    return ("Each rung's mean over seeds on val, and in brackets its change from the rung before (paired by seed and "
            "test case for relation, order and attribute, by seed for recognition; Holm-adjusted over every step "
            "of the table: exploratory). Text cos: the text tower's mean cosine between a val case's true caption "
            "and its false ones (lower: the tower tells them apart); tree-score over "
            f"{TREE_CAPTIONS} val captions (higher: more tree-like), both means over seeds.\n\n"
            + "\n".join(lines) + f"\n\nThe whole gap, MosaiCLIP − NegCLIP (the table's rows, rung {FROM} to the last): "
            f"{gap}; tested as one comparison: {tests}. Before it, NegCLIP's mined hard images − the twin oracle's "
            f"(rung 0 to {FROM}): {oracle}.\n\n"
            + "The rungs:\n\n" + why)


def plot_waterfall(steps: dict, names: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = [c for c in CHART_COLUMNS if c in steps["means"]]
    fig, axes = plt.subplots(1, len(cols), figsize=(4.2 * len(cols), 4.8), sharey=False)
    for ax, col in zip(np.atleast_1d(axes), cols):
        means = [100 * m for m in steps["means"][col]]
        for k in range(len(names)):
            if k == 0 or k == len(names) - 1:
                ax.bar(k, means[k], color="0.55")
                continue
            lo, hi = sorted((means[k - 1], means[k]))
            ax.bar(k, hi - lo, bottom=lo, color="tab:green" if means[k] >= means[k - 1] else "tab:red")
        d_last = means[-1] - means[-2]
        ax.annotate(f"{d_last:+.1f}", (len(names) - 1, means[-1]), ha="center", va="bottom", fontsize=7)
        low = min(means)
        ax.set_ylim(max(0, low - 10), max(means) + 5)
        ax.set_xticks(range(len(names)), [f"{k}" for k in range(len(names))])
        ax.set_title(col)
        ax.set_xlabel("rung")
    np.atleast_1d(axes)[0].set_ylabel("val accuracy / top-1 (%)")
    fig.suptitle("NegCLIP with twin hard images (0, an oracle), with mined ones (%d), to MosaiCLIP (%d), one change per rung"
                 % (FROM, len(names) - 1), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
