"""Record contracts: the fields each reader uses, as typed schemas, checked where the value enters.

One contract per kind of record (pydantic, strict types, TypedDicts):

    ParseRecord       the caption (--text-key, see `with_key`): parse
    DecomposeRecord   graph {entities[{head, lemma_head, span, modifiers[{dep, span}], attributes}],
                      relations[{subject, object, relation}]} (+ the caption unless --no-caption)
    NegateRecord      subgraphs[{kind, text, key, objects[{noun, lemma, plural, count, attributes,
                      determiner}], relations[{subject, object, relation}]}], graph, subgraph_keys,
                      tokens {model, words, spaces, tags, pos, deps, heads} (parse's spaCy analysis)
    TemplateRecord    subgraphs, negatives[{kind, subgraph, graph, text, category, transform, slot,
                      from, to, key}] (what a negative needs depends on its kind), graph
    TrainRecord       id, caption, texts {positives[{text, kind, key}], negatives[{text, kind,
                      category, transform, positive, from, key}]}, hard_images, subgraph_keys: train,
                      shard (`train_record` adds the image path), world audit
    GraphRecord       graph alone: vocab build
    CHECKPOINT, RESUMABLE, MODEL_CONFIG, MINED_HARD_IMAGES
                      a checkpoint's header (and what --resume reads), an open_clip model config
                      file, a run's mined hard images

A contract lists only what its reader uses: other keys pass through untouched, and the record itself
is never replaced by the validated copy. Types are strict: a string where a list belongs is refused
(never iterated as characters), `true` is no integer and "1" no number. `check(contract, record)`
raises RecordError with one line naming the field, `graph.entities[0].attributes: expected a list
of strings, got str`, which `read_records` prefixes with `file:line:` (and `--skip-bad` skips).

Config dataclasses (TrainConfig, DemoConfig) declare their bounds on their fields' types
(`Annotated[int, Field(ge=1)]`); `check_flags` and `config_errors` check flags and config.json by them.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union

import annotated_types
from pydantic import AfterValidator, Field, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError
from typing_extensions import NotRequired, Required, TypedDict, is_typeddict

from mosaictool.errors import RecordError

# TypedDicts rather than models: pydantic validates them ~3x faster (no instance per node), and
# what a stage reads is the record itself anyway. Unknown keys are ignored; types are strict.
Index = Annotated[int, Field(ge=0)]
Seed = Annotated[int, Field(ge=0, lt=2**31)]  # numpy takes seeds up to 2**32 - 1, and each rank adds its own
NonEmpty = Annotated[str, Field(min_length=1)]
# Worker processes: more than a few per CPU only adds forks that wait for a core (and their memory)
WORKERS_PER_CPU = 4
MAX_WORKERS = WORKERS_PER_CPU * (os.cpu_count() or 1)
_PER_CPU = f"at most {WORKERS_PER_CPU} per CPU: this machine has {os.cpu_count() or 1}"
Workers = Annotated[int, Field(ge=0, le=MAX_WORKERS, description=_PER_CPU)]  # 0: in the main process
Processes = Annotated[int, Field(ge=1, le=MAX_WORKERS, description=_PER_CPU)]


@functools.cache
def _pictograph():
    """The compiled pattern, made on first use (regex loads only where a caption has a format character)."""
    import regex

    return regex.compile(r"\p{Extended_Pictographic}")


def clean_caption(text: str) -> tuple[str, bool]:
    """A caption as mosaictool reads it: Unicode NFC, without invisible format characters (category
    Cf: zero-width spaces and joiners, bidi overrides and isolates, BOMs, soft hyphens), which would
    reach the texts unseen or make a blank caption look non-empty. A grapheme cluster holding a
    pictograph (an emoji ZWJ sequence such as 👩‍💻, a flag's tag sequence) is kept whole: its
    joiners are part of one symbol. Returns the text and whether a character was removed."""
    import unicodedata

    text = unicodedata.normalize("NFC", text)
    if text.isascii() or not any(unicodedata.category(c) == "Cf" for c in text):
        return text, False
    import regex

    pictograph = _pictograph()
    kept = "".join(cluster if pictograph.search(cluster) else "".join(c for c in cluster if unicodedata.category(c) != "Cf")
                   for cluster in regex.findall(r"\X", text))
    return kept, kept != text


def flag_name(argument: str, off: bool = False) -> str:
    """The command line's word for an argument a check names: text_key -> --text-key; `off`, the flag
    that turns it off: caption -> --no-caption. The API names its arguments instead (api._named)."""
    return ("--no-" if off else "--") + argument.replace("_", "-")


def check_workers(value: int, flag: str = "--workers", least: int = 1) -> None:
    """A stage's worker count against its bounds (Workers' for TrainConfig and DemoConfig), one line naming the flag."""
    from mosaictool.errors import MosaicError

    if isinstance(value, int) and not isinstance(value, bool) and not least <= value <= MAX_WORKERS:
        raise MosaicError(f"{flag} {value}: must be a whole number >= {least} and <= {MAX_WORKERS} ({_PER_CPU})")


def machine_memory() -> int | None:
    """Bytes of this machine's physical memory (None where the OS does not say): what a size must fit in."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def rule_error(message: str, at: str = "") -> PydanticCustomError:
    """An error found by a contract's own rule (an index out of range, a blank caption), for a
    validator to raise: `explain` words it as `field: message`; `at` extends the field's path."""
    return PydanticCustomError("record_rule", "{message}", {"message": message, "at": at})


def _indices_into(items: str, what: str):
    """A rule: every relation's subject and object index `items` of the same object."""

    def rule(value: dict) -> dict:
        n = len(value[items])
        for i, rel in enumerate(value["relations"]):
            for end in ("subject", "object"):
                if rel[end] >= n:
                    raise rule_error(f"{rel[end]} is not an index into {what.format(n=n)}", f"relations[{i}].{end}")
        return value

    return AfterValidator(rule)


# ---- parse: the caption graph ------------------------------------------------------------------------


class Modifier(TypedDict):
    dep: NotRequired[str | None]
    span: NotRequired[str | None]


class Entity(TypedDict):
    head: str
    lemma_head: NotRequired[str | None]
    span: NotRequired[str | None]
    modifiers: NotRequired[list[Modifier] | None]
    attributes: NotRequired[list[str] | None]
    measure: NotRequired[str | None]


class GraphRelation(TypedDict):
    subject: Index
    object: Index
    relation: str


class GraphFields(TypedDict):
    entities: list[Entity]
    relations: list[GraphRelation]


Graph = Annotated[GraphFields, _indices_into("entities", "the graph's {n} entities")]

# spaCy's part-of-speech labels (spacy.parts_of_speech.IDS; "" for none): a Doc refuses any other.
POS = Literal["", "ADJ", "ADP", "ADV", "AUX", "CCONJ", "CONJ", "DET", "EOL", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
              "PUNCT", "SCONJ", "SPACE", "SYM", "VERB", "X"]
_TOKEN_LISTS = ("spaces", "tags", "pos", "deps", "heads")


def _one_tree_per_sentence(value: dict) -> dict:
    """Rules of `tokens`: one entry per word in every list, and heads that are token indices leading
    from every token to a root (a token that is its own head), as a dependency parse does."""
    n = len(value["words"])
    for name in _TOKEN_LISTS:
        if len(value[name]) != n:
            raise rule_error(f"{len(value[name])} entries for {n} words", name)
    heads = value["heads"]
    for i, head in enumerate(heads):
        if head >= n:
            raise rule_error(f"{head} is not an index into the {n} words", f"heads[{i}]")
    for i in range(n):
        j, steps = i, 0
        while heads[j] != j:
            j, steps = heads[j], steps + 1
            if steps > n:
                raise rule_error(f"token {i}'s heads go round in a circle and reach no root", "heads")
    return value


class TokenFields(TypedDict):
    """`tokens` (parse): spaCy's analysis of the caption, from which negate rebuilds the Doc."""

    model: str
    words: list[NonEmpty]
    spaces: list[bool]
    tags: list[str]
    pos: list[POS]
    deps: list[str]
    heads: list[Index]


Tokens = Annotated[TokenFields, AfterValidator(_one_tree_per_sentence)]


# ---- decompose / negate / template: sub-graphs and negatives --------------------------------------------


class Node(TypedDict):
    """A sub-graph object as template renders it."""

    noun: str
    lemma: NotRequired[str | None]
    plural: bool
    count: NotRequired[str | int | Annotated[float, Field(allow_inf_nan=False)] | None]
    attributes: list[str]
    determiner: NotRequired[str | None]
    measure: NotRequired[str | None]


class NegateNode(Node):
    lemma: str  # replacements are looked up by it


class SubRelation(TypedDict):
    subject: Index
    object: Index
    relation: str


class SubGraphFields(TypedDict):
    """{objects, relations}: a sub-graph, or the graph of a graph negative."""

    objects: list[Node]
    relations: list[SubRelation]


SubGraph = Annotated[SubGraphFields, _indices_into("objects", "its {n} objects")]


def _caption_text(value: dict) -> dict:
    if value.get("kind") == "caption" and value.get("text") is None:
        raise rule_error("the caption entry (kind 'caption') needs its text", "text")
    return value


class SubgraphFields(SubGraphFields):
    """An entry of `subgraphs` (decompose)."""

    kind: NotRequired[str | None]
    text: NotRequired[str | None]
    key: NotRequired[str | None]


class NegateSubgraphFields(SubgraphFields):
    objects: list[NegateNode]


Subgraph = Annotated[SubgraphFields, _indices_into("objects", "its {n} objects"), AfterValidator(_caption_text)]
NegateSubgraph = Annotated[NegateSubgraphFields, _indices_into("objects", "its {n} objects"), AfterValidator(_caption_text)]

_NEGATIVE_FIELDS = {
    "category": NotRequired[str | None],
    "transform": NotRequired[str | None],
    "slot": NotRequired[str | None],
    "from": NotRequired[str | None],  # a TypedDict's functional form: "from" is a Python keyword
    "to": NotRequired[str | None],
    "key": NotRequired[str | None],
}
GraphNegative = TypedDict("GraphNegative", {
    "kind": Literal["graph"], "subgraph": Index, "graph": SubGraph, "text": NotRequired[str | None], **_NEGATIVE_FIELDS,
})
TextNegative = TypedDict("TextNegative", {
    "kind": Literal["text"], "subgraph": NotRequired[Index | None], "text": str, "graph": NotRequired[SubGraph | None],
    **_NEGATIVE_FIELDS,
})
# An entry of `negatives` (negate), as template reads it; "kind" says which fields it needs.
Negative = Annotated[GraphNegative | TextNegative, Field(discriminator="kind")]


# ---- training: the `texts` field (template writes it; docs/stages.md) and what train and shard read ------


class PositiveText(TypedDict):
    text: str
    kind: NotRequired[str | None]
    key: NotRequired[str | None]


NegativeText = TypedDict("NegativeText", {
    "text": str,
    "kind": NotRequired[str | None],
    "category": NotRequired[str | None],
    "transform": NotRequired[str | None],
    "positive": NotRequired[Index | None],
    "from": NotRequired[str | None],  # probe-ft's synonym positives
    "key": NotRequired[str | None],
})


class Texts(TypedDict):
    positives: NotRequired[list[PositiveText] | None]
    negatives: NotRequired[list[NegativeText] | None]


# ---- the contracts -----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Contract:
    """The fields one stage reads (a TypedDict), rules over the whole record, and for top-level fields
    how to get them, said when one is missing ("run `mosaictool parse` first")."""

    name: str
    fields: type
    rules: tuple = ()
    hints: Mapping[str, str] = field(default_factory=dict)

    @functools.cached_property
    def adapter(self) -> TypeAdapter:
        return TypeAdapter(Annotated[(self.fields, *self.rules)] if self.rules else self.fields)


def _fields(name: str, **annotations) -> type:
    return TypedDict(name, annotations)


DECOMPOSE_FIRST = "run `mosaictool decompose` first"
PARSE_FIRST = "run `mosaictool parse` first"


def _negatives_index_subgraphs(value: dict) -> dict:
    n = len(value["subgraphs"])
    for i, neg in enumerate(value.get("negatives") or ()):
        index = neg.get("subgraph")
        if index is not None and index >= n:
            raise rule_error(f"{index} is not an index into the record's {n} 'subgraphs'", f"negatives[{i}].subgraph")
    return value


GraphRecord = Contract("GraphRecord", _fields("GraphRecord", graph=Graph), hints={"graph": PARSE_FIRST})
DecomposeRecord = Contract("DecomposeRecord", GraphRecord.fields, hints=GraphRecord.hints)
NegateRecord = Contract("NegateRecord", _fields(
    "NegateRecord", subgraphs=list[NegateSubgraph], graph=NotRequired[Graph | None], subgraph_keys=NotRequired[list[str] | None],
    tokens=NotRequired[Tokens | None],
), hints={"subgraphs": DECOMPOSE_FIRST})
TemplateRecord = Contract("TemplateRecord", _fields(
    "TemplateRecord", subgraphs=list[Subgraph], negatives=NotRequired[list[Negative] | None], graph=NotRequired[Graph | None],
), rules=(AfterValidator(_negatives_index_subgraphs),), hints={"subgraphs": DECOMPOSE_FIRST})
def _hard_images_are_others(value: dict) -> dict:
    """A record's hard images are other records' images (NegCLIP's hard negative images, Yuksekgonul
    et al. 2023: an image's nearest neighbours); its own id there is a mistake training dropped unsaid."""
    for i, hid in enumerate(value.get("hard_images") or ()):
        if hid == value["id"] and type(hid) is type(value["id"]):
            raise rule_error(f"{hid!r} is the record's own id (a hard image is another record's image); remove it",
                             f"hard_images[{i}]")
    return value


TrainRecord = Contract("TrainRecord", _fields(
    "TrainRecord", id=str | int, caption=NotRequired[str | None], texts=NotRequired[Texts | None],
    hard_images=NotRequired[list[str | int] | None], subgraph_keys=NotRequired[list[str] | None],
), rules=(AfterValidator(_hard_images_are_others),))
ParseRecord = Contract("ParseRecord", _fields("ParseRecord"))  # the caption: see `with_key`

# A run's mined_hard_images.json, wrapped as {"neighbours": ...}: per record, its hard images' indices.
MINED_HARD_IMAGES = Contract("MinedHardImages", _fields("MinedHardImages", neighbours=list[list[Index]]))

# A mosaictool checkpoint (mosaictool.model.openclip.save_checkpoint): what loading it reads; last.pt adds
# what --resume reads.
CHECKPOINT = Contract("Checkpoint", _fields(
    "Checkpoint", model_name=NonEmpty, model_cfg=dict, quick_gelu=bool, state_dict=dict, step=NotRequired[Index],
))
RESUMABLE = Contract("Resumable", _fields(
    "Resumable", **{**typing.get_type_hints(CHECKPOINT.fields, include_extras=True), "step": Index},
    optimizer=dict, rng=Annotated[list[dict], Field(min_length=1)], lora_state=NotRequired[dict],
))

# An open_clip model config (--model-config FILE): the sizes a user sets, the rest passes to open_clip.
Size = Annotated[int, Field(gt=0)]
MODEL_CONFIG = Contract("ModelConfig", _fields(
    "ModelConfig", embed_dim=Size,
    vision_cfg=TypedDict("VisionConfig", {
        "image_size": NotRequired[Size | Annotated[list[Size], Field(min_length=2, max_length=2)]],
        "layers": NotRequired[Size | list[Size]], "width": NotRequired[Size], "head_width": NotRequired[Size],
        "patch_size": NotRequired[Size], "mlp_ratio": NotRequired[Annotated[float, Field(gt=0, allow_inf_nan=False)]],
    }),
    text_cfg=TypedDict("TextConfig", {
        "context_length": NotRequired[Size], "vocab_size": NotRequired[Size], "width": NotRequired[Size],
        "heads": NotRequired[Size], "layers": NotRequired[Size],
    }),
))

IMAGE_HINT = "a path relative to --image-root"


@functools.cache
def with_key(base: Contract, key: str, kind: str = "text", *, hint: str | None = None) -> Contract:
    """`base` plus the field `key` (a flag's choice: --text-key, --image-key) holding a string:
    `kind` "text" (a caption) or "path" (a non-empty string)."""
    fields = {**typing.get_type_hints(base.fields, include_extras=True), key: NonEmpty if kind == "path" else str}
    return Contract(f"{base.name}[{key}]", TypedDict(f"{base.name}_{kind}", fields), base.rules,
                    {**base.hints, **({key: hint} if hint else {})})


def train_record(image_key: str = "image") -> Contract:
    """TrainRecord with the image path in `image_key` (a shard's records have their image as a member)."""
    return with_key(TrainRecord, image_key, "path", hint=IMAGE_HINT)


# ---- checking ------------------------------------------------------------------------------------------


def check(contract: Contract, record: dict) -> None:
    """Validate the fields `contract` names; RecordError (one line, the field's path) if one is wrong."""
    checker(contract)(record)


@functools.cache
def checker(contract: Contract):
    """`check` bound to one contract, as `read_records(check=...)` takes it."""
    validate = contract.adapter.validate_python

    def run(record: dict) -> None:
        try:
            validate(record, strict=True)
        except ValidationError as e:
            raise RecordError(explain(contract, record, e)) from None

    return run


def explain(contract: Contract, record: Any, error: ValidationError) -> str:
    """The first problem of `error` as one line: `path: expected <type>, got <kind>`."""
    errors = error.errors(include_url=False)
    first = errors[0]
    loc, kind, ctx = list(first["loc"]), first["type"], first.get("ctx") or {}
    annotation, path = _walk(contract.fields, loc)
    if len(path) < len(loc):  # a union: a member of the value's own type that failed a bound says more
        better = next((e for e in errors if list(e["loc"][:len(path)]) == path and not e["type"].endswith("_type")), first)
        kind, ctx = better["type"], better.get("ctx") or {}
    if kind in ("union_tag_invalid", "union_tag_not_found"):  # a discriminated union: its tag field is wrong
        tag = ctx["discriminator"].strip("'")
        value, _ = _value_at(record, [*path, tag])
        return (f"{_join(path, tag)}: expected one of {ctx['expected_tags']}, got {value!r}" if kind == "union_tag_invalid"
                else f"missing {_join(path, tag)!r}")
    if kind == "record_rule":
        where = _join(path, ctx.get("at", ""))
        return f"{where}: {ctx['message']}" if where else ctx["message"]
    where = _join(path)
    value, found = _value_at(record, path)
    hint = f" ({contract.hints[path[0]]})" if len(path) == 1 and path[0] in contract.hints else ""
    if kind == "missing":
        return f"missing {where!r}{hint}"
    expected = describe(annotation)
    at = f"{where}: " if where else ""  # none: the entry itself (a list where an object belongs)
    if not found:
        return f"{at}expected {expected}{hint}"
    if kind in ("literal_error", "string_too_short", "too_short", "too_long", "finite_number") or \
            kind.startswith(("greater", "less")):
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        return f"{at}expected {expected}, got {shown}{hint}"
    return f"{at}expected {expected}, got {kind_of(value)}{hint}"


def kind_of(value: Any) -> str:
    """A value's type as JSON says it (what a user wrote)."""
    if value is None:
        return "null"
    names = {dict: "object", bool: "bool", int: "int", float: "float", str: "str", list: "list"}
    return names.get(type(value), type(value).__name__)


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


def _strip(tp: Any) -> Any:
    """The type under NotRequired[...], Annotated[...] and `| None`."""
    while True:
        origin = typing.get_origin(tp)
        if origin in (NotRequired, Required, Annotated):
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType) and type(None) in typing.get_args(tp):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _member(union: Any, tag: str) -> Any:
    """The TypedDict of `union` whose `kind` is Literal[tag], if any."""
    for member in typing.get_args(union):
        if is_typeddict(member):
            kind = typing.get_type_hints(member, include_extras=True).get("kind")
            if kind is not None and tag in typing.get_args(_strip(kind)):
                return member
    return None


def _walk(fields: type, loc: list) -> tuple[Any, list]:
    """The declared type at an error's location, and the location's record path (a union member's
    tag, which pydantic adds to the location, ends it)."""
    tp: Any = fields
    path: list = []
    for part in loc:
        inner = _strip(tp)
        if isinstance(part, int) and typing.get_origin(inner) is list:
            tp = typing.get_args(inner)[0]
        elif isinstance(part, str) and typing.get_origin(inner) in (Union, types.UnionType) and _member(inner, part):
            tp = _member(inner, part)  # a discriminated union's tag: the member it chose, no record field
            continue
        elif isinstance(part, str) and is_typeddict(inner):
            hints = typing.get_type_hints(inner, include_extras=True)
            if part not in hints:
                break
            tp = hints[part]
        else:
            break
        path.append(part)
    return tp, path


_NAMES = {str: ("a string", "strings"), int: ("an integer", "integers"), float: ("a number", "numbers"),
          bool: ("true or false", "booleans"), type(None): ("null", "nulls")}


def _describe_bounded(text: str, bounds: list, plural: bool) -> str:
    """A type's words with its Annotated bounds: lengths ("a non-empty list", "a list of 2"), limits
    ("> 0"), finiteness."""
    lengths = {type(b).__name__: getattr(b, "min_length", getattr(b, "max_length", None)) for b in bounds
               if isinstance(b, (annotated_types.MinLen, annotated_types.MaxLen))}
    if lengths.get("MinLen") == 1 and "MaxLen" not in lengths:
        text = ("non-empty " if plural else "a non-empty ") + text.removeprefix("a ")
    elif lengths and lengths.get("MinLen") == lengths.get("MaxLen"):
        text = text.replace("list of ", f"list of {lengths['MinLen']} ", 1)
    for b in bounds:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            if isinstance(b, getattr(annotated_types, attr.capitalize())):
                text += f" {sign} {getattr(b, attr)}"
        if getattr(b, "allow_inf_nan", True) is False:
            text = text.replace("a number", "a finite number", 1)
    return text


def describe(tp: Any, plural: bool = False) -> str:
    """A declared type in words: `list[str] | None` -> "a list of strings or null"."""
    origin = typing.get_origin(tp)
    if origin in (NotRequired, Required):
        return describe(typing.get_args(tp)[0], plural)
    if origin is Annotated:
        base, *meta = typing.get_args(tp)
        return _describe_bounded(describe(base, plural), [b for m in meta for b in getattr(m, "metadata", [m])], plural)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        words = list(dict.fromkeys(describe(a, plural) for a in args if a is not type(None)))
        if type(None) in args:
            words.append("null")
        return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
    if origin is list:
        return ("lists of " if plural else "a list of ") + describe(typing.get_args(tp)[0], plural=True)
    if origin is Literal:
        return "one of " + ", ".join(repr(v) for v in typing.get_args(tp))
    if is_typeddict(tp):
        return "objects" if plural else "an object"
    if tp in _NAMES:
        return _NAMES[tp][plural]
    return getattr(tp, "__name__", str(tp))


# ---- configs: dataclasses whose fields declare their constraints (TrainConfig, DemoConfig) --------------


@functools.cache
def _config_adapter(cls: type) -> TypeAdapter:
    return TypeAdapter(cls)


@functools.cache
def _field_adapter(cls: type, name: str) -> TypeAdapter:
    return TypeAdapter(typing.get_type_hints(cls, include_extras=True)[name])


def rule(tp: Any) -> str:
    """What a flag's declared type accepts, in words: `Annotated[float, Field(gt=0, allow_inf_nan=False)]`
    -> "a finite number > 0"."""
    if typing.get_origin(tp) in (Union, types.UnionType):  # `X | None`: None is a flag's "not given"
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    base, meta = tp, []
    if typing.get_origin(tp) is Annotated:
        base, *meta = typing.get_args(tp)
    words = {int: "a whole number", float: "a number", bool: "true or false", str: "text"}.get(base, describe(base))
    bounds, note = [], ""
    for m in meta:
        if getattr(m, "description", None):
            note = f" ({m.description})"
        for c in getattr(m, "metadata", [m]):
            for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
                if isinstance(c, getattr(annotated_types, attr.capitalize())):
                    bounds.append(f"{sign} {getattr(c, attr)}")
            if getattr(c, "allow_inf_nan", True) is False:
                words = "a finite number"
    return " ".join([words, " and ".join(bounds)]).strip() + note


def config_errors(cls: type, values: Mapping[str, Any] | str, *, strict: bool = True) -> list[tuple[str, Any, str]]:
    """Check `values` (a dict, or JSON text) against dataclass `cls`'s declared field types and
    constraints; -> [(field, value, what it must be)] for each wrong field ([] if none). JSON text
    that does not parse is one entry with field "" and pydantic's message."""
    import json

    if not isinstance(values, str):  # field by field: strict validation of a dict as a dataclass refuses the dict itself
        hints = typing.get_type_hints(cls, include_extras=True)
        out = []
        for name, value in values.items():
            try:
                _field_adapter(cls, name).validate_python(value, strict=strict)
            except ValidationError:
                out.append((name, value, rule(hints[name])))
        return out
    adapter = _config_adapter(cls)
    try:
        adapter.validate_json(values, strict=strict)
    except ValidationError as e:
        hints = typing.get_type_hints(cls, include_extras=True)
        parsed = None
        out = []
        for err in e.errors(include_url=False):
            if err["type"] == "json_invalid":
                return [("", None, err["msg"])]
            name = str(err["loc"][0]) if err["loc"] else ""
            if name not in hints or any(o[0] == name for o in out):
                continue
            if parsed is None:
                parsed = json.loads(values)
            value = parsed.get(name) if isinstance(parsed, Mapping) else None
            out.append((name, value, "present" if err["type"] == "missing" else rule(hints[name])))
        return out
    return []


def check_flags(config: Any, named: Callable[[str], str] | None = None) -> None:
    """A config dataclass built from flags against its declared field types and bounds; MosaicError
    naming the first wrong one as its flag (`--grad-clip -1.0: must be a finite number > 0 (...)`), or
    as `named(field)` says."""
    from mosaictool.errors import ArgumentError, MosaicError

    # strict: "10" or 2.0 for a whole number, True for a number, are refused (pydantic's lax mode takes
    # them and the config would keep the str); a list stands for a tuple, as config.json stores one
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    problems = config_errors(type(config), {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
    if problems:
        name, value, what = problems[0]
        shown = repr(value) if isinstance(value, str) else value  # "--seeds '2'": a str from Python, not the number
        flag = named(name) if named else f"--{name.replace('_', '-')}"
        raise (ArgumentError if named else MosaicError)(f"{flag} {shown}: must be {what}")  # named: final words


@dataclass
class SeedFlag:
    """--seed alone, for the commands without a config dataclass: check_flags(SeedFlag(seed)) bounds it as train's."""

    seed: Seed = 0
