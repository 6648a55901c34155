"""Samples and batches: the map-style dataset a plan's specs index (TrainDataset), its collate into
the batch contract (mosaictool.training.batch), the DataLoader, and a run's iterator of micro-batches.

Which texts of a record (`texts`, written by `template`; docs/stages.md) fill an image's slots is the
method's choice (mosaictool.methods: Method.slots, Method.select); this module only calls it.
"""

from __future__ import annotations

import dataclasses
import random

import torch

from mosaictool.errors import MosaicError
from mosaictool.model.text_ids import key_id, record_key_ids, text_id
from mosaictool.training.batch import Batch
from mosaictool.training.sampler import BatchPlan, SamplerConfig, sample_rng
from mosaictool.training.shards import DecodedImages, real_path
from mosaictool.training.traindata import TrainData
from mosaictool.training.transform import UNREADABLE_IMAGE, ImagePrep, ImageTransform


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
        rows = [decoded.rows.get((real_path(loc.path), loc.offset)) for loc in dataset.data.images]
        if None not in rows:
            return decoded.on(device), torch.tensor(rows, dtype=torch.long, device=device)
    n, size = len(dataset), dataset.transform.size
    store = torch.empty(n, 3, size, size, dtype=torch.uint8)
    for i in tqdm(range(n), desc="images to the device", unit="img", disable=n < 5000, leave=False):
        store[i] = dataset._decode(i, None)  # the center crop draws nothing from the rng
    return store.to(device), None
