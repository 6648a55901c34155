"""Where training's samples live: WebDataset shards written by `shard` (a folder of *.tar, a glob
('shards/*.tar') or a brace pattern ('shards/{000000..000099}.tar')). Each tar is indexed once
(member headers + the small JSON members, read by mosaictool.sources.read_tar); images are then read
by offset (ImageLocation), so samples can be drawn in any order. ShardCache shares the index, the
decoded images, the open files and the texts' tokens between the runs of one process."""

from __future__ import annotations

import functools
import glob
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mosaictool.errors import MosaicError, RecordError
from mosaictool.io import is_parquet, parse_json
from mosaictool.model.text_ids import record_key_ids
from mosaictool.sources import read_tar
from mosaictool.training.transform import UNREADABLE_IMAGE, ImageTransform


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


SHARD_REDO = "re-create it with `mosaictool shard`, or leave it out of --data"


def index_tar(path: str) -> Iterator[tuple[dict, ImageLocation | None]]:
    """Yield (record, image location) per sample of one tar of `shard`'s, in member order (read by
    mosaictool.sources.read_tar, as the text stages read tars); the location is None for a sample
    without an image member (the caller skips or refuses it). Any bad sample stops the shard: a
    `shard` tar holds none."""
    for sample in read_tar(path, SHARD_REDO):
        where = f"{path}#{sample.key}"
        if sample.error is not None:
            raise MosaicError(f"{where}: {sample.error}; {SHARD_REDO}")
        record = None if sample.json is None else parse_json(sample.json, f"{where}: {sample.key}.json", hint=SHARD_REDO)
        if not isinstance(record, dict):
            raise MosaicError(f"{where}: no .json member holding a record (was it written by `shard`?); {SHARD_REDO}")
        yield record, None if sample.image_at is None else ImageLocation(path, *sample.image_at)


@dataclass(frozen=True)
class DecodedImages:
    """Every image of some shards decoded once at one size, center crop (as a run without --augment
    decodes it): uint8 (N, 3, size, size), and the row of each (real tar path, member offset)."""

    size: int
    rows: dict[tuple[str, int], int]
    images: torch.Tensor
    _on_device: dict[str, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

    def get(self, loc: ImageLocation) -> torch.Tensor | None:
        row = self.rows.get((real_path(loc.path), loc.offset))
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
      are read from their tars once (~10 s of headers, JSON and slim_record) instead of once per run;
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
        """(record, image location, slimmed) per sample of one tar, in member order. A record slim_record
        cannot read is kept whole (slimmed False), so that the method's check names what is wrong."""
        st = os.stat(path)
        key = (real_path(path), st.st_size, st.st_mtime_ns)
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
                samples.append((slim_record(rec), loc, True))
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
                                            if loc is not None) if (real_path(loc.path), loc.offset) not in rows]
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
            rows[(real_path(loc.path), loc.offset)] = len(rows)
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
def real_path(path: str) -> str:
    return os.path.realpath(path)


def is_record_file(spec: str) -> bool:
    s = spec.lower()
    return s.endswith((".jsonl", ".jsonl.gz", ".json", ".ndjson")) or is_parquet(s)


def slim_record(record: dict) -> dict:
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
