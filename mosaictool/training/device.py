"""One device rule for every command (train, demo, evaluate, tree-score, wise-ft, the perf scripts).

    no --device      the GPU when CUDA is visible: cuda:<LOCAL_RANK> under torchrun, the current
                     CUDA device otherwise; cpu when no GPU is visible
    --device cuda    the same GPU, always with its index (cuda:N)
    --device cuda:N  GPU N; an error when it does not exist
    --device cpu     the CPU (also mps and other torch device strings, passed through)

The result always carries an index for CUDA, because `torch.cuda.set_device(torch.device("cuda"))`
raises "Expected a torch.device with a specified index" and DDP's `device_ids` need one too.
"""

from __future__ import annotations

import os

from mosaictool.errors import MosaicError


def resolve_device(requested: str | None = None, *, flag: str = "--device") -> str:
    """The torch device string to use: 'cpu', 'cuda:N', or `requested` for other device types."""
    import torch

    text = (requested or "").strip().lower()
    if text in ("", "auto"):
        if not torch.cuda.is_available():
            return "cpu"
        text = "cuda"
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise MosaicError(f"{flag} {requested!r}: not a torch device; use cpu, cuda or cuda:N") from None
    if device.type != "cuda":
        return str(device)
    if not torch.cuda.is_available():
        raise MosaicError(f"{flag} {requested}: no CUDA GPU is visible here; use {flag} cpu")
    count = torch.cuda.device_count()
    index = device.index
    if index is None:
        local_rank = os.environ.get("LOCAL_RANK")  # set by torchrun: each rank takes the GPU of its local rank
        index = int(local_rank) if local_rank is not None else torch.cuda.current_device()
    if not 0 <= index < count:
        where = f" (LOCAL_RANK {index})" if device.index is None else ""
        raise MosaicError(
            f"{flag} {requested or 'cuda'}: GPU {index}{where} does not exist, {count} visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); use {flag} cuda:0 .. cuda:{count - 1} or {flag} cpu"
        )
    return f"cuda:{index}"
