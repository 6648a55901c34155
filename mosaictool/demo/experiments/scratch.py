"""Pretraining from scratch (Singh et al. 2023, Sec. 4.1 and Table 3): CLIP, NegCLIP and MosaiCLIP
each trained from a random initialisation (its seed's) on the world's fine-tuning captions (every
image with its varied and its plain caption), the base's steps, images per step and lr, the demo's
batches (NegCLIP with its hard images, mined in the demo's base's image space: the paper mined
NegCLIP's with a pretrained CLIP, "based on OpenAI CLIP ViT-B/32 features", Singh et al. 2023,
App. E.1, not with the model being trained), and scored on every column of the table.

The paper's claims here are its largest: across its four pretraining settings MosaiCLIP over NegCLIP
by up to +42.5 on CREPE's unseen compounds (HN-Comp) and +12.0 on relation."""

from __future__ import annotations

import dataclasses

from mosaictool.analysis.stats import seed_paired
from mosaictool.atomic import write_text
from mosaictool.demo.claims import Claim, control_claims, passed_by_column
from mosaictool.demo.config import COLUMNS, METHODS
from mosaictool.demo.evaluation import column_value
from mosaictool.demo.experiments import Context, Section
from mosaictool.demo.experiments.common import score
from mosaictool.demo.finetune import finetune_all
from mosaictool.demo.report import paired_markdown, summarise, table_markdown
from mosaictool.demo.significance import (
    compare,
    comparisons,
    comparisons_markdown,
    holm_family,
    positive_control,
)

NAME = "scratch"
HELP = "CLIP, NegCLIP and MosaiCLIP each pretrained from a random initialisation (--split)"
PLACE = 50  # HELP: its line in `demo --help` and docs/demo.md; PLACE: its place in those lists
FILES = ("scratch.md",)  # what it writes in the demo folder
ROWS = ("CLIP", "NegCLIP", "MosaiCLIP")
FAMILY = "MosaiCLIP over NegCLIP, pretrained from scratch"


def run(ctx: Context) -> Section:
    cfg = ctx.cfg
    trial = dataclasses.replace(cfg, seeds=cfg.scratch_seeds, finetune_steps=cfg.scratch_steps or cfg.pretrain_steps,
                                finetune_batch=cfg.pretrain_batch, finetune_lr=cfg.pretrain_lr)
    rows = [(f"scratch {label}", method, options) for label, method, options in METHODS if label in ROWS]
    runs = finetune_all(trial, ctx.shards, None, ctx.out, rows=rows, shard_cache=ctx.shard_cache, miner=ctx.base)
    runs = {label.removeprefix("scratch "): finals for label, finals in runs.items()}
    results, groups = score(ctx, runs, "scratch", cfg.split)
    table = table_markdown(summarise(results, groups))
    control = positive_control(results, groups)
    versus = {m: r for m, r in comparisons(results, groups, reference="NegCLIP").items() if m == "MosaiCLIP"}
    cases = comparisons_markdown(versus, reference="NegCLIP", adjusted=holm_family(versus))
    by_seed = paired_markdown(results, groups, reference="NegCLIP")
    text = "\n".join([
        f"{', '.join(ROWS)} each pretrained from a random initialisation, {trial.finetune_steps} steps of "
        f"{trial.finetune_batch} images (NegCLIP: half as many, each with its hard image, "
        + ("its twin" if cfg.hard_image_source == "twin-oracle" else "mined in the base's image space")
        + f"), lr {trial.finetune_lr:g}, "
        f"{trial.seeds} seeds, on the fine-tuning captions; **{cfg.split}** split.", "", f"**{control['verdict']}**", "", table, "",
        "MosaiCLIP − NegCLIP on the case columns, paired by seed and test case:", "", cases, "",
        "Every column, paired by seed (Holm-adjusted over the table):", "", by_seed, ""])
    write_text(ctx.out / FILES[0], text)
    claims = control_claims(results, groups, NAME) + scratch_claims(results, groups, passed_by_column(control["columns"].items()))
    return Section("Pretraining from scratch", text, [ctx.out / FILES[0]], claims=claims, control=control["verdict"])


def scratch_claims(results: list[dict], groups: dict[str, list[str]], control: dict[str, bool]) -> list[Claim]:
    """Table 3: MosaiCLIP over NegCLIP on CREPE's unseen compounds (HN-Comp, R@1 per seed) and on
    relation and attribute (paired by seed and case); `control`: this regime's control per column."""
    words = ("Across pre-training settings, MosaiCLIP improves over NegCLIP by up to 42.5%, 4.9% [...] HN-Comp (CU), "
             "HN-Atom (AU) [...] gains of up to 8.3%, 12.0% [attribute, relation]")
    versus = compare(results, groups, "MosaiCLIP", "NegCLIP")
    out = [Claim(words, "Sec. 4.1, Table 3", paper, f"MosaiCLIP − NegCLIP, {col}", "scratch", versus[col], family=FAMILY,
                 columns=(col,), control=control)
           for col, paper in (("relation", "up to +12.0"), ("attribute", "up to +8.3")) if col in versus]
    sub, metric = next((s, m) for c, s, m in COLUMNS if c == "unseen")
    values = [[column_value(results, m, sub, metric) for m in groups[row]] for row in ("MosaiCLIP", "NegCLIP")]
    if len(values[0]) > 1:
        out.append(Claim(words, "Sec. 4.1, Table 3", "up to +42.5 (CU)", "MosaiCLIP − NegCLIP, CREPE unseen compounds R@1",
                         "scratch", seed_paired(*values), family=FAMILY, columns=("unseen",), control=control))
    return out
