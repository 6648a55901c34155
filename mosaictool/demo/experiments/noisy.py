"""Noisy captions (Singh et al. 2023, Sec. 4.3 "MosaiCLIP is Robust", Table 1 COCO vs YFCC-FT):
NegCLIP and MosaiCLIP fine-tuned on the world's clean captions and on web-like noisy ones, from the
same base, and the drop of each.

The noisy world is the demo's world with `caption_noise` (mosaictool.world.noise: wrong attributes,
dropped mentions, alt-text fragments, unrelated words) on its train captions; images, val and test
are the same. Both arms fine-tune on the varied captions only (the plain captions stay clean in the
noisy world, and would dilute its noise by half). The paper: NegCLIP "takes a > 10% hit in
performance across various ARO datasets when the fine-tuning dataset is changed from COCO to YFCC,
whereas, MosaiCLIP achieves similar performance using both datasets" (relation 81.7 -> 57.8 vs
82.6 -> 74.3)."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from mosaictool.analysis.stats import paired
from mosaictool.atomic import write_text
from mosaictool.demo.claims import ARO_COLUMNS, Claim
from mosaictool.demo.config import METHODS
from mosaictool.demo.data import make_shards, make_texts, make_world, train_fields
from mosaictool.demo.experiments import Context, Section
from mosaictool.demo.experiments.common import score
from mosaictool.demo.finetune import finetune_all
from mosaictool.demo.report import summarise, table_markdown
from mosaictool.demo.significance import case_matrix

logger = logging.getLogger(__name__)

NAME = "noisy"
HELP = "NegCLIP and MosaiCLIP fine-tuned on clean and on web-like noisy captions (--split)"
PLACE = 70  # HELP: its line in `demo --help` and docs/demo.md; PLACE: its place in those lists
FILES = ("noisy.md",)  # what it writes in the demo folder
ROWS = ("NegCLIP", "MosaiCLIP")
HIT = 0.10  # Sec. 4.3's "> 10% hit", relative (see run)
FAMILY = "MosaiCLIP robust to noisy captions, NegCLIP not (Sec. 4.3)"


def varied_shards(texts: Path, world: Path, folder: Path) -> Path:
    """Shards of the records' varied captions (the `-plain` records left out)."""
    from mosaictool.io import read_records

    records = (r for r in read_records(texts) if not str(r["id"]).endswith("-plain"))
    return make_shards(train_fields(records), world, folder, source=texts)


def noisy_data(ctx: Context) -> tuple[Path, Path, str]:
    """The noisy world and its texts under OUT/noisy (reused there when their recipe is the same), and
    the texts audit: how many sub-graph positives of noisy captions are false of their image."""
    from mosaictool.demo.data import audit_kept, audit_texts, file_digest

    cfg = dataclasses.replace(ctx.cfg, caption_noise=ctx.cfg.noise_rate)
    out = ctx.out / "noisy"
    out.mkdir(parents=True, exist_ok=True)
    world = make_world(cfg, out)
    texts = make_texts(cfg, world, out)
    key = {"texts": file_digest(texts), "batches": cfg.audit_batches}
    audited = audit_kept(out, key) or audit_texts(cfg, texts, out, key)
    return world, texts, audited


def run(ctx: Context) -> Section:
    cfg = ctx.cfg
    logger.info(f"noisy: the world's train captions with noise {cfg.noise_rate:g}")
    noisy_world, noisy_texts, audited = noisy_data(ctx)
    shards = {"clean": varied_shards(ctx.out / "texts.jsonl", ctx.world, ctx.out / "shards-varied"),
              "noisy": varied_shards(noisy_texts, noisy_world, ctx.out / "noisy" / "shards-varied")}
    rows = [row for row in METHODS if row[0] in ROWS]
    runs: dict[str, list[Path]] = {}
    for arm, folder in shards.items():
        trial = dataclasses.replace(cfg, finetune_lr=cfg.lr_for("NegCLIP"))
        got = finetune_all(trial, folder, ctx.base, ctx.out, rows=[(f"{arm} {label}", m, o) for label, m, o in rows])
        runs.update({f"{label.split(' ', 1)[1]} {arm}": finals for label, finals in got.items()})
    results, groups = score(ctx, runs, "noisy", cfg.split)
    aro = {name: case_matrix(results, groups, name) for name in runs}
    claims = []
    if all(m is not None for m in aro.values()):
        # "a > 10% hit": relative to the clean arm's accuracy (Table 1: NegCLIP's attribute drop, 72.7 -> 63.1, is 9.6
        # points and 13% of it, so the paper's 10% is relative); "similar performance" is the same sentence's other
        # side, a drop within 10% (MosaiCLIP's ARO drops in Table 1 average 9% of its COCO accuracy). The margin is
        # measured on the clean arm (its SE is a tenth of the clean mean's, small beside the drop's).
        margin = {row: HIT * float(aro[f"{row} clean"].mean()) for row in ROWS}
        words = f"{HIT:.0%} of the clean arm's ARO accuracy"
        claims.append(Claim("NegCLIP takes a > 10% hit in performance across various ARO datasets when the fine-tuning "
                            "dataset is changed from COCO to YFCC", "Sec. 4.3, Table 1", "relation 81.7 -> 57.8, order "
                            "85.7 -> 52.1", "NegCLIP clean − NegCLIP noisy, ARO cases", "noisy",
                            paired(aro["NegCLIP clean"], aro["NegCLIP noisy"]), margin=margin["NegCLIP"],
                            margin_words=f"\"> 10% hit\": {words}", family=FAMILY, columns=ARO_COLUMNS))
        claims.append(Claim("whereas, MosaiCLIP achieves similar performance using both datasets", "Sec. 4.3, Table 1",
                            "relation 82.6 -> 74.3, order 87.1 -> 84.4", "MosaiCLIP clean − MosaiCLIP noisy, ARO cases", "noisy",
                            paired(aro["MosaiCLIP clean"], aro["MosaiCLIP noisy"]), test="equivalence",
                            margin=margin["MosaiCLIP"], margin_words=f"\"similar\": no 10% hit, {words}", family=FAMILY,
                            columns=ARO_COLUMNS))
    text = "\n".join([
        f"NegCLIP and MosaiCLIP fine-tuned on the varied captions, clean and with noise {cfg.noise_rate:g} (mosaictool.world."
        f"noise), from the same base, {cfg.seeds} seeds; **{cfg.split}** split.", "",
        table_markdown(summarise(results, groups)), "", audited, ""])
    write_text(ctx.out / FILES[0], text)
    return Section("Noisy captions", text, [ctx.out / FILES[0]], claims=claims,
                   control="none of its own (its arms train on the varied captions only, clean or noisy, and it has no "
                           "CLIP arm); read it beside the table's, from the same base")
