"""Compositionality benchmarks: one module per benchmark, found by name (docs/architecture.md: adding a benchmark).

Adding a benchmark = adding a module here that defines `BENCHMARK` (see `base.py` for the
interface). Modules are imported only when the registry is first asked, and import no torch.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from mosaictool.errors import MosaicError

_INFRASTRUCTURE = {"base", "metrics", "engine", "report"}


@cache
def registry() -> dict[str, object]:
    """name -> BENCHMARK object, for every module in this package that defines one."""
    found: dict[str, object] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in _INFRASTRUCTURE or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        bench = getattr(module, "BENCHMARK", None)
        if bench is None:
            continue
        for b in bench if isinstance(bench, (tuple, list)) else (bench,):
            if b.name in found:
                raise RuntimeError(f"benchmark name {b.name!r} defined twice (module {info.name})")
            found[b.name] = b
    return found


def data_names(bench) -> tuple[str, ...]:
    """What `bench` reads under --data-root (its `data`, files and folders/): by default the folder of its name."""
    return tuple(getattr(bench, "data", None) or (f"{bench.name}/",))


def aliases() -> dict[str, str]:
    out = {}
    for name, b in registry().items():
        for alias in getattr(b, "aliases", ()) or ():
            out[alias] = name
    return out


def get(name: str):
    """The benchmark called `name` (or one of its aliases); MosaicError naming the choices."""
    reg = registry()
    key = aliases().get(name, name)
    if key not in reg:
        raise MosaicError(f"unknown benchmark {name!r}; choose from {', '.join(sorted(reg))} (see `mosaictool evaluate --list`)")
    return reg[key]
