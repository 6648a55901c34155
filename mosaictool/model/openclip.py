"""Creating, saving and loading open_clip models, one way for train, evaluate, wise-ft and tree-score.

A model is named like open_clip names it (`ViT-B-32-quickgelu`), or by one of the configs shipped in
`mosaictool/model/configs/` (`mosaic-tiny`: 4-layer, 128-wide ViT and text towers, the train
default; `mosaic-micro`: 64 wide, ~3x faster on CPU; `mosaic-micro-p16`: the same with 16-pixel patches, 17
image tokens instead of 65, the demo's), or by a
user's JSON config (`--model-config file.json`, open_clip's schema: embed_dim, vision_cfg, text_cfg).

mosaictool checkpoints are one `torch.save`d dict (see `save_checkpoint`) that carries everything
needed to rebuild the model: architecture name, the full model config, whether QuickGELU is used,
the open_clip version, the run's resolved config. Loading rebuilds from that record and refuses a
request that contradicts it (the GELU/QuickGELU mix-up that skewed published ARO and SugarCrepe
numbers) instead of silently running the wrong activation.

Checkpoints hold only tensors, plain Python values and the config, and are read with
`torch.load(weights_only=True)`: a downloaded file cannot run code on `evaluate`, `wise-ft`, `tree-score`
or `train --resume`; one that carries a pickled object is refused. Writes are atomic (temp file, then
os.replace); `keep_previous=True` first moves the old file to `NAME.prev.pt`, which
`read_resume_checkpoint` falls back to when the newest one is unreadable.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaictool.atomic import atomic_output, torch_save_to
from mosaictool.errors import MosaicError

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "mosaictool-checkpoint/1"
DEFAULT_MODEL = "mosaic-tiny"
CONFIG_DIR = Path(__file__).parent / "configs"


@dataclass
class ModelBundle:
    """A model with what is needed to feed it and to describe it."""

    model: Any  # open_clip CLIP / CustomTextCLIP
    preprocess_train: Any
    preprocess_val: Any
    tokenizer: Any
    meta: dict = field(default_factory=dict)  # model_name, model_cfg, quick_gelu, open_clip_version, source

    @property
    def name(self) -> str:
        return self.meta.get("label") or self.meta.get("source") or self.meta.get("model_name", "model")


def _shipped_config(model_name: str) -> dict | None:
    """The config of a model shipped with mosaictool (model/configs/NAME.json), None for another name.
    Read here, not registered in open_clip's registry for good: _config_known registers it while a
    model is built."""
    path = CONFIG_DIR / f"{model_name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _user_config(extra_config: str | os.PathLike) -> dict:
    """A user's JSON model config (open_clip's schema), checked."""
    path = Path(extra_config)
    if not path.is_file():
        raise MosaicError(f"{path}: model config not found" + (" (a folder; give its .json file)" if path.is_dir() else ""))
    from mosaictool.io import read_json

    cfg = read_json(path, hint="a model config is a JSON file (open_clip's schema)")
    missing = [k for k in ("embed_dim", "vision_cfg", "text_cfg") if not isinstance(cfg, dict) or k not in cfg]
    if missing:
        raise MosaicError(f"{path}: model config lacks {', '.join(missing)} (open_clip's schema)")
    check_model_config(cfg, path)
    check_size(cfg, path)
    return cfg


def check_model_config(cfg: dict, source: str | os.PathLike) -> None:
    """The sizes of an open_clip model config (records.MODEL_CONFIG), typed: a string or a negative
    width fails here with the field named, not deep inside open_clip."""
    from mosaictool import records
    from mosaictool.errors import RecordError

    try:
        records.check(records.MODEL_CONFIG, cfg)
    except RecordError as e:
        raise MosaicError(f"{source}: model config: {e} (open_clip's schema)") from None


def model_config(model_name: str) -> dict:
    import open_clip

    cfg = open_clip.get_model_config(model_name) or _shipped_config(model_name)
    if cfg is None:
        raise MosaicError(
            f"unknown model {model_name!r}; choose one of `open_clip.list_models()`, "
            f"the shipped {', '.join(sorted(p.stem for p in CONFIG_DIR.glob('*.json')))}, or pass --model-config FILE.json"
        )
    return copy.deepcopy(cfg)


def _is_quick_gelu(model_name: str, cfg: dict, force_quick_gelu: bool) -> bool:
    return bool(force_quick_gelu or cfg.get("quick_gelu", False) or model_name.endswith("-quickgelu"))


def _bundle(model, model_name: str, cfg: dict, quick_gelu: bool, source: str):
    import open_clip

    pp_cfg = open_clip.get_model_preprocess_cfg(model) if hasattr(open_clip, "get_model_preprocess_cfg") else {}
    image_size = cfg["vision_cfg"].get("image_size", 224)
    with _open_clip_logs(quiet=False):
        tokenizer = open_clip.get_tokenizer(model_name, context_length=cfg["text_cfg"].get("context_length", 77))
    from open_clip.transform import AugmentationCfg, image_transform

    aug = AugmentationCfg(scale=(0.8, 1.0))  # the paper's fine-tuning uses random-crop augmentation
    mean = pp_cfg.get("mean") if pp_cfg else None
    std = pp_cfg.get("std") if pp_cfg else None
    preprocess_train = image_transform(image_size, is_train=True, mean=mean, std=std, aug_cfg=aug)
    preprocess_val = image_transform(image_size, is_train=False, mean=mean, std=std)
    meta = {
        "model_name": model_name,
        "model_cfg": cfg,
        "quick_gelu": quick_gelu,
        "open_clip_version": open_clip.__version__,
        "source": source,
    }
    return ModelBundle(model, preprocess_train, preprocess_val, tokenizer, meta)


def create(
    model_name: str = DEFAULT_MODEL,
    pretrained: str | None = None,
    *,
    model_config_file: str | os.PathLike | None = None,
    force_quick_gelu: bool = False,
    device: str = "cpu",
    seed: int | None = None,
    stored_config: dict | None = None,
) -> ModelBundle:
    """A fresh model, or one initialised from `pretrained` (an open_clip tag, a weights file, a
    `local-dir:` folder, or a mosaictool checkpoint). A `model_config_file` names the model by its
    file stem, known to open_clip while the model is built (over a shipped config of that name);
    `stored_config` is a checkpoint's config of `model_name`, used where open_clip does not know it."""
    if model_config_file is None:
        known = _shipped_config(model_name) if stored_config is None else {k: v for k, v in stored_config.items() if k != "quick_gelu"}
        with _config_known(model_name, known):
            return _create(model_name, pretrained, None, force_quick_gelu, device, seed)
    name = Path(model_config_file).stem
    with _config_known(name, _user_config(model_config_file), replace=True):
        return _create(name, pretrained, model_config_file, force_quick_gelu, device, seed)


def _create(model_name: str, pretrained: str | None, model_config_file: str | os.PathLike | None, force_quick_gelu: bool,
            device: str, seed: int | None) -> ModelBundle:
    import open_clip
    import torch

    weights = _weights_file(pretrained, mmap=True) if pretrained and os.path.exists(pretrained) else None
    if isinstance(weights, dict) and weights.get("format") == CHECKPOINT_FORMAT:
        return load_checkpoint(pretrained, device=device, expect_model=model_name, expect_quick_gelu=force_quick_gelu or None)
    if weights is not None:
        weights = _state_of(weights, pretrained)
    cfg = model_config(model_name)
    check_size(cfg, model_config_file or model_name)
    quick_gelu = _is_quick_gelu(model_name, cfg, force_quick_gelu)
    if seed is not None:
        torch.manual_seed(seed)
    try:
        with _open_clip_logs(quiet=not pretrained):  # random init is what was asked: "no pretrained weights" left out
            model = open_clip.create_model(
                model_name, pretrained=pretrained, device=device, force_quick_gelu=force_quick_gelu
            )
    # open_clip asserts on other architectures' weights
    except (RuntimeError, AssertionError, KeyError, ValueError, TypeError) as e:
        if not pretrained:  # sizes that do not combine (a width smaller than a head's)
            source = model_config_file or model_name
            raise MosaicError(f"{source}: cannot build the model {model_name}: {_one_line(e)}; check its config") from None
        if not os.path.exists(pretrained) and "://" not in pretrained:
            raise MosaicError(
                f"cannot load pretrained weights {pretrained!r} for {model_name}: {e}. Offline, pass a local file "
                f"(e.g. --pretrained /weights/openai.pt) or a `local-dir:` folder"
            ) from e
        other = not isinstance(e, RuntimeError) or "state_dict" in str(e)
        hint = " (weights of another architecture? give the matching model name)" if other else ""
        raise MosaicError(f"cannot load pretrained weights {pretrained!r} for {model_name}: {_one_line(e)}{hint}") from e
    if pretrained:
        if weights is not None:
            check_dtypes(model.state_dict(), weights, pretrained)
        check_finite(model.state_dict(), pretrained)
    cfg["quick_gelu"] = quick_gelu
    return _bundle(model, model_name, cfg, quick_gelu, source=pretrained or f"{model_name} (random init)")


def is_mosaictool_checkpoint(path: str | os.PathLike) -> bool:
    ckpt = _weights_file(path, mmap=True)
    return isinstance(ckpt, dict) and ckpt.get("format") == CHECKPOINT_FORMAT


def check_weights_path(path: str | os.PathLike) -> None:
    """MosaicError unless `path` is a regular file: missing, a folder, a FIFO, socket or device (whose
    read would block) each said in one line."""
    if not os.path.exists(path):
        raise MosaicError(f"{path}: checkpoint not found")
    if not os.path.isfile(path):
        kind = "a folder" if os.path.isdir(path) else "a FIFO, socket or device"
        raise MosaicError(f"{path}: not a weights file ({kind}); give the .pt file itself")


def without_ddp_prefix(state: dict) -> dict:
    """A state_dict's names as one model has them: DistributedDataParallel's `module.` prefix removed."""
    return {k.removeprefix("module."): v for k, v in state.items()}


TORCHSCRIPT = object()  # _weights_file's answer for a whole-model archive (OpenAI's .pt files): open_clip reads those


def _weights_file(path: str | os.PathLike, *, mmap: bool = False) -> Any:
    """What `torch.save` put in `path`, read with weights_only (tensors and plain values, no code), or
    TORCHSCRIPT; safetensors and numpy files are left to open_clip (None). One line naming the file
    for anything else: a folder, a FIFO, an empty, foreign, truncated or code-carrying file. `mmap`
    reads only what is used of a big zip file (torch's older format cannot be mapped)."""
    import pickle
    import warnings
    import zipfile

    import torch

    if str(path).endswith((".safetensors", ".npz", ".npy")):
        return None
    check_weights_path(path)
    if os.path.getsize(path) == 0:
        raise MosaicError(f"{path}: empty checkpoint (0 bytes): the write that made it did not finish")
    try:
        with warnings.catch_warnings():  # torch warns of a pickle protocol it may not read, then says why not
            warnings.simplefilter("ignore", UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap and zipfile.is_zipfile(path))
    except pickle.UnpicklingError as e:
        if "Unsupported global" in str(e):  # a pickled object: no loader here or in open_clip would run it
            raise _refused(path, e) from None
        raise MosaicError(f"{path}: not a torch weights file (no torch.save or pickle format: "
                          f"{_first_line(e)})") from None
    except Exception as e:
        if "TorchScript" in str(e):
            return TORCHSCRIPT
        raise MosaicError(f"{path}: truncated or corrupt checkpoint, cannot be read ({type(e).__name__}: "
                          f"{_first_line(e)})") from None


def _first_line(error: Exception) -> str:
    """torch's message without the advice it adds after the first sentence."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    unsupported = next((line for line in lines if line.startswith("Unsupported")), None)
    return unsupported or (lines[0].split(". ")[0] if lines else type(error).__name__)


def _state_of(weights: Any, path: str | os.PathLike) -> dict | None:
    """The state_dict open_clip's loader takes from a weights file (`{"state_dict": ...}` or the dict
    itself, DDP's `module.` prefix removed), checked to be names to tensors: open_clip would fail on
    anything else with an AttributeError or StopIteration."""
    if weights is None or weights is TORCHSCRIPT:
        return None
    state = weights["state_dict"] if isinstance(weights, dict) and "state_dict" in weights else weights
    check_state_dict(state, path)
    return without_ddp_prefix(state)


def check_state_dict(state: Any, source: str | os.PathLike) -> None:
    """MosaicError unless `state` is a non-empty dict of names to tensors."""
    import torch

    if not isinstance(state, dict) or not state:
        got = "an empty dict" if isinstance(state, dict) else type(state).__name__
        raise MosaicError(f"{source}: not a weights file: expected a state_dict (names to tensors), got {got}")
    key, value = next(((k, v) for k, v in state.items() if not isinstance(k, str) or not torch.is_tensor(v)), (None, None))
    if key is not None or value is not None:
        raise MosaicError(f"{source}: not a weights file: state_dict[{key!r}] is a {type(value).__name__}, not a tensor")


def check_dtypes(own: dict, state: dict, source: str | os.PathLike) -> None:
    """MosaicError when a tensor of `state` is an integer or bool where `own` (the model's state_dict)
    holds floating-point weights: load_state_dict would cast it silently. float16/bfloat16 weights are
    widened exactly, so they load."""
    for key, value in own.items():
        other = state.get(key)
        if other is not None and value.is_floating_point() and not other.is_floating_point():
            raise MosaicError(f"{source}: {key} holds {str(other.dtype).removeprefix('torch.')} values where the model "
                              f"has {str(value.dtype).removeprefix('torch.')} weights (an edited or converted file?)")


def check_size(cfg: dict, source: str | os.PathLike) -> None:
    """MosaicError when the weights a ViT/transformer config describes would not fit in this machine's
    memory (float32): building it would only end in an out-of-memory kill."""
    params = estimated_parameters(cfg)
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    if params * 4 > memory:
        raise MosaicError(f"{source}: the model config describes ~{params:.3g} weights ({params * 4 / 2**30:,.0f} GiB as "
                          f"float32), more than this machine's {memory / 2**30:,.0f} GiB of memory; check its sizes")


def estimated_parameters(cfg: dict) -> float:
    """About how many numbers open_clip allocates for a CLIP config of ViT and transformer towers (the
    blocks' 4 + 2 * mlp_ratio width^2, embeddings, the text mask); 0 for timm / Hugging Face towers."""
    vision, text = cfg.get("vision_cfg") or {}, cfg.get("text_cfg") or {}
    if any(k in vision for k in ("timm_model_name",)) or any(k in text for k in ("hf_model_name",)):
        return 0
    total = 0.0
    for tower, defaults in ((vision, (12, 768)), (text, (12, 512))):
        layers, width = tower.get("layers", defaults[0]), tower.get("width", defaults[1])
        layers = sum(layers) if isinstance(layers, (list, tuple)) else layers
        total += float(layers) * (4 + 2 * float(tower.get("mlp_ratio", 4))) * float(width) ** 2
        total += float(width) * float(cfg.get("embed_dim", 512))
    size = vision.get("image_size", 224)
    height, width_px = (size, size) if isinstance(size, int) else size
    patch, vision_width = vision.get("patch_size", 16), float(vision.get("width", 768))
    total += ((float(height) // patch) * (float(width_px) // patch) + 3.0 * patch ** 2) * vision_width
    context = float(text.get("context_length", 77))
    total += (float(text.get("vocab_size", 49408)) + context) * float(text.get("width", 512)) + context ** 2
    return total


def _refused(path, error: Exception) -> MosaicError:
    first = str(error).strip().splitlines()
    unsupported = next((line.strip() for line in first if "Unsupported global" in line), first[0] if first else "")
    return MosaicError(
        f"{path}: refused: the checkpoint carries a pickled Python object ({unsupported}); checkpoints are "
        "read with torch.load(weights_only=True) so a file cannot run code. mosaictool checkpoints hold only "
        "tensors, plain values and the config; if you trust this file, re-save its tensors (state_dict) alone"
    )


def _plain(value: Any) -> Any:
    """What weights_only loading accepts: numpy arrays become tensors, numpy scalars and paths plain values
    (np.random.get_state() holds an array; np.random.set_state takes the tensor back as it is)."""
    import numpy as np
    import torch

    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def save_checkpoint(path: str | os.PathLike, bundle: ModelBundle, *, keep_previous: bool = False, **extra: Any) -> None:
    """Write a mosaictool checkpoint atomically (temp file beside the target, then os.replace).

    `extra` carries what the writer wants to keep: the run config, step, optimizer state, RNG states, ...
    (numpy arrays are stored as tensors: see `_plain`). With `keep_previous`, an existing file is first
    moved to `NAME.prev.pt`, the fallback of `read_resume_checkpoint`.
    """
    model = bundle.model.module if hasattr(bundle.model, "module") else bundle.model
    payload = {
        "format": CHECKPOINT_FORMAT,
        "model_name": bundle.meta["model_name"],
        "model_cfg": bundle.meta["model_cfg"],
        "quick_gelu": bundle.meta["quick_gelu"],
        "open_clip_version": bundle.meta["open_clip_version"],
        "state_dict": model.state_dict(),
        **_plain(extra),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path, flag="--out") as tmp:  # a full disk: one line, the previous file kept
        torch_save_to(payload, tmp)  # on disk before it replaces anything
        if keep_previous and path.exists():
            os.replace(path, previous_checkpoint(path))


def previous_checkpoint(path: str | os.PathLike) -> Path:
    """`last.pt` -> `last.prev.pt`: where `save_checkpoint(keep_previous=True)` keeps the one before."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def read_checkpoint(path: str | os.PathLike) -> dict:
    """Read a mosaictool checkpoint safely (weights_only: tensors, plain values, no code)."""
    ckpt = _weights_file(path)
    if ckpt is TORCHSCRIPT:
        ckpt = None
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise MosaicError(
            f"{path}: not a mosaictool checkpoint; to start from open_clip / OpenAI weights use "
            f"--model NAME --pretrained {path} (with a -quickgelu name for OpenAI-derived weights)"
        )
    check_contract(ckpt, path, "CHECKPOINT")
    check_state_dict(ckpt["state_dict"], path)
    return ckpt


def check_contract(ckpt: dict, path: str | os.PathLike, contract: str) -> None:
    """The fields a reader of the checkpoint uses (records.CHECKPOINT or RESUMABLE), typed: an edited
    or hand-made file is one line naming the field, not a KeyError."""
    from mosaictool import records
    from mosaictool.errors import RecordError

    try:
        records.check(getattr(records, contract), ckpt)
    except RecordError as e:
        raise MosaicError(f"{path}: {e} (an edited checkpoint, or one mosaictool did not write)") from None


def read_resume_checkpoint(path: str | os.PathLike) -> dict | None:
    """The checkpoint to resume from: `path`, or when it is unreadable (truncated, corrupt) the previous
    good one (`NAME.prev.pt`), with a note on stderr. None when neither exists."""

    path, previous = Path(path), previous_checkpoint(path)
    if not path.exists():
        return read_checkpoint(previous) if previous.exists() else None
    try:
        return read_checkpoint(path)
    except MosaicError as e:
        if "refused" in str(e) or not previous.exists():
            raise
        ckpt = read_checkpoint(previous)
        logger.warning(f"note: {e}; resuming from the previous checkpoint {previous} (step {ckpt.get('step')})")
        return ckpt


def load_checkpoint(
    path: str | os.PathLike,
    *,
    device: str = "cpu",
    expect_model: str | None = None,
    expect_quick_gelu: bool | None = None,
) -> ModelBundle:
    """Rebuild the model a mosaictool checkpoint describes and load its weights (strict)."""
    import open_clip
    import torch

    ckpt = read_checkpoint(path)
    name, cfg, quick = ckpt["model_name"], ckpt["model_cfg"], ckpt["quick_gelu"]
    if expect_quick_gelu is not None and expect_quick_gelu != quick:
        raise MosaicError(
            f"{path}: checkpoint was trained with quick_gelu={quick}, but quick_gelu={expect_quick_gelu} was "
            "requested; loading it with the other activation would silently change the model"
        )
    if expect_model and expect_model not in (DEFAULT_MODEL, name):
        expected_quick = expect_model.endswith("-quickgelu")
        if expected_quick != quick or expect_model.removesuffix("-quickgelu") != name.removesuffix("-quickgelu"):
            raise MosaicError(f"{path}: checkpoint holds a {name} (quick_gelu={quick}), not a {expect_model}")
    check_model_config(cfg, path)
    check_size(cfg, path)
    stored = {k: v for k, v in cfg.items() if k != "quick_gelu"}  # force_quick_gelu says it
    with _config_known(name, stored):  # the tokenizer too is chosen by the config of that name
        with _open_clip_logs(quiet=True):  # it warns "no pretrained weights loaded": we load them just below
            model = open_clip.create_model(name, device="cpu", force_quick_gelu=quick)
        state = without_ddp_prefix(ckpt["state_dict"])
        check_finite(state, path)
        check_dtypes(model.state_dict(), state, path)
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as e:
            raise MosaicError(f"{path}: weights do not fit the {name} its config describes (another architecture, or an "
                              f"edited file): {_one_line(e)}") from None
        model.to(torch.device(device))
        bundle = _bundle(model, name, cfg, quick, source=str(path))
    bundle.meta["checkpoint"] = {k: v for k, v in ckpt.items() if k not in ("state_dict", "optimizer", "scaler", "rng")}
    return bundle


def check_finite(state: dict, source: str | os.PathLike) -> None:
    """MosaicError when a floating-point tensor of `state` holds NaN or inf: such weights score 0% (or
    train on as NaN) without a word, so the checkpoint is refused where it is read."""
    import torch

    for key, value in state.items():
        if torch.is_tensor(value) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise MosaicError(f"{source}: its weights hold NaN or inf ({key}); the run that wrote them diverged or "
                              "the file is damaged: use an earlier checkpoint")


def check_fits(model, state: dict, source: str | os.PathLike, described: str) -> None:
    """MosaicError when `state` (a state_dict) does not fit `model`: a tensor missing, extra or of
    another shape, named with the count of the others (load_state_dict would list every one)."""
    own = model.state_dict()
    problems = [f"{k} is {list(state[k].shape)} there, {list(v.shape)} here" for k, v in own.items()
                if k in state and tuple(state[k].shape) != tuple(v.shape)]
    problems += [f"{k} is missing there" for k in own if k not in state]
    problems += [f"{k} is not in {described}" for k in state if k not in own]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise MosaicError(f"{source}: its weights do not fit {described}: {problems[0]}{more}")


def _one_line(error: Exception) -> str:
    """torch's load_state_dict error lists every mismatch on its own line: the first one, cut, and a count."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    problems = lines[1:] if len(lines) > 1 and lines[0].startswith("Error(s) in loading state_dict") else lines
    problems = problems or [type(error).__name__]
    first = problems[0] if len(problems[0]) <= 160 else problems[0][:160] + "..."
    return first + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")


class _OpenClipRecords(logging.Filter):
    """open_clip logs through the root logger's module functions (logging.warning, logging.info), not a
    logger of its own: its records, told apart by the file that made them, leave the root logger and
    go on through mosaictool's (WARNING and above; with `quiet`, ERROR and above)."""

    def __init__(self, quiet: bool) -> None:
        super().__init__()
        import open_clip

        self.folder, self.least = os.path.dirname(open_clip.__file__) + os.sep, logging.ERROR if quiet else logging.WARNING

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.pathname.startswith(self.folder):
            return True
        if record.levelno >= self.least:
            logger.log(record.levelno, record.getMessage())
        return False


@contextlib.contextmanager
def _open_clip_logs(*, quiet: bool):
    """open_clip's log records through mosaictool's logger while it builds a model (`quiet`: its notes
    below ERROR left out); the root logger's level, handlers and other records as they were.
    `logging.warning` configures the root logger (basicConfig: a stderr handler) when it has no
    handler: a NullHandler there meanwhile keeps a program's logging unconfigured."""
    root = logging.getLogger()
    rerouted, placeholder = _OpenClipRecords(quiet), logging.NullHandler()
    root.addFilter(rerouted)
    if not root.handlers:
        root.addHandler(placeholder)
    try:
        yield
    finally:
        root.removeFilter(rerouted)
        root.removeHandler(placeholder)


@contextlib.contextmanager
def _config_known(name: str, cfg: dict | None, *, replace: bool = False):
    """open_clip builds from its registry by name: a shipped config, a user's config (`replace`: over a
    config of that name) or a checkpoint's stored config of a name unknown here is registered under
    `name` while the model is built and taken out of open_clip's registry after, so a program building
    models keeps no trace of them there. `cfg` None: the name is open_clip's own."""
    import open_clip
    from open_clip import factory

    if cfg is None or not replace and open_clip.get_model_config(name) is not None:
        yield
        return
    with tempfile.TemporaryDirectory(prefix="mosaictool-cfg-") as tmpdir:
        path = Path(tmpdir) / f"{name}.json"
        path.write_text(json.dumps(cfg))
        open_clip.add_model_config(path)
        try:
            yield
        finally:
            # open_clip has no function to take a config out: its own list of paths and table of
            # configs (a rescan adds, never removes), the name's earlier config (if any) rescanned back
            factory._MODEL_CONFIG_PATHS.remove(path)
            factory._MODEL_CONFIGS.pop(name, None)
            factory._rescan_model_configs()


def load_model(
    checkpoint: str | None = None,
    model: str | None = None,
    pretrained: str | None = None,
    *,
    model_config_file: str | None = None,
    device: str = "cpu",
) -> ModelBundle:
    """What evaluate and tree-score call: a mosaictool checkpoint, or an open_clip name + weights."""
    if checkpoint:
        return load_checkpoint(checkpoint, device=device, expect_model=model)
    if not model and not model_config_file:
        raise MosaicError("give --checkpoint FILE, or --model NAME with --pretrained TAG_OR_FILE")
    return create(model or DEFAULT_MODEL, pretrained, model_config_file=model_config_file, device=device)
