"""The equal tuning budget of `demo --select-on-val`: every row's grid (the lr for all, and the knobs its
paper tuned: DemoRow.tuning) and the trials drawn from it, the same number for every row.

A row gets `tuning_budget` fine-tuning runs on val. When its grid has at least that many points they
are drawn from it without repeats by a generator seeded with `tuning_seed` and the row's label
(random.Random of a string: the same draw on every machine and Python); when it has fewer, every
point is run once and the rest of the budget repeats the points in grid order at the next fine-tuning
seeds, so a row with few knobs spends its trials on a less noisy choice instead of none. Each point is
scored by the mean of its runs' criterion (val retrieval, CRITERION); a row takes its best point, ties
going to the first in grid order.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from mosaictool.demo.config import METHODS, DemoConfig

# One criterion for every row, ARO's (run.RETRIEVAL_METRICS, where the reason is given)
CRITERION = ("val retrieval: the mean of image->text and text->image R@1/5/10 on the world's val captions, each point the "
             "mean over its runs (Yuksekgonul et al. 2023, App. C.3: models picked by COCO val retrieval)")


@dataclass(frozen=True)
class Trial:
    """One fine-tuning run on val: the row's lr, its method options at this point of its grid, and the seed."""

    lr: float
    options: dict
    seed: int = 0

    @property
    def point(self) -> str:
        """The grid point, without the seed: the runs of one point are averaged."""
        return describe(self.lr, self.options)


def row_knobs(label: str) -> tuple[tuple[str, tuple[dict, ...]], ...]:
    """The knobs the paper of `label`'s method tuned besides the lr (DemoRow.tuning)."""
    from mosaictool import methods

    for name in methods.names():
        for row in methods.get(name).demo_rows:
            if row.label == label:
                return tuple((knob, tuple(dict(v) for v in values)) for knob, values in row.tuning)
    raise KeyError(label)


def row_grid(cfg: DemoConfig, label: str) -> list[tuple[float, dict]]:
    """Every (lr, method options) point of the row's grid: select_lrs x each knob's values."""
    knobs = row_knobs(label)
    return [(lr, {k: v for values in combo for k, v in values.items()})
            for lr in cfg.select_lrs for combo in itertools.product(*(values for _, values in knobs))]


def draw_trials(cfg: DemoConfig, label: str) -> list[Trial]:
    """The row's `cfg.tuning_budget` trials (see the module's docstring), in grid order."""
    grid, budget = row_grid(cfg, label), cfg.tuning_budget
    if budget >= len(grid):
        return [Trial(*grid[k % len(grid)], seed=k // len(grid)) for k in range(budget)]
    picked = random.Random(f"{cfg.tuning_seed}:{label}").sample(range(len(grid)), budget)
    return [Trial(*grid[k]) for k in sorted(picked)]


def plan(cfg: DemoConfig) -> dict:
    """Every row's search as the pre-registration states it: its grid, the budget, the seed and the trials."""
    rows = {}
    for label, _, _ in METHODS:
        knobs = row_knobs(label)
        rows[label] = {"grid": {"lr": list(cfg.select_lrs), **{knob: list(values) for knob, values in knobs}},
                       "grid_points": len(row_grid(cfg, label)),
                       "trials": [{"lr": t.lr, "options": t.options, "seed": t.seed} for t in draw_trials(cfg, label)]}
    return {"budget": cfg.tuning_budget, "seed": cfg.tuning_seed, "criterion": CRITERION, "rows": rows}


def describe(lr: float, options: dict) -> str:
    """A grid point in a few words: "lr 0.0005, category_probs=[obj:0,attr:0.5,rel:0.5], max_pos=2, max_neg=4"."""
    def value(v) -> str:
        if isinstance(v, dict):
            return "[" + ",".join(f"{k}:{x:g}" for k, x in v.items()) + "]"
        return f"{v:g}" if isinstance(v, float) else str(v)

    return ", ".join([f"lr {lr:g}", *(f"{k}={value(v)}" for k, v in options.items())])
