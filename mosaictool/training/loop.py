"""The training loop for every method of mosaictool.methods on open_clip models, one process or torchrun.

Read `train` top to bottom: set up (config, process group, model, data, optimizer, resume) -> steps
-> final checkpoint. The loop names no method: the method (`--method`, built from TrainConfig.method
and .method_options) says which texts fill an image's slots, whether the forward pass adds dense
features, and what the loss is; the loop runs the model, the optimizer and the bookkeeping.

Files in the run folder (`out`):
  config.json      the full resolved config (also inside every checkpoint)
  metrics.jsonl    one line per logged step: every term of the method's loss, lr, logit_scale, samples/s,
                   texts per image; with --eval-bench, at the end of every epoch its headline (`eval/...`)
  tensorboard/     with --report-to tensorboard: the same numbers (+ texts/s, GPU memory) as event files
  last.pt          model + optimizer + scaler + RNG + step, every `save_every` steps (atomic); with --lora
                   the merged weights, and the LoRA model's own state for --resume (checkpoints.py)
  final.pt         the trained model with its config and metadata (what evaluate and wise-ft read)
  mined_hard_images.json   with --hard-images K: the neighbours mined with the starting model
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from mosaictool import methods
from mosaictool.errors import MosaicError
from mosaictool.locks import folder_lock, main_process
from mosaictool.model import lora, openclip
from mosaictool.model.openclip import ModelBundle
from mosaictool.training import distributed as dist
from mosaictool.training.batch import Batch, make_forward_backward
from mosaictool.training.checkpoints import Checkpoints, prepare_run
from mosaictool.training.config import TrainConfig, check_step_fits
from mosaictool.training.data import load_run_data
from mosaictool.training.distributed import DistInfo
from mosaictool.training.evaluation import EpochEval
from mosaictool.training.loader import run_batches
from mosaictool.training.reporting import Reporter, parse_report_to
from mosaictool.training.sampler import BatchPlan, SamplerConfig
from mosaictool.training.shards import ShardCache
from mosaictool.training.transform import ImagePrep


def train(cfg: TrainConfig, *, resume: bool = False, on_step: Callable[[int, dict, object], None] | None = None,
          shards: ShardCache | None = None) -> Path:
    """Train and return the path of the final checkpoint (`out/final.pt`).

    With `resume=True` the run in `cfg.out` continues from its last.pt (or starts over if it never
    saved one) with the config stored there; `cfg` then only supplies the run folder and runtime
    options (num_workers, quiet, device; report_to when given). `on_step(step, metrics, model)` is
    called after every step (the model still holds that step's gradients). `shards`: the process's
    ShardCache (shards indexed, and images decoded, once for every run); without one the run
    indexes its shards itself.
    """
    # one writer per run folder: the main process of a torchrun job holds its lock for the whole run
    with folder_lock(cfg.out, "mosaictool train") if main_process() else contextlib.nullcontext():
        return run_loop(setup(cfg, resume, shards), on_step)


def run_loop(run: Run, on_step: Callable[[int, dict, object], None] | None = None) -> Path:
    """The steps of a set-up run, then its final checkpoint; -> the final checkpoint's path."""
    cfg, model, info = run.cfg, run.bundle.model, run.info
    bar = _progress_bar(cfg, info, run.total_steps, run.step)
    model.train()
    last_time = time.perf_counter()
    while run.step < run.total_steps:
        lr = _set_lr(run.optimizer, lr_at(cfg, run.step, run.total_steps))
        micro = _next_micro_batches(run.batches, cfg.accum_freq)
        run.optimizer.zero_grad(set_to_none=True)
        losses = run.forward_backward(micro)
        grad_norm = run.precision.step(run.optimizer, model, cfg.grad_clip)
        run.step += 1
        step = run.step

        now = time.perf_counter()
        metrics = step_metrics(run, micro, losses, lr, now - last_time)
        last_time = now
        blown = grad_norm is not None and run.precision.scaler is None and not torch.isfinite(grad_norm)  # same on every rank
        if not math.isfinite(metrics["loss"]) or blown:  # the loss: the mean over ranks
            run.reporter.close()  # the curves up to here are written out
            what = f"the loss is {metrics['loss']}" + (f", the gradient norm {float(grad_norm)}" if blown else "")
            raise run.checkpoints.diverged(step, what)
        run.reporter.log_step(step, metrics)
        evaluated = run.epoch_eval is not None and run.epoch_eval.due(step)
        if evaluated:
            run.epoch_eval.at_step(step, run.bundle, metrics, run.reporter, quiet=cfg.quiet)
            last_time = time.perf_counter()  # the next step's samples/s leaves the evaluation out
        if step % cfg.log_every == 0 or step == run.total_steps or evaluated:
            run.reporter.write_line(metrics)
        bar.update(1)
        bar.set_postfix(loss=f"{metrics['loss']:.3f}", lr=f"{lr:.2e}")
        if cfg.save_every and step % cfg.save_every == 0 and step < run.total_steps:
            run.checkpoints.save(step, run.total_steps, run.micro_per_epoch)
        if on_step is not None:
            on_step(step, metrics, model)
    bar.close()
    run.reporter.close()
    final = run.checkpoints.save(run.step, run.total_steps, run.micro_per_epoch, final=True)
    dist.shutdown(info)  # a barrier first: every rank returns once final.pt is written
    return final


# ---- setup ------------------------------------------------------------------------------------


@dataclass
class Run:
    """Everything the loop works with, built by `setup`."""

    cfg: TrainConfig
    info: DistInfo
    bundle: ModelBundle  # the model trained (with --lora, its adapters)
    method: methods.Method
    optimizer: torch.optim.Optimizer
    precision: Precision
    checkpoints: Checkpoints
    reporter: Reporter
    epoch_eval: EpochEval | None  # None without --eval-bench (and on ranks other than the main one)
    images: ImagePrep
    forward_backward: Callable[[list[Batch]], dict]  # micro-batches -> the last one's loss terms; gradients accumulate
    batches: Iterator[Batch]
    total_steps: int
    micro_per_epoch: int
    use_hard: bool  # batches carry a hard image after each anchor
    step: int = 0


def setup(cfg: TrainConfig, resume: bool, shards: ShardCache | None = None, *, num_workers: int | None = None,
          said: set[str] | None = None) -> Run:
    """Process group, config, seeds, model, data, optimizer and the resumed state, in the order that
    makes a resumed run continue bit-exact. `num_workers` overrides the config's DataLoader workers
    (train_many shares the machine's between its runs); `said`: the data notes its other runs printed."""
    info = dist.init(cfg.device)
    cfg, state = prepare_run(cfg, resume)
    if cfg.precision == "amp" and not info.device.startswith("cuda"):  # fp16's GradScaler is CUDA's; bf16 autocast runs on CPU
        raise MosaicError("--precision amp (fp16) needs a GPU; on CPU use fp32, bf16 or amp_bf16")
    method = methods.create(cfg.method, cfg.method_options)
    random.seed(cfg.seed + info.rank)
    np.random.seed(cfg.seed + info.rank)

    bundle = openclip.create(cfg.model, cfg.pretrained, model_config_file=cfg.model_config,
                             force_quick_gelu=cfg.force_quick_gelu, device=info.device, seed=cfg.seed)
    check_step_fits(cfg, method, bundle.meta["model_cfg"], info.device)
    if cfg.lora:  # before the locks: a locked tower freezes its adapters too
        lora.add_lora(bundle.model, cfg.lora)
    _lock_and_checkpoint(bundle.model, cfg)
    optimizer = build_optimizer(cfg, bundle.model)
    precision = Precision(cfg.precision, info.device)
    images = ImagePrep.of(bundle)
    data, use_hard = load_run_data(cfg, method, bundle, images, info, shards, said)
    micro_per_epoch = len(data) // (cfg.batch_size * info.world_size)
    total_steps = cfg.steps or max(1, cfg.epochs * micro_per_epoch // cfg.accum_freq)
    sampler_cfg = SamplerConfig(method=method, batch_size=cfg.batch_size, seed=cfg.seed, use_hard=use_hard,
                                total_steps=total_steps, accum_freq=cfg.accum_freq)
    step = state["step"] if state is not None else 0
    plan = BatchPlan(len(data), sampler_cfg, rank=info.rank, world_size=info.world_size, start=step * cfg.accum_freq,
                     stop=total_steps * cfg.accum_freq, hard=data.hard)
    # --eval-bench: its cases loaded once, before the run folder appears (main rank: the others do not evaluate)
    epoch_eval = (EpochEval(cfg.eval_bench, cfg.eval_data_root, info.device, micro_per_epoch=micro_per_epoch,
                            accum_freq=cfg.accum_freq, total_steps=total_steps) if cfg.eval_bench and info.is_main else None)
    checkpoints = Checkpoints(cfg, bundle, optimizer, precision.scaler, info)
    checkpoints.restore(state)
    reporter = Reporter(parse_report_to(cfg.report_to) if info.is_main else [], cfg.out, config=dataclasses.asdict(cfg),
                        device=info.device, start_step=step, metrics_file=info.is_main, resumed=resume)
    forward_backward = make_forward_backward(cfg, method, bundle.model, images, precision, info)
    batches = run_batches(cfg, data, sampler_cfg, plan, bundle.tokenizer, images, info, num_workers=num_workers)
    checkpoints.write_config()
    return Run(cfg, info, bundle, method, optimizer, precision, checkpoints, reporter, epoch_eval, images, forward_backward,
               batches, total_steps, micro_per_epoch, use_hard, step)


def _lock_and_checkpoint(model, cfg: TrainConfig) -> None:
    """--lock-image / --lock-text freeze a tower; --grad-checkpointing recomputes activations in backward."""
    if cfg.lock_image:
        model.lock_image_tower(unlocked_groups=0, freeze_bn_stats=True)
    if cfg.lock_text:
        model.lock_text_tower(unlocked_layers=0, freeze_layer_norm=True)
    if cfg.grad_checkpointing:
        model.set_grad_checkpointing(True)


def decays(name: str, ndim: int) -> bool:
    """Whether a parameter gets weight decay: not gains, biases, norms, logit_scale, nor any vector."""
    return ndim >= 2 and not any(k in name for k in ("bn", "ln", "bias", "logit_scale", "gain"))


def build_optimizer(cfg: TrainConfig, model=None, *, named: list[tuple[str, torch.Tensor, int]] | None = None):
    """AdamW (or SGD with momentum), no weight decay on gains, biases, norms and logit_scale.
    `named`: (name, tensor, the ndim of one model's parameter) to optimise instead of `model`'s
    trainable parameters (train_many's stacked ones)."""
    if named is None:
        named = [(name, p, p.ndim) for name, p in model.named_parameters() if p.requires_grad]
    decay = [p for name, p, ndim in named if decays(name, ndim)]
    no_decay = [p for name, p, ndim in named if not decays(name, ndim)]
    groups = [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": cfg.wd}]
    if cfg.optimizer == "sgd":  # torch's SGD: the weight decay is added to the gradient (L2)
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, foreach=True)
    return torch.optim.AdamW(
        groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
        fused=True,  # one kernel for all parameters: ~50x faster than the per-tensor loop on CPU
    )


class Precision:
    """--precision: the autocast dtype and, for amp (fp16), the gradient scaler."""

    def __init__(self, precision: str, device: str):
        self.scaler = torch.amp.GradScaler("cuda") if precision == "amp" else None
        self.dtype = {"fp32": None, "bf16": torch.bfloat16, "amp_bf16": torch.bfloat16, "amp": torch.float16}[precision]
        self.device_type = "cuda" if device.startswith("cuda") else "cpu"

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def backward(self, loss) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, optimizer, model, grad_clip: float | None):
        """Unscale, clip, step the optimizer, keep logit_scale in [0, log 100]; -> the gradient norm
        (None under amp without clipping: its scaler skips steps with inf gradients itself)."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)
        if grad_clip:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        elif self.scaler is None:
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
        else:
            grad_norm = None
        if self.scaler is not None:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        return grad_norm


# ---- the step's helpers -----------------------------------------------------------------------


def lr_at(cfg: TrainConfig, step: int, total_steps: int) -> float:
    """Linear warmup to cfg.lr, then cosine decay to 0 at total_steps."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, total_steps - cfg.warmup)
    return 0.5 * (1 + math.cos(math.pi * progress)) * cfg.lr


def _set_lr(optimizer, lr: float) -> float:
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def _next_micro_batches(batches, accum_freq: int) -> list:
    try:
        return [next(batches) for _ in range(accum_freq)]
    except MosaicError as e:  # from a DataLoader worker it comes back with the worker's traceback in its text
        raise MosaicError(str(e).strip().splitlines()[-1].removeprefix("mosaictool.errors.MosaicError: ")) from None


def step_metrics(run: Run, micro: list, losses: dict, lr: float, seconds: float) -> dict:
    """What a step logs: every loss term (mean over ranks), lr, logit scale, samples/s, texts per image."""
    terms = {term: dist.mean_over_ranks(value.detach().item(), run.info) for term, value in losses.items()}
    return metrics_line(run, micro, terms, lr, run.bundle.model.logit_scale.detach().exp().item(), seconds)


def metrics_line(run: Run, micro: list, terms: dict[str, float], lr: float, logit_scale: float, seconds: float) -> dict:
    """step_metrics from the loss terms' values and the logit scale (exp()'d)."""
    images = sum(b.size for b in micro)
    pos_per_image = sum(float(b.pos_mask.sum()) for b in micro) / images
    neg_per_image = sum(float(b.neg_mask.sum()) for b in micro) / images
    return {
        "step": run.step,
        "epoch": (run.step * run.cfg.accum_freq - 1) // run.micro_per_epoch,
        **terms,
        "lr": lr,
        "logit_scale": logit_scale,
        "samples_per_s": images * run.info.world_size / max(seconds, 1e-9),
        "texts_per_image": pos_per_image + neg_per_image,
        "pos_per_image": pos_per_image,
        "neg_per_image": neg_per_image,
    }


def _progress_bar(cfg: TrainConfig, info: DistInfo, total_steps: int, step: int) -> tqdm:
    return tqdm(total=total_steps, initial=step, desc=f"train {cfg.method}", unit="step", file=sys.stderr,
                disable=cfg.quiet or not info.is_main or not sys.stderr.isatty(), dynamic_ncols=True)
