"""Data efficiency (Singh et al. 2023, App. C.5, Table 11): MosaiCLIP fine-tuned on 0.3x, 0.5x and 1x
of the fine-tuning images against NegCLIP on all of them. The paper found 0.3x-0.6x of the data
enough for MosaiCLIP to match or exceed NegCLIP (CC-FT; no curriculum in those runs, nor here).

A fraction keeps that share of the world's scenes (drawn by a hash of the scene id, each kept scene
with both its captions) and trains for that share of the steps: the same number of passes over its
data as the full run makes over all of it, so 0.3x sees 0.3x the images."""

from __future__ import annotations

import dataclasses
import hashlib
import logging

from mosaictool.analysis.stats import format_p, paired
from mosaictool.atomic import write_text
from mosaictool.demo.claims import ARO_COLUMNS, PRESERVATION, Claim
from mosaictool.demo.config import METHODS
from mosaictool.demo.data import make_shards, train_fields
from mosaictool.demo.experiments import Context, Section
from mosaictool.demo.experiments.common import score
from mosaictool.demo.finetune import finetune_all
from mosaictool.demo.report import summarise, table_markdown
from mosaictool.demo.significance import CASE_COLUMNS, case_matrix, compare, holm_family

logger = logging.getLogger(__name__)

NAME = "efficiency"
HELP = "MosaiCLIP on 0.3× / 0.5× / 1× of the fine-tuning images against NegCLIP on all (--split)"
PLACE = 60  # HELP: its line in `demo --help` and docs/demo.md; PLACE: its place in those lists
FILES = ("efficiency.md",)  # what it writes in the demo folder
FRACTIONS = (0.3, 0.5, 1.0)
MARGIN = 0.01  # the paper's "within 1% or greater than NegCLIP" (Table 11's blue numbers)


def kept(record_id: str, fraction: float) -> bool:
    """Whether a record's scene is in the `fraction` subset (both captions of a scene go together)."""
    scene = str(record_id).removesuffix("-plain")
    return int(hashlib.sha256(scene.encode()).hexdigest()[:8], 16) < fraction * 0x100000000


def subset_shards(ctx: Context, fraction: float):
    from mosaictool.io import read_records

    if fraction >= 1:
        return ctx.shards
    texts = ctx.out / "texts.jsonl"
    records = (r for r in read_records(texts) if kept(r["id"], fraction))
    logger.info(f"efficiency: shards of {fraction:g}x the scenes")
    return make_shards(train_fields(records), ctx.world, ctx.out / f"shards-{fraction:g}x", source=texts)


def run(ctx: Context) -> Section:
    cfg = ctx.cfg
    rows = {label: (method, options) for label, method, options in METHODS}
    method, options = rows["MosaiCLIP"]
    options = {**options, "curriculum": False}
    runs = {"NegCLIP 1x": finetune_all(cfg, ctx.shards, ctx.base, ctx.out, rows=[("NegCLIP", *rows["NegCLIP"])],
                                         shard_cache=ctx.shard_cache)["NegCLIP"]}
    for fraction in FRACTIONS:
        trial = dataclasses.replace(cfg, finetune_steps=max(1, round(fraction * cfg.finetune_steps)),
                                    finetune_lr=cfg.lr_for("MosaiCLIP"))
        label = f"MosaiCLIP {fraction:g}x"
        runs[label] = finetune_all(trial, subset_shards(ctx, fraction), ctx.base, ctx.out,
                                   rows=[(f"efficiency {label}", method, options)])[f"efficiency {label}"]
    results, groups = score(ctx, runs, "efficiency", cfg.split)
    found = {name: compare(results, groups, name, "NegCLIP 1x") for name in runs if name != "NegCLIP 1x"}
    adjusted = holm_family(found)
    lines = ["| MosaiCLIP (no curriculum) − NegCLIP 1x | " + " | ".join(CASE_COLUMNS) + " |", "|---|" + "---|" * len(CASE_COLUMNS)]
    for name, by_col in found.items():
        cells = [f"{100 * r.diff:+.1f} ({format_p(adjusted[name, c])}; MDE {100 * r.mde:.1f})" if (r := by_col.get(c)) else "–"
                 for c in CASE_COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    text = "\n".join([
        f"MosaiCLIP (no curriculum, as the paper's Table 11) on a share of the scenes for that share of the "
        f"{cfg.finetune_steps} steps, against NegCLIP on all of them; {cfg.seeds} seeds; **{cfg.split}** split.", "",
        table_markdown(summarise(results, groups)), "", "\n".join(lines),
        "", "(paired by seed and test case; exploratory, Holm-adjusted over this table)", ""])
    write_text(ctx.out / FILES[0], text)
    claims = []
    stacked = {name: case_matrix(results, groups, name) for name in runs}
    if all(m is not None for m in stacked.values()):
        for fraction in (0.3, 0.5):
            r = paired(stacked[f"MosaiCLIP {fraction:g}x"], stacked["NegCLIP 1x"])
            claims.append(Claim("MosaiCLIP requires about 0.3x-0.6x of the total fine-tuning [...] data to match or exceed "
                                "NegCLIP performance (within 1%)", "App. C.5, Table 11", "0.3x-0.6x",
                                f"MosaiCLIP {fraction:g}x − NegCLIP 1x, ARO cases", "efficiency", r, test="non-inferiority",
                                margin=MARGIN, margin_words="\"within 1%\" (Table 11's blue numbers)", family=PRESERVATION,
                                columns=ARO_COLUMNS))
    return Section("Data efficiency", text, [ctx.out / FILES[0]], claims=claims,
                   control="the table's (its NegCLIP 1x is the table's NegCLIP row, from the same base)")
