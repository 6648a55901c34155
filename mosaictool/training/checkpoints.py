"""Where a run's state is written and read back: the run folder, --resume, last.pt, final.pt, RNG states.

last.pt (every --save-every steps) holds model + optimizer + scaler + every rank's RNG + the step, so
`--resume` continues bit-exact; with --lora its state_dict is the merged weights (what evaluate and
--pretrained read) and the LoRA model's own state sits beside it. final.pt holds the trained model
with its config. Both are written by mosaictool.model.openclip (atomic; last.pt keeps its previous
version, which --resume falls back to when last.pt is truncated).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
from pathlib import Path

from mosaictool.errors import MosaicError
from mosaictool.io import write_json
from mosaictool.training.config import TrainConfig

logger = logging.getLogger(__name__)


def prepare_run(cfg: TrainConfig, resume: bool) -> tuple[TrainConfig, dict | None]:
    """The config to train with and, when resuming, the state of last.pt (None: start from step 0)."""
    out = Path(cfg.out)
    if resume:
        return resume_state(cfg, out)
    check_run_outputs(cfg)
    cfg = cfg.resolved()
    if (out / "final.pt").exists() or (out / "last.pt").exists():
        raise MosaicError(f"{out}: already holds a run; continue it with --resume {out}, or choose another --out")
    return cfg, None


def check_run_outputs(cfg: TrainConfig) -> None:
    """The run folder may not be the --data folder, nor write its files over a file the run reads (the
    --pretrained checkpoint, the files of the run it comes from, the data, the model config)."""
    from mosaictool.paths import RUN_FILES, Read, Write, check_outputs, checkpoint, read_path

    reads = [*checkpoint("--pretrained", cfg.pretrained), *read_path("--model-config", cfg.model_config),
             *read_path("--texts", cfg.texts)]
    if cfg.pretrained and cfg.pretrained.startswith("local-dir:"):
        reads.append(Read("--pretrained", cfg.pretrained.removeprefix("local-dir:"), ("**",)))
    data = cfg.data
    if os.path.isfile(data):
        reads.append(Read("--data", data))
    else:  # a shard folder, or a pattern ('shards/{000000..000099}.tar') of files in one
        folder = data if os.path.isdir(data) else os.path.dirname(data.split("{")[0].split("*")[0].split("?")[0])
        if folder and os.path.isdir(folder):
            reads.append(Read("--data", folder, ("*.tar", "sizes.json")))
    check_outputs([Write("--out", cfg.out, RUN_FILES)], reads)


# Fields a resumed run may hold otherwise than its last.pt: where its files are, and how this session runs.
MAY_DIFFER = frozenset({"out", "data", "texts", "image_root", "allow_outside_root", "eval_data_root", "pretrained", "model_config",
                        "num_workers", "quiet", "device", "report_to"})
RESTORE = "restore it, or start a new run"


def resume_state(cfg: TrainConfig, out: Path) -> tuple[TrainConfig, dict | None]:
    """The stored config of the run in `out` (runtime options from `cfg`) and its last.pt's state."""
    from mosaictool.model import openclip

    if (out / "final.pt").exists():
        raise MosaicError(f"{out}: the run already finished (final.pt); nothing to resume")
    config_file = out / "config.json"
    if not config_file.exists():
        raise MosaicError(f"{out}: no run to resume (config.json missing); start it without --resume")
    resumed = read_stored_config(config_file)
    resumed.out = str(out)
    for runtime in ("num_workers", "quiet", "device"):
        setattr(resumed, runtime, getattr(cfg, runtime))
    if cfg.report_to is not None:  # given again on --resume: it replaces the stored one
        resumed.report_to = cfg.report_to
    check_run_outputs(resumed)
    try:
        resumed.resolved()  # the checks a new run's flags get (names, cross-field rules); its values stay as stored
    except MosaicError as e:
        raise MosaicError(f"{config_file}: {e}") from None
    state = openclip.read_resume_checkpoint(out / "last.pt")  # a truncated last.pt: the previous one
    if state is not None:
        openclip.check_contract(state, out / "last.pt", "RESUMABLE")
        _same_run(resumed, config_file, state.get("config") or {}, out / "last.pt")
    return resumed, state


def read_stored_config(config_file: Path) -> TrainConfig:
    """A run folder's config.json as a TrainConfig; MosaicError naming the file and the field when it
    is not JSON (truncated), names a field TrainConfig lacks, lacks one, or holds a value of the
    wrong type or out of its declared bounds."""
    from mosaictool import methods
    from mosaictool.io import parse_json
    from mosaictool.records import config_errors, kind_of

    try:
        text = config_file.read_bytes()
    except OSError as e:
        raise MosaicError(f"{config_file}: not a readable JSON file ({e}): truncated or edited; {RESTORE}") from None
    stored = parse_json(text, str(config_file), label="not a readable JSON file", hint=f"truncated or edited; {RESTORE}")
    text = text.decode("utf-8")
    if not isinstance(stored, dict):
        raise MosaicError(f"{config_file}: expected a JSON object of the run's settings, got {kind_of(stored)}; {RESTORE}")
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    # configs written before methods had their own options kept them at the top level
    method = stored.get("method")
    declared = {o.name for o in methods.get(method).options} if isinstance(method, str) and method in methods.names() else set()
    unknown = sorted(set(stored) - known - declared)
    required = {f.name for f in dataclasses.fields(TrainConfig)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    missing = sorted(required - set(stored))
    if unknown or missing:
        what = f"unknown field {unknown[0]!r}" if unknown else f"missing field {missing[0]!r}"
        raise MosaicError(f"{config_file}: {what} (a config.json mosaictool did not write, or an edited one); {RESTORE}")
    defaulted = sorted(known - set(stored))
    if defaulted:  # written by an older mosaictool: said, not silent
        logger.warning(f"note: {config_file} lacks {', '.join(defaulted)}: their defaults are used")
    values = {k: v for k, v in stored.items() if k in known}
    problems = config_errors(TrainConfig, json.dumps(values), strict=True)
    if problems:
        name, value, what = problems[0]
        raise MosaicError(f"{config_file}: {name}: expected {what}, got {value!r}; {RESTORE}")
    resumed = TrainConfig(**values)
    resumed.crop_scale = tuple(resumed.crop_scale)  # JSON gave a list
    resumed.method_options = {**{k: v for k, v in stored.items() if k in declared and k not in known}, **resumed.method_options}
    return resumed


def _same_run(cfg: TrainConfig, config_file: Path, written: dict, checkpoint: Path) -> None:
    """config.json must describe the run its last.pt was written by (the architecture, method,
    optimizer, ...: everything but MAY_DIFFER)."""
    mine = json.loads(json.dumps(dataclasses.asdict(cfg)))
    theirs = json.loads(json.dumps(written, default=str))
    for name in sorted(set(mine) & set(theirs) - MAY_DIFFER):
        if mine[name] != theirs[name]:
            raise MosaicError(f"{config_file}: {name} is {mine[name]!r}, but {checkpoint} was written with {theirs[name]!r}: "
                              f"the config was edited or belongs to another run; {RESTORE}")


class Checkpoints:
    """The run folder's config.json, last.pt and final.pt, and the steps last.pt and its previous version hold."""

    def __init__(self, cfg: TrainConfig, bundle, optimizer, scaler, info):
        self.cfg, self.bundle, self.optimizer, self.scaler, self.info = cfg, bundle, optimizer, scaler, info
        self.out = Path(cfg.out)
        self.last = self.out / "last.pt"
        self.saved_step: int | None = None  # of last.pt, named if the loss blows up

    def write_config(self) -> None:
        """config.json: the run folder appears (once model, data and plan are usable: a refused --data or
        --model leaves none)."""
        if self.info.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
            write_json(self.out / "config.json", dataclasses.asdict(self.cfg))

    def restore(self, state: dict | None) -> int:
        """Model, optimizer, scaler and this rank's RNG from last.pt's state; returns its step (0: none)."""
        if state is None:
            return 0
        from mosaictool.model import openclip

        model = self.bundle.model
        source = self.out / "last.pt"
        config = self.out / "config.json"
        if self.cfg.lora and "lora_state" not in state:
            raise MosaicError(f"{source}: holds no LoRA state, but {config} says lora {self.cfg.lora}; {RESTORE}")
        # with --lora, last.pt's state_dict holds the merged weights; the LoRA model's own is beside them
        weights = state["lora_state"] if self.cfg.lora else openclip.without_ddp_prefix(state["state_dict"])
        openclip.check_state_dict(weights, source)
        openclip.check_finite(weights, source)
        openclip.check_dtypes(model.state_dict(), weights, source)
        openclip.check_fits(model, weights, source,
                            f"the {self.bundle.meta['model_name']} that {config} describes (fields model, model_config, lora)")
        model.load_state_dict(weights)
        try:
            self.optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError) as e:  # other parameter groups: locks, LoRA or the optimizer differ
            raise MosaicError(f"{source}: its optimizer state does not fit the run {self.out / 'config.json'} describes "
                              f"(fields optimizer, lock_image, lock_text, lora): {e}; {RESTORE}") from None
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        restore_rng(state["rng"][min(self.info.rank, len(state["rng"]) - 1)])
        self.saved_step = state["step"]
        return state["step"]

    def save(self, step: int, total_steps: int, micro_per_epoch: int, *, final: bool = False) -> Path:
        """last.pt (resumable: every rank takes part, their RNG states are gathered), or at the end
        final.pt, whereupon the resumable files go. Both hold plain weights (with --lora the adapters
        merged in); last.pt also the LoRA model itself, for --resume."""
        from mosaictool.model import lora, openclip

        rng = None if final else gather_rng(self.info)
        path = self.out / "final.pt" if final else self.last
        if self.info.is_main:
            plain = lora.merged_bundle(self.bundle)
            previous = openclip.previous_checkpoint(self.last)
            if final:
                extra = {"method": self.cfg.method}
            else:
                position = {"micro_batch": step * self.cfg.accum_freq, "micro_batches_per_epoch": micro_per_epoch}
                extra = {"rng": rng, "data_position": position, "keep_previous": True, "optimizer": self.optimizer.state_dict(),
                         "scaler": self.scaler.state_dict() if self.scaler else None}
                if self.cfg.lora:
                    extra["lora_state"] = self.bundle.model.state_dict()
            openclip.save_checkpoint(path, plain, config=dataclasses.asdict(self.cfg), step=step, total_steps=total_steps,
                                     **extra)
            for resumable in (self.last, previous) if final else ():
                if resumable.exists():
                    os.unlink(resumable)
        self.saved_step = step
        return path

    def diverged(self, step: int, what: str) -> MosaicError:
        """The error that stops a run whose loss or gradient is not finite at `step`. When last.pt holds
        the weights that gave it, its previous version is put back in its place."""
        from mosaictool.model import openclip

        if self.saved_step == step - 1 and self.info.is_main:
            previous = openclip.previous_checkpoint(self.last)
            if previous.exists():
                os.replace(previous, self.last)
                self.saved_step = openclip.read_checkpoint(self.last)["step"]
            else:
                self.last.unlink(missing_ok=True)
                self.saved_step = None
        kept = (f"the last good checkpoint {self.last} (step {self.saved_step}) is kept: start a new run "
                f"from it (--pretrained {self.last}) with a lower --lr" if self.saved_step else
                f"no checkpoint was written yet (--save-every {self.cfg.save_every}): start again with a lower --lr")
        return MosaicError(f"step {step}: {what} (not finite), training stopped; {kept}, --grad-clip on, or "
                           "--precision fp32")


def gather_rng(info) -> list[dict]:
    """RNG states of every rank (for the checkpoint)."""
    state = rng_state(info.device)
    if not info.distributed:
        return [state]
    import torch.distributed

    states: list = [None] * info.world_size
    torch.distributed.all_gather_object(states, state)
    return states


def rng_state(device: str) -> dict:
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and device.startswith("cuda"):
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def restore_rng(state: dict) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
