"""A run's training data (mosaictool.training.loop): its records and images (traindata), with the
hard images it trains on (the records' own, and/or mined with the starting model).

The pieces: where samples live (shards), the records (traindata), image preparation (transform),
which records each micro-batch of each rank takes (sampler), samples and batches (loader).
"""

from __future__ import annotations

import hashlib
import logging
import random
from pathlib import Path

import torch

from mosaictool.errors import MosaicError, RecordError
from mosaictool.io import read_json, write_json
from mosaictool.training.batch import normalize_images
from mosaictool.training.shards import ShardCache
from mosaictool.training.traindata import TrainData
from mosaictool.training.transform import ImagePrep, ImageTransform

logger = logging.getLogger(__name__)


@torch.no_grad()
def mine_hard_images(data: TrainData, model, transform: ImageTransform, mean, std, *, k: int, device: str,
                     batch_size: int = 256) -> list[list[int]]:
    """The k nearest other images of every image under `model` (cosine), as NegCLIP mined them
    with CLIP ViT-B/32 (Yuksekgonul et al. 2023, App. C.2). An image that comes with several captions (several
    records, the same bytes) is embedded once and is never its own neighbour: its twin record's
    caption is true of it, so it is no negative (it was every such record's first neighbour).
    Each image's neighbours are ordered by similarity, equal similarities by index (nearest_indices),
    so that a sampler's draw from them is the same on every run."""
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
        nearest.extend(nearest_indices(sims, k).tolist())
    model.train()
    return [[distinct[j] for j in nearest[image_of[i]]] for i in range(len(data))]


def nearest_indices(sims: torch.Tensor, k: int) -> torch.Tensor:
    """Per row of `sims`, the columns of its k largest values, largest first and equal values by
    column: torch's topk leaves the order of ties (and which of them is kept at the k-th place)
    to the kernel. Every value equal to a row's k-th is a candidate; candidates are sorted by
    value, then column, and the first k kept."""
    kth = sims.topk(k, dim=1).values[:, -1:]
    row, col = (sims >= kth).nonzero(as_tuple=True)  # row-major: columns ascending within a row
    value = sims[row, col]
    order = torch.sort(-value, stable=True).indices  # by value, ties in column order
    order = order[torch.sort(row[order], stable=True).indices]  # then grouped by row, keeping that order
    counts = torch.bincount(row, minlength=sims.shape[0])
    starts = torch.cumsum(counts, 0) - counts
    return col[order][starts[:, None] + torch.arange(k, device=sims.device)]


def mine_for(cfg, shards: ShardCache | None = None) -> tuple[TrainData, list[list[int]]]:
    """The hard images a run of `cfg` (a TrainConfig with hard_images K > 0) mines when it starts:
    its data's K nearest neighbours under its starting model (mine_hard_images), mined here so that
    the runs of one starting model on one data set share one mining: a run whose folder holds them as
    mined_hard_images.json reads them instead of mining again (load_run_data). -> (the run's data, the
    neighbours of each of its records)."""
    from mosaictool import methods
    from mosaictool.model import openclip
    from mosaictool.training.device import resolve_device

    device = resolve_device(cfg.device)
    bundle = openclip.create(cfg.model, cfg.pretrained, model_config_file=cfg.model_config, force_quick_gelu=cfg.force_quick_gelu,
                             device=device, seed=cfg.seed)
    data = _run_records(cfg, methods.create(cfg.method, cfg.method_options), shards)
    return data, _mine(data, bundle, ImagePrep.of(bundle), cfg.hard_images, device)


def _run_records(cfg, method, shards: ShardCache | None) -> TrainData:
    """The records and images a run of `cfg` trains on."""
    return TrainData.load(cfg.data, method=method, image_root=cfg.image_root, skip_bad=cfg.skip_bad, shards=shards,
                          texts=cfg.texts, allow_outside_root=cfg.allow_outside_root)


def _mine(data: TrainData, bundle, images: ImagePrep, k: int, device: str) -> list[list[int]]:
    """mine_hard_images of `data` under the run's starting model, with its own image preprocessing."""
    return mine_hard_images(data, bundle.model, ImageTransform(images.size, augment=False), images.mean, images.std,
                            k=k, device=device)


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
    data = _run_records(cfg, method, shards)
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
            neighbours = _mine(data, bundle, images, cfg.hard_images, info.device)
            if info.is_main:
                out.mkdir(parents=True, exist_ok=True)
                write_json(mined_path, neighbours)
        data.add_hard(neighbours)
        use_hard = True
    return data, use_hard


def read_mined(path: Path, n: int) -> list[list[int]]:
    """A run's mined_hard_images.json: per record, the indices of its hard images (each in 0..n-1);
    MosaicError naming the file when it is not that (truncated by a crash, or from other data)."""
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
