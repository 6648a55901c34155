"""Training methods by name (`mosaictool train --method NAME`), as the benchmarks are by name.

Each module of MODULES that defines `METHOD` (a mosaictool.methods.base.Method subclass) adds one
method; adding a module here adds its --method value, its flags and its demo rows.

    from mosaictool import methods
    methods.names()                       # ('clip', 'negclip', 'mosaiclip', ...)
    m = methods.create("mosaiclip", {"max_pos": 2})
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from mosaictool.errors import MosaicError
from mosaictool.methods.base import DemoRow, Method, Option, Selection

__all__ = ["DemoRow", "Method", "Option", "Selection", "create", "get", "names", "all_options"]

MODULES = ("clip", "negclip", "mosaiclip", "fsc_clip", "probe_ft")
_REGISTRY: dict[str, type[Method]] | None = None


def _registry() -> dict[str, type[Method]]:
    global _REGISTRY
    if _REGISTRY is None:
        found: dict[str, type[Method]] = {}
        for module in MODULES:
            cls = getattr(importlib.import_module(f"{__name__}.{module}"), "METHOD", None)
            if cls is not None:
                found[cls.name] = cls
        _REGISTRY = found
    return _REGISTRY


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
