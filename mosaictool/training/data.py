"""Training data: records + images -> batches of the batch contract (mosaictool.training.batch).

Sources (`--data`):
  - WebDataset shards written by `shard`: a folder of *.tar, a glob ('shards/*.tar') or a brace
    pattern ('shards/{000000..000099}.tar'). Each tar is indexed once (member headers + the small
    JSON members); images are then read by offset, so samples can be drawn in any order.
  - A JSONL / JSONL.gz / Parquet file of records with an `image` path relative to --image-root
    (default: the data file's folder).

Order and randomness: the data of optimizer step s is a pure function of (seed, s), whatever the
number of workers, the device or the number of ranks at a fixed global batch: each epoch is a seeded
permutation of the records, cut into global batches of batch_size × world_size anchors, and rank r
takes the r-th slice. Every random choice about one sample (which texts, which crop, which hard
image) comes from a generator seeded by (seed, epoch, record index). That is what makes
`--resume` exact: the run continues at micro-batch s × accum_freq with the same draws.

Which texts of a record (`texts`, written by `template`; docs/stages.md) fill an image's slots is the
method's choice (mosaictool.methods: Method.slots, Method.select); this module only calls it.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import logging
import math
import os
import random
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from mosaictool.errors import MosaicError, RecordError
from mosaictool.images import ImageError, image_path, open_image
from mosaictool.io import Skips, is_parquet, parse_json, read_json, read_records, write_json
from mosaictool.model.text_ids import key_id, record_key_ids, text_id
from mosaictool.sources import IMAGE_MEMBERS, IN_TAR_HINT, in_tar, tar_samples
from mosaictool.training.batch import Batch, normalize_images

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Sources: which records, and where each one's image bytes live


@dataclass(frozen=True)
class ImageLocation:
    path: str
    offset: int = 0  # byte range inside a tar; size -1 = the whole file
    size: int = -1

    def read(self, files: "ShardCache | None" = None) -> bytes:
        """The image's bytes; `files` keeps the tar open between reads (else it is opened for this one)."""
        if self.size < 0:
            with open(self.path, "rb") as f:
                return f.read()
        if files is not None:
            return os.pread(files.fd(self.path), self.size, self.offset)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return os.pread(fd, self.size, self.offset)
        finally:
            os.close(fd)


def expand_shards(spec: str) -> list[str]:
    """A folder, a glob, a brace pattern or a single tar -> the tar files, in order."""
    path = Path(spec)
    if path.is_dir():
        tars = sorted(str(p) for p in path.glob("*.tar"))
        if not tars:
            raise MosaicError(f"{spec}: folder holds no .tar shards (write them with `mosaictool shard`)")
        return tars
    import braceexpand

    files: list[str] = []
    for pattern in braceexpand.braceexpand(spec):
        matched = sorted(glob.glob(pattern)) if any(c in pattern for c in "*?[") else [pattern]
        files.extend(matched)
    missing = [f for f in files if not os.path.isfile(f)]
    if not files or missing:
        raise MosaicError(f"{spec}: no such shard(s): {', '.join(missing[:3]) or 'pattern matched nothing'}")
    return files


def index_tar(path: str) -> Iterator[tuple[dict, ImageLocation | None]]:
    """Yield (record, image location) per sample of one tar, in member order; the location is None
    for a sample without an image member (the caller skips or refuses it)."""
    redo = "re-create it with `mosaictool shard`, or leave it out of --data"
    try:
        tar = tarfile.open(path, "r:")
    except (tarfile.TarError, OSError) as e:
        raise MosaicError(f"{path}: not a readable tar shard: {e}; {redo}") from e
    size = os.path.getsize(path)
    with tar:
        pending: dict[str, dict] = {}
        order: list[str] = []
        names: set[str] = set()
        try:
            for member in tar:
                if not member.isfile():
                    continue
                if member.offset_data + member.size > size:
                    raise MosaicError(f"{path}: truncated tar shard ({member.name} is cut off at byte {size}); {redo}")
                base = os.path.basename(member.name)
                key, _, ext = base.partition(".")
                key = os.path.join(os.path.dirname(member.name), key)
                entry = pending.get(key)
                if entry is None:
                    entry = pending[key] = {}
                    order.append(key)
                if member.name in names:  # which of the two is the sample's? neither is guessed
                    raise MosaicError(f"{path}: sample {key!r} has {member.name} twice; {redo}")
                names.add(member.name)
                if ext == "json":
                    entry["json"] = parse_json(tar.extractfile(member).read(), f"{path}: {member.name}", hint=redo)
                elif ext.lower() in IMAGE_MEMBERS:
                    entry["image"] = ImageLocation(path, member.offset_data, member.size)
            # tarfile stops quietly at a cut-off header: a whole shard ends with a zero end-of-archive block
            with open(path, "rb") as f:
                f.seek(tar.offset)
                end = f.read(512)
        except tarfile.TarError as e:
            raise MosaicError(f"{path}: corrupt tar shard ({e}); {redo}") from None
        if len(end) < 512 or end.strip(b"\0"):
            raise MosaicError(f"{path}: truncated or corrupt tar shard (no end-of-archive block after byte {tar.offset}); {redo}")
        for key in order:
            entry = pending[key]
            if not isinstance(entry.get("json"), dict):
                raise MosaicError(f"{path}: sample {key!r} has no .json member holding a record (was it written by "
                                  f"`shard`?); {redo}")
            yield entry["json"], entry.get("image")


# What Pillow raises for a file that is not an image, truncated or corrupt
UNREADABLE_IMAGE = (OSError, SyntaxError, ValueError)


@dataclass(frozen=True)
class DecodedImages:
    """Every image of some shards decoded once at one size, center crop (as a run without --augment
    decodes it): uint8 (N, 3, size, size), and the row of each (real tar path, member offset)."""

    size: int
    rows: dict[tuple[str, int], int]
    images: torch.Tensor
    _on_device: dict[str, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

    def get(self, loc: ImageLocation) -> torch.Tensor | None:
        row = self.rows.get((_real(loc.path), loc.offset))
        return None if row is None else self.images[row]

    def on(self, device: str) -> torch.Tensor:
        """The images copied to `device` once (--images-on-device: every run of the process gathers from it)."""
        if device not in self._on_device:
            self._on_device[device] = self.images.to(device)
        return self._on_device[device]


class ShardCache:
    """What the training runs of one process share about their shards, built once and handed to
    `train(..., shards=)` / `train_many` (the demo builds one before it forks its pool of fine-tuning
    runs, which then read it, never write, so its pages stay shared):

    - each tar's index by file identity (records and image locations): the demo's 38,000 records
      are read from their tars once (~10 s of headers, JSON and _slim) instead of once per run;
      the records are shared between loads, and training treats them as read-only;
    - with `decode`, every image decoded once at the model's size (each of the demo's runs decodes
      the ~11,000 images its 400 steps draw: 275,000 decodes of 38,000 images for 25 runs);
    - the open tar files images are read from (pread: no file position, so forked readers may share them);
    - the texts' tokens, per tokenizer: the runs of a process draw the same world's texts (a run of the
      demo tokenizes ~50,000 texts over its 400 steps, ~0.25 ms each).

    Without one, a run indexes its shards, decodes its images and tokenizes its texts itself."""

    def __init__(self) -> None:
        self._samples: dict[tuple[str, int, int], list[tuple[dict, ImageLocation | None, bool]]] = {}
        self._decoded: dict[int, DecodedImages] = {}
        self._fds: dict[str, int] = {}
        self._tokens: dict[tuple, dict[str, torch.Tensor]] = {}

    def token_cache(self, tokenizer) -> dict[str, torch.Tensor]:
        """text -> its token row, shared by every run whose tokenizer is alike (class, context length,
        vocabulary size)."""
        kind = type(tokenizer)
        key = (kind.__module__, kind.__qualname__, getattr(tokenizer, "context_length", None),
               len(getattr(tokenizer, "encoder", None) or ()) or getattr(tokenizer, "vocab_size", None))
        return self._tokens.setdefault(key, {})

    def samples(self, path: str) -> list[tuple[dict, ImageLocation | None, bool]]:
        """(record, image location, slimmed) per sample of one tar, in member order. A record _slim
        cannot read is kept whole (slimmed False), so that the method's check names what is wrong."""
        st = os.stat(path)
        key = (_real(path), st.st_size, st.st_mtime_ns)
        samples = self._samples.get(key)
        if samples is None:
            from mosaictool import records

            check = records.checker(records.TrainRecord)
            samples = []
            for rec, loc in index_tar(path):
                try:
                    check(rec)
                except RecordError:  # kept whole: the run's own check names what is wrong
                    samples.append((rec, loc, False))
                    continue
                samples.append((_slim(rec), loc, True))
            self._samples[key] = samples
        return samples

    def preload(self, spec: str) -> None:
        """Index `spec`'s shards now (before forking processes that load them)."""
        if not is_record_file(spec):
            for tar in expand_shards(spec):
                self.samples(tar)

    def decode(self, spec: str, size: int, max_bytes: int = 1 << 30) -> bool:
        """Decode every image of `spec`'s shards at `size` (DecodedImages; added to those of other
        shards decoded before). An image that does not decode is left to the run, whose error names
        it. When all the images would take more than `max_bytes` (the demo's 38,022 at 64 px: 0.47 GB)
        the new shards are only indexed; -> whether they are decoded. (Two threads were slower than
        one: the GIL.)"""
        if is_record_file(spec):
            return False
        self.preload(spec)
        known = self._decoded.get(size)
        rows = dict(known.rows) if known is not None else {}
        new = [loc for loc in dict.fromkeys(loc for tar in expand_shards(spec) for _, loc, _ in self.samples(tar)
                                            if loc is not None) if (_real(loc.path), loc.offset) not in rows]
        if not new:
            return True
        if (len(rows) + len(new)) * 3 * size * size > max_bytes:
            return False
        transform = ImageTransform(size, augment=False)
        images = torch.empty(len(new), 3, size, size, dtype=torch.uint8)
        done = 0
        for loc in new:
            try:
                images[done] = transform(loc.read(self), None)
            except UNREADABLE_IMAGE:
                continue
            rows[(_real(loc.path), loc.offset)] = len(rows)
            done += 1
        images = images[:done] if known is None else torch.cat([known.images, images[:done]])
        self._decoded[size] = DecodedImages(size, rows, images)
        return True

    def decoded(self, size: int) -> DecodedImages | None:
        """The images `decode` decoded at `size`, if any."""
        return self._decoded.get(size)

    def __getstate__(self) -> dict:  # a spawned process opens its own files
        return {**self.__dict__, "_fds": {}}

    def fd(self, path: str) -> int:
        """An open descriptor of `path`, kept for the next reads."""
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, os.O_RDONLY)
        return fd


@functools.lru_cache(maxsize=4096)
def _real(path: str) -> str:
    return os.path.realpath(path)


def is_record_file(spec: str) -> bool:
    s = spec.lower()
    return s.endswith((".jsonl", ".jsonl.gz", ".json", ".ndjson")) or is_parquet(s)


# ---------------------------------------------------------------------------------------------
# A run's images: their size and normalisation


@dataclass(frozen=True)
class ImagePrep:
    """The model's image size and normalisation (images travel as uint8 and are normalised per batch)."""

    size: int
    mean: tuple
    std: tuple

    @staticmethod
    def size_of(model_cfg: dict) -> int:
        """The square side a model's images are prepared at, from its open_clip config."""
        size = model_cfg["vision_cfg"].get("image_size", 224)
        return size[0] if isinstance(size, (list, tuple)) else size

    @classmethod
    def of(cls, bundle) -> "ImagePrep":
        import open_clip

        pp = open_clip.get_model_preprocess_cfg(bundle.model)
        return cls(cls.size_of(bundle.meta["model_cfg"]), pp.get("mean", open_clip.OPENAI_DATASET_MEAN),
                   pp.get("std", open_clip.OPENAI_DATASET_STD))


# ---------------------------------------------------------------------------------------------
# The dataset


@dataclass
class TrainData:
    """All records (text side only) and where their images are."""

    records: list[dict]
    images: list[ImageLocation]
    source: str
    hard: list[list[int]] = field(default_factory=list)  # per record: indices of its hard-negative images
    files: ShardCache | None = field(default=None, compare=False, repr=False)  # the shards' index and open files

    def read(self, index: int) -> bytes:
        """The image bytes of record `index`."""
        return self.images[index].read(self.files)

    def __len__(self) -> int:
        return len(self.records)

    @classmethod
    def load(
        cls,
        spec: str,
        *,
        method,
        image_root: str | None = None,
        skip_bad: bool = False,
        allow_outside_root: bool = False,
        shards: ShardCache | None = None,
        texts: str | None = None,
    ) -> "TrainData":
        """`method`: a mosaictool.methods.Method; its check_record says which records are usable.
        `shards`: the process's ShardCache (tars indexed once for every run); without one the tars
        are indexed here. `texts`: records joined by key to the samples of `spec`'s image shards
        (img2dataset's; see `_joined`)."""
        from mosaictool import records as contracts

        skips = Skips(enabled=skip_bad)
        records: list[dict] = []
        images: list[ImageLocation] = []
        if texts is not None:
            if is_record_file(spec) or image_root:
                raise MosaicError("--texts joins records to the images of WebDataset shards (img2dataset's): give the "
                                  "shards with --data, and no --image-root")
            records, images = _joined(spec, texts, _checks(contracts.checker(contracts.TrainRecord), method.check_record),
                                      skips)
            shards = shards if shards is not None else ShardCache()  # its open files: one descriptor per tar
        elif is_record_file(spec):
            root = Path(image_root) if image_root else Path(spec).resolve().parent
            check = _checks(contracts.checker(contracts.train_record("image")), method.check_record)
            for rec in read_records(spec, skips=skips, check=check):
                try:  # inside the root, a regular file whose declared size is within bounds (header read, no pixel decoded)
                    path = image_path(root, rec["image"], allow_outside=allow_outside_root)
                    open_image(path).close()
                except ImageError as e:
                    hint = " (check --image-root)" if str(e).startswith("image not found") else ""
                    if in_tar(rec["image"]):
                        hint = f" ({IN_TAR_HINT})"
                    skips.handle(f"{spec}: record {rec['id']!r}", f"{e}{hint}")
                    continue
                records.append(_slim(rec))
                images.append(ImageLocation(str(path)))
        else:
            if image_root:
                raise MosaicError("--image-root applies to JSONL/Parquet data; shards carry their images")
            seen: set = set()
            shards = shards if shards is not None else ShardCache()
            check = _checks(contracts.checker(contracts.TrainRecord), method.check_record)
            tars = expand_shards(spec)
            listed = _listed_sizes(spec, tars)
            for tar in tars:
                for rec, loc, slim in shards.samples(tar):
                    where = f"{tar}: record {rec.get('id')!r}"
                    try:
                        check(rec)
                    except RecordError as e:
                        skips.handle(where, str(e))
                        continue
                    if rec["id"] in seen:
                        skips.handle(where, "duplicate 'id'")
                        continue
                    if loc is None:
                        skips.handle(where, "the sample has no image member")
                        continue
                    seen.add(rec["id"])
                    records.append(rec if slim else _slim(rec))
                    images.append(loc)
            if listed is not None:
                _compare_sizes(listed, {os.path.basename(tar): len(shards.samples(tar)) for tar in tars})
        skips.report()
        if not records:
            raise MosaicError(f"{spec}: no usable training records")
        return cls(records, images, spec, files=shards)

    def resolve_record_hard_images(self) -> int:
        """Turn records' `hard_images` ids into indices; returns how many ids were not in the data."""
        by_id = {rec["id"]: i for i, rec in enumerate(self.records)}
        unknown = 0
        self.hard = [list(h) for h in self.hard] if self.hard else [[] for _ in self.records]
        for i, rec in enumerate(self.records):
            for hid in rec.get("hard_images") or []:
                j = by_id.get(hid)
                if j is None or j == i:
                    unknown += j is None
                    continue
                if j not in self.hard[i]:
                    self.hard[i].append(j)
        return unknown

    def add_hard(self, neighbours: Sequence[Sequence[int]]) -> None:
        if not self.hard:
            self.hard = [[] for _ in self.records]
        for i, extra in enumerate(neighbours):
            self.hard[i].extend(j for j in extra if j not in self.hard[i] and j != i)


def _listed_sizes(spec: str, tars: list[str]) -> tuple[Path, dict] | None:
    """A shard folder's sizes.json (`shard`'s: tar name -> samples), or None when `spec` is not a
    folder holding one. Training counts the tars themselves; the file is read to find a shard it lists
    that the folder lacks (MosaicError: the samples would be lost unsaid). A file that is no such list is
    said in one line and left aside."""
    from mosaictool.stages.shard import SIZES_FILE

    path = Path(spec) / SIZES_FILE
    if not Path(spec).is_dir() or not path.is_file():
        return None
    try:
        sizes = read_json(path)
    except (OSError, MosaicError) as e:
        logger.warning(f"{path}: not readable ({e}); the tars are counted instead")
        return None
    if not isinstance(sizes, dict) or not all(isinstance(n, int) and not isinstance(n, bool) for n in sizes.values()):
        logger.warning(f"{path}: not a map of tar name to sample count; the tars are counted instead")
        return None
    present = {os.path.basename(tar) for tar in tars}
    missing = [name for name in sizes if name not in present]
    if missing:
        raise MosaicError(f"{path}: lists {len(missing)} shard(s) the folder lacks ({', '.join(missing[:3])}): their "
                          "samples would be missing from training; restore them, or give the tars present as a pattern "
                          f"('{spec}/*.tar')")
    return path, sizes


def _compare_sizes(listed: tuple[Path, dict], counted: dict[str, int]) -> None:
    """One line where a folder's sizes.json disagrees with the samples its tars hold (the tars count)."""
    path, sizes = listed
    wrong = [f"{name} holds {n}, listed as {sizes[name] if name in sizes else 'absent'}" for name, n in counted.items()
             if sizes.get(name) != n]
    if wrong:
        more = f" and {len(wrong) - 1} more" if len(wrong) > 1 else ""
        logger.warning(f"{path}: disagrees with the tars ({wrong[0]}{more}); the tars' counts are used (write the folder "
                       "again with `mosaictool shard` to mend it)")


def _joined(spec: str, texts: str, check, skips: Skips) -> tuple[list[dict], list[ImageLocation]]:
    """`--data SHARDS --texts FILE`: the records of FILE (`template`'s, from `parse SHARDS`: their ids
    are the samples' keys) with the images of the shards' samples of the same key. The tars are read
    in order, their images located, never read; a sample without a record trains on its own caption
    (`.txt`) without negatives; a record whose key no sample has is an error (--skip-bad: counted)."""
    by_key = {rec["id"]: _slim(rec) for rec in read_records(texts, skips=skips, check=check)}
    records: list[dict] = []
    images: list[ImageLocation] = []
    seen: dict = {}  # key -> its tar: a key in two tars (a tar copied twice) would train twice, once without its texts
    for tar in expand_shards(spec):
        for where, sample, error, image_at in tar_samples(tar):
            if error is None and image_at is None:
                error = "the sample has no image member"
            if error is None and seen.setdefault(sample["id"], tar) != tar:
                error = f"key {sample['id']!r} is also a sample of {seen[sample['id']]} (a key names one sample)"
            if error is not None:
                skips.handle(where, error)
                continue
            record = by_key.pop(sample["id"], None)
            if record is None:
                record = {"id": sample["id"], "caption": sample["caption"]}
                try:
                    check(record)
                except RecordError as e:
                    skips.handle(where, str(e))
                    continue
            records.append(record)
            images.append(ImageLocation(tar, *image_at))
    for key in by_key:
        skips.handle(f"{texts}: record {key!r}", f"no sample of --data {spec} has this key (a record's id is its "
                     "sample's key, as `parse` reads the shards)")
    return records, images


def _checks(*checks):
    """One record check running `checks` in turn (each raises RecordError)."""

    def check(record: dict) -> None:
        for one in checks:
            one(record)

    return check


def _slim(record: dict) -> dict:
    """Keep what training reads; big per-record fields (graphs, ...) would cost memory in every worker.
    `subgraph_keys` are kept as their sorted hashes (`subgraph_key_ids`, an array('q'): 8 bytes a key,
    and no per-string objects for forked workers to copy)."""
    texts = record.get("texts") or {}
    keep = {"id": record["id"], "caption": record.get("caption"), "hard_images": record.get("hard_images")}
    if record.get("subgraph_keys"):
        keep["subgraph_key_ids"] = record_key_ids(record)
    if texts:
        keep["texts"] = {
            "positives": [{"text": p["text"], "kind": p.get("kind"), "key": p.get("key")}
                          for p in texts.get("positives") or []],
            "negatives": [
                {
                    "text": n["text"],
                    "kind": n.get("kind"),
                    "category": n.get("category"),
                    "transform": n.get("transform"),
                    "positive": n.get("positive"),
                    "from": n.get("from"),
                    "key": n.get("key"),
                }
                for n in texts.get("negatives") or []
            ],
        }
    return keep


# ---------------------------------------------------------------------------------------------
# Images: decode + (random) crop + resize, with a generator per sample (never the global RNG)


@dataclass
class ImageTransform:
    size: int
    augment: bool = True
    scale: tuple[float, float] = (0.8, 1.0)  # random-resized-crop as in open_clip's fine-tuning aug
    ratio: tuple[float, float] = (3 / 4, 4 / 3)

    def __call__(self, data: bytes, rng: random.Random) -> torch.Tensor:
        """uint8 (3, size, size); normalisation happens once per batch."""
        from PIL import Image

        from mosaictool.images import image_to_rgb

        with open_image(data) as im:  # its declared size checked before decoding
            im.draft("RGB", (self.size, self.size))
            im = image_to_rgb(im)
            w, h = im.size
            box = self._crop_box(w, h, rng) if self.augment else _center_square(w, h)
            im = im.resize((self.size, self.size), Image.Resampling.BICUBIC, box=box)
        return torch.from_numpy(np.asarray(im).copy()).permute(2, 0, 1)

    def _crop_box(self, w: int, h: int, rng: random.Random) -> tuple[float, float, float, float]:
        area = w * h
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target = area * rng.uniform(*self.scale)
            aspect = math.exp(rng.uniform(*log_ratio))
            cw = math.sqrt(target * aspect)
            ch = math.sqrt(target / aspect)
            if cw <= w and ch <= h:
                left = rng.uniform(0, w - cw)
                top = rng.uniform(0, h - ch)
                return (left, top, left + cw, top + ch)
        return _center_square(w, h)


def _center_square(w: int, h: int) -> tuple[float, float, float, float]:
    side = min(w, h)
    left, top = (w - side) / 2, (h - side) / 2
    return (left, top, left + side, top + side)


def sample_rng(seed: int, epoch: int, index: int, purpose: str) -> random.Random:
    return random.Random(f"{seed}:{epoch}:{index}:{purpose}")  # str seeds hash with sha512: stable across runs


# ---------------------------------------------------------------------------------------------
# The plan: which records form micro-batch g on rank r, and with how many text slots


@dataclass
class SamplerConfig:
    method: object  # a mosaictool.methods.Method: slots per step and the texts of each image
    batch_size: int  # anchors per rank per micro-batch
    seed: int = 0
    use_hard: bool = False
    total_steps: int = 1  # optimizer steps of the run (a method's curriculum is a share of them)
    accum_freq: int = 1


class BatchPlan:
    """Iterates the micro-batches of one rank from micro-batch `start` on: lists of sample specs
    (index, epoch, kp, kn, is_hard). A torch batch_sampler."""

    def __init__(self, n_records: int, cfg: SamplerConfig, *, rank: int, world_size: int, start: int, stop: int,
                 hard: list[list[int]] | None = None):
        self.n = n_records
        self.cfg = cfg
        self.rank = rank
        self.world = world_size
        self.start = start
        self.stop = stop
        self.hard = hard or []
        self.global_batch = cfg.batch_size * world_size
        self.batches_per_epoch = n_records // self.global_batch
        if self.batches_per_epoch < 1:
            raise MosaicError(
                f"{n_records} training records are fewer than one global batch ({cfg.batch_size} per rank × "
                f"{world_size} rank(s)); lower --batch-size"
            )
        self._perm: tuple[int, list[int]] | None = None

    def __len__(self) -> int:
        return self.stop - self.start

    def permutation(self, epoch: int) -> list[int]:
        if self._perm is None or self._perm[0] != epoch:
            g = torch.Generator().manual_seed(self.cfg.seed * 100_003 + epoch)
            self._perm = (epoch, torch.randperm(self.n, generator=g).tolist())
        return self._perm[1]

    def micro_batch(self, g: int) -> list[tuple]:
        epoch, b = divmod(g, self.batches_per_epoch)
        kp, kn = self.cfg.method.slots(g // self.cfg.accum_freq, self.cfg.total_steps)
        perm = self.permutation(epoch)
        first = b * self.global_batch + self.rank * self.cfg.batch_size
        anchors = perm[first : first + self.cfg.batch_size]
        specs = [(i, epoch, kp, kn, False) for i in anchors]
        if self.cfg.use_hard:
            for i in anchors:
                rng = sample_rng(self.cfg.seed, epoch, i, "hard")
                candidates = self.hard[i] if self.hard else []
                if candidates:
                    j = rng.choice(candidates)
                else:  # no hard image known: any other record
                    j = rng.randrange(self.n - 1)
                    j += j >= i
                specs.append((j, epoch, kp, kn, True))
        return specs

    def __iter__(self) -> Iterator[list[tuple]]:
        for g in range(self.start, self.stop):
            yield self.micro_batch(g)


class TrainDataset(torch.utils.data.Dataset):
    """Map-style: spec (index, epoch, kp, kn, is_hard) -> one sample, all draws seeded by the spec."""

    def __init__(self, data: TrainData, cfg: SamplerConfig, transform: ImageTransform, tokenizer, with_images: bool = True,
                 decoded: DecodedImages | None = None, token_cache: dict[str, torch.Tensor] | None = None):
        self.data = data
        self.cfg = cfg
        self.transform = transform
        self.tokenizer = tokenizer
        self.with_images = with_images  # False: batches carry indices only (the images wait on the device)
        self._image_cache: dict[int, torch.Tensor] = {}
        self._token_cache = token_cache if token_cache is not None else {}  # text -> tokens (ShardCache.token_cache)
        # images decoded once for every run of the process (ShardCache.decode): only the center crop
        self._decoded = decoded if decoded is not None and not transform.augment and decoded.size == transform.size else None

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, spec: tuple) -> dict:
        index, epoch, kp, kn, is_hard = spec
        rng = sample_rng(self.cfg.seed, epoch, index, "hard-sample" if is_hard else "sample")
        record = self.data.records[index]
        method = self.cfg.method
        chosen = method.select(record, rng, kp, kn)
        sample = {"image": self._image(index, rng) if self.with_images else None, "pos": chosen.pos, "neg": chosen.neg, "kp": kp, "kn": kn,
                  "is_hard": is_hard, "index": index}
        if method.uses_subgraph_keys:
            sample["image_keys"] = record_key_ids(record)
            sample["pos_keys"] = chosen.pos_keys or [None] * len(chosen.pos)
            sample["neg_keys"] = chosen.neg_keys or [None] * len(chosen.neg)
        return sample

    def _image(self, index: int, rng: random.Random) -> torch.Tensor:
        if self.transform.augment:
            return self._decode(index, rng)
        cached = self._image_cache.get(index)  # deterministic preprocessing: decode each image once
        if cached is None:
            shared = self._decoded.get(self.data.images[index]) if self._decoded is not None else None
            cached = self._image_cache[index] = self._decode(index, rng) if shared is None else shared
        return cached

    def _decode(self, index: int, rng: random.Random) -> torch.Tensor:
        from PIL import UnidentifiedImageError

        loc = self.data.images[index]
        try:
            return self.transform(self.data.read(index), rng)
        except UNREADABLE_IMAGE as e:
            what = "not an image file" if isinstance(e, UnidentifiedImageError) else f"unreadable image ({e})"
            where = loc.path if loc.size < 0 else f"{loc.path} (member at byte {loc.offset})"
            raise MosaicError(f"{where}: record {self.data.records[index]['id']!r}: {what}; replace it, or drop the "
                              "record (`mosaictool shard --skip-bad` checks every image)") from None

    def tokens(self, texts: list[str]) -> torch.Tensor:
        missing = [t for t in dict.fromkeys(texts) if t not in self._token_cache]
        if missing:
            for t, row in zip(missing, self.tokenizer(missing)):
                self._token_cache[t] = row
        if not texts:
            return torch.zeros(0, self._context_length(), dtype=torch.long)
        return torch.stack([self._token_cache[t] for t in texts])

    def _context_length(self) -> int:
        return int(getattr(self.tokenizer, "context_length", 77))

    def collate(self, samples: list[dict]) -> Batch:
        kp = max(s["kp"] for s in samples)
        kn = max(s["kn"] for s in samples)
        pos_texts = [t for s in samples for t in s["pos"]]
        neg_texts = [t for s in samples for t in s["neg"]]
        # every field built as rows of Python values, one tensor each (not a small op per sample)
        keys = {}
        if "image_keys" in samples[0]:  # Method.uses_subgraph_keys: hashes like the ids, 0 = none / padding
            width = max(len(s["image_keys"]) for s in samples)
            keys["image_keys"] = _padded([list(s["image_keys"]) for s in samples], width, 0, torch.long)
            keys["pos_keys"] = _padded([[key_id(k) for k in s["pos_keys"]] for s in samples], kp, 0, torch.long)
            keys["neg_keys"] = _padded([[key_id(k) for k in s["neg_keys"]] for s in samples], kn, 0, torch.long)
        return Batch(
            images=torch.stack([s["image"] for s in samples]) if self.with_images else torch.empty(len(samples), 0, dtype=torch.uint8),
            pos_tokens=self.tokens(pos_texts),
            pos_mask=_padded([[True] * len(s["pos"]) for s in samples], kp, False, torch.bool),
            neg_tokens=self.tokens(neg_texts),
            neg_mask=_padded([[True] * len(s["neg"]) for s in samples], kn, False, torch.bool),
            is_hard=torch.tensor([s["is_hard"] for s in samples], dtype=torch.bool),
            indices=torch.tensor([s["index"] for s in samples], dtype=torch.long),
            pos_ids=_padded([[text_id(t) for t in s["pos"]] for s in samples], kp, 0, torch.long),
            neg_ids=_padded([[text_id(t) for t in s["neg"]] for s in samples], kn, 0, torch.long),
            **keys,
        )


def _padded(rows: list[list], width: int, fill, dtype: torch.dtype) -> torch.Tensor:
    """(len(rows), width): each row's values, then `fill`."""
    return torch.tensor([row + [fill] * (width - len(row)) for row in rows], dtype=dtype).reshape(len(rows), width)


def make_loader(dataset: TrainDataset, plan: BatchPlan, *, num_workers: int = 0, pin_memory: bool = False):
    return torch.utils.data.DataLoader(
        dataset,
        batch_sampler=plan,
        collate_fn=dataset.collate,
        num_workers=num_workers,
        pin_memory=pin_memory,
        persistent_workers=False,
        prefetch_factor=4 if num_workers else None,
    )


@torch.no_grad()
def mine_hard_images(data: TrainData, model, transform: ImageTransform, mean, std, *, k: int, device: str,
                     batch_size: int = 256) -> list[list[int]]:
    """The k nearest other images of every image under `model` (cosine), as NegCLIP mined them
    with CLIP ViT-B/32 (Yuksekgonul et al. 2023, App. C.2). An image that comes with several captions (several
    records, the same bytes) is embedded once and is never its own neighbour: its twin record's
    caption is true of it, so it is no negative (it was every such record's first neighbour)."""
    model.eval()
    rng = random.Random(0)
    first: dict[bytes, int] = {}  # image bytes' digest -> index among the distinct images
    image_of = []  # record -> distinct image
    distinct = []  # distinct image -> its first record
    feats, pending = [], []

    def embed(imgs: list) -> None:
        batch = torch.stack(imgs).to(device)
        feats.append(model.encode_image(normalize_images(batch, mean, std), normalize=True).float().cpu())

    for i in range(len(data)):  # each file read once: digested, and decoded when it is new
        raw = data.read(i)
        key = hashlib.blake2b(raw, digest_size=16).digest()
        if key not in first:
            first[key] = len(distinct)
            distinct.append(i)
            pending.append(transform(raw, rng))
            if len(pending) == batch_size:
                embed(pending)
                pending = []
        image_of.append(first[key])
    if pending:
        embed(pending)
    feats = torch.cat(feats)
    k = min(k, len(distinct) - 1)
    nearest: list[list[int]] = []
    for start in range(0, len(distinct), 1024):
        sims = feats[start : start + 1024] @ feats.T
        rows = torch.arange(sims.shape[0])
        sims[rows, rows + start] = float("-inf")
        nearest.extend(sims.topk(k, dim=1).indices.tolist())
    model.train()
    return [[distinct[j] for j in nearest[image_of[i]]] for i in range(len(data))]


# ---------------------------------------------------------------------------------------------
# A run's data and batches (mosaictool.training.loop)


def _say_once(note: str, said: set[str] | None) -> None:
    if said is None or note not in said:
        logger.warning(f"note: {note}")
    if said is not None:
        said.add(note)


def load_run_data(cfg, method, bundle, images: ImagePrep, info, shards: ShardCache | None = None,
                  said: set[str] | None = None) -> tuple[TrainData, bool]:
    """A run's (a TrainConfig's) records and images, with their hard images (the records' own, and/or
    --hard-images K mined with the starting model); -> (data, whether batches carry hard images).
    `shards`: the process's ShardCache, if it has one. `said`: notes already printed (by the other runs
    of a train_many), not printed again."""
    out = Path(cfg.out)
    data = TrainData.load(cfg.data, method=method, image_root=cfg.image_root, skip_bad=cfg.skip_bad, shards=shards,
                          texts=cfg.texts, allow_outside_root=cfg.allow_outside_root)
    note = method.check_data(data.records, cfg.data)
    if note and info.is_main:
        _say_once(note, said)
    use_hard = False
    if cfg.record_hard_images:
        unknown = data.resolve_record_hard_images()
        use_hard = any(data.hard)
        if unknown and info.is_main:
            _say_once(f"{unknown} hard_images id(s) are not in the training data and are ignored", said)
    if cfg.hard_images > 0:
        mined_path = out / "mined_hard_images.json"
        if mined_path.exists():  # a resumed run mined them with its starting model already
            neighbours = read_mined(mined_path, len(data))
        else:
            neighbours = mine_hard_images(data, bundle.model, ImageTransform(images.size, augment=False), images.mean,
                                          images.std, k=cfg.hard_images, device=info.device)
            if info.is_main:
                out.mkdir(parents=True, exist_ok=True)
                write_json(mined_path, neighbours)
        data.add_hard(neighbours)
        use_hard = True
    return data, use_hard


def read_mined(path: Path, n: int) -> list[list[int]]:
    """A run's mined_hard_images.json: per record, the indices of its hard images (each in 0..n-1);
    MosaicError naming the file when it is not that (truncated by a crash, or from other data)."""
    from mosaictool.errors import RecordError
    from mosaictool.records import MINED_HARD_IMAGES, check

    try:
        neighbours = read_json(path, label="not readable JSON", hint="delete it to mine them again")
        check(MINED_HARD_IMAGES, {"neighbours": neighbours})
    except (OSError, RecordError) as e:
        what = str(e).removeprefix("neighbours").lstrip(": ") if isinstance(e, RecordError) else f"not readable JSON ({e})"
        raise MosaicError(f"{path}: {what}; delete it to mine them again") from None
    bad = next((i for i, row in enumerate(neighbours) if any(j >= n for j in row)), None)
    if len(neighbours) != n or bad is not None:
        what = (f"holds {len(neighbours)} rows for {n} records" if len(neighbours) != n
                else f"row {bad} names an index >= {n} records")
        raise MosaicError(f"{path}: {what} (mined from other data?); delete it to mine them again")
    return neighbours


def run_batches(cfg, data: TrainData, sampler_cfg: SamplerConfig, plan: BatchPlan, tokenizer, images: ImagePrep, info,
                num_workers: int | None = None):
    """The iterator of a run's micro-batches on this rank, as `plan` lays them out (the data of a step
    is a function of the seed and the step alone: see the module docstring). Images decoded once for
    the process (data.files, a ShardCache that `decode`d them) are read from there."""
    transform = ImageTransform(images.size, augment=cfg.augment, scale=tuple(cfg.crop_scale))
    decoded = data.files.decoded(images.size) if data.files is not None else None
    tokens = data.files.token_cache(tokenizer) if data.files is not None else None
    dataset = TrainDataset(data, sampler_cfg, transform, tokenizer, with_images=not cfg.images_on_device, decoded=decoded,
                           token_cache=tokens)
    workers = cfg.num_workers if num_workers is None else num_workers
    loader = make_loader(dataset, plan, num_workers=workers, pin_memory=info.device.startswith("cuda"))
    if not cfg.images_on_device:
        return iter(loader)
    store, rows = images_on_device(dataset, info.device)
    if rows is not None:
        return (dataclasses.replace(b, images=store.index_select(0, rows.index_select(0, b.indices.to(rows.device))))
                for b in loader)
    return (dataclasses.replace(b, images=store.index_select(0, b.indices.to(store.device))) for b in loader)


def images_on_device(dataset: TrainDataset, device: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Every image of the data, decoded once (center crop: --no-augment) into one uint8 (N, 3, S, S)
    tensor on `device`: a step then gathers its images there instead of copying them from the host
    (a 20,000-scene world of 64-px images is ~0.5 GB per copy of each image). -> (the images, the row
    of each record, or None: row = record). When the process decoded every image of the data once
    (ShardCache.decode), their one copy on the device serves every run that trains on them."""
    from tqdm import tqdm

    decoded = dataset._decoded
    if decoded is not None:
        rows = [decoded.rows.get((_real(loc.path), loc.offset)) for loc in dataset.data.images]
        if None not in rows:
            return decoded.on(device), torch.tensor(rows, dtype=torch.long, device=device)
    n, size = len(dataset), dataset.transform.size
    store = torch.empty(n, 3, size, size, dtype=torch.uint8)
    for i in tqdm(range(n), desc="images to the device", unit="img", disable=n < 5000, leave=False):
        store[i] = dataset._decode(i, None)  # the center crop draws nothing from the rng
    return store.to(device), None
