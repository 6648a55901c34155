"""What the experiments share: fine-tuning rows that differ in batch as well as in method options,
and scoring them on the world's val split."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from mosaictool.demo.config import MAIN_FAMILIES, METHODS
from mosaictool.demo.evaluation import evaluate_all
from mosaictool.demo.experiments import Context
from mosaictool.demo.finetune import finetune_all

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Variant:
    """A fine-tuning row of an experiment: `label` names its runs (a row of the table keeps the
    table's label, so its runs are reused), `name` is what the experiment's table prints."""

    name: str
    label: str
    method: str
    options: dict
    hard_images: str | None = None  # "all" / "none": this row's batch; None: the demo's rule
    hard_image_source: str | None = None  # "mined" / "twin-oracle": which hard images; None: the demo's
    lr: float | None = None  # None: the demo's lr for `lr_row`
    lr_row: str | None = None
    lock: str | None = None  # "image" / "text": that tower frozen (open_clip's lock conventions)


def method_variant(ctx: Context, name: str, label: str, method: str, options: dict, **kwargs) -> Variant:
    """A variant of `method` with `options`, those equal to the method's defaults (or to the demo's max_pos /
    max_neg, which finetune_all adds) left out, so that equal training settings name the same run folder."""
    from mosaictool import methods

    defaults = {o.name: o.default for o in methods.get(method).options}
    injected = {"max_pos": ctx.cfg.max_pos, "max_neg": ctx.cfg.max_neg}
    kept = {key: v for key, v in options.items() if v != injected.get(key, defaults.get(key))}
    return Variant(name, label, method, kept, **kwargs)


def finetune_variants(ctx: Context, variants: list[Variant]) -> dict[str, list[Path]]:
    """{variant name: final checkpoint per seed}, every variant at ctx.cfg's steps, images per step
    and seeds."""
    cfg = ctx.cfg
    groups: dict[tuple, list[Variant]] = {}
    for v in variants:
        lr = v.lr if v.lr is not None else cfg.lr_for(v.lr_row or v.label)
        groups.setdefault((v.hard_images or cfg.hard_images, v.hard_image_source or cfg.hard_image_source, lr, v.lock),
                          []).append(v)
    runs: dict[str, list[Path]] = {}
    for (hard_images, source, lr, lock), group in groups.items():
        trial = dataclasses.replace(cfg, finetune_lr=lr, hard_images=hard_images, hard_image_source=source)
        by_label = finetune_all(trial, ctx.shards, ctx.base, ctx.out, rows=[(v.label, v.method, {**_tuned(cfg, v), **v.options})
                                                                       for v in group], lock=lock, shard_cache=ctx.shard_cache)
        runs.update({v.name: by_label[v.label] for v in group})
    return {v.name: runs[v.name] for v in variants}


def _tuned(cfg, v: Variant) -> dict:
    """The method options --select-on-val chose for the row a variant changes (its `lr_row`, of the same method):
    a variant is that row with one thing changed, so it starts from the row's chosen knobs; its own options win."""
    row = v.lr_row or v.label
    return dict(cfg.row_options.get(row, {})) if (row, v.method) in {(label, method) for label, method, _ in METHODS} else {}


def score_on_val(ctx: Context, runs: dict[str, list[Path]], prefix: str) -> tuple[list[dict], dict[str, list[str]]]:
    """Result rows of every run on the world's val split (MAIN_FAMILIES), and {variant: model names}."""
    return score(ctx, runs, prefix, "val")


def score(ctx: Context, runs: dict[str, list[Path]], prefix: str, split: str) -> tuple[list[dict], dict[str, list[str]]]:
    """Result rows of every run on the world's `split` (MAIN_FAMILIES), and {variant: model names}."""
    device, workers = ctx.cfg.runtime()
    groups = {name: [f"{prefix} {name}-s{seed}" for seed in range(len(finals))] for name, finals in runs.items()}
    models = [(m, path) for name, finals in runs.items() for m, path in zip(groups[name], finals)]
    logger.info(f"{prefix}: scoring {len(models)} checkpoints on {split}")
    rows = evaluate_all(models, ctx.world, "world" if split == "test" else "world-val", device=device, workers=workers,
                        families=MAIN_FAMILIES, cache=ctx.out / "evals")
    return rows, groups
