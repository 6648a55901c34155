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


def setting(default=dataclasses.MISSING, help=None, *, factory=dataclasses.MISSING, flag: bool = True, text: str | None = None,
            path: bool = False, flags: tuple[str, ...] = (), metavar: str | None = None):
    """A field of a config dataclass (TrainConfig, DemoConfig) with what its command and API function
    show of it: `help`, the flag's help (None: the option every command shares, mosaictool.cli.common's;
    a command may word it itself: config_options' `helps`); `flag=False`: no flag of its own (set by recipes, the
    method's own flags or the code); `text`: the flag's form of the default (crop_scale's "0.8,1");
    `path`: a file or folder, which the API also takes as an os.PathLike; `flags`: the flag's
    spellings where they are not --NAME-WITH-DASHES (and its --no- form for a switch); `metavar`: its
    value's name in --help. The flag's bounds are the field's annotation."""
    return field(default=default, default_factory=factory,
                 metadata={"help": help, "flag": flag, "text": text, "path": path, "flags": flags, "metavar": metavar})


@dataclass
class TrainConfig:
    """Every setting of a training run. The flags of `mosaictool train` and the keywords of
    `mosaictool.train` are made from these fields (name, help, bounds, default): a new setting is one
    field here."""

    data: str = setting(help="Shards (folder, glob or {a..b} pattern) or a JSONL/Parquet file.", path=True)
    out: str = setting(help="Run folder: config.json, metrics.jsonl, last.pt, final.pt.", path=True)
    method: str = setting("clip", "A training method (listed below: METHODS).")  # a name of mosaictool.methods
    # the method's own flags (Method.options), by name: each is a flag of its own (cli.train.method_parameters)
    method_options: dict = setting(factory=dict, flag=False)
    # the method's named recipe these settings came from (with_recipe), if any
    recipe: str | None = setting(None, "The method's paper recipe by name (METHODS lists each method's recipes), e.g. --method fsc-clip "
                                       "--recipe paper: its optimizer, lr, batch, epochs, precision, ...; flags you give explicitly win.")
    image_root: str | None = setting(None, "JSONL/Parquet data: folder of the image paths (default: the file's folder).", path=True)
    # records joined by key to the samples of image shards (img2dataset's) in `data`
    texts: str | None = setting(
        None, "Records (template's JSONL/Parquet, made by `parse SHARDS`) joined by key to the images of --data's WebDataset "
              "shards (img2dataset's): no second copy of the images. A sample without a record trains on its .txt caption "
              "without negatives; a record no sample has is an error (--skip-bad: counted). "
              "Example: --data 'cc3m/{00000..00331}.tar' --texts cc3m-texts.parquet", path=True)
    allow_outside_root: bool = setting(False)  # read images named outside image_root (images.image_path)
    skip_bad: bool = setting(False)
    # model
    model: str = setting("mosaic-tiny", "open_clip model name or a shipped config (mosaic-tiny).")
    pretrained: str | None = setting(None, "open_clip tag, weights file, local-dir:FOLDER or a mosaictool checkpoint.")
    model_config: str | None = setting(None, "JSON model config (open_clip schema) for a custom architecture.", path=True)
    force_quick_gelu: bool = setting(False, "QuickGELU activations (OpenAI weights); prefer a -quickgelu model name.")
    # hard images
    hard_images: Count = setting(0, "Mine K nearest-neighbour hard images with the starting model (0: off).")
    record_hard_images: bool | None = setting(None, "Use records' hard_images ids (default: the method's; on for negclip).")
    # optimisation
    batch_size: AtLeastOne = setting(32, "Images per process per micro-batch (hard images come on top).")
    epochs: AtLeastOne = setting(5, "Passes over the data.")
    steps: AtLeastOne | None = setting(None, "Optimizer steps (overrides --epochs).")
    # default: 1e-5 from pretrained weights (Singh et al. 2023, App. H.1), 5e-4 from scratch
    lr: PositiveNumber | None = setting(None, "Peak learning rate (default 1e-5 with --pretrained, else 5e-4).")
    optimizer: str = setting("adamw", "adamw | sgd (with --momentum; the Probe paper's: --optimizer sgd --lr 1e-3 --wd 1e-4).")
    momentum: Fraction = setting(0.9, "SGD momentum (--optimizer sgd).")
    wd: NonNegativeNumber = setting(0.1, "Weight decay (not on gains, biases, logit_scale); decoupled for adamw, L2 for sgd.")
    # Adam's betas and eps: open_clip's fine-tuning values; the papers' recipes set them, no flag does
    beta1: Fraction = setting(0.9, flag=False)
    beta2: Fraction = setting(0.98, flag=False)
    eps: PositiveNumber = setting(1e-6, flag=False)
    warmup: Count = setting(50, "Linear warmup steps before the cosine decay.")
    grad_clip: Annotated[float, Field(gt=0, allow_inf_nan=False, description="0 turns clipping off")] | None = setting(
        1.0, "Gradient norm clip (0: off).")
    accum_freq: AtLeastOne = setting(1, "Micro-batches per optimizer step (the loss sees them all).")
    precision: str = setting("fp32", "fp32 | bf16 | amp | amp_bf16 (amp, fp16 with a loss scaler, needs a GPU; amp_bf16 also runs on CPU).")
    grad_checkpointing: bool = setting(False, "Recompute activations in backward to save memory.")
    lock_image: bool = setting(False, "Freeze the image tower.")
    lock_text: bool = setting(False, "Freeze the text tower.")
    lora: Count = setting(
        0, "Train LoRA adapters of this rank (peft; every adapted weight W + B A / rank, a loralib-style conv1 adapter, "
           "as FSC-CLIP's code) on both towers instead of all weights, e.g. --lora 4 with --lr 5e-5 (FSC-CLIP's; --recipe paper-lora); "
           "final.pt holds them merged into plain weights (0: full fine-tuning).")
    augment: bool = setting(True, "Random-resized-crop augmentation (off: center crop, cached).")
    images_on_device: bool = setting(False, "With --no-augment: decode every image once into one tensor on the "
                                            "training device (GPU memory: N x 3 x S x S bytes); a step gathers its images there.")
    # the crop's share of the image area (open_clip's fine-tuning aug)
    crop_scale: tuple[float, float] = setting((0.8, 1.0), "The random crop's share of the image area, LOW,HIGH (FSC-CLIP's recipe: 0.9,1).",
                                              text="0.8,1")
    local_loss: bool = setting(False, "torchrun: each process computes its own rows of the loss.")
    merge_equal_texts: bool | None = setting(
        None, "Equal texts in a batch are one sub-graph: positives of every image owning them, never its "
              "negatives (default: the method's; off for fsc-clip, whose paper labels captions by position).")
    seed: Seed = setting(0, "Seed of the initialisation, the data order and every random draw.")
    # runtime
    device: str | None = setting(None, "cpu or cuda (default: cuda when available).")
    num_workers: Workers = setting(0, "Data loader worker processes.")
    save_every: Count = setting(0, "Write a resumable checkpoint every N steps (0: only the final one).")
    log_every: AtLeastOne = setting(1, "Append a metrics line every N steps.")
    quiet: bool = setting(False)
    report_to: str | None = setting(
        None, "Also log every loss term, lr, samples/s, texts/s and GPU memory to tensorboard (OUT/tensorboard/), "
              "wandb or both (tensorboard,wandb); with --resume it replaces the run's own. Default: off.")
    eval_bench: str | None = setting(
        None, "Score these benchmarks (evaluate's --bench syntax, e.g. world-val) at the end of every epoch; their "
              "headline goes to metrics.jsonl and --report-to.")
    eval_data_root: str | None = setting(None, "Folder holding the --eval-bench benchmarks (evaluate's --data-root).", path=True)

    def resolved(self) -> "TrainConfig":
        from mosaictool import methods

        cfg = dataclasses.replace(self)
        check_flags(cfg)
        method = methods.create(cfg.method, cfg.method_options)
        cfg.method_options = dict(method.opts)  # every option, defaults included: the stored config is complete
        _check_choices(cfg)
        if cfg.lr is None:
            cfg.lr = 1e-5 if cfg.pretrained else 5e-4
        if cfg.merge_equal_texts is None:
            cfg.merge_equal_texts = method.merge_equal_texts
        _check_crop_scale(cfg)
        _make_paths_absolute(cfg)
        if cfg.record_hard_images is None:
            cfg.record_hard_images = method.uses_hard_images
        _check_exclusive_flags(cfg)
        from mosaictool.training.reporting import parse_report_to

        cfg.report_to = ",".join(parse_report_to(cfg.report_to)) or None
        _check_eval_bench(cfg)
        return cfg


def _check_choices(cfg: TrainConfig) -> None:
    """--precision and --optimizer name one of the known choices: a typo fails before any model is built."""
    if cfg.precision not in PRECISIONS:
        raise MosaicError(f"--precision {cfg.precision!r}: choose one of {', '.join(PRECISIONS)}")
    if cfg.optimizer not in OPTIMIZERS:
        raise MosaicError(f"--optimizer {cfg.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")


def _check_crop_scale(cfg: TrainConfig) -> None:
    """--crop-scale as a tuple (a list once read back from config.json) of two area fractions in order."""
    cfg.crop_scale = tuple(cfg.crop_scale)
    low, high = cfg.crop_scale
    if not 0 < low <= high <= 1:
        raise MosaicError(f"--crop-scale {low},{high}: two area fractions with 0 < low <= high <= 1, e.g. 0.8,1")


def _make_paths_absolute(cfg: TrainConfig) -> None:
    """Absolute paths: the stored config must still work when resumed from another folder."""
    cfg.data = os.path.abspath(cfg.data) if cfg.data else cfg.data
    for name in ("image_root", "texts", "model_config", "pretrained", "eval_data_root"):
        value = getattr(cfg, name)
        if value and os.path.exists(value):
            setattr(cfg, name, os.path.abspath(value))


def _check_exclusive_flags(cfg: TrainConfig) -> None:
    """Flags that contradict each other, named together rather than one silently winning."""
    if cfg.images_on_device and cfg.augment:
        raise MosaicError("--images-on-device keeps each image decoded once: it needs --no-augment (a fixed center crop)")
    if cfg.lock_image and cfg.lock_text:
        raise MosaicError("--lock-image and --lock-text together leave nothing to train")


def _check_eval_bench(cfg: TrainConfig) -> None:
    """--eval-bench's folder and benchmark names, checked before any training rather than at the first epoch's end."""
    if not cfg.eval_bench:
        return
    if not cfg.eval_data_root or not os.path.isdir(cfg.eval_data_root):
        raise MosaicError(f"--eval-bench {cfg.eval_bench}: give --eval-data-root, the folder holding the "
                          f"benchmark (not found: {cfg.eval_data_root})")
    from mosaictool.bench import get
    from mosaictool.bench.engine import parse_bench_spec

    for name, _ in parse_bench_spec(cfg.eval_bench):
        get(name)  # an unknown name fails here


def flag_fields(config: type = None) -> list[dataclasses.Field]:
    """The fields of `config` (TrainConfig or a subclass) that are settings of `mosaictool train` (a
    flag each) and of `mosaictool.train` (a keyword each), in the order of the flags."""
    return [f for f in dataclasses.fields(config or TrainConfig) if f.metadata.get("flag", True)]


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
