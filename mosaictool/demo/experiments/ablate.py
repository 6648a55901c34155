"""MosaiCLIP's parts taken away (or changed) one at a time, every seed, at MosaiCLIP's lr, scored on
val and compared with the paper's MosaiCLIP, paired by seed and test case."""

from __future__ import annotations

from mosaictool.analysis.stats import format_p
from mosaictool.atomic import write_text
from mosaictool.bench.base import HEADLINE
from mosaictool.demo.config import METHODS
from mosaictool.demo.evaluation import column_value
from mosaictool.demo.experiments import Context, Section
from mosaictool.demo.experiments.common import Variant, finetune_variants, score_on_val
from mosaictool.demo.significance import CASE_COLUMNS, comparisons, holm_family

NAME = "ablate"
HELP = "MosaiCLIP's parts taken away one at a time (val)"
PLACE = 10  # HELP: its line in `demo --help` and docs/demo.md; PLACE: its place in those lists
FILES = ("ablation.md",)  # what it writes in the demo folder
# (name, options changed, hard images): the last is the batch, not the method (NegCLIP's: each
# image with its hard image; DemoConfig.hard_images and hard_image_source)
ABLATIONS: list[tuple[str, dict, str | None]] = [
    ("MosaiCLIP (the paper's)", {}, None),
    ("− sub-graph positives (--max-pos 1)", {"max_pos": 1}, None),
    ("− P(i) by containment (equal texts only)", {"containment": False}, None),
    ("− curriculum", {"curriculum": False}, None),
    ("fewer graph negatives (--max-neg 2)", {"max_neg": 2}, None),
    ("mean loss weighting", {"loss_weighting": "mean"}, None),
    ("text negatives for graph ones (not the paper's)", {"negatives": "text"}, None),
    ("+ hard images (NegCLIP's batch; not the paper's)", {}, "all"),
]


def run(ctx: Context) -> Section:
    label, method, options = next(row for row in METHODS if row[0] == "MosaiCLIP")
    variants = [Variant(name, f"ablation {name}", method, {**options, **change}, hard_images=hard, lr_row=label)
                for name, change, hard in ABLATIONS]
    runs = finetune_variants(ctx, variants)
    rows, groups = score_on_val(ctx, runs, "ablation")
    reference = ABLATIONS[0][0]
    found = comparisons(rows, groups, reference=reference)
    adjusted = holm_family(found)
    lines = ["| variant | val headline | " + " | ".join(f"{c} − paper's" for c in CASE_COLUMNS) + " |",
             "|---|---|" + "---|" * len(CASE_COLUMNS)]
    for name in groups:
        head = sum(column_value(rows, m, HEADLINE, "accuracy") for m in groups[name]) / len(groups[name])
        cells = []
        for col in CASE_COLUMNS:
            r = found.get(name, {}).get(col)
            cells.append("–" if r is None else f"{100 * r.diff:+.1f} ({format_p(adjusted[name, col])})")
        lines.append(f"| {name} | {100 * head:.1f} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    write_text(ctx.out / FILES[0], table + "\n")
    text = (f"MosaiCLIP's parts on the **val** split ({ctx.cfg.seeds} seeds each, MosaiCLIP's lr; each variant minus the "
            "paper's MosaiCLIP, paired by seed and test case; exploratory, Holm-adjusted p over this table):\n\n" + table)
    return Section("MosaiCLIP's parts, one at a time", text, [ctx.out / FILES[0]])
