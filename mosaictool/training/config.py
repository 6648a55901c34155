"""What a training run is: TrainConfig, its checks (`resolved`) and the papers' named recipes.

The stored config (config.json, and inside every checkpoint) is the resolved one: every field and
every method option filled in, paths absolute, so a run can be resumed or repeated from it alone.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field

from mosaictool.errors import MosaicError
from mosaictool.records import Seed, Workers, check_flags

# Each numeric field declares what it accepts (mosaictool.records checks flags and config.json by it).
Count = Annotated[int, Field(ge=0)]
AtLeastOne = Annotated[int, Field(ge=1)]
PositiveNumber = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeNumber = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]  # [0, 1): momentum, Adam's betas

PRECISIONS = ("fp32", "bf16", "amp", "amp_bf16")
# adamw: open_clip's (and most recipes'); sgd (with momentum): the Probe paper's (Schiappa et al. 2023, App. B)
OPTIMIZERS = ("adamw", "sgd")


@dataclass
class TrainConfig:
    data: str
    out: str
    method: str = "clip"  # a name of mosaictool.methods
    method_options: dict = field(default_factory=dict)  # the method's own flags (Method.options), by name
    recipe: str | None = None  # the method's named recipe these settings came from (with_recipe), if any
    image_root: str | None = None  # JSONL/Parquet data: folder the image paths are relative to
    texts: str | None = None  # records joined by key to the samples of image shards (img2dataset's) in `data`
    allow_outside_root: bool = False  # read images named outside image_root (images.image_path)
    skip_bad: bool = False
    # model
    model: str = "mosaic-tiny"
    pretrained: str | None = None  # open_clip tag, weights file, local-dir:, or a mosaictool checkpoint
    model_config: str | None = None  # a JSON model config (open_clip schema)
    force_quick_gelu: bool = False
    # hard images
    hard_images: Count = 0  # mine K nearest-neighbour hard images with the starting model
    record_hard_images: bool | None = None  # use records' hard_images ids (default: the method's)
    # optimisation
    batch_size: AtLeastOne = 32  # images per rank per micro-batch (hard images come on top)
    epochs: AtLeastOne = 5
    steps: AtLeastOne | None = None  # optimizer steps; overrides epochs
    lr: PositiveNumber | None = None  # default: 1e-5 from pretrained weights (Singh et al. 2023, App. H.1), 5e-4 from scratch
    optimizer: str = "adamw"  # one of OPTIMIZERS
    momentum: Fraction = 0.9  # --optimizer sgd
    wd: NonNegativeNumber = 0.1
    beta1: Fraction = 0.9
    beta2: Fraction = 0.98
    eps: PositiveNumber = 1e-6
    warmup: Count = 50
    grad_clip: Annotated[float, Field(gt=0, allow_inf_nan=False, description="0 turns clipping off")] | None = 1.0
    accum_freq: AtLeastOne = 1
    precision: str = "fp32"
    grad_checkpointing: bool = False
    lock_image: bool = False
    lock_text: bool = False
    lora: Count = 0  # LoRA adapters of this rank on both towers, merged into final.pt (0: full fine-tuning)
    augment: bool = True  # random-resized crop; off = center crop, decoded once and cached
    crop_scale: tuple[float, float] = (0.8, 1.0)  # the crop's share of the image area (open_clip's fine-tuning aug)
    images_on_device: bool = False  # --no-augment only: every image decoded once and kept on the training device
    local_loss: bool = False
    merge_equal_texts: bool | None = None  # equal texts in a batch = the same sub-graph (default: the method's)
    seed: Seed = 0
    # runtime
    device: str | None = None  # default: cuda if available
    num_workers: Workers = 0
    save_every: Count = 0  # write last.pt every N steps (0: only at the end)
    log_every: AtLeastOne = 1
    quiet: bool = False
    report_to: str | None = None  # tensorboard, wandb or both, comma-separated (mosaictool.training.reporting)
    eval_bench: str | None = None  # benchmarks scored at the end of every epoch (evaluate's --bench syntax)
    eval_data_root: str | None = None  # where they are (evaluate's --data-root)

    def resolved(self) -> "TrainConfig":
        from mosaictool import methods

        cfg = dataclasses.replace(self)
        check_flags(cfg)
        method = methods.create(cfg.method, cfg.method_options)
        cfg.method_options = dict(method.opts)  # every option, defaults included: the stored config is complete
        if cfg.precision not in PRECISIONS:
            raise MosaicError(f"--precision {cfg.precision!r}: choose one of {', '.join(PRECISIONS)}")
        if cfg.optimizer not in OPTIMIZERS:
            raise MosaicError(f"--optimizer {cfg.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")
        if cfg.lr is None:
            cfg.lr = 1e-5 if cfg.pretrained else 5e-4
        if cfg.merge_equal_texts is None:
            cfg.merge_equal_texts = method.merge_equal_texts
        cfg.crop_scale = tuple(cfg.crop_scale)  # a list once read back from config.json
        low, high = cfg.crop_scale
        if not 0 < low <= high <= 1:
            raise MosaicError(f"--crop-scale {low},{high}: two area fractions with 0 < low <= high <= 1, e.g. 0.8,1")
        # absolute paths: the stored config must still work when resumed from another folder
        cfg.data = os.path.abspath(cfg.data) if cfg.data else cfg.data
        for name in ("image_root", "texts", "model_config", "pretrained", "eval_data_root"):
            value = getattr(cfg, name)
            if value and os.path.exists(value):
                setattr(cfg, name, os.path.abspath(value))
        if cfg.record_hard_images is None:
            cfg.record_hard_images = method.uses_hard_images
        if cfg.images_on_device and cfg.augment:
            raise MosaicError("--images-on-device keeps each image decoded once: it needs --no-augment (a fixed center crop)")
        if cfg.lock_image and cfg.lock_text:
            raise MosaicError("--lock-image and --lock-text together leave nothing to train")
        from mosaictool.training.reporting import parse_report_to

        cfg.report_to = ",".join(parse_report_to(cfg.report_to)) or None
        if cfg.eval_bench:
            if not cfg.eval_data_root or not os.path.isdir(cfg.eval_data_root):
                raise MosaicError(f"--eval-bench {cfg.eval_bench}: give --eval-data-root, the folder holding the "
                                  f"benchmark (not found: {cfg.eval_data_root})")
            from mosaictool.bench import get
            from mosaictool.bench.engine import parse_bench_spec

            for name, _ in parse_bench_spec(cfg.eval_bench):
                get(name)  # an unknown name fails here, before any training
        return cfg


def with_recipe(cfg: TrainConfig, name: str, given: Collection[str] = ()) -> TrainConfig:
    """`cfg` with the method's recipe `name` (Method.recipes) filled in, except the fields in `given`
    (flags the user gave explicitly, and method options given in cfg.method_options, win)."""
    from mosaictool import methods

    recipes = methods.get(cfg.method).recipes
    if name not in recipes:
        have = ", ".join(recipes) or "none"
        raise MosaicError(f"--recipe {name!r}: --method {cfg.method} has no such recipe (its recipes: {have})")
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    recipe = dict(recipes[name])
    options = {**recipe.pop("method_options", {}), **cfg.method_options}
    unknown = sorted(set(recipe) - fields)
    if unknown:  # a recipe is code: a wrong field name is our bug, named here rather than ignored
        raise MosaicError(f"recipe {cfg.method}:{name} sets unknown TrainConfig fields {unknown}")
    chosen = {k: v for k, v in recipe.items() if k not in given}
    return dataclasses.replace(cfg, **chosen, method_options=options, recipe=name)


def check_step_fits(cfg: TrainConfig, method, model_cfg: dict, device: str) -> None:
    """MosaicError naming the flags when one optimizer step cannot fit in memory, estimated from below
    before anything is allocated: the --accum-freq micro-batches of images (uint8) and token ids the
    loop holds at once, and one micro-batch's text slots (--max-pos/--max-neg/--hn-per-image each:
    a feature of embed_dim floats and its row of logits against the batch, forward and gradient)."""
    from mosaictool.records import machine_memory

    vision, text = model_cfg.get("vision_cfg") or {}, model_cfg.get("text_cfg") or {}
    size = vision.get("image_size", 224)
    pixels = size * size if isinstance(size, int) else size[0] * size[1]
    context, embed = text.get("context_length", 77), model_cfg.get("embed_dim", 512)
    kp, kn = method.slots(1, 1)  # the full slots (a curriculum's first stage has fewer)
    held = cfg.accum_freq * cfg.batch_size * (3 * pixels + 8 * context)
    slots = 2 * cfg.batch_size * (kp + kn) * (embed + cfg.batch_size) * 4
    memory, where = machine_memory(), "this machine's memory"
    if device.startswith("cuda"):
        import torch

        memory, where = torch.cuda.get_device_properties(torch.device(device)).total_memory, f"{device}'s memory"
    if memory is None:
        return
    if held > memory:
        raise MosaicError(f"--accum-freq {cfg.accum_freq} x --batch-size {cfg.batch_size}: the micro-batches of one step hold "
                          f"{held / 2**30:,.0f} GiB at least, more than {where} ({memory / 2**30:,.0f} GiB); lower them")
    if slots > memory:
        names = "/".join(o.flag for o in method.options if o.type is int and o.name in ("max_pos", "max_neg", "hn_per_image"))
        raise MosaicError(f"{names or '--method'} ({kp} positive and {kn} negative texts per image) x --batch-size {cfg.batch_size}: "
                          f"one micro-batch's text slots need {slots / 2**30:,.0f} GiB at least, more than {where} "
                          f"({memory / 2**30:,.0f} GiB); lower them")
