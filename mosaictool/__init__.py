"""mosaictool: stages for teaching CLIP-style models composition (MosaiCLIP, NegCLIP, FSC-CLIP).

The Python API (mosaictool.api) has one function per command, with the command's defaults and
errors:

    import mosaictool

    graphs = mosaictool.parse("captions.jsonl")
    mosaictool.write(mosaictool.template(mosaictool.negate(mosaictool.decompose(graphs))), "texts.jsonl")

`import mosaictool` is cheap on purpose: the API is loaded on first use (PEP 562), and torch,
open_clip and spaCy are imported inside the functions that need them, so `mosaictool --help` is
instant. `world` and `demo` are `mosaictool.api.world` and `mosaictool.api.demo`: `mosaictool.world`
and `mosaictool.demo` are the packages that implement them.
"""

import logging

__version__ = "0.1.0"

# A library's loggers stay silent until the program using it configures logging (the `mosaictool`
# command shows INFO and above on stderr: mosaictool/cli/__init__.py), not Python's last-resort stderr.
logging.getLogger(__name__).addHandler(logging.NullHandler())

_API = ("read", "write", "parse", "decompose", "negate", "template", "texts_report", "shard", "train", "wise_ft", "evaluate", "tree_score")

__all__ = ["MosaicError", "__version__", "api", *_API]


def __getattr__(name: str):
    from importlib import import_module

    if name == "api":
        return import_module("mosaictool.api")
    if name in _API:
        return getattr(import_module("mosaictool.api"), name)
    if name == "MosaicError":
        return import_module("mosaictool.errors").MosaicError
    raise AttributeError(f"module 'mosaictool' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
