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
