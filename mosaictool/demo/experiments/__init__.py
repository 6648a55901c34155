"""Experiments beside the demo's table, one module each (a registry, as methods/ and bench/ are).

An experiment trains and scores what it needs from the demo's data and base (`Context`), on the
split its question needs (settings are chosen on val; the claims of the paper's regimes are read
on test once), and returns a `Section` of report.md: a title, markdown, and the files it wrote. Each
module names NAME, FILES (what it may write in the demo folder) and run(ctx).
`mosaictool demo --experiment NAME` runs it after the table (whose runs it reuses where its
settings are the same: a run folder is named by its settings' digest).

    ablate   MosaiCLIP's parts taken away one at a time (val)
    ladder   from NegCLIP to MosaiCLIP one change at a time, each rung paired with the one before (val)
    towers   NegCLIP and MosaiCLIP fine-tuning only the text tower or only the image tower (val)
    teach    the teaching regime: a base that knows no arrangement, the rows fine-tuned from it (--split)
    scratch  CLIP, NegCLIP and MosaiCLIP each pretrained from a random initialisation (--split)
    efficiency  MosaiCLIP on 0.3x / 0.5x / 1x of the fine-tuning images against NegCLIP on all (--split)
    noisy    NegCLIP and MosaiCLIP fine-tuned on clean and on web-like noisy captions (--split)
    claims   the paper's claims, each with a verdict (claims.md): the regimes above on the demo's split
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mosaictool.demo.config import DemoConfig
from mosaictool.errors import MosaicError


@dataclass
class Context:
    """What the demo made before the experiments run."""

    cfg: DemoConfig
    shards: Path  # fine-tuning shards (every image with its varied and its plain caption)
    plain_shards: Path  # the base's pretraining shards
    base: Path  # the base checkpoint
    world: Path
    out: Path
    table_rows: list = field(default_factory=list)  # the table's result rows (the demo's split)
    groups: dict = field(default_factory=dict)  # the table's {row: model names}
    claims: bool = False  # run for claims.md: the mechanism experiments read the demo's split, not val
    shard_cache: object = None  # training.ShardCache: the shards indexed, and images decoded, once for every run


@dataclass
class Section:
    title: str
    text: str  # markdown
    files: list[Path] = field(default_factory=list)
    claims: list = field(default_factory=list)  # mosaictool.demo.claims.Claim: the paper's claims it tested
    control: str = ""  # its positive control's one-line verdict, stated before any of its claims


def _registry() -> dict:
    from mosaictool.demo.experiments import (
        ablate,
        claims,
        efficiency,
        ladder,
        noisy,
        scratch,
        teach,
        towers,
    )

    return {m.NAME: m for m in (ablate, ladder, towers, teach, scratch, efficiency, noisy, claims)}


def names() -> list[str]:
    return list(_registry())


def files() -> tuple[str, ...]:
    """Every file an experiment may write in the demo folder (its module's FILES)."""
    return tuple(f for module in _registry().values() for f in module.FILES)


def get(name: str):
    found = _registry().get(name)
    if found is None:
        raise MosaicError(f"--experiment {name!r}: choose from {', '.join(names())}")
    return found


def run(name: str, ctx: Context) -> Section:
    return get(name).run(ctx)
