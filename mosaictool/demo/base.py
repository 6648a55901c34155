"""The base model every row is fine-tuned from: pretrained once with the plain CLIP loss, cached."""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

from mosaictool.demo import cache
from mosaictool.demo.config import DemoConfig, digest, file_digest
from mosaictool.errors import MosaicError
from mosaictool.io import read_json

logger = logging.getLogger(__name__)


def pretrain_base(cfg: DemoConfig, plain_shards: Path, world: Path, out: Path, *, twins: bool = True,
                  name: str = "base") -> Path:
    """The base model, pretrained once with the plain CLIP loss on `plain_shards` (the demo's: the plain
    captions of one- and two-object scenes, each scene's arrangement twin in its batch; with
    `twins=False` the batches are plain random draws), cached by everything it depends on; a copy
    at OUT/<name>.pt."""
    from mosaictool.model.openclip import model_config
    from mosaictool.training import TrainConfig, train
    from mosaictool.training.launch import train_in_local_ranks
    from mosaictool.world.generate import load_manifest

    device, workers = cfg.runtime()
    ranks = cfg.pretrain_ranks()
    # the shards' bytes, not only their sizes: captions that change without a new world version
    # (a code change) must not find the base trained on the old ones
    data = digest([file_digest(tar) for tar in sorted(plain_shards.glob("*.tar"))])
    recipe = {"world": load_manifest(world), "shards": read_json(plain_shards / "sizes.json"), "data": data,
              "model": cfg.model, "model_config": model_config(cfg.model), "steps": cfg.pretrain_steps, "lr": cfg.pretrain_lr,
              "batch": cfg.pretrain_batch,
              "twins_in_batch": twins, "ranks": ranks}
    cached = Path(cfg.cache_dir) / f"base-{digest(recipe)}"  # holds base.pt and its manifest (demo.cache)
    link = out / f"{name}.pt"
    with cache.lock_of(cached):  # a second demo wanting this base waits for the first to train it
        problem = cache.restore(cached, out, rename={"base.pt": link.name}) if cached.is_dir() else "not cached"
        if problem is None:
            logger.info(f"pretrain: reusing cached base model {cached}")
            return link
        if problem != "not cached":
            logger.info(f"pretrain: the cached base {cached} failed its check ({problem}); training it again")
        logger.info(f"pretrain: {name} model, plain CLIP loss, {cfg.pretrain_steps} steps on {plain_shards.name}"
                   + ("" if twins else ", no twins in the batch") + (f", {ranks} one-thread processes" if ranks > 1 else "")
                   + f" (cached as {cached})")
        run = out / "runs" / name
        if run.exists():
            shutil.rmtree(run)
        tc = TrainConfig(data=str(plain_shards), out=str(run), method="clip", model=cfg.model, record_hard_images=twins,
                         augment=False, steps=cfg.pretrain_steps, lr=cfg.pretrain_lr, batch_size=cfg.pretrain_batch,
                         warmup=min(100, cfg.pretrain_steps // 10), seed=0, quiet=not sys.stderr.isatty(),
                         device=device, num_workers=workers, images_on_device=device.startswith("cuda"))
        final = train_in_local_ranks(tc, ranks) if ranks > 1 else train(tc)
        cache.store({"base.pt": Path(final)}, cached)
        problem = cache.restore(cached, out, rename={"base.pt": link.name})
        if problem is not None:
            raise MosaicError(f"{cached}: the base just cached does not read back ({problem}); check the disk")
    return link
