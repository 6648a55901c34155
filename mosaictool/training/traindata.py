"""A run's records (text side only) and where their images are: TrainData.load reads `--data`.

Sources (`--data`):
  - WebDataset shards written by `shard` (mosaictool.training.shards), or img2dataset's image shards
    with `--texts FILE`, the records joined to the samples by key.
  - A JSONL / JSONL.gz / Parquet file of records with an `image` path relative to --image-root
    (default: the data file's folder).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mosaictool.errors import MosaicError, RecordError
from mosaictool.images import ImageError, image_path, open_image
from mosaictool.io import Skips, read_json, read_records
from mosaictool.sources import IN_TAR_HINT, in_tar, tar_samples
from mosaictool.training.shards import ImageLocation, ShardCache, expand_shards, is_record_file, slim_record

logger = logging.getLogger(__name__)


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
            records, images = _from_record_file(spec, root, check, skips, allow_outside_root)
        else:
            if image_root:
                raise MosaicError("--image-root applies to JSONL/Parquet data; shards carry their images")
            shards = shards if shards is not None else ShardCache()
            check = _checks(contracts.checker(contracts.TrainRecord), method.check_record)
            records, images = _from_shards(spec, shards, check, skips)
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


def _from_record_file(spec: str, root: Path, check, skips: Skips,
                      allow_outside_root: bool) -> tuple[list[dict], list[ImageLocation]]:
    """The usable records of a JSONL/Parquet file and their image paths under `root`. Each image is
    opened (header only) here, so a missing or oversized file is skipped or named before training,
    not found by a data loader worker mid-epoch."""
    records: list[dict] = []
    images: list[ImageLocation] = []
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
        records.append(slim_record(rec))
        images.append(ImageLocation(str(path)))
    return records, images


def _from_shards(spec: str, shards: ShardCache, check, skips: Skips) -> tuple[list[dict], list[ImageLocation]]:
    """The usable samples of `spec`'s WebDataset shards (indexed through `shards`): records that pass
    `check`, with a unique id and an image member; the counts are compared with the shards' listing."""
    records: list[dict] = []
    images: list[ImageLocation] = []
    seen: set = set()
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
            records.append(rec if slim else slim_record(rec))
            images.append(loc)
    if listed is not None:
        _compare_sizes(listed, {os.path.basename(tar): len(shards.samples(tar)) for tar in tars})
    return records, images


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
    by_key = {rec["id"]: slim_record(rec) for rec in read_records(texts, skips=skips, check=check)}
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
