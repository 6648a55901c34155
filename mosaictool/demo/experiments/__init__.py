"""Experiments beside the demo's table, one module each (a registry, as methods/ and bench/ are).

An experiment trains and scores what it needs from the demo's data and base (`Context`), on the
split its question needs (settings are chosen on val; the claims of the paper's regimes are read
on test once), and returns a `Section` of report.md: a title, markdown, and the files it wrote.
`mosaictool demo --experiment NAME` runs it after the table (whose runs it reuses where its
settings are the same: a run folder is named by its settings' digest).

Every module of this package but `common` is an experiment, found when the registry is first asked
(as the benchmarks and methods are): it declares, as plain literals at its top, NAME, HELP (its line
in `demo --help` and docs/demo.md), PLACE (its place in those lists) and FILES (what it may write in
the demo folder), and defines run(ctx). The declarations are read from the module's source, so
`mosaictool --help` lists the experiments without importing them (they load scipy and the demo).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import cache
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


DECLARED = ("NAME", "HELP", "PLACE", "FILES")


@dataclass(frozen=True)
class Declaration:
    """What an experiment module declares of itself; `module`: its name in this package."""

    name: str
    help: str
    place: int
    files: tuple[str, ...]
    module: str


def _declaration(module: str, path: str) -> Declaration:
    found = {}
    for node in ast.parse(Path(path).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and getattr(node.targets[0], "id", None) in DECLARED:
            found[node.targets[0].id] = ast.literal_eval(node.value)
    missing = [d for d in DECLARED if d not in found]
    if missing:  # an experiment module is code: a missing declaration is our bug, named here
        raise RuntimeError(f"experiment module {module} declares no {', '.join(missing)} (literals at its top)")
    return Declaration(found["NAME"], found["HELP"], found["PLACE"], tuple(found["FILES"]), module)


@cache
def registry() -> dict[str, Declaration]:
    """name -> Declaration of every experiment module of this package, by PLACE."""
    found = [_declaration(info.name, info.module_finder.find_spec(f"{__name__}.{info.name}").origin)
             for info in pkgutil.iter_modules(__path__) if info.name != "common" and not info.name.startswith("_")]
    return {d.name: d for d in sorted(found, key=lambda d: (d.place, d.name))}


def names() -> list[str]:
    return list(registry())


def files() -> tuple[str, ...]:
    """Every file an experiment may write in the demo folder (its module's FILES)."""
    return tuple(f for d in registry().values() for f in d.files)


def help_text() -> str:
    """`demo --experiment`'s help: every experiment with its HELP line."""
    return ("After the table, also run this experiment (repeat for several): "
            + "; ".join(f"{d.name}: {d.help}" for d in registry().values()) + ". Each adds a section to report.md.")


def get(name: str):
    """The module of experiment `name` (imported now)."""
    found = registry().get(name)
    if found is None:
        raise MosaicError(f"--experiment {name!r}: choose from {', '.join(names())}")
    return importlib.import_module(f"{__name__}.{found.module}")


def run(name: str, ctx: Context) -> Section:
    return get(name).run(ctx)
