"""What a training run reports: metrics.jsonl, and `train --report-to tensorboard,wandb` (off by default), as
open_clip_train offers.

`Reporter.write_line` appends a step's metrics to RUN/metrics.jsonl (the main rank's; a resumed run first
drops the lines logged after its checkpoint, which it logs again). The loop hands its per-step metrics dict
to `Reporter.log_step`; every number in it is logged under
`train/` (the loss and each named term of the method's loss, the learning rate, the logit scale,
samples/s, texts per image), plus texts/s (samples/s x texts per image) and, on CUDA, the GPU memory
allocated now and at its peak (`gpu/`). `log_eval` logs an evaluation headline under `eval/` for loops
that evaluate. TensorBoard event files go to `RUN/tensorboard/`; wandb runs are written under `RUN/`
(its own settings, e.g. WANDB_MODE=offline or WANDB_PROJECT, apply). Only the main rank reports.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

from mosaictool.atomic import append_line, write_text
from mosaictool.errors import MosaicError
from mosaictool.io import parse_json

logger = logging.getLogger(__name__)

TARGETS = ("tensorboard", "wandb")
_NOT_SCALARS = {"step", "epoch"}  # the x axis, not a curve


def parse_report_to(value: str | None) -> list[str]:
    """'tensorboard,wandb' -> ['tensorboard', 'wandb']; '' / 'none' / None -> []."""
    names = [v.strip().lower() for v in (value or "").split(",") if v.strip()]
    if names == ["none"]:
        return []
    bad = [n for n in names if n not in TARGETS]
    if bad:
        raise MosaicError(f"--report-to {bad[0]!r}: choose tensorboard, wandb or both (tensorboard,wandb)")
    return list(dict.fromkeys(names))


class Reporter:
    """Logs one training run to the chosen targets; `Reporter([], ...)` does nothing."""

    def __init__(self, targets: list[str], out: str | os.PathLike, *, config: dict | None = None,
                 device: str = "cpu", start_step: int = 0, metrics_file: bool = False, resumed: bool = False):
        self.targets = list(targets)
        self.out = Path(out)
        self.device = device
        self.metrics_file = self.out / "metrics.jsonl" if metrics_file else None
        if self.metrics_file is not None and resumed:  # lines logged after the checkpoint (or before none) come again
            _truncate_jsonl(self.metrics_file, start_step)
        elif self.metrics_file is not None:
            _move_aside(self.metrics_file)
        self._tb = None
        self._wandb = None
        if "tensorboard" in self.targets:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as e:
                raise MosaicError(
                    "--report-to tensorboard needs the tensorboard package: pip install 'mosaictool[log]' "
                    "(or pip install tensorboard)"
                ) from e
            # a resumed run logs the steps after its checkpoint again: purge_step hides the first attempt's
            self._tb = SummaryWriter(log_dir=str(self.out / "tensorboard"), purge_step=start_step + 1 if start_step else None)
        if "wandb" in self.targets:
            try:
                import wandb
            except ImportError as e:
                raise MosaicError("--report-to wandb needs the wandb package: pip install wandb") from e
            self._wandb = wandb.init(project=os.environ.get("WANDB_PROJECT", "mosaictool"), name=self.out.name,
                                     dir=str(self.out), config=config or {}, resume="allow", id=_wandb_id(self.out))

    def __bool__(self) -> bool:
        return bool(self.targets)

    def step_scalars(self, metrics: dict) -> dict[str, float]:
        """What one step logs: metric name -> value."""
        scalars = {f"train/{k}": float(v) for k, v in metrics.items()
                   if k not in _NOT_SCALARS and isinstance(v, (int, float)) and not isinstance(v, bool)}
        if "samples_per_s" in metrics and "texts_per_image" in metrics and "texts_per_s" not in metrics:
            scalars["train/texts_per_s"] = float(metrics["samples_per_s"] * metrics["texts_per_image"])
        if self.device.startswith("cuda"):
            import torch

            if torch.cuda.is_available():
                scalars["gpu/memory_allocated_gb"] = torch.cuda.memory_allocated(self.device) / 2**30
                scalars["gpu/max_memory_allocated_gb"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        return scalars

    def log_step(self, step: int, metrics: dict) -> None:
        if self:
            self._write(step, self.step_scalars(metrics))

    def write_line(self, metrics: dict) -> None:
        """Append a step's metrics to metrics.jsonl (when this reporter keeps it)."""
        if self.metrics_file is not None:
            append_line(self.metrics_file, json.dumps(metrics) + "\n")

    def log_eval(self, step: int, headline: dict[str, float]) -> None:
        """An evaluation's headline numbers (e.g. {'aro/VG-Relation/accuracy': 0.61}) at `step`."""
        if self:
            self._write(step, {f"eval/{k}": float(v) for k, v in headline.items()})

    def _write(self, step: int, scalars: dict[str, float]) -> None:
        scalars = {k: v for k, v in scalars.items() if not math.isnan(v)}
        if self._tb is not None:
            for name, value in scalars.items():
                self._tb.add_scalar(name, value, step)
        if self._wandb is not None:
            self._wandb.log(scalars, step=step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def _wandb_id(out: Path) -> str:
    """One wandb run per run folder, so `--resume` continues the same wandb run."""
    import hashlib

    return hashlib.sha1(str(out.resolve()).encode()).hexdigest()[:16]


def _move_aside(path: Path) -> None:
    """A new run in a folder whose earlier attempt left metrics but no checkpoint (it diverged, or was
    killed before its first save): the earlier lines move to metrics.N.jsonl, said once, so that the
    run's metrics.jsonl holds its own steps only (appended, they read 1, 1, 2, 3)."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    n = 1
    while (aside := path.with_name(f"metrics.{n}.jsonl")).exists():
        n += 1
    os.replace(path, aside)
    logger.warning(f"{path}: an earlier attempt logged there without leaving a checkpoint; its lines moved to {aside}")


EDITED = "the file was edited: restore it, or remove the line"


def _truncate_jsonl(path: Path, step: int) -> None:
    """Drop the lines of steps after `step`."""
    if not path.exists():
        return
    lines = [(n, line) for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if line.strip()]
    keep = []
    for k, (n, line) in enumerate(lines):
        try:
            logged = parse_json(line, f"{path}:{n}", label="not a metrics line", hint=EDITED)["step"]
            if not isinstance(logged, int):
                raise TypeError(f"step {logged!r}")
        except (MosaicError, KeyError, TypeError) as e:
            if k == len(lines) - 1:  # the line a killed run was writing: torn, and after its last checkpoint
                break
            if isinstance(e, MosaicError):
                raise
            raise MosaicError(f"{path}:{n}: not a metrics line ({type(e).__name__}: {e}); {EDITED}") from None
        if logged <= step:
            keep.append(line)
    write_text(path, "".join(line + "\n" for line in keep), flag="--out")
