"""The training loop for every method of mosaictool.methods on open_clip models, one process or torchrun.

Read top to bottom: config -> setup (process group, model, data, optimizer, resume) -> steps ->
final checkpoint. The loop names no method: the method (`--method`, built from TrainConfig.method
and .method_options) says which texts fill an image's slots, whether the forward pass adds dense
features, and what the loss is; the loop runs the model, the optimizer and the bookkeeping.

Files in the run folder (`out`):
  config.json      the full resolved config (also inside every checkpoint)
  metrics.jsonl    one line per logged step: every term of the method's loss, lr, logit_scale, samples/s,
                   texts per image; with --eval-bench, at the end of every epoch its headline (`eval/...`)
  tensorboard/     with --report-to tensorboard: the same numbers (+ texts/s, GPU memory) as event files
  last.pt          model + optimizer + scaler + RNG + step, every `save_every` steps (atomic); with --lora
                   the merged weights, and the LoRA model's own state for --resume (mosaictool.model.lora)
  final.pt         the trained model with its config and metadata (what evaluate and wise-ft read)
  mined_hard_images.json   with --hard-images K: the neighbours mined with the starting model
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mosaictool.errors import MosaicError

PRECISIONS = ("fp32", "bf16", "amp", "amp_bf16")
# adamw: open_clip's (and most recipes'); sgd (with momentum): the Probe paper's (seed 004 App. B)
OPTIMIZERS = ("adamw", "sgd")


@dataclass
class TrainConfig:
    data: str
    out: str
    method: str = "clip"  # a name of mosaictool.methods
    method_options: dict = field(default_factory=dict)  # the method's own flags (Method.options), by name
    image_root: str | None = None  # JSONL/Parquet data: folder the image paths are relative to
    skip_bad: bool = False
    # model
    model: str = "mosaic-tiny"
    pretrained: str | None = None  # open_clip tag, weights file, local-dir:, or a mosaictool checkpoint
    model_config: str | None = None  # a JSON model config (open_clip schema)
    force_quick_gelu: bool = False
    # hard images
    hard_images: int = 0  # mine K nearest-neighbour hard images with the starting model
    record_hard_images: bool | None = None  # use records' hard_images ids (default: the method's)
    # optimisation
    batch_size: int = 32  # images per rank per micro-batch (hard images come on top)
    epochs: int = 5
    steps: int | None = None  # optimizer steps; overrides epochs
    lr: float | None = None  # default: 1e-5 from pretrained weights (seed 000 App. H.1), 5e-4 from scratch
    optimizer: str = "adamw"  # one of OPTIMIZERS
    momentum: float = 0.9  # --optimizer sgd
    wd: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-6
    warmup: int = 50
    grad_clip: float | None = 1.0
    accum_freq: int = 1
    precision: str = "fp32"
    grad_checkpointing: bool = False
    lock_image: bool = False
    lock_text: bool = False
    lora: int = 0  # LoRA adapters of this rank on both towers, merged into final.pt (0: full fine-tuning)
    augment: bool = True  # random-resized crop; off = center crop, decoded once and cached
    local_loss: bool = False
    merge_equal_texts: bool = True  # equal texts in a batch = the same sub-graph (see losses.py)
    seed: int = 0
    # runtime
    device: str | None = None  # default: cuda if available
    num_workers: int = 0
    save_every: int = 0  # write last.pt every N steps (0: only at the end)
    log_every: int = 1
    quiet: bool = False
    report_to: str | None = None  # tensorboard, wandb or both, comma-separated (mosaictool.model.reporting)
    eval_bench: str | None = None  # benchmarks scored at the end of every epoch (evaluate's --bench syntax)
    eval_data_root: str | None = None  # where they are (evaluate's --data-root)

    def resolved(self) -> "TrainConfig":
        from mosaictool import methods

        cfg = dataclasses.replace(self)
        method = methods.create(cfg.method, cfg.method_options)
        cfg.method_options = dict(method.opts)  # every option, defaults included: the stored config is complete
        if cfg.precision not in PRECISIONS:
            raise MosaicError(f"--precision {cfg.precision!r}: choose one of {', '.join(PRECISIONS)}")
        if cfg.optimizer not in OPTIMIZERS:
            raise MosaicError(f"--optimizer {cfg.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")
        if not 0 <= cfg.momentum < 1:
            raise MosaicError(f"--momentum {cfg.momentum}: a fraction in [0, 1)")
        if cfg.lr is None:
            cfg.lr = 1e-5 if cfg.pretrained else 5e-4
        # absolute paths: the stored config must still work when resumed from another folder
        cfg.data = os.path.abspath(cfg.data) if cfg.data else cfg.data
        for name in ("image_root", "model_config", "pretrained", "eval_data_root"):
            value = getattr(cfg, name)
            if value and os.path.exists(value):
                setattr(cfg, name, os.path.abspath(value))
        if cfg.record_hard_images is None:
            cfg.record_hard_images = method.uses_hard_images
        for name in ("batch_size", "accum_freq", "log_every", "epochs"):
            if getattr(cfg, name) < 1:
                raise MosaicError(f"--{name.replace('_', '-')} must be at least 1")
        if cfg.steps is not None and cfg.steps < 1:
            raise MosaicError("--steps must be at least 1")
        if not (math.isfinite(cfg.lr) and cfg.lr > 0) or not (math.isfinite(cfg.wd) and cfg.wd >= 0):
            raise MosaicError(f"--lr {cfg.lr} / --wd {cfg.wd}: the learning rate must be a positive number, the weight "
                              "decay zero or more (finite)")
        if cfg.lora < 0:
            raise MosaicError(f"--lora {cfg.lora}: a rank of at least 1 (0: full fine-tuning)")
        if cfg.lock_image and cfg.lock_text:
            raise MosaicError("--lock-image and --lock-text together leave nothing to train")
        from mosaictool.model.reporting import parse_report_to

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


def train(cfg: TrainConfig, *, resume: bool = False, on_step: Callable[[int, dict, object], None] | None = None) -> Path:
    """Train and return the path of the final checkpoint (`out/final.pt`).

    With `resume=True` the run in `cfg.out` continues from its last.pt (or starts over if it never
    saved one) with the config stored there; `cfg` then only supplies the run folder and runtime
    options (num_workers, quiet, device; report_to when given). `on_step(step, metrics, model)` is
    called after every step (the model still holds that step's gradients).
    """
    import numpy as np
    import torch

    from mosaictool import methods
    from mosaictool.model import distributed as dist
    from mosaictool.model import openclip
    from mosaictool.model.data import (
        BatchPlan, ImageTransform, SamplerConfig, TrainData, TrainDataset, make_loader, mine_hard_images,
    )
    from mosaictool.model.batch import ContrastiveForward, Features, batch_features

    # ---- run folder, config, resume state -------------------------------------------------
    out = Path(cfg.out)
    state = None
    if resume:
        cfg, state = _resume_state(cfg, out)
    else:
        cfg = cfg.resolved()
        if (out / "final.pt").exists() or (out / "last.pt").exists():
            raise MosaicError(f"{out}: already holds a run; continue it with --resume {out}, or choose another --out")
    method = methods.create(cfg.method, cfg.method_options)
    info = dist.init(cfg.device)
    device = info.device

    if cfg.precision in ("amp", "amp_bf16") and not device.startswith("cuda"):
        raise MosaicError(f"--precision {cfg.precision} needs a GPU; on CPU use fp32 (or bf16)")
    random.seed(cfg.seed + info.rank)
    np.random.seed(cfg.seed + info.rank)

    # ---- model ----------------------------------------------------------------------------
    bundle = openclip.create(
        cfg.model, cfg.pretrained, model_config_file=cfg.model_config, force_quick_gelu=cfg.force_quick_gelu,
        device=device, seed=cfg.seed,
    )
    model = bundle.model
    if cfg.lora:  # before the locks: a locked tower freezes its adapters too
        from mosaictool.model import lora

        lora.add_lora(model, cfg.lora)
    if cfg.lock_image:
        model.lock_image_tower(unlocked_groups=0, freeze_bn_stats=True)
    if cfg.lock_text:
        model.lock_text_tower(unlocked_layers=0, freeze_layer_norm=True)
    if cfg.grad_checkpointing:
        model.set_grad_checkpointing(True)
    import open_clip

    pp = open_clip.get_model_preprocess_cfg(model)
    mean, std = pp.get("mean", open_clip.OPENAI_DATASET_MEAN), pp.get("std", open_clip.OPENAI_DATASET_STD)
    image_size = bundle.meta["model_cfg"]["vision_cfg"].get("image_size", 224)
    image_size = image_size[0] if isinstance(image_size, (list, tuple)) else image_size

    # ---- data -----------------------------------------------------------------------------
    data = TrainData.load(cfg.data, method=method, image_root=cfg.image_root, skip_bad=cfg.skip_bad)
    note = method.check_data(data.records, cfg.data)
    if note and info.is_main:
        print(f"note: {note}", file=sys.stderr)
    use_hard = False
    if cfg.record_hard_images:
        unknown = data.resolve_record_hard_images()
        use_hard = any(data.hard)
        if unknown and info.is_main:
            print(f"note: {unknown} hard_images id(s) are not in the training data and are ignored", file=sys.stderr)
    if cfg.hard_images > 0:
        mined_path = out / "mined_hard_images.json"
        if mined_path.exists():  # a resumed run mined them with its starting model already
            neighbours = json.loads(mined_path.read_text())
        else:
            neighbours = mine_hard_images(data, model, ImageTransform(image_size, augment=False), mean, std,
                                          k=cfg.hard_images, device=device)
            if info.is_main:
                out.mkdir(parents=True, exist_ok=True)
                _write_json(mined_path, neighbours)
        data.add_hard(neighbours)
        use_hard = True

    micro_per_epoch = len(data) // (cfg.batch_size * info.world_size)
    total_steps = cfg.steps or max(1, cfg.epochs * micro_per_epoch // cfg.accum_freq)
    sampler_cfg = SamplerConfig(method=method, batch_size=cfg.batch_size, seed=cfg.seed, use_hard=use_hard,
                                total_steps=total_steps, accum_freq=cfg.accum_freq)
    # --eval-bench: its cases loaded once, before the run folder appears (main rank: the others do not evaluate)
    epoch_eval = _EpochEval(cfg.eval_bench, cfg.eval_data_root, device) if cfg.eval_bench and info.is_main else None

    # ---- optimizer, schedule, precision -----------------------------------------------------
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        exclude = p.ndim < 2 or any(k in name for k in ("bn", "ln", "bias", "logit_scale", "gain"))
        (no_decay if exclude else decay).append(p)
    groups = [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": cfg.wd}]
    if cfg.optimizer == "sgd":  # torch's SGD: the weight decay is added to the gradient (L2)
        optimizer = torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, foreach=True)
    else:
        optimizer = torch.optim.AdamW(
            groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
            fused=True,  # one kernel for all parameters: ~50x faster than the per-tensor loop on CPU
        )
    scaler = torch.amp.GradScaler("cuda") if cfg.precision == "amp" else None
    autocast_dtype = {"bf16": torch.bfloat16, "amp_bf16": torch.bfloat16, "amp": torch.float16}.get(cfg.precision)
    device_type = "cuda" if device.startswith("cuda") else "cpu"

    def autocast():
        if autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device_type, dtype=autocast_dtype)

    def lr_at(step: int) -> float:
        if step < cfg.warmup:
            return cfg.lr * (step + 1) / cfg.warmup
        progress = (step - cfg.warmup) / max(1, total_steps - cfg.warmup)
        return 0.5 * (1 + math.cos(math.pi * progress)) * cfg.lr

    step = 0
    saved_step = state["step"] if state is not None else None  # of last.pt, named if the loss blows up
    if state is not None:
        # with --lora, last.pt's state_dict holds the merged weights; the LoRA model's own is beside them
        model.load_state_dict(state["lora_state"] if cfg.lora else
                              {k.removeprefix("module."): v for k, v in state["state_dict"].items()})
        optimizer.load_state_dict(state["optimizer"])
        if scaler is not None and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        step = state["step"]
        _restore_rng(state["rng"][min(info.rank, len(state["rng"]) - 1)])
    if resume and info.is_main:  # lines logged after the checkpoint (or before none) are logged again
        _truncate_metrics(out / "metrics.jsonl", step)
    from mosaictool.model.reporting import Reporter, parse_report_to

    reporter = Reporter(parse_report_to(cfg.report_to) if info.is_main else [], out, config=dataclasses.asdict(cfg),
                        device=device, start_step=step)

    train_model = ContrastiveForward(model)
    if info.distributed:
        ddp_kwargs = {"device_ids": [device]} if device_type == "cuda" else {}
        train_model = torch.nn.parallel.DistributedDataParallel(train_model, **ddp_kwargs)
    loss_fn = method.make_loss(local_loss=cfg.local_loss, rank=info.rank, world_size=info.world_size)

    dataset = TrainDataset(data, sampler_cfg, ImageTransform(image_size, augment=cfg.augment), bundle.tokenizer)
    plan = BatchPlan(len(data), sampler_cfg, rank=info.rank, world_size=info.world_size, start=step * cfg.accum_freq,
                     stop=total_steps * cfg.accum_freq, hard=data.hard)
    batches = iter(make_loader(dataset, plan, num_workers=cfg.num_workers, pin_memory=device_type == "cuda"))
    # the run folder appears once model, data and plan are usable: a refused --data or --model leaves none
    if info.is_main:
        out.mkdir(parents=True, exist_ok=True)
        _write_json(out / "config.json", dataclasses.asdict(cfg))

    def encode(batch):
        return batch_features(train_model, batch, mean=mean, std=std, device=device, autocast=autocast,
                              text_ids=cfg.merge_equal_texts, dense=method.dense)

    def backward(loss):
        (scaler.scale(loss) if scaler is not None else loss).backward()

    # ---- steps ------------------------------------------------------------------------------
    from tqdm import tqdm

    bar = tqdm(total=total_steps, initial=step, desc=f"train {cfg.method}", unit="step", file=sys.stderr,
               disable=cfg.quiet or not info.is_main or not sys.stderr.isatty(), dynamic_ncols=True)
    model.train()
    last_time = time.perf_counter()
    while step < total_steps:
        lr = lr_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        try:
            micro = [next(batches) for _ in range(cfg.accum_freq)]
        except MosaicError as e:  # from a DataLoader worker it comes back with the worker's traceback in its text
            raise MosaicError(str(e).strip().splitlines()[-1].removeprefix("mosaictool.errors.MosaicError: ")) from None
        optimizer.zero_grad(set_to_none=True)
        if cfg.accum_freq == 1:
            losses = loss_fn(encode(micro[0]))
            backward(losses["loss"])
        else:
            # Features of every micro-batch without gradient first; then each micro-batch again with
            # gradient, joined with the others' cached features field by field (Features.cat), so
            # the loss sees the big batch's layout.
            with torch.no_grad():
                cached = [encode(b) for b in micro]
            for j, b in enumerate(micro):
                last = j == len(micro) - 1
                sync = contextlib.nullcontext() if last or not info.distributed else train_model.no_sync()
                with sync:
                    live = encode(b)
                    parts = [live if m == j else cached[m] for m in range(len(micro))]
                    scale = live.logit_scale if last else live.logit_scale.detach()  # its gradient counted once
                    losses = loss_fn(Features.cat(parts, scale))
                    backward(losses["loss"])
        if scaler is not None:
            scaler.unscale_(optimizer)
        if cfg.grad_clip:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        elif scaler is None:  # (amp's scaler skips steps with inf gradients itself)
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
        else:
            grad_norm = None
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        step += 1

        now = time.perf_counter()
        images_per_step = sum(b.size for b in micro) * info.world_size
        pos_per_image = sum(float(b.pos_mask.sum()) for b in micro) / sum(b.size for b in micro)
        neg_per_image = sum(float(b.neg_mask.sum()) for b in micro) / sum(b.size for b in micro)
        metrics = {
            "step": step,
            "epoch": (step * cfg.accum_freq - 1) // micro_per_epoch,
            **{term: dist.mean_over_ranks(value.detach().item(), info) for term, value in losses.items()},
            "lr": lr,
            "logit_scale": model.logit_scale.detach().exp().item(),
            "samples_per_s": images_per_step / max(now - last_time, 1e-9),
            "texts_per_image": pos_per_image + neg_per_image,
            "pos_per_image": pos_per_image,
            "neg_per_image": neg_per_image,
        }
        last_time = now
        blown = grad_norm is not None and scaler is None and not torch.isfinite(grad_norm)  # same on every rank
        if not math.isfinite(metrics["loss"]) or blown:  # the loss: the mean over ranks
            if saved_step == step - 1 and info.is_main:  # last.pt holds the weights that gave this loss
                saved_step = _drop_last_checkpoint(out / "last.pt")
            kept = (f"the last good checkpoint {out / 'last.pt'} (step {saved_step}) is kept: start a new run "
                    f"from it (--pretrained {out / 'last.pt'}) with a lower --lr" if saved_step else
                    f"no checkpoint was written yet (--save-every {cfg.save_every}): start again with a lower --lr")
            what = f"the loss is {metrics['loss']}" + (f", the gradient norm {float(grad_norm)}" if blown else "")
            reporter.close()  # the curves up to here are written out
            raise MosaicError(f"step {step}: {what} (not finite), training stopped; {kept}, --grad-clip on, or "
                              "--precision fp32")
        reporter.log_step(step, metrics)
        evaluated = False
        epoch_ends = (step * cfg.accum_freq) // micro_per_epoch > ((step - 1) * cfg.accum_freq) // micro_per_epoch
        if epoch_eval is not None and (epoch_ends or step == total_steps):
            # with --lora the merged copy, as checkpoints hold it (peft's attention forward would round the base)
            headline = epoch_eval(dataclasses.replace(bundle, model=lora.merged_model(model)) if cfg.lora else bundle)
            model.train()
            reporter.log_eval(step, headline)
            metrics.update({f"eval/{name}": value for name, value in headline.items()})
            evaluated = True
            last_time = time.perf_counter()  # the next step's samples/s leaves the evaluation out
            if not cfg.quiet:
                print(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in headline.items()), file=sys.stderr)
        if info.is_main and (step % cfg.log_every == 0 or step == total_steps or evaluated):
            with open(out / "metrics.jsonl", "a") as f:
                f.write(json.dumps(metrics) + "\n")
        bar.update(1)
        bar.set_postfix(loss=f"{metrics['loss']:.3f}", lr=f"{lr:.2e}")
        if cfg.save_every and step % cfg.save_every == 0 and step < total_steps:
            rng = _gather_rng(info)
            if info.is_main:
                extra = {"optimizer": optimizer.state_dict(), "scaler": scaler.state_dict() if scaler else None}
                position = {"micro_batch": step * cfg.accum_freq, "micro_batches_per_epoch": micro_per_epoch}
                saved = bundle
                if cfg.lora:  # plain merged weights (evaluate, --pretrained read them) + the LoRA model for --resume
                    saved = dataclasses.replace(bundle, model=lora.merged_model(model))
                    extra["lora_state"] = model.state_dict()
                openclip.save_checkpoint(out / "last.pt", saved, config=dataclasses.asdict(cfg), step=step,
                                         total_steps=total_steps, rng=rng, data_position=position,
                                         keep_previous=True, **extra)
            saved_step = step
        if on_step is not None:
            on_step(step, metrics, model)
    bar.close()
    reporter.close()

    final = out / "final.pt"
    if info.is_main:
        if cfg.lora:  # plain open_clip weights (adapters folded in) for evaluate, wise-ft and open_clip
            bundle = dataclasses.replace(bundle, model=lora.merged_model(model))
        openclip.save_checkpoint(final, bundle, config=dataclasses.asdict(cfg), step=step, total_steps=total_steps,
                                 method=cfg.method)
        for resumable in (out / "last.pt", openclip.previous_checkpoint(out / "last.pt")):
            if resumable.exists():
                os.unlink(resumable)
    dist.shutdown(info)  # a barrier first: every rank returns once final.pt is written
    return final


# ---- helpers ----------------------------------------------------------------------------------


def _resume_state(cfg: TrainConfig, out: Path) -> tuple[TrainConfig, dict | None]:
    from mosaictool.model import openclip

    if (out / "final.pt").exists():
        raise MosaicError(f"{out}: the run already finished (final.pt); nothing to resume")
    config_file = out / "config.json"
    if not config_file.exists():
        raise MosaicError(f"{out}: no run to resume (config.json missing); start it without --resume")
    stored = json.loads(config_file.read_text())
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    resumed = TrainConfig(**{k: v for k, v in stored.items() if k in known})
    # configs written before methods had their own options kept them at the top level
    from mosaictool import methods

    declared = {o.name for o in methods.get(resumed.method).options}
    resumed.method_options = {**{k: v for k, v in stored.items() if k in declared and k not in known},
                              **resumed.method_options}
    resumed.out = str(out)
    for runtime in ("num_workers", "quiet", "device"):
        setattr(resumed, runtime, getattr(cfg, runtime))
    if cfg.report_to is not None:  # given again on --resume: it replaces the stored one
        resumed.report_to = cfg.report_to
    state = openclip.read_resume_checkpoint(out / "last.pt")  # a truncated last.pt: the previous one
    return resumed, state


class _EpochEval:
    """--eval-bench: the benchmarks' cases loaded once, scored with the model being trained by the engine of
    `mosaictool evaluate`. Returns the headline: each benchmark's `headline` rows, or all its rows when it has
    none, as {'BENCH/SUBTASK/METRIC': value}."""

    def __init__(self, spec: str, root: str, device: str):
        from mosaictool.bench import get
        from mosaictool.bench.engine import EngineOptions, parse_bench_spec, prepare

        self.options = EngineOptions(device=device, quiet=True)
        self.prepared = [prepare(get(name), Path(root), subs, self.options) for name, subs in parse_bench_spec(spec)]

    def __call__(self, bundle) -> dict[str, float]:
        from mosaictool.bench.base import HEADLINE
        from mosaictool.bench.engine import Encoder, score_prepared

        headline = {}
        with _rng_kept(self.options.device):  # the evaluation's loaders draw seeds: training goes on as without it
            encoder = Encoder(bundle, self.options)
            for prep in self.prepared:
                rows = [r for r in score_prepared(prep, encoder) if not r.get("detail")]
                rows = [r for r in rows if r["subtask"] == HEADLINE] or rows
                headline.update({f"{prep.bench.name}/{r['subtask']}/{r['metric']}": float(r["value"]) for r in rows})
        return headline


@contextlib.contextmanager
def _rng_kept(device: str):
    state = _rng_state(device)
    try:
        yield
    finally:
        _restore_rng(state)


def _drop_last_checkpoint(path: Path) -> int | None:
    """Put the previous checkpoint back in place of `path`; returns its step (None: there was none)."""
    from mosaictool.model import openclip

    previous = openclip.previous_checkpoint(path)
    if not previous.exists():
        path.unlink(missing_ok=True)
        return None
    os.replace(previous, path)
    return openclip.read_checkpoint(path)["step"]


def _gather_rng(info) -> list[dict]:
    """RNG states of every rank (for the checkpoint)."""
    state = _rng_state(info.device)
    if not info.distributed:
        return [state]
    import torch.distributed

    states: list = [None] * info.world_size
    torch.distributed.all_gather_object(states, state)
    return states


def _rng_state(device: str) -> dict:
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and device.startswith("cuda"):
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def _restore_rng(state: dict) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop lines logged after the checkpoint we resume from (they will be logged again)."""
    if not path.exists():
        return
    keep = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["step"] <= step]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(line + "\n" for line in keep))
    os.replace(tmp, path)


def _write_json(path: Path, value) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(value, indent=1) + "\n")
    os.replace(tmp, path)
