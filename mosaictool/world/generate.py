"""`generate_world`: the whole world directory, built in a hidden staging folder inside it and moved
into place at the end, under the folder's lock (mosaictool.locks: one writer at a time).

    W/manifest.json
    W/train/captions.jsonl, W/train/images/*.png
    W/{val,test}/aro/visual_genome_relation.json, visual_genome_attribution.json, coco_karpathy_test.json, images/
    W/{val,test}/coco/world/*.png
    W/{val,test}/crepe/syst_vg_hard_negs_{seen,unseen}_compounds_in_laion.csv, prod_hard_negatives/{atom,swap,negate}/*.csv,
                     VG_100K/*.jpg
    W/{val,test}/zeroshot/{shape,colour,object}/classnames.txt, templates.txt, test/<class>/*.png
    W/{val,test}/probe_c/probe_c.jsonl, images/; probe_b/probe_b.jsonl, classes.txt, prompts.txt, images/ (Schiappa et al. 2023)
    W/{val,test}/relforms/relation_forms.jsonl, images/ (relation in several sentence forms, on an image and its twin)

Items are made in chunks, in worker processes when --workers > 1; each item has its own seeded
random stream and its own files, and rows are gathered in item order, so the bytes never depend on
the number of workers.
"""

from __future__ import annotations

import csv
import functools
import io
import logging
import math
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import orjson

from mosaictool.errors import MosaicError
from mosaictool.locks import LOCK_NAME, folder_lock
from mosaictool.world import splits
from mosaictool.world.noise import NOISE_KINDS
from mosaictool.world.vocab import (
    COLOURS,
    HELD_OUT_OBJECTS,
    HELD_OUT_RELATIONS,
    RELATION_WORDS,
    RELATIONS,
    SHAPE_WORDS,
    SHAPES,
    SIZE_WORDS,
    SIZES,
    TEXTURE_WORDS,
    TEXTURES,
)

logger = logging.getLogger(__name__)
GENERATOR_VERSION = "mosaic-world/5"  # 2: copular relation sentences ("the X is above the Y"); 3: placement priors;
# 4: twice the order images (the first 1200 unchanged: each item is drawn from its own index); 5: relforms/ (relation
# in several sentence forms on an image and its twin; every file of world 4 unchanged but the manifest)
EVAL_SPLITS = ("val", "test")
# Items per val/test split at --eval-scale 1. ARO attribution: per group (25 groups; ARO drops
# groups under 25); relation: per predicate; productivity: per complexity (4..12), shared by the
# atom/swap/negate files; zero-shot: per class.
# The ARO sizes give the demo's paired tests (10 seeds) a minimal detectable effect of at most ~3 points:
# order's cases vary most between methods, so it has the most; scoring is cheap next to training.
EVAL_SIZES = {"attribution_per_group": 120, "relation_per_predicate": 1200, "order_images": 2400,
              "syst_seen": 200, "syst_unseen": 200, "prod_per_complexity": 40,
              "zs_shape_per_class": 30, "zs_colour_per_class": 30, "zs_object_per_class": 5,
              "probe_c_per_split": 60, "probe_b_scenes_per_split": 20, "relforms_per_predicate": 600}
# Numeric CREPE image ids (VG's are numbers): one range per file family.
SYST_SEEN_BASE, SYST_UNSEEN_BASE, PROD_BASE = 1_000_000, 2_000_000, 3_000_000
CHUNK = 64


def eval_sizes(scale: float) -> dict[str, int]:
    return {k: max(1, round(v * scale)) for k, v in EVAL_SIZES.items()}


# --- jobs: (kind, args) run by _run_chunk in any process ---------------------------------------------


def _item(job: tuple, root: Path):
    kind, *args = job
    return getattr(splits, kind)(*args, root=root)


def _run_chunk(payload: tuple[list[tuple], str]) -> list:
    jobs, root = payload
    return [_item(job, Path(root)) for job in jobs]


def _run_jobs(jobs: list[tuple], root: Path, workers: int, progress) -> list:
    chunks = [(jobs[k:k + CHUNK], str(root)) for k in range(0, len(jobs), CHUNK)]
    results: list = []
    if workers <= 1:
        for chunk in chunks:
            results.extend(_run_chunk(chunk))
            progress(len(chunk[0]))
        return results
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    with ctx.Pool(workers) as pool:
        for chunk_result in pool.imap(_run_chunk, chunks):  # imap keeps chunk order
            results.extend(chunk_result)
            progress(len(chunk_result))
    return results


# --- writers ----------------------------------------------------------------------------------------


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")


def _write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    """CREPE's CSVs: list columns as Python list literals (CREPE parses them with ast.literal_eval)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([repr(row[c]) if isinstance(row[c], list) else row[c] for c in columns])
    path.write_text(buf.getvalue())


def _eval_jobs(seed: int, split: str, size: int, n: dict) -> dict[str, list[tuple]]:
    groups = len(splits.attribution_groups())
    jobs = {
        "relation": [("aro_relation_item", seed, split, k, size) for k in range(n["relation_per_predicate"] * len(RELATIONS))],
        "attribution": [("aro_attribution_item", seed, split, k, size) for k in range(n["attribution_per_group"] * groups)],
        "order": [("order_item", seed, split, k, size) for k in range(n["order_images"])],
        "syst_seen": [("systematicity_item", seed, split, k, size, False, SYST_SEEN_BASE + k) for k in range(n["syst_seen"])],
        "syst_unseen": [("systematicity_item", seed, split, k, size, True, SYST_UNSEEN_BASE + k) for k in range(n["syst_unseen"])],
        "prod": [("productivity_item", seed, split, c, k, size, PROD_BASE + 1000 * c + k)
                 for c in splits.COMPLEXITIES for k in range(n["prod_per_complexity"])],
    }
    for which in ("composition", "object"):
        jobs[f"probe_c_{which}"] = [("probe_c_item", seed, split, which, k, size) for k in range(n["probe_c_per_split"])]
    for which in ("MR", "R"):
        jobs[f"probe_b_{which}"] = [("probe_b_item", seed, split, which, k, size) for k in range(n["probe_b_scenes_per_split"])]
    for task in ("shape", "colour", "object"):
        per_class = n[f"zs_{task}_per_class"]
        jobs[f"zs_{task}"] = [("zeroshot_item", seed, split, task, k, size)
                              for k in range(per_class * len(splits.zeroshot_classes(task)))]
    jobs["relforms"] = [("relation_forms_item", seed, split, k, size) for k in range(n["relforms_per_predicate"] * len(RELATIONS))]
    return jobs


def _write_eval_split(root: Path, results: dict[str, list]) -> dict[str, int]:
    aro = root / "aro"
    _write_json(aro / "visual_genome_relation.json", results["relation"])
    _write_json(aro / "visual_genome_attribution.json", results["attribution"])
    _write_json(aro / "coco_karpathy_test.json", results["order"])
    crepe = root / "crepe"
    syst_cols = ["image_id", "region_id", "x", "y", "width", "height", "caption",
                 "valid_hard_negs_atom", "valid_hard_negs_comp", "valid_hard_negs_combined"]
    for which in ("seen", "unseen"):
        _write_csv(crepe / f"syst_vg_hard_negs_{which}_compounds_in_laion.csv", results[f"syst_{which}"], syst_cols)
    prod_cols = ["image_id", "x", "y", "width", "height", "caption", "hard_negs"]
    for kind in ("atom", "swap", "negate"):
        for c in splits.COMPLEXITIES:
            rows = [{**r, "hard_negs": r["hard_negs"][kind]} for r in results["prod"] if r["complexity"] == c]
            _write_csv(crepe / "prod_hard_negatives" / kind / f"prod_vg_hard_negs_{kind}_complexity_{c}.csv", rows, prod_cols)
    for task in ("shape", "colour", "object"):
        folder = root / "zeroshot" / task
        (folder / "classnames.txt").write_text("\n".join(splits.zeroshot_classes(task)) + "\n")
        (folder / "templates.txt").write_text("\n".join(splits.ZEROSHOT_TEMPLATES[task]) + "\n")
    counts = {"aro_relation": len(results["relation"]), "aro_attribution": len(results["attribution"]),
              "coco_order_images": len(results["order"]), "coco_order_captions": sum(len(r["caption"]) for r in results["order"]),
              "crepe_syst_seen": len(results["syst_seen"]), "crepe_syst_unseen": len(results["syst_unseen"]),
              "crepe_prod_per_type": len(results["prod"])}
    for task in ("shape", "colour", "object"):
        counts[f"zeroshot_{task}"] = len(results[f"zs_{task}"])
    counts.update(splits.write_probe_files(root, results))
    counts.update(splits.write_relation_forms(root, results["relforms"]))
    return counts


def manifest(seed: int, train: int, twins: bool, binding_twins: bool, shape_twins: bool, image_size: int, eval_scale: float, counts: dict,
             caption_noise: float = 0.0, noise_kinds: tuple[str, ...] = NOISE_KINDS) -> dict:
    options = {"train": train, "twins": twins, "binding_twins": binding_twins, "shape_twins": shape_twins, "image_size": image_size,
               "eval_scale": eval_scale}
    layout = {
        "train": "train/captions.jsonl (id, image, caption, scene, mentions, hard_images, twin_of, twin_kind) + train/images/",
        "val/test": "aro/, coco/, crepe/, zeroshot/ in the real benchmarks' file layouts (evaluate --bench world / world-val)",
    }
    if caption_noise:  # a clean world's manifest stays as it was, byte for byte
        options.update(caption_noise=caption_noise, noise_kinds=list(noise_kinds))
        layout["train_noise"] = ("each train record also has clean_caption, clean_mentions and noise (entries: kind, spans in caption, "
                                 "what changed; [] for a caption left clean); caption and mentions are the noisy ones; val/test are clean")
    return {
        "generator": GENERATOR_VERSION,
        "seed": seed,
        "options": options,
        "counts": counts,
        "held_out": {
            "object_compounds": [f"{c} {s}" for c, s in HELD_OUT_OBJECTS],
            "relation_compounds": [f"{s} {r} {o}" for s, r, o in HELD_OUT_RELATIONS],
            "note": "never in train (relation compounds in either direction); the CREPE unseen files test them",
        },
        "vocab": {
            "shapes": list(SHAPES), "colours": list(COLOURS), "sizes": list(SIZES), "textures": list(TEXTURES),
            "relations": list(RELATIONS),
            "synonyms": {"shape": SHAPE_WORDS, "size": SIZE_WORDS, "texture": TEXTURE_WORDS, "relation": RELATION_WORDS},
        },
        "layout": layout,
    }


def check_settings(*, train: int, image_size: int, eval_scale: float) -> None:
    """MosaicError naming the flag when a size is unusable."""
    if train < 0:
        raise MosaicError("--train must be 0 or more")
    if not 48 <= image_size <= 256:
        raise MosaicError(f"--image-size {image_size}: choose 48..256 pixels (64-96 is the intended range)")
    if not 0 < eval_scale < math.inf:  # NaN too
        raise MosaicError(f"--eval-scale {eval_scale}: must be a finite number > 0")


# What a world needs at least, measured on mosaic-world/4 at 64 px: a train record is ~1.1 KB of JSON,
# kept in memory until captions.jsonl is written; every item (train scene, twin or benchmark image)
# is a file of ~2.6 KB on disk.
TRAIN_RECORD_BYTES, ITEM_FILE_BYTES = 1000, 2000


def check_size(out: Path, *, train: int, eval_scale: float, twins: int = 0) -> None:
    """MosaicError naming the flag when the world could not fit in this machine's memory or on the disk
    of `out`, estimated before anything is made (`twins`: how many twin kinds each train scene adds)."""
    from mosaictool.records import machine_memory

    records = train * (1 + twins)
    items = records + len(EVAL_SPLITS) * _split_items_at_scale_1() * eval_scale
    memory = machine_memory()
    if memory is not None and records * TRAIN_RECORD_BYTES > memory:
        raise MosaicError(f"--train {train}: ~{records:,} train records need ~{records * TRAIN_RECORD_BYTES / 2**30:,.0f} GiB of "
                          f"memory at least, more than this machine's {memory / 2**30:,.0f} GiB; make fewer")
    above = next((p for p in [out, *out.parents] if p.exists()), None)
    free = shutil.disk_usage(above).free if above is not None else None
    if free is not None and items * ITEM_FILE_BYTES > free:
        flag = f"--eval-scale {eval_scale:g}" if len(EVAL_SPLITS) * _split_items_at_scale_1() * eval_scale > records else f"--train {train}"
        raise MosaicError(f"{flag}: ~{items:,.0f} images need ~{items * ITEM_FILE_BYTES / 2**30:,.0f} GiB on disk at least, more "
                          f"than the {free / 2**30:,.0f} GiB free under {above}; make fewer or choose another --out")


@functools.cache
def _split_items_at_scale_1() -> int:
    return sum(len(j) for j in _eval_jobs(0, "val", 64, eval_sizes(1.0)).values())


def generate_world(out: str | os.PathLike, *, train: int, seed: int = 0, twins: bool = False, binding_twins: bool = False,
                   shape_twins: bool = False, image_size: int = 64,
                   eval_scale: float = 1.0, workers: int = 1, overwrite: bool = False, progress=None,
                   caption_noise: float = 0.0, noise_kinds=NOISE_KINDS) -> dict:
    """Write the world to `out`; returns the manifest. caption_noise: the chance that a train
    caption is made web-like noisy by `noise_kinds` (world.noise); val and test stay clean."""
    out = Path(out)
    check_settings(train=train, image_size=image_size, eval_scale=eval_scale)
    noise_kinds = check_noise(caption_noise, noise_kinds)
    if out.is_symlink() and out.is_dir():  # the world goes where the link points; the link stays
        out = out.resolve()
    if out.exists() and not out.is_dir():
        raise MosaicError(f"{out}: is a file, not a folder; choose another --out")
    above = next((p for p in out.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise MosaicError(f"--out {out}: {above} is a file, not a folder; choose another --out")
    check_size(out, train=train, eval_scale=eval_scale, twins=twins + binding_twins + shape_twins)
    _check_target(out, overwrite)  # before hours of rendering; again under the lock right before the swap
    progress = progress or (lambda n: None)
    with folder_lock(out, "mosaictool world"):
        for stale in out.glob(f"{STAGING}*"):  # a killed run's: under the lock, nobody else is writing it
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=STAGING, dir=out))  # its folders (made with the umask's mode) move out of it
        try:
            info = _generate(tmp, seed, train, twins, binding_twins, shape_twins, image_size, eval_scale, workers, progress,
                             caption_noise, noise_kinds)
            _check_target(out, overwrite)  # what was put into the folder while the world was made
            _swap_in(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return info


def _generate(tmp: Path, seed, train, twins, binding_twins, shape_twins, image_size, eval_scale, workers, progress,
              caption_noise, noise_kinds) -> dict:
    """Write the whole world into the staging folder `tmp`; returns its manifest."""
    jobs = [("train_item", seed, k, image_size, twins, binding_twins, shape_twins, caption_noise, noise_kinds) for k in range(train)]
    train_records = [r for pair in _run_jobs(jobs, tmp / "train", workers, progress) for r in pair]
    (tmp / "train").mkdir(parents=True, exist_ok=True)
    with open(tmp / "train" / "captions.jsonl", "wb") as f:
        for r in train_records:
            f.write(orjson.dumps(r) + b"\n")
    counts = {"train": {"records": len(train_records), "scenes": train,
                        "twins": sum(r["twin_kind"] == "arrangement" for r in train_records),
                        "binding_twins": sum(r["twin_kind"] == "binding" for r in train_records),
                        "shape_twins": sum(r["twin_kind"] == "shape" for r in train_records)}}
    if caption_noise:
        counts["train"]["noisy"] = sum(bool(r["noise"]) for r in train_records)
        counts["train"]["noise_kinds"] = {k: sum(any(e["kind"] == k for e in r["noise"]) for r in train_records) for k in noise_kinds}
    n = eval_sizes(eval_scale)
    for split in EVAL_SPLITS:
        root = tmp / split
        results = {name: _run_jobs(jobs, root, workers, progress) for name, jobs in _eval_jobs(seed, split, image_size, n).items()}
        counts[split] = _write_eval_split(root, results)
    info = manifest(seed, train, twins, binding_twins, shape_twins, image_size, eval_scale, counts, caption_noise, noise_kinds)
    _write_json(tmp / "manifest.json", info)
    return info


STAGING = ".world-partial-"  # the staging folder inside --out; a killed run's is removed by the next run
_TOP = ("train", *EVAL_SPLITS, "manifest.json")  # manifest.json last: it is what makes the folder a world


def _ours(name: str) -> bool:
    """A top-level entry of --out that a world run keeps there while it writes (the lock, staging)."""
    return name == LOCK_NAME or name.startswith(STAGING)


def _check_target(out: Path, overwrite: bool) -> None:
    """MosaicError unless `out` is missing or empty, or (with --overwrite) holds a world and nothing else."""
    if not out.is_dir() or not any(not _ours(p.name) for p in out.iterdir()):
        return
    if not overwrite:
        raise MosaicError(f"{out} exists and is not empty; choose another --out or pass --overwrite")
    if not (out / "manifest.json").is_file():
        raise MosaicError(f"{out} is not a world (no manifest.json); refusing to overwrite it")
    foreign = sorted(p.name for p in out.iterdir() if p.name not in _TOP and not _ours(p.name))
    if foreign:  # --overwrite replaces the world: what else was put there would go with it
        raise MosaicError(f"{out} holds {', '.join(foreign[:3])} besides the world; --overwrite would delete "
                          "it: move it out, or choose another --out")
    foreign = _not_written_by_a_world(out)
    if foreign:
        raise MosaicError(f"{out} holds {', '.join(foreign[:3])}, which no world writes; --overwrite would delete "
                          "it: move it out, or choose another --out")


def _swap_in(tmp: Path, out: Path) -> None:
    """Move the staged world into `out`: an old world's folders are moved aside into the staging folder,
    then the new ones moved in, manifest.json last (replaced in one rename). Of the old folders only
    the files a world writes are deleted: anything put there since the last check is kept, in a
    folder named in one log line."""
    old = tmp / ".old"
    old.mkdir()
    for name in _TOP:
        if name != "manifest.json" and (out / name).exists():
            os.replace(out / name, old / name)
        os.replace(tmp / name, out / name)
    for root, dirs, files in os.walk(old, topdown=False):
        rel = Path(root).relative_to(old)
        for name in files:
            if _WORLD_FILES.fullmatch((rel / name).as_posix()):
                os.unlink(Path(root) / name)
        if root != str(old) and not os.listdir(root):
            os.rmdir(root)
    if any(old.iterdir()):
        kept = Path(tempfile.mkdtemp(prefix=".world-kept-", dir=out))
        os.replace(old, kept / "old")
        logger.warning(f"{out}: files that no world writes appeared in the old world while the new one was moved in; "
                       f"kept in {kept / 'old'}")


# Every file a world writes, by its path in the world folder (digits as \\d+): --overwrite deletes only these.
_WORLD_FILES = re.compile(r"""manifest\.json
    | train/(captions\.jsonl | images/\d+(_[a-z]+)?\.png)
    | (val|test)/(
        aro/(coco_karpathy_test | visual_genome_attribution | visual_genome_relation)\.json
      | aro/images/(attribution|relation)_\d+\.png
      | coco/world/order_\d+\.png
      | crepe/VG_100K/\d+\.jpg
      | crepe/prod_hard_negatives/(atom|negate|swap)/prod_vg_hard_negs_(atom|negate|swap)_complexity_\d+\.csv
      | crepe/syst_vg_hard_negs_(seen|unseen)_compounds_in_laion\.csv
      | probe_b/(classes\.txt | prompts\.txt | probe_b\.jsonl)
      | probe_b/images/M?R/((black|gray|noise|scene)/\d+_x\d+(_patch)?|x\d+/\d+)\.png
      | probe_c/probe_c\.jsonl | probe_c/images/(composition|object)_\d+_\d+\.png
      | relforms/relation_forms\.jsonl | relforms/images/\d+_[01]\.png
      | zeroshot/(shape|colour|object)/(classnames\.txt | templates\.txt | test/\d+/\d+\.png))""", re.VERBOSE)


def _not_written_by_a_world(out: Path) -> list[str]:
    """Paths under `out` (relative, sorted) that no world writes: user files --overwrite must keep."""
    found = []
    for root, dirs, files in os.walk(out):
        rel = Path(root).relative_to(out)
        if root == str(out):  # the lock and the staging folder are this run's own
            dirs[:] = [d for d in dirs if not _ours(d)]
            files = [f for f in files if not _ours(f)]
        found += [(rel / name).as_posix() for name in files if not _WORLD_FILES.fullmatch((rel / name).as_posix())]
        found += [(rel / d).as_posix() + " (a link)" for d in dirs if (Path(root) / d).is_symlink()]
    return sorted(found)


def check_noise(caption_noise: float, noise_kinds) -> tuple[str, ...]:
    """The noise kinds in NOISE_KINDS order, after checking the rate (a fraction; NaN fails the
    comparison) and the kinds (known ones, at least one)."""
    if not 0 <= caption_noise <= 1:
        raise MosaicError(f"--caption-noise {caption_noise}: the share of train captions made noisy, a fraction from 0 to 1")
    kinds = tuple(noise_kinds)
    unknown = [k for k in kinds if k not in NOISE_KINDS]
    if unknown or not kinds:
        raise MosaicError(f"--noise-kinds {','.join(kinds) or '(none)'}: choose one or more of {','.join(NOISE_KINDS)}")
    return tuple(k for k in NOISE_KINDS if k in kinds)


def total_items(train: int, eval_scale: float) -> int:
    """How many items (progress units) generate_world makes."""
    n = eval_sizes(eval_scale)
    per_split = sum(len(j) for j in _eval_jobs(0, "val", 64, n).values())
    return train + len(EVAL_SPLITS) * per_split


def load_manifest(world: str | os.PathLike) -> dict:
    path = Path(world) / "manifest.json"
    if not path.is_file():
        raise MosaicError(f"{path} not found: make a world with `mosaictool world --out {world}`")
    from mosaictool.io import read_json

    return read_json(path, hint=f"make the world again with `mosaictool world --out {world} --overwrite`")
