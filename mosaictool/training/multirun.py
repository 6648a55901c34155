"""Several training runs in one process, their steps taken together: `train_many(configs)`.

Runs that share what a step does to every run (the architecture, images per step, steps, optimiser
and schedule: `shared_key`) train as one stacked model (mosaictool.model.stacked.StackedCLIP): each
step draws every run's own batch (its seed's order, its method's texts), runs one forward over all
their images and texts, the runs' losses summed into one backward, then clips each run's gradient
to its own norm and takes one AdamW step over the stacked weights, whose every element is one
run's. Each run keeps its weights, optimiser state, data order, method and run folder: config.json,
metrics.jsonl, last.pt and final.pt are written as `train` writes them, so evaluate, wise-ft and
`--resume` (alone or in train_many) read them unchanged. A run trains the weights it trains alone,
up to float rounding (another summation order in the batched matmuls; tests/test_multirun.py).

What a step does not share: the data (each run's loader), the loss (each method's), the metrics.
What it shares: the per-op cost of the forward, backward and optimiser, which dominates the demo's
tiny models (perf/multirun_speed.py).

Runs that cannot share (another architecture, --lora, --accum-freq, fp16 --precision amp, locked
towers, gradient checkpointing, torchrun) train one after the other, as `train` trains them.

    from mosaictool.training import TrainConfig, train_many
    finals = train_many([TrainConfig(data="shards/", out=f"runs/s{s}", seed=s) for s in range(5)])
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from tqdm import tqdm

from mosaictool.errors import MosaicError
from mosaictool.locks import folder_lock
from mosaictool.model.stacked import StackedCLIP, supports
from mosaictool.training.batch import batch_tokens, normalize_images, slot_features
from mosaictool.training.config import TrainConfig
from mosaictool.training.loop import (
    Run,
    _next_micro_batches,
    _set_lr,
    build_optimizer,
    lr_at,
    metrics_line,
    run_loop,
    setup,
)
from mosaictool.training.shards import ShardCache


def train_many(cfgs: Sequence[TrainConfig], *, resume: bool = False, shards: ShardCache | None = None,
               on_step: Callable[[int, int, dict, object], None] | None = None) -> list[Path]:
    """Train every config in this process and return their final checkpoints, in order. Runs with
    the same `shared_key` take their steps together; the others train alone, one after the other.

    `resume`: every run continues from its folder (train's --resume). `shards`: the process's
    ShardCache. `on_step(index, step, metrics, model)` is called after each run's every step, `index`
    the run's place in `cfgs` and `model` its weights after the step (without gradients when the run
    shares its steps). DataLoader workers (num_workers) are shared out between the runs."""
    if not cfgs:
        return []
    folders = [os.path.realpath(c.out) for c in cfgs]
    twice = sorted({c.out for c, f in zip(cfgs, folders) if folders.count(f) > 1})
    if twice:
        raise MosaicError(f"train_many: two runs would write {twice[0]}; give each run its own out folder")
    with contextlib.ExitStack() as locks:  # one writer per run folder, held for the whole call
        for cfg in cfgs:
            locks.enter_context(folder_lock(cfg.out, "mosaictool train_many"))
        return _train_many(cfgs, resume, shards, on_step)


def _train_many(cfgs: Sequence[TrainConfig], resume: bool, shards: ShardCache | None,
                on_step: Callable[[int, int, dict, object], None] | None) -> list[Path]:
    workers = [max(1, c.num_workers // len(cfgs)) if c.num_workers else 0 for c in cfgs]
    said: set[str] = set()  # a note about the data (records without negatives) once, not once per run
    runs = [setup(cfg, resume, shards, num_workers=w, said=said) for cfg, w in zip(cfgs, workers)]
    finals: list[Path | None] = [None] * len(runs)
    groups: dict[tuple, list[int]] = {}
    for i, run in enumerate(runs):
        groups.setdefault(shared_key(run) if stackable(run) is None else ("alone", i), []).append(i)
    for indices in groups.values():
        if len(indices) == 1:
            i = indices[0]
            finals[i] = run_loop(runs[i], None if on_step is None else lambda *a, i=i: on_step(i, *a))
            continue
        step_hook = None if on_step is None else lambda j, *a, idx=indices: on_step(idx[j], *a)
        for i, final in zip(indices, train_stacked([runs[i] for i in indices], step_hook)):
            finals[i] = final
    return finals


def stackable(run: Run) -> str | None:
    """Why `run` cannot take its steps with others (None: it can)."""
    cfg = run.cfg
    if run.info.distributed:
        return "it is one rank of several (torchrun)"
    if cfg.accum_freq != 1 or cfg.lora or cfg.grad_checkpointing or cfg.lock_image or cfg.lock_text:
        return "it accumulates gradients, trains LoRA adapters, checkpoints activations or locks a tower"
    if run.precision.scaler is not None:
        return "fp16 --precision amp scales the loss of all runs by one factor"
    return supports(run.bundle.model)


def shared_key(run: Run) -> tuple:
    """What runs must share to take their steps together: the architecture, images per step, the steps
    (and where they stand), optimiser, schedule, clipping, precision, device, checkpoint interval."""
    cfg = run.cfg
    return (json.dumps(run.bundle.meta["model_cfg"], sort_keys=True), run.bundle.meta["quick_gelu"], cfg.batch_size,
            run.use_hard, run.total_steps, run.step, cfg.lr, cfg.warmup, cfg.optimizer, cfg.momentum, cfg.wd, cfg.beta1,
            cfg.beta2, cfg.eps, cfg.grad_clip, cfg.precision, run.info.device, cfg.images_on_device, cfg.save_every)


def train_stacked(runs: list[Run], on_step: Callable[[int, int, dict, object], None] | None = None) -> list[Path]:
    """Train `runs` (all with one shared_key) as one StackedCLIP to their last step; -> final checkpoints.
    `on_step(j, step, metrics, model)`: j the run's place in `runs`."""
    # the runs of one method next to each other: their texts take the text tower together, on a view
    # of their weights
    order = sorted(range(len(runs)), key=lambda j: _text_group(runs[j]))
    finals = _train_stacked([runs[j] for j in order], None if on_step is None else lambda k, *a: on_step(order[k], *a))
    return [final for _, final in sorted(zip(order, finals))]


def _text_group(run: Run) -> tuple[str, str]:
    return run.cfg.method, json.dumps(run.cfg.method_options, sort_keys=True, default=str)


def _train_stacked(runs: list[Run], on_step: Callable[[int, int, dict, object], None] | None) -> list[Path]:
    first, n = runs[0], len(runs)
    cfg, device, total_steps = first.cfg, first.info.device, first.total_steps
    stack = StackedCLIP([r.bundle.model for r in runs], lazy_rows=cfg.optimizer == "adamw")
    optimizer = build_optimizer(cfg, named=stack.named_leaves())
    if first.step:  # resumed: setup put each run's last.pt state in its own optimiser
        stack.load_optimizer_state(optimizer, [_named_state(r) for r in runs])
    losses = [r.method.make_loss() for r in runs]
    by_texts: dict[tuple, list[int]] = {}  # runs of one method bring alike numbers of texts: a tower call each
    for j, r in enumerate(runs):
        by_texts.setdefault(_text_group(r), []).append(j)
    text_groups = list(by_texts.values())
    dense = [r.method.dense for r in runs]
    quiet = all(r.cfg.quiet for r in runs)
    bar = tqdm(total=total_steps, initial=first.step, desc=f"train {n} runs", unit="step", file=sys.stderr,
               disable=quiet or not sys.stderr.isatty(), dynamic_ncols=True)
    last_time = time.perf_counter()
    step = first.step
    while step < total_steps:
        lr = _set_lr(optimizer, lr_at(cfg, step, total_steps))
        micro = [_next_micro_batches(r.batches, 1) for r in runs]
        batches = [m[0] for m in micro]
        texts = [batch_tokens(b) for b in batches]  # on the host: the stack works out lengths there
        stack.use_tokens(texts, optimizer)
        optimizer.zero_grad(set_to_none=True)
        images = torch.stack([b.images.to(device, non_blocking=True) for b in batches])
        images = normalize_images(images.flatten(0, 1), first.images.mean, first.images.std).view(images.shape)
        with first.precision.autocast():
            out = stack.forward(images, texts, text_groups=text_groups, dense=dense)
        terms = []
        for j, (r, b) in enumerate(zip(runs, batches)):
            feats = slot_features(b, out.image[j], out.texts[j], out.logit_scale[j], texts[j].to(device), device=device,
                                  text_ids=r.cfg.merge_equal_texts,
                                  dense=(out.patches[j], out.tokens[j]) if r.method.dense else None)
            terms.append(losses[j](feats))
        sum(t["loss"] for t in terms).backward()
        grad_norm = _clip_per_run(stack, cfg.grad_clip)
        optimizer.step()
        stack.after_step(lr, cfg.wd if cfg.optimizer == "adamw" else 0.0)
        step += 1
        # every logged number in one transfer from the device
        values = torch.cat([torch.stack([v.detach().float() for t in terms for v in t.values()]), grad_norm.float(),
                            stack.leaves["logit_scale"].detach().exp().float()]).tolist()
        now = time.perf_counter()
        seconds, last_time = now - last_time, now
        _report_step(stack, optimizer, runs, terms, values, micro, lr, step, seconds, on_step)
        if any(r.epoch_eval is not None for r in runs):
            last_time = time.perf_counter()  # the next step's samples/s leaves the evaluations out
        bar.update(1)
        bar.set_postfix(lr=f"{lr:.2e}")
    bar.close()
    finals = []
    for j, r in enumerate(runs):
        _write_back(stack, optimizer, r, j, 0.0, with_optimizer=False)
        r.reporter.close()
        finals.append(r.checkpoints.save(step, total_steps, r.micro_per_epoch, final=True))
    return finals


def _report_step(stack: StackedCLIP, optimizer, runs: list[Run], terms: list[dict], values: list[float], micro: list, lr: float,
                 step: int, seconds: float, on_step: Callable[[int, int, dict, object], None] | None) -> None:
    """Each run's side of a step: its metrics (`values`: every loss term, then the gradient norms, then
    the logit scales), a divergence stops them all; its evaluation, log line, checkpoint and callback
    where due (the stack's weights written back into the run's model first)."""
    n, cfg, total_steps = len(runs), runs[0].cfg, runs[0].total_steps
    at = 0
    for j, (r, t) in enumerate(zip(runs, terms)):
        logged = dict(zip(t, values[at: at + len(t)]))
        at += len(t)
        norm, scale = values[-2 * n + j], values[-n + j]
        r.step = step
        metrics = metrics_line(r, micro[j], logged, lr, scale, seconds)
        if not math.isfinite(metrics["loss"]) or not math.isfinite(norm):
            for other in runs:
                other.reporter.close()
            what = f"the loss is {metrics['loss']}" + (f", the gradient norm {norm}" if not math.isfinite(norm) else "")
            raise MosaicError(f"{r.cfg.out}: {r.checkpoints.diverged(step, what)}")
        r.reporter.log_step(step, metrics)
        evaluated = r.epoch_eval is not None and r.epoch_eval.due(step)
        if evaluated:
            _write_back(stack, optimizer, r, j, lr, with_optimizer=False)
            r.epoch_eval.at_step(step, r.bundle, metrics, r.reporter, quiet=r.cfg.quiet)
        if step % r.cfg.log_every == 0 or step == total_steps or evaluated:
            r.reporter.write_line(metrics)
        if cfg.save_every and step % cfg.save_every == 0 and step < total_steps:
            _write_back(stack, optimizer, r, j, lr, with_optimizer=True)
            r.checkpoints.save(step, total_steps, r.micro_per_epoch)
        if on_step is not None:
            _write_back(stack, optimizer, r, j, lr, with_optimizer=False)
            on_step(j, step, metrics, r.bundle.model)


def _clip_per_run(stack: StackedCLIP, grad_clip: float | None) -> torch.Tensor:
    """Each run's gradient norm over all its parameters (R,), and with `grad_clip` each run's gradient
    scaled to at most that norm, as torch.nn.utils.clip_grad_norm_ scales one model's."""
    grads = [leaf.grad for _, leaf, _ in stack.named_leaves() if leaf.grad is not None]
    n = stack.runs
    total = torch.stack([g.reshape(n, -1).norm(dim=1) for g in grads], dim=1).norm(dim=1)
    if grad_clip:
        coef = (grad_clip / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view((n,) + (1,) * (g.ndim - 1)).to(g.dtype))
    return total


def _named_state(run: Run) -> dict[str, dict]:
    """A run's own optimiser state by parameter name (what setup restored from its last.pt)."""
    return {name: run.optimizer.state[p] for name, p in run.bundle.model.named_parameters() if p in run.optimizer.state}


def _write_back(stack: StackedCLIP, optimizer: torch.optim.Optimizer, run: Run, j: int, lr: float, *,
                with_optimizer: bool) -> None:
    """Run j's weights (and optimiser state) from the stack into its own model (and optimiser), which
    its checkpoints and evaluation read."""
    weights = stack.state_dict(j)
    with torch.no_grad():
        for name, p in run.bundle.model.named_parameters():
            p.copy_(weights[name])
    if not with_optimizer:
        return
    states = stack.optimizer_state(optimizer, j)
    for name, p in run.bundle.model.named_parameters():
        if name in states:
            run.optimizer.state[p] = states[name]
    _set_lr(run.optimizer, lr)
