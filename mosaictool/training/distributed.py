"""torchrun / DDP plumbing: the process group from the environment, and this rank's device.

`torchrun --nproc_per_node K -m mosaictool train ...` sets WORLD_SIZE, RANK and LOCAL_RANK; one
plain process is world size 1 and touches no process group. The backend is gloo on CPU and nccl on
CUDA. The losses' feature gathering is mosaictool.model.collectives.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch

from mosaictool.errors import MosaicError


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: str = "cpu"

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def init(device: str | None = None, timeout_s: float | None = None) -> DistInfo:
    """Join the process group torchrun describes (if any) and choose this rank's device
    (mosaictool.training.device.resolve_device: by default the GPU of this rank, else cpu).
    `timeout_s` bounds every collective (torch's default is 30 min): when one rank dies, the
    others fail after it instead of waiting."""
    from mosaictool.training.device import resolve_device

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(device)
    if device.startswith("cuda"):
        if world > 1 and device != f"cuda:{local_rank}":
            raise MosaicError(
                f"--device {device} under torchrun with {world} ranks: each rank uses the GPU of its "
                f"LOCAL_RANK (this one cuda:{local_rank}); pass --device cuda or leave --device out"
            )
        torch.cuda.set_device(torch.device(device))  # always indexed: set_device refuses a bare "cuda"
    if world > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            backend = "nccl" if device.startswith("cuda") else "gloo"
            timeout = {} if timeout_s is None else {"timeout": datetime.timedelta(seconds=timeout_s)}
            dist.init_process_group(backend=backend, init_method="env://", **timeout)
    return DistInfo(rank=rank, world_size=world, local_rank=local_rank, device=device)


def shutdown(info: DistInfo) -> None:
    if info.distributed:
        import torch.distributed as dist

        if dist.is_initialized():
            # No rank tears the group down (rank 0 also hosts the env:// store) while another is
            # still in its last collective: that rank would abort ("terminate called ...").
            dist.barrier()
            dist.destroy_process_group()


def mean_over_ranks(value: float, info: DistInfo) -> float:
    """For logging: the mean of a scalar over ranks (a no-op in one process)."""
    if not info.distributed:
        return value
    from mosaictool.model.collectives import all_reduce_sum

    t = torch.tensor([value], dtype=torch.float64, device=info.device)
    return float(all_reduce_sum(t)) / info.world_size


def train_in_local_ranks(cfg, ranks: int) -> str:
    """train(cfg) as `ranks` gloo processes of one torch thread each on this machine, the batch
    (cfg.batch_size, images per step) split between them; returns the final checkpoint's path.
    The global batch, its order and so the loss are those of one process (the features are
    gathered): on 2 CPU cores two one-thread ranks train the demo's tiny model ~1.2x faster than
    one process with two threads, which keeps them waiting on each other."""
    import dataclasses
    import multiprocessing
    import socket
    import sys

    from mosaictool.errors import MosaicError

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
    from pathlib import Path

    return str(Path(cfg.out) / "final.pt")


def _local_rank(cfg, rank: int, ranks: int, port: int) -> None:
    os.environ.update(WORLD_SIZE=str(ranks), RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    from mosaictool.training.loop import train

    train(cfg)
