"""`import coco`: COCO's caption annotations -> caption records {id, caption, image, image_id}.

Reads COCO captions files (captions_train2017.json: {images: [{id, file_name}], annotations: [{id,
image_id, caption}]}) and Karpathy's dataset_coco.json ({images: [{cocoid, split, filepath, filename,
sentences: [{raw, sentid}]}]}), the split NegCLIP fine-tunes on (Yuksekgonul et al. 2023, §4: COCO's
Karpathy train split). One record per caption: `id` "<image_id>-<annotation id>" (Karpathy's file:
"<cocoid>-<sentid>"), the caption as written, `image` the file's path relative to the image folder
(COCO: `file_name`; Karpathy: `filepath/filename`) and `image_id`. `karpathy` keeps the captions of
the images of `splits` (by cocoid, which is COCO's image id), so a COCO 2014 or 2017 captions file
can be cut to Karpathy's train split. Every entry is checked against its schema (stages/source_formats):
a file that does not follow it is refused with one line naming the file and the entry.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mosaictool.errors import MosaicError
from mosaictool.io import Skips, read_json
from mosaictool.stages.source_formats import (
    COCO_CAPTION,
    COCO_CAPTION_FILE,
    COCO_CAPTION_IMAGE,
    KARPATHY_FILE,
    KARPATHY_IMAGE,
    KARPATHY_SENTENCE,
    check_entry,
)

SPLITS = ("train", "val", "test", "restval")
COCO_WHAT = "COCO captions: captions_*.json {images: [{id, file_name}], annotations: [{id, image_id, caption}]}"
KARPATHY_WHAT = "Karpathy's dataset_coco.json {images: [{cocoid, split, filepath, filename, sentences: [{raw, sentid}]}]}"


@dataclass
class CocoImport:
    """What an import wrote (complete once its records are exhausted): captions, the images they
    describe, and the images of the Karpathy splits that no captions file holds (a 2017 file misses
    none of the 2014 images; one file of two, train or val, misses the other's)."""

    captions: int = 0
    images: int = 0
    split_images: int = 0
    not_found: int = 0


def parse_splits(value: str) -> tuple[str, ...]:
    """--split: comma-separated Karpathy splits ("train,restval")."""
    items = [s.strip() for s in value.split(",")]
    bad = [s for s in items if s not in SPLITS]
    if bad or not items:
        raise MosaicError(f"--split {value!r}: expected Karpathy splits from {', '.join(SPLITS)} (comma-separated, "
                          "e.g. train or train,restval)")
    return tuple(dict.fromkeys(items))


def _load(path: str, flag: str) -> object:
    p = Path(path)
    if not p.is_file():
        raise MosaicError(f"{path}: {'no such file' if not p.exists() else 'not a file'} ({flag})")
    try:
        return read_json(p, hint="download the annotation file again")
    except OSError as e:
        raise MosaicError(f"{path}: cannot read it ({e.strerror or e})") from None


def _is_karpathy(data: object) -> bool:
    return isinstance(data, dict) and "annotations" not in data and isinstance(data.get("images"), list) and \
        any(isinstance(im, dict) and "sentences" in im for im in data["images"][:1])


def karpathy_images(path: str, data: object) -> Iterator[tuple[int, dict]]:
    """(index, entry) per image of a Karpathy file, each checked."""
    check_entry(KARPATHY_FILE, data, path, "top level", KARPATHY_WHAT)
    for i, image in enumerate(data["images"]):
        check_entry(KARPATHY_IMAGE, image, path, f"images[{i}]", KARPATHY_WHAT)
        yield i, image


def coco_captions(files: Sequence[str], *, karpathy: str | None = None, splits: Sequence[str] | None = None,
                  image_root: str | os.PathLike | None = None, skips: Skips | None = None,
                  stats: CocoImport | None = None) -> Iterator[dict]:
    """The caption records of `files` (COCO captions files, or Karpathy's file itself), in file
    order; `splits` of Karpathy's file (`karpathy`, or a Karpathy file in `files`) keeps their
    images' captions (default: train); `image_root`: every image must be a file there (else
    MosaicError naming it, or counted in `skips`)."""
    skips = skips or Skips()
    stats = stats if stats is not None else CocoImport()
    loaded = [(path, _load(path, "CAPTIONS")) for path in files]
    in_files = [path for path, data in loaded if _is_karpathy(data)]
    if karpathy is not None and in_files:
        raise MosaicError(f"{in_files[0]} is Karpathy's file itself: read its captions without --karpathy (--split picks the split)")
    if splits is not None and karpathy is None and not in_files:
        raise MosaicError("--split picks a split of Karpathy's file: give it with --karpathy dataset_coco.json")
    chosen = tuple(splits or ("train",))
    keep: set[int] | None = None
    if karpathy is not None:
        keep = {image["cocoid"] for _, image in karpathy_images(karpathy, _load(karpathy, "--karpathy"))
                if image["split"] in chosen}
        stats.split_images = len(keep)
    found: set = set()
    ids: dict[str, str] = {}
    root = None if image_root is None else Path(image_root)
    for path, data in loaded:
        if path in in_files:
            records = _karpathy_records(path, data, chosen, stats)
        else:
            records = _coco_records(path, data, keep)
        for where, record in records:
            first = ids.setdefault(record["id"], where)
            if first != where:
                raise MosaicError(f"{where}: its id {record['id']!r} is also {first}'s (two annotations with one id)")
            if root is not None and not (root / record["image"]).is_file():
                skips.handle(where, f"image not found: {root / record['image']} (--image-root)")
                continue
            if record["image_id"] not in found:
                found.add(record["image_id"])
                stats.images += 1
            stats.captions += 1
            yield record
    if keep is not None:
        stats.not_found = len(keep - found)


def _coco_records(path: str, data: object, keep: set[int] | None) -> Iterator[tuple[str, dict]]:
    check_entry(COCO_CAPTION_FILE, data, path, "top level", COCO_WHAT)
    files: dict = {}
    for i, image in enumerate(data["images"]):
        check_entry(COCO_CAPTION_IMAGE, image, path, f"images[{i}]", COCO_WHAT)
        if files.setdefault(image["id"], image["file_name"]) != image["file_name"]:
            raise MosaicError(f"{path}: images[{i}]: image id {image['id']!r} is also {files[image['id']]!r} (not {COCO_WHAT})")
    first: dict = {}  # annotation id -> its first index: COCO's ids are unique in a file
    for i, ann in enumerate(data["annotations"]):
        where = f"{path}: annotations[{i}]" + (f" (id {ann['id']!r})" if isinstance(ann, dict) and "id" in ann else "")
        check_entry(COCO_CAPTION, ann, path, where.removeprefix(f"{path}: "), COCO_WHAT)
        if first.setdefault(ann["id"], i) != i:
            raise MosaicError(f"{where}: annotation id {ann['id']!r} is also annotations[{first[ann['id']]}]'s (not {COCO_WHAT})")
        if ann["image_id"] not in files:
            raise MosaicError(f"{where}: image_id {ann['image_id']!r} is not among the file's images (not {COCO_WHAT})")
        if keep is not None and ann["image_id"] not in keep:
            continue
        yield where, {"id": f"{ann['image_id']}-{ann['id']}", "caption": ann["caption"], "image": files[ann["image_id"]],
                      "image_id": ann["image_id"]}


def _karpathy_records(path: str, data: object, splits: Sequence[str], stats: CocoImport) -> Iterator[tuple[str, dict]]:
    for i, image in karpathy_images(path, data):
        if image["split"] not in splits:
            continue
        stats.split_images += 1
        folder = image.get("filepath") or ""
        for j, sentence in enumerate(image["sentences"]):
            where = f"images[{i}] (cocoid {image['cocoid']}).sentences[{j}]"
            check_entry(KARPATHY_SENTENCE, sentence, path, where, KARPATHY_WHAT)
            yield f"{path}: {where}", {"id": f"{image['cocoid']}-{sentence['sentid']}", "caption": sentence["raw"],
                                       "image": f"{folder}/{image['filename']}" if folder else image["filename"],
                                       "image_id": image["cocoid"]}
