"""Training methods by name (`mosaictool train --method NAME`), as the benchmarks are by name.

Each module of this package that defines `METHOD` (a mosaictool.methods.base.Method subclass) adds
one method, found when the registry is first asked (as mosaictool.bench finds benchmarks): a new
module adds its --method value, its flags, its recipes and its demo rows, in the order of its `place`.
Modules named `*_loss` hold a method's loss (torch), imported by the method when it trains.

    from mosaictool import methods
    methods.names()                       # ('clip', 'negclip', 'mosaiclip', ...)
    m = methods.create("mosaiclip", {"max_pos": 2})
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from functools import cache
from typing import Any

from mosaictool.errors import MosaicError
from mosaictool.methods.base import DemoRow, Method, Option, Selection

__all__ = ["DemoRow", "Method", "Option", "Selection", "create", "get", "names", "all_options"]


@cache
def _registry() -> dict[str, type[Method]]:
    """name -> Method subclass, for every module of this package that defines METHOD, by `place`."""
    found: list[type[Method]] = []
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base" or info.name.endswith("_loss") or info.name.startswith("_"):
            continue
        cls = getattr(importlib.import_module(f"{__name__}.{info.name}"), "METHOD", None)
        if cls is not None:
            found.append(cls)
    names = [cls.name for cls in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RuntimeError(f"method name {twice[0]!r} defined twice")
    return {cls.name: cls for cls in sorted(found, key=lambda cls: (cls.place, cls.name))}


def names() -> tuple[str, ...]:
    return tuple(_registry())


def get(name: str) -> type[Method]:
    cls = _registry().get(name)
    if cls is None:
        raise MosaicError(f"--method {name!r}: choose one of {', '.join(names())}")
    return cls


def create(name: str, options: Mapping[str, Any] | None = None) -> Method:
    """The method `name` with its options (defaults filled in, validated)."""
    return get(name)(options)


def all_options() -> dict[str, tuple[Option, list[str]]]:
    """Every method option by name -> (its declaration, the methods that declare it). Two methods may
    share an option name only with the same type and default (they then share the flag)."""
    out: dict[str, tuple[Option, list[str]]] = {}
    for name, cls in _registry().items():
        for opt in cls.options:
            if opt.name in out:
                first, owners = out[opt.name]
                if (first.type, first.flag_default()) != (opt.type, opt.flag_default()):
                    raise MosaicError(f"methods {owners[0]} and {name} declare {opt.flag} differently")
                owners.append(name)
            else:
                out[opt.name] = (opt, [name])
    return out
