"""Launching train() in local processes, as torchrun would: a gloo group of one-thread ranks on
one CPU machine (what the demo pretrains its base with)."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import socket
import sys
from pathlib import Path

import torch

from mosaictool.errors import MosaicError
from mosaictool.training.loop import train


def train_in_local_ranks(cfg, ranks: int) -> str:
    """train(cfg) as `ranks` gloo processes of one torch thread each on this machine, the batch
    (cfg.batch_size, images per step) split between them; returns the final checkpoint's path.
    The global batch, its order and so the loss are those of one process (the features are
    gathered): on 2 CPU cores two one-thread ranks train the demo's tiny model ~1.2x faster than
    one process with two threads, which keeps them waiting on each other."""
    if cfg.batch_size % ranks:
        raise MosaicError(f"batch size {cfg.batch_size} does not split into {ranks} ranks")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    part = dataclasses.replace(cfg, batch_size=cfg.batch_size // ranks, device="cpu")
    # fork, as the demo's parallel fine-tuning runs: no re-import of the caller's main module
    context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    procs = [context.Process(target=_local_rank, args=(part, rank, ranks, port)) for rank in range(ranks)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    failed = [rank for rank, p in enumerate(procs) if p.exitcode != 0]
    if failed:
        raise MosaicError(f"training in {ranks} local processes: rank(s) {failed} failed (their error is above)")
    return str(Path(cfg.out) / "final.pt")


def _local_rank(cfg, rank: int, ranks: int, port: int) -> None:
    os.environ.update(WORLD_SIZE=str(ranks), RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    train(cfg)
