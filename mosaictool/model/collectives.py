"""Collectives the losses use under torchrun (as open_clip's loss module gathers features itself).

`all_gather_with_grad` keeps the autograd graph (torch.distributed.nn), so every rank's features
receive the gradients that other ranks' losses send them. Joining the process group is the
training engine's (mosaictool.training.distributed).
"""

from __future__ import annotations

import torch


def all_gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    import warnings

    from torch.distributed.nn.functional import all_gather

    with warnings.catch_warnings():  # deprecated in favour of a private module (_functional_collectives)
        warnings.simplefilter("ignore", FutureWarning)
        return torch.cat(all_gather(tensor.contiguous()))


def all_gather_no_grad(tensor: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    is_bool = tensor.dtype == torch.bool  # gloo has no bool all_gather
    source = tensor.to(torch.uint8) if is_bool else tensor
    parts = [torch.empty_like(source) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, source.contiguous())
    out = torch.cat(parts)
    return out.bool() if is_bool else out


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    tensor = tensor.clone()
    dist.all_reduce(tensor)
    return tensor
