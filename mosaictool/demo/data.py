"""The demo's data: world -> parse -> vocab -> decompose -> negate -> template -> shards, each kept on
disk and reused when its recipe is the same; and the texts audit against the world's truth."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mosaictool.atomic import write_text
from mosaictool.demo import cache
from mosaictool.demo.config import TEXT_METHODS, DemoConfig, digest, file_digest
from mosaictool.io import read_json

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # the demo's stages import torch only where they train
    from mosaictool.training.shards import ShardCache


# What the data stages leave in OUT (world -> texts -> shards, and the texts audit): ~1.3 min on 2
# cores, the same for every demo of the same world, settings and code. Kept in the cache beside the
# base, so that a demo in a new folder starts at the fine-tuning.
DATA_ARTIFACTS = ("world", "graphs.parquet", "vocab", "texts.jsonl", "texts.recipe.json", "shards",
                  "shards.recipe.json", "shards-plain", "shards-plain.recipe.json", "audit.json")


def data_cache(cfg: DemoConfig) -> Path:
    """The cache folder of this config's data: named by the world's settings, the audit's batches and
    the bytes of mosaictool's own files (any code change makes new data, never a stale reuse), the
    stages and vocabulary included: in a source checkout they live beside the package, not in it."""
    import mosaictool.stages
    import mosaictool.vocab

    package = Path(__file__).resolve().parents[1]  # mosaictool/ itself
    roots = dict.fromkeys([package, *(Path(p) for m in (mosaictool.stages, mosaictool.vocab) for p in m.__path__)])
    files = sorted({f for root in roots for f in root.rglob("*") if f.is_file() and "__pycache__" not in f.parts})
    code = [file_digest(f) for f in files]
    key = {"seed": cfg.world_seed, "train": cfg.world_train, "twins": cfg.twins, "image_size": cfg.image_size,
           "eval_scale": cfg.eval_scale, "caption_noise": cfg.caption_noise, "audit_batches": cfg.audit_batches, "code": digest(code)}
    return Path(cfg.cache_dir) / f"data-{digest(key)}"


def restore_data(cached: Path, out: Path) -> bool:
    """Copy the data cached in `cached` (data_cache) into OUT, replacing what is there, every file
    checked against the entry's manifest (mosaictool.demo.cache); False when none is cached or the
    entry failed the check (then it is removed, with one line saying why, and built again)."""
    with cache.lock_of(cached):
        if not cached.is_dir():
            return False
        problem = cache.restore(cached, out)
    if problem is not None:
        logger.info(f"data: the cache {cached} failed its check ({problem}); building the data again")
        return False
    logger.info(f"data: reusing the cached world, texts, shards and audit ({cached})")
    return True


def keep_data(cached: Path, out: Path) -> None:
    """Copy OUT's data into `cached` (data_cache; once: a complete folder with its manifest, moved into place)."""
    with cache.lock_of(cached):
        if not cached.is_dir():
            cache.store({name: out / name for name in DATA_ARTIFACTS}, cached)


def make_world(cfg: DemoConfig, out: Path) -> Path:
    from mosaictool.world.generate import GENERATOR_VERSION, generate_world, load_manifest
    from mosaictool.world.noise import NOISE_KINDS

    world = out / "world"
    wanted = {"seed": cfg.world_seed, "train": cfg.world_train, "twins": cfg.twins, "binding_twins": cfg.twins,
              "shape_twins": cfg.twins, "image_size": cfg.image_size, "eval_scale": cfg.eval_scale}
    if cfg.caption_noise:  # a clean world's manifest has no noise options
        wanted.update(caption_noise=cfg.caption_noise, noise_kinds=list(NOISE_KINDS))
    if (world / "manifest.json").is_file():
        m = load_manifest(world)
        # a world of an older generator lacks what newer columns read (relforms/): made again
        if {"seed": m.get("seed"), **m.get("options", {})} == wanted and m.get("generator") == GENERATOR_VERSION:
            logger.info(f"world: reusing {world}")
            return world
    logger.info(f"world: {cfg.world_train} scenes{' + twins' if cfg.twins else ''} -> {world}")
    generate_world(world, train=cfg.world_train, seed=cfg.world_seed, twins=cfg.twins, binding_twins=cfg.twins,
                   shape_twins=cfg.twins, image_size=cfg.image_size, eval_scale=cfg.eval_scale, workers=cfg.workers,
                   overwrite=True, caption_noise=cfg.caption_noise)
    return world


def two_captions(world: Path):
    """The fine-tuning data: every train image twice, as COCO gives an image several captions, with
    its varied caption and, as `<id>-plain`, with its plain one (whose hard images are the twins'
    plain records). Continuing the base on the varied captions alone took val relation from 62% to
    46% in 300 steps; with both captions, to 52%."""
    from mosaictool.io import read_records

    for rec in read_records(world / "train" / "captions.jsonl"):
        yield rec
        hard = [f"{h}-plain" for h in rec["hard_images"] or []] or None
        yield {**rec, "id": f"{rec['id']}-plain", "caption": rec["plain_caption"], "hard_images": hard}


def make_texts(cfg: DemoConfig, world: Path, out: Path) -> Path:
    """parse -> vocab build -> decompose -> negate -> template: the graphs kept on disk, and the texts
    (whose records also hold the graphs, sub-graphs and negatives of the stages between)."""
    from mosaictool.io import write_records
    from mosaictool.stages.decompose import decompose
    from mosaictool.stages.negate import negate
    from mosaictool.stages.parse import parse
    from mosaictool.stages.template import template
    from mosaictool.stages.vocab_tools import build_from_graphs
    from mosaictool.vocab import load as load_vocab
    from mosaictool.vocab import save as save_vocab
    from mosaictool.world.generate import load_manifest
    from mosaictool.world.vocab import base_vocab

    texts = out / "texts.jsonl"
    recipe_file = out / "texts.recipe.json"
    recipe = {"world": load_manifest(world), "vocab_min_count": 20, "vocab_base": "world", "max_subgraphs": 3,
              "max_negatives": 6, "text_methods": list(TEXT_METHODS)}
    if texts.is_file() and recipe_file.is_file() and read_json(recipe_file) == recipe:
        logger.info(f"texts: reusing {texts}")
        return texts
    recipe_file.unlink(missing_ok=True)
    graphs = out / "graphs.parquet"
    logger.info("parse: captions -> scene graphs")
    parsed = list(parse(two_captions(world), workers=cfg.workers))  # kept: the vocabulary and decompose read them
    write_records(graphs, parsed)
    # Negatives drawn from the world's own vocabulary (objects/attributes/relations seen >= 20
    # times), as MosaiCLIP drew them from Visual Genome's: replacements are then in-distribution.
    # Its base is the world's words (`vocab build --base world`): their synonym and hypernym groups
    # keep a replacement from being true ("diamond" -> "rhombus") and give sub-graph keys the same
    # head for the same meaning (the texts audit: 2.3% -> 1.3% of graph negatives true of their image).
    vocab_dir = out / "vocab"
    save_vocab(build_from_graphs(parsed, min_count=20, base=base_vocab()), vocab_dir)
    logger.info("decompose + negate + template: sub-graph positives, hard negatives, their texts")
    # streamed from one stage to the next: the negatives as a file of their own (Parquet) cost 14 s
    # to write and 4 to read back, and texts.jsonl holds them
    negatives = negate(decompose(parsed, max_subgraphs=recipe["max_subgraphs"], vocab=str(vocab_dir)), vocab=str(vocab_dir),
                       max_negatives=recipe["max_negatives"], text_methods=TEXT_METHODS, workers=cfg.workers)
    write_records(texts, template(negatives, vocab=load_vocab(vocab_dir)))
    write_text(recipe_file, json.dumps(recipe, sort_keys=True) + "\n")
    return texts


# The fields of a texts record that training reads (mosaictool.training.shards.slim_record's inputs) and the
# shard writer needs: the fine-tuning shards carry only these. Each run decodes every record's JSON
# when it starts, and the graphs, raw negatives and scenes were two thirds of it (~24 s a run at
# 8,000 scenes, 18 runs).
TRAIN_FIELDS = ("id", "image", "caption", "hard_images", "subgraph_keys", "texts")


def train_fields(records):
    for rec in records:
        yield {k: rec[k] for k in TRAIN_FIELDS if k in rec}


def make_shards(records, world: Path, shards: Path, source: Path | None = None) -> Path:
    """Shards of `records`, reused only when they were written from the same world and `source` file."""
    from mosaictool.stages.shard import write_shards
    from mosaictool.world.generate import load_manifest

    recipe_file = shards.with_name(shards.name + ".recipe.json")
    recipe = {"world": load_manifest(world), "source": file_digest(source) if source else None, "fields": list(TRAIN_FIELDS)}
    if (shards / "sizes.json").is_file() and recipe_file.is_file() and read_json(recipe_file) == recipe:
        logger.info(f"shards: reusing {shards}")
        return shards
    recipe_file.unlink(missing_ok=True)
    if shards.exists():
        shutil.rmtree(shards)
    logger.info(f"shard: WebDataset tar shards -> {shards}")
    write_shards(records, out=shards, image_root=world / "train", shard_size=2000)
    write_text(recipe_file, json.dumps(recipe, sort_keys=True) + "\n")
    return shards


def plain_records(world: Path):
    """The base's pretraining data: the world's scenes of one or two objects and their
    arrangement twins (the only hard images kept), each with its plain caption as the caption.
    With 1-4 objects from the start, 500 steps left shape recognition at chance (0.22 vs 0.62 on
    val); with binding and shape twins in the batch too, relation stayed at 0.52 after 1,200 steps."""
    from mosaictool.io import read_records

    records = [r for r in read_records(world / "train" / "captions.jsonl")
               if len(r["scene"]["objects"]) <= 2 and r["twin_kind"] in (None, "arrangement")]
    kept = {r["id"] for r in records}
    for rec in records:
        hard = [h for h in rec["hard_images"] or [] if h in kept]
        yield {**rec, "caption": rec["plain_caption"], "hard_images": hard or None}


def shards_and_audit(cfg: DemoConfig, world: Path, texts: Path, out: Path,
                     shard_cache: ShardCache) -> tuple[Path, Path, str]:
    """The fine-tuning and pretraining shards, and the texts audit's markdown. The audit (~20 s on
    one core, when not kept) runs in a forked process beside the shards (~13 s), which are then
    indexed into `shard_cache` for the fine-tuning runs to come."""
    from mosaictool.io import read_records

    def shards() -> tuple[Path, Path]:
        tuned = make_shards(train_fields(read_records(texts)), world, out / "shards", source=texts)
        plain = make_shards(train_fields(plain_records(world)), world, out / "shards-plain")
        shard_cache.preload(str(tuned))
        return tuned, plain

    key = {"texts": file_digest(texts), "batches": cfg.audit_batches}
    kept = audit_kept(out, key)
    if kept is not None or not sys.platform.startswith("linux"):
        tuned, plain = shards()
        return tuned, plain, kept if kept is not None else audit_texts(cfg, texts, out, key)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        audited = pool.submit(audit_texts, cfg, texts, out, key)
        tuned, plain = shards()
        return tuned, plain, audited.result()


def audit_kept(out: Path, key: dict) -> str | None:
    """The audit's markdown kept in OUT/audit.json under `key` (the texts' digest and the batches), else None."""
    kept = out / "audit.json"
    if kept.is_file():
        old = read_json(kept)
        if old.get("key") == key:
            return old["markdown"]
    return None


def audit_texts(cfg: DemoConfig, texts: Path, out: Path, key: dict) -> str:
    """The texts audit (mosaictool.world.audit) as markdown, kept in OUT/audit.json under `key` (audit_kept)."""
    from mosaictool.io import read_records, write_json
    from mosaictool.world.audit import audit, audit_markdown

    logger.info(f"audit: the texts against the world's truth ({cfg.audit_batches} simulated batches)")
    result = audit(read_records(texts), batches=cfg.audit_batches)
    markdown = audit_markdown(result)
    write_json(out / "audit.json", {"key": key, "result": result, "markdown": markdown})
    return markdown
