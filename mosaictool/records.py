"""Record contracts: the fields each stage reads, as typed schemas, checked where a record enters.

One schema per contract (pydantic, strict types):

    ParseRecord       the caption (--text-key): parse, tree-score
    DecomposeRecord   graph {entities[{head, lemma_head, span, modifiers[{dep, span}], attributes}],
                      relations[{subject, object, relation}]} (+ the caption unless --no-caption)
    NegateRecord      subgraphs[{kind, text, key, objects[{noun, lemma, plural, count, attributes,
                      determiner}], relations[{subject, object, relation}]}], graph, subgraph_keys
    TemplateRecord    subgraphs, negatives[{kind, subgraph, graph, text, category, transform, slot,
                      from, to, key}], graph
    TrainRecord       id, caption, texts {positives[{text, kind, key}], negatives[{text, kind,
                      category, transform, positive, key}]}, hard_images, subgraph_keys; shard and
                      train (ShardRecord adds the image path)
    GraphRecord       graph alone: vocab build

A schema lists only what its stage reads: other keys pass through untouched, and the record itself
is never replaced by the validated copy. Types are strict: a string where a list belongs is refused
(never iterated as characters), `true` is no integer and "1" no number. `check(schema, record)`
raises RecordError with one line naming the field, `graph.entities[0].attributes: expected a list
of strings, got str`, which `read_records` prefixes with `file:line:` (and `--skip-bad` skips).
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Union

import annotated_types
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic_core import PydanticCustomError

from mosaictool.errors import RecordError

Index = Annotated[int, Field(ge=0)]
NonEmpty = Annotated[str, Field(min_length=1)]


class Schema(BaseModel):
    """A record contract: strict types, unknown keys ignored (they pass through the stage)."""

    model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=False)
    # top-level field -> how to get it, said when it is missing or null ("run `mosaictool parse` first")
    hints: ClassVar[Mapping[str, str]] = {}


def _bad(at: str, message: str) -> PydanticCustomError:
    """An error found by a schema's own rule (an index out of range): `at` extends the field path."""
    return PydanticCustomError("record_rule", "{message}", {"message": message, "at": at})


# ---- parse: the caption graph ------------------------------------------------------------------------


class Modifier(Schema):
    dep: str | None = None
    span: str | None = None


class Entity(Schema):
    head: str
    lemma_head: str | None = None
    span: str | None = None
    modifiers: list[Modifier] | None = None
    attributes: list[str] | None = None


class GraphRelation(Schema):
    subject: Index
    object: Index
    relation: str


class Graph(Schema):
    entities: list[Entity]
    relations: list[GraphRelation]

    @model_validator(mode="after")
    def _indices(self):
        n = len(self.entities)
        for i, rel in enumerate(self.relations):
            for end in ("subject", "object"):
                value = getattr(rel, end)
                if value >= n:
                    raise _bad(f"relations[{i}].{end}", f"{value} is not an index into the graph's {n} entities")
        return self


# ---- decompose / negate / template: sub-graphs and negatives --------------------------------------------


class Node(Schema):
    """A sub-graph object as template renders it."""

    noun: str
    lemma: str | None = None
    plural: bool
    count: str | int | float | None = None
    attributes: list[str]
    determiner: str | None = None


class NegateNode(Node):
    lemma: str  # replacements are looked up by it


class SubRelation(Schema):
    subject: Index
    object: Index
    relation: str


class SubGraph(Schema):
    """{objects, relations}: a sub-graph, or the graph of a graph negative."""

    objects: list[Node]
    relations: list[SubRelation]

    @model_validator(mode="after")
    def _indices(self):
        n = len(self.objects)
        for i, rel in enumerate(self.relations):
            for end in ("subject", "object"):
                value = getattr(rel, end)
                if value >= n:
                    raise _bad(f"relations[{i}].{end}", f"{value} is not an index into its {n} objects")
        return self


class Subgraph(SubGraph):
    """An entry of `subgraphs` (decompose)."""

    kind: str | None = None
    text: str | None = None
    key: str | None = None

    @model_validator(mode="after")
    def _caption_text(self):
        if self.kind == "caption" and self.text is None:
            raise _bad("text", "the caption entry (kind 'caption') needs its text")
        return self


class NegateSubgraph(Subgraph):
    objects: list[NegateNode]


class Negative(Schema):
    """An entry of `negatives` (negate), as template reads it."""

    kind: Literal["graph", "text"]
    subgraph: Index | None = None
    graph: SubGraph | None = None
    text: str | None = None
    category: str | None = None
    transform: str | None = None
    slot: str | None = None
    from_: str | None = Field(None, alias="from")
    to: str | None = None
    key: str | None = None

    @model_validator(mode="after")
    def _complete(self):
        if self.kind == "graph" and self.graph is None:
            raise _bad("graph", "a graph negative needs its 'graph'")
        if self.kind == "graph" and self.subgraph is None:
            raise _bad("subgraph", "a graph negative needs the index of the positive it perturbs")
        if self.kind == "text" and self.text is None:
            raise _bad("text", "a text negative needs its 'text'")
        return self


DECOMPOSE_FIRST = "run `mosaictool decompose` first"


class GraphRecord(Schema):
    hints = {"graph": "run `mosaictool parse` first"}
    graph: Graph


class DecomposeRecord(GraphRecord):
    pass


class NegateRecord(Schema):
    hints = {"subgraphs": DECOMPOSE_FIRST}
    subgraphs: list[NegateSubgraph]
    graph: Graph | None = None
    subgraph_keys: list[str] | None = None


class TemplateRecord(Schema):
    hints = {"subgraphs": DECOMPOSE_FIRST}
    subgraphs: list[Subgraph]
    negatives: list[Negative] | None = None
    graph: Graph | None = None

    @model_validator(mode="after")
    def _positives(self):
        n = len(self.subgraphs)
        for i, neg in enumerate(self.negatives or ()):
            if neg.subgraph is not None and neg.subgraph >= n:
                raise _bad(f"negatives[{i}].subgraph", f"{neg.subgraph} is not an index into the record's {n} 'subgraphs'")
        return self


# ---- training: contract A (`texts`, from template) and what train and shard read ------------------------


class PositiveText(Schema):
    text: str
    kind: str | None = None
    key: str | None = None


class NegativeText(Schema):
    text: str
    kind: str | None = None
    category: str | None = None
    transform: str | None = None
    positive: Index | None = None
    from_: str | None = Field(None, alias="from")  # probe-ft's synonym positives
    key: str | None = None


class Texts(Schema):
    positives: list[PositiveText] | None = None
    negatives: list[NegativeText] | None = None


class TrainRecord(Schema):
    id: str | int
    caption: str | None = None
    texts: Texts | None = None
    hard_images: list[str | int] | None = None
    subgraph_keys: list[str] | None = None


IMAGE_HINT = "a path relative to --image-root"


def train_record(image_key: str | None = "image") -> type[Schema]:
    """TrainRecord with the image path in `image_key` (None: the image is elsewhere, a shard's member)."""
    return TrainRecord if image_key is None else with_key(TrainRecord, image_key, "path", hint=IMAGE_HINT)


class ParseRecord(Schema):
    """The caption alone (its field is named by --text-key: see `with_key`)."""


# ---- schemas with a field named by a flag (--text-key, --image-key) ------------------------------------


@functools.cache
def with_key(base: type[Schema], key: str, kind: str = "text", *, required: bool = True, hint: str | None = None) -> type[Schema]:
    """`base` plus the field `key` (a flag's choice) holding a string: `kind` "text" (a caption) or
    "path" (a non-empty string)."""
    annotation: Any = NonEmpty if kind == "path" else str
    field = (annotation, Field(alias=key)) if required else (annotation | None, Field(None, alias=key))
    hints = {**base.hints, **({key: hint} if hint else {})}
    model = create_model(f"{base.__name__}_{kind}", __base__=base, keyed_field_=field)
    model.hints = hints
    return model


# ---- checking ------------------------------------------------------------------------------------------


def check(schema: type[Schema], record: dict) -> None:
    """Validate the fields `schema` names; RecordError (one line, the field's path) if one is wrong."""
    try:
        schema.__pydantic_validator__.validate_python(record)
    except ValidationError as e:
        raise RecordError(explain(schema, record, e)) from None


def checker(schema: type[Schema]):
    """`check` bound to one schema, as `read_records(check=...)` takes it."""
    validate = schema.__pydantic_validator__.validate_python

    def run(record: dict) -> None:
        try:
            validate(record)
        except ValidationError as e:
            raise RecordError(explain(schema, record, e)) from None

    return run


def explain(schema: type[Schema], record: Any, error: ValidationError) -> str:
    """The first problem of `error` as one line: `path: expected <type>, got <kind>`."""
    first = error.errors(include_url=False)[0]
    loc, kind, ctx = list(first["loc"]), first["type"], first.get("ctx") or {}
    annotation, path = _walk(schema, loc)
    if kind == "record_rule":
        where = _join(path, ctx.get("at", ""))
        return f"{where}: {ctx['message']}" if where else ctx["message"]
    where = _join(path)
    value, found = _value_at(record, path)
    hint = f" ({schema.hints[path[0]]})" if len(path) == 1 and path[0] in schema.hints else ""
    if kind == "missing":
        return f"missing {where!r}{hint}"
    expected = describe(annotation)
    if not found:
        return f"{where}: expected {expected}{hint}"
    if kind in ("literal_error", "string_too_short") or kind.startswith(("greater", "less")):
        return f"{where}: expected {expected}, got {value!r}{hint}"
    return f"{where}: expected {expected}, got {kind_of(value)}{hint}"


def kind_of(value: Any) -> str:
    """A value's type as JSON says it (what a user wrote)."""
    if value is None:
        return "null"
    return {dict: "object", bool: "bool", int: "int", float: "float", str: "str", list: "list"}.get(type(value), type(value).__name__)


def _join(path: list, extra: str = "") -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    if extra:
        out += extra if extra.startswith("[") or not out else f".{extra}"
    return out


def _value_at(record: Any, path: list) -> tuple[Any, bool]:
    value = record
    for part in path:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return None, False
    return value, True


def _optional_inner(tp: Any) -> Any:
    """X for `X | None`; other types unchanged."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _walk(schema: type[Schema], loc: list) -> tuple[Any, list]:
    """The declared type at an error's location, and the location's record path (a union member's
    tag, which pydantic adds to the location, ends it)."""
    tp: Any = schema
    path: list = []
    for part in loc:
        inner = _optional_inner(tp)
        while typing.get_origin(inner) is Annotated:
            inner = typing.get_args(inner)[0]
        if isinstance(part, int) and typing.get_origin(inner) is list:
            tp = typing.get_args(inner)[0]
        elif isinstance(part, str) and isinstance(inner, type) and issubclass(inner, BaseModel):
            info = next((f for n, f in inner.model_fields.items() if (f.alias or n) == part), None)
            if info is None:
                break
            tp = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        else:
            break
        path.append(part)
    return tp, path


_NAMES = {str: ("a string", "strings"), int: ("an integer", "integers"), float: ("a number", "numbers"),
          bool: ("true or false", "booleans"), type(None): ("null", "nulls")}


def describe(tp: Any, plural: bool = False) -> str:
    """A declared type in words: `list[str] | None` -> "a list of strings or null"."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *meta = typing.get_args(tp)
        text = describe(base, plural)
        for m in meta:
            for bound in getattr(m, "metadata", [m]):
                if isinstance(bound, annotated_types.Ge):
                    text += f" >= {bound.ge}"
                elif isinstance(bound, annotated_types.MinLen) and bound.min_length == 1:
                    text = ("non-empty " if plural else "a non-empty ") + text.removeprefix("a ")
        return text
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        words = [describe(a, plural) for a in args if a is not type(None)]
        if type(None) in args:
            words.append("null")
        return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
    if origin is list:
        return ("lists of " if plural else "a list of ") + describe(typing.get_args(tp)[0], plural=True)
    if origin is Literal:
        return "one of " + ", ".join(repr(v) for v in typing.get_args(tp))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "objects" if plural else "an object"
    if tp in _NAMES:
        return _NAMES[tp][plural]
    return getattr(tp, "__name__", str(tp))
