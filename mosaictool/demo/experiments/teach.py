"""The teaching regime (Singh et al. 2023, Table 1's shape): a base that knows no arrangement beyond
the text prior, then the rows fine-tuned from it.

The demo's own base is taught relations before any method touches it (plain captions of one- and
two-object scenes, each with its arrangement twin in the batch), so its table asks which method best
*preserves* composition. The paper's base starts near the text prior and the methods *teach* it
(COCO fine-tuning: CLIP VG-Relation 59.8 -> 58.9 fine-tuned, NegCLIP 81.7, MosaiCLIP 82.6). Here the
base is pretrained with the plain CLIP loss on the fine-tuning data itself (every image with its
varied and its plain caption) with no twins in the batch, so nothing makes arrangement worth
learning; the rows are then fine-tuned from it with the demo's batches (NegCLIP with its hard
images, mined in this base's image space: the model it starts from).

Its positive control has the paper's shape: NegCLIP above the base AND above CLIP fine-tuning, on
relation and on order, each p < 0.01.
"""

from __future__ import annotations

import dataclasses

from mosaictool.analysis.stats import format_p
from mosaictool.atomic import write_text
from mosaictool.demo.base import pretrain_base
from mosaictool.demo.claims import control_claims, passed_by_column, table1_claims
from mosaictool.demo.config import METHODS
from mosaictool.demo.experiments import Context, Section
from mosaictool.demo.experiments.common import score
from mosaictool.demo.finetune import finetune_all
from mosaictool.demo.report import summarise, table_markdown
from mosaictool.demo.significance import (
    CONTROL_ALPHA,
    compare,
    comparisons,
    comparisons_markdown,
    holm_family,
)

NAME = "teach"
HELP = "the teaching regime: a base that knows no arrangement, the rows fine-tuned from it (--split)"
PLACE = 40  # HELP: its line in `demo --help` and docs/demo.md; PLACE: its place in those lists
FILES = ("teach.md",)  # what it writes in the demo folder
ROWS = ("CLIP", "NegCLIP", "MosaiCLIP")
BASE = "base (no arrangement taught)"
FAMILY = "MosaiCLIP over NegCLIP, fine-tuned from a base that knows no arrangement"


def teaching_base(ctx: Context):
    """The base pretrained on the fine-tuning captions without twins (cached as the demo's base is)."""
    return pretrain_base(ctx.cfg, ctx.shards, ctx.world, ctx.out, twins=False, name="base-teach")


def run(ctx: Context) -> Section:
    cfg = ctx.cfg
    base = teaching_base(ctx)
    trial = dataclasses.replace(cfg, finetune_steps=cfg.teach_steps, finetune_lr=cfg.teach_lr or cfg.lr_for("NegCLIP"))
    runs = finetune_all(trial, ctx.shards, base, ctx.out, rows=[row for row in METHODS if row[0] in ROWS],
                        shard_cache=ctx.shard_cache)
    results, groups = score(ctx, {BASE: [base], **runs}, "teach", cfg.split)
    control = shaped_control(results, groups)
    table = table_markdown(summarise(results, groups))
    found = {m: r for m, r in comparisons(results, groups, reference="CLIP").items() if m != BASE}
    versus = comparisons_markdown(found, adjusted=holm_family(found))
    text = "\n".join([
        f"A base pretrained {cfg.pretrain_steps} steps with the plain CLIP loss on the fine-tuning captions, no twins in "
        f"the batch; then {', '.join(ROWS)} fine-tuned from it, {trial.finetune_steps} steps at lr "
        f"{trial.finetune_lr:g}, {cfg.seeds} seeds, the demo's batches; **{cfg.split}** split.",
        "", f"**{control['verdict']}**", "", table, "",
        "Each row minus CLIP fine-tuning, paired by seed and test case (exploratory, Holm-adjusted):", "", versus, ""])
    write_text(ctx.out / FILES[0], text)
    return Section("The teaching regime: a base that must be taught", text, [ctx.out / FILES[0]],
                   claims=control_claims(results, groups, "teaching") + table1_claims(
                       results, groups, "teaching", FAMILY, passed_by_column((col, r) for (_, col), r in control["checks"].items())),
                   control=control["verdict"])


def shaped_control(results: list[dict], groups: dict[str, list[str]]) -> dict:
    """NegCLIP above the base and above CLIP, on relation and order, each p < CONTROL_ALPHA."""
    checks = {(ref, col): r for ref in (BASE, "CLIP") for col, r in compare(results, groups, "NegCLIP", ref).items()
              if col in ("relation", "order")}
    parts = [f"{col} vs {ref.split(' (')[0]} {100 * r.diff:+.1f} ({format_p(r.p)})" for (ref, col), r in checks.items()]
    passed = len(checks) == 4 and all(r.diff > 0 and r.p < CONTROL_ALPHA for r in checks.values())
    verdict = (f"teaching control {'passed' if passed else 'FAILED'}: NegCLIP − base and − CLIP: " + "; ".join(parts)
               + f" (each must be positive with p < {CONTROL_ALPHA:g})")
    return {"passed": passed, "checks": checks, "verdict": verdict}
