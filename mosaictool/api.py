"""The Python API: a function per command that makes or uses data, with the command's defaults,
checks, errors and output, and `read` / `write` for records (`import`, `vocab`, `probe build` and
`world audit` are commands only: COMMANDS_ONLY).

Each function takes what its command takes, by the same names as the command's flags (`--max-chars`
is `max_chars=`), and raises the same `MosaicError` where the command would print `Error: ...` and
exit 1, its message naming the arguments the caller passed where the command's names its flags
(`decompose(max_subgraphs=0)`: "max_subgraphs must be at least 1", where `decompose --max 0` says
"--max must be at least 1"). Lists are lists (`probs=[0.15, 0.425, 0.425]`, `alpha=[0, 0.5]`), or
the command line's comma-separated text. The command line is a thin layer over these functions: it
parses flags, opens stdin/stdout, shows progress and prints reports.

Record stages (`read`, `parse`, `decompose`, `negate`, `template`, `tree_score`) take a `source`: a
path (JSONL, .jsonl.gz or Parquet; "-" is stdin) or an iterable of dicts, and return a lazy
iterator of records (`Records`): nothing is read until it is iterated, and a bad record raises
`MosaicError` naming `file:line` (`record N` for records in memory) when it is reached, or with
`skip_bad=True` is skipped and counted in the iterator's `skips`.

    import mosaictool

    texts = mosaictool.template(mosaictool.negate(mosaictool.decompose(mosaictool.parse("captions.jsonl"))))
    mosaictool.write(texts, "texts.jsonl")

Each function imports what it needs when it runs, so `mosaictool.read` never loads torch or spaCy.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
import os
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from mosaictool.errors import ArgumentError, MosaicError, RecordError
from mosaictool.io import STDIO, Skips, progress, read_records, write_records
from mosaictool.records import check_workers

if typing.TYPE_CHECKING:
    from mosaictool.training.config import TrainConfig

Source = Union[str, os.PathLike, Iterable[dict]]
PathLike = Union[str, os.PathLike]

__all__ = [
    "Records", "Shards", "TextsReport", "TreeScores", "World", "Evaluation", "DemoResult",
    "read", "write", "parse", "decompose", "negate", "template", "texts_report",
    "world", "shard", "train", "wise_ft", "evaluate", "tree_score", "demo",
]
# The commands that have no function here (tests/test_api.py: with the functions above, the commands of the app)
COMMANDS_ONLY = ("import", "vocab", "probe")


# The flag a keyword stands for, where it is not `--` + its name with dashes
FLAGS = {"max_subgraphs": "--max", "max_negatives": "--max", "checkpoints": "--checkpoint", "source": "INPUT",
         "caption": "--caption/--no-caption", "path": "path", "augment": "--augment/--no-augment", "experiments": "--experiment"}
# True while a command runs (mosaictool.cli): errors keep the flags' words the command line was given
_FLAG_WORDS = contextvars.ContextVar("mosaictool_flag_words", default=False)
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*(?:/--[a-z][a-z0-9-]*)?")


@contextlib.contextmanager
def flag_words():
    """Inside, API errors name the command's flags (`--max`), not the arguments (`max_subgraphs`):
    the CLI's vocabulary, for the command line that calls these functions."""
    token = _FLAG_WORDS.set(True)
    try:
        yield
    finally:
        _FLAG_WORDS.reset(token)


def _named(argument: str, off: bool = False) -> str:
    """The word an error names `argument` by: its flag while a command runs (`--max`; `off`: the flag
    that turns it off, `--no-caption`), the argument itself for a caller of the API (`max_subgraphs`,
    `caption=False`). The checks of parse, decompose, negate and template build their messages with it."""
    from mosaictool.records import flag_name

    if not _FLAG_WORDS.get():
        return f"{argument}=False" if off else argument
    return flag_name(argument, off) if off else FLAGS.get(argument, flag_name(argument))


def _argument_table(names: Iterable[str]) -> dict[str, str]:
    """flag -> the argument it stands for: --max-chars -> max_chars, --no-augment -> augment=False."""
    table = {}
    for name in names:
        flag = FLAGS.get(name, "--" + name.replace("_", "-"))
        table["--no-" + name.replace("_", "-")] = f"{name}=False"
        for part in flag.split("/"):
            table[part] = f"{name}=False" if part.startswith("--no-") else name
        table[flag] = name
    return table


def _in_argument_words(error: MosaicError, table: Mapping[str, str]) -> MosaicError:
    """`error` with the flags of its message named as the caller's arguments, unless a command runs;
    a command line quoted in backticks (`mosaictool decompose --max 3`) keeps its flags. For the
    errors raised below the API's own checks, which speak flags: the records' hints (--text-key),
    the vocabulary, training, evaluation (the stages' and the argument checks name by `_named`)."""
    if isinstance(error, ArgumentError):  # named by its check as the caller knows it, values and all
        return error
    if table and not _FLAG_WORDS.get() and error.args and isinstance(error.args[0], str):
        parts = error.args[0].split("`")

        def word(flag: str) -> str:  # --max-pos/--max-neg: each named
            return table.get(flag) or "/".join(table.get(f, f) for f in flag.split("/"))

        parts[::2] = [_FLAG.sub(lambda m: word(m.group(0)), p) for p in parts[::2]]
        error.args = ("`".join(parts), *error.args[1:])
    return error
# Arguments streamed or checked by the function itself (records, each checked as it is read)
_UNCHECKED = {"source", "records", "return"}


def _typed(fn=None, *, config: Callable[[], type] | None = None, names: Callable[[], Iterable[str]] | None = None):
    """Check every argument against `fn`'s annotations before it runs, as the command line's flag
    parser does: pydantic's strict mode, so "10" or 2.7 for a whole number, True for a number, 1 for
    true or false, a list for a path, are MosaicError naming the flag, not a traceback
    from deep inside (or a run on a value the command line could not have given). `config`: the
    dataclass whose settings `fn` takes as keywords (**settings), checked by their fields' types, and
    whose declared bounds word the message (TrainConfig's `--steps`: "a whole number >= 1"). Built
    on the first call: `import mosaictool` stays cheap. Errors name the arguments (_in_argument_words):
    `fn`'s parameters and `names()`, the keywords it takes as **settings.

    Not pydantic.validate_call (strict, with this ConfigDict): it raises a ValidationError of 4 to 8
    lines ("1 validation error for f / batch_size / Input should be a valid integer [type=int_type,
    ...] / For further information visit https://errors.pydantic.dev/..."), not one MosaicError
    line in the words of the bounds; a wrong path is two errors with pydantic's internal schema
    ("path.lax-or-strict[lax=union[...]]"); an unknown keyword is a ValidationError, not Python's
    TypeError. The validation itself is pydantic's (TypeAdapter, strict) here too."""
    if fn is None:
        return functools.partial(_typed, config=config, names=names)
    signature = inspect.signature(fn)

    @functools.cache
    def arguments() -> dict[str, str]:
        own = [n for n, p in signature.parameters.items() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        return _argument_table([*own, *(names() if names else ())])

    @functools.cache
    def checks() -> dict[str, tuple]:
        from pydantic import ConfigDict, TypeAdapter

        from mosaictool.records import rule

        hints = typing.get_type_hints(fn)
        declared = typing.get_type_hints(config(), include_extras=True) if config else {}
        if config:  # its settings, given as keywords (**settings)
            hints = {**_setting_types(config()), **hints}
        # NaN and inf pass here: each function bounds its numbers, with the message naming the bound
        strict = ConfigDict(strict=True, arbitrary_types_allowed=True)
        return {name: (TypeAdapter(tp, config=strict), name,
                       rule(declared[name]) if name in declared and not _takes_str(tp) else _words(tp), _takes_str(tp))
                for name, tp in hints.items() if (name in signature.parameters or config) and name not in _UNCHECKED}

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        try:
            result = check_and_call(*args, **kwargs)
        except MosaicError as e:
            raise _in_argument_words(e, arguments()) from e.__cause__
        if isinstance(result, Records):  # its errors come as it is read
            result.arguments = arguments()
        return result

    def check_and_call(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:  # an unknown keyword, a missing argument: Python's own TypeError, raised by the call
            return fn(*args, **kwargs)
        for name, value in _given(signature, bound).items():
            if name not in checks() or (config and isinstance(value, config())):  # train(TrainConfig(...)): checked whole
                continue
            _check_value(value, *checks()[name])
        return fn(*args, **kwargs)

    return checked


def _given(signature: inspect.Signature, bound: inspect.BoundArguments) -> dict:
    """The arguments as given, the **settings spread out: each setting is checked as its own flag."""
    given = dict(bound.arguments)
    for name, p in signature.parameters.items():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            given.update(given.pop(name, {}))
    return given


def _check_value(value, adapter, argument: str, words: str, takes_str: bool) -> None:
    """MosaicError naming `argument` (_named) when `value` does not fit its type (`adapter`, strict): one
    line in the words of the flag's bounds, as the command line's own errors are, not pydantic's report."""
    from pydantic import ValidationError

    flag = _named(argument)
    if isinstance(value, str) and not takes_str:  # a str is a sequence of its letters: checkpoints="a.pt"
        raise ArgumentError(f"{flag} {value!r}: must be {words}, not a string")
    try:
        adapter.validate_python(value)
    except ValidationError as e:
        wrong_type = any(err["type"].endswith("_type") for err in e.errors())
        raise ArgumentError(f"{flag} {value!r}: must be {words}" + (f", not {type(value).__name__}" if wrong_type else "")) from None


def _options(tp) -> tuple:
    """The types a `X | Y` annotation allows (itself for any other)."""
    return typing.get_args(tp) if typing.get_origin(tp) in (Union, types.UnionType) else (tp,)


def _takes_str(tp) -> bool:
    return str in _options(tp)


_WORDS = {int: "a whole number", float: "a finite number", bool: "True or False", str: "a string", os.PathLike: "a path",
          type(None): "None", dict: "a dict"}


def _words(tp) -> str:
    """An annotation in words: `str | os.PathLike | None` -> "a string, a path or None"."""
    if len(_options(tp)) > 1:
        words = list(dict.fromkeys(_words(t) for t in _options(tp)))
        return f"{', '.join(words[:-1])} or {words[-1]}"
    if typing.get_origin(tp) in (Sequence, Iterable, list, tuple):
        return f"a list, each {_words(typing.get_args(tp)[0])}"
    return _WORDS.get(tp, getattr(tp, "__name__", str(tp)))


class Records(Iterator[dict]):
    """The records a stage yields, one at a time; `skips` counts the bad input records it skipped
    (with `skip_bad=True`; complete once the iterator is exhausted)."""

    def __init__(self, records: Iterable[dict], skips: Skips, inputs: tuple[str, ...] = ()):
        self._records = iter(records)
        self.skips = skips
        self.inputs = inputs  # the files read, so that `write` refuses to replace one of them
        self.arguments: Mapping[str, str] = {}  # flag -> argument of the function that made it (its errors' words)

    def __next__(self) -> dict:
        try:
            return next(self._records)
        except MosaicError as e:
            raise _in_argument_words(e, self.arguments) from e.__cause__


def _lazy_progress(records: Iterable[dict], *, desc: str, unit: str, quiet: bool) -> Iterator[dict]:
    # a generator: the bar starts with the first record, after the caller's own checks of its outputs
    yield from progress(records, desc=desc, unit=unit, quiet=quiet)


def _source(source: Source) -> str | Iterable[dict]:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    if isinstance(source, dict) or not isinstance(source, Iterable):
        raise MosaicError(f"source: give a path or an iterable of records (dicts), not {type(source).__name__}")
    return source


def _records(source: Source, *, check=None, skip_bad: bool = False, assign_ids: bool = False,
             transform: Callable[[Iterable[dict]], Iterable[dict]] | None = None, desc: str = "records",
             unit: str = "caption", quiet: bool = False, fields=None, text_key: str = "caption") -> Records:
    from mosaictool import sources

    inputs = tuple(getattr(source, "inputs", ()))
    source = _source(source)
    skips = Skips(enabled=skip_bad)
    records: Iterable[dict] = read_records(source, skips=skips, check=check, assign_ids=assign_ids, fields=fields,
                                           captions=tuple(dict.fromkeys(("caption", text_key))))
    if transform is not None:
        records = _lazy_progress(transform(records), desc=desc, unit=unit, quiet=quiet)
    return Records(records, skips, tuple(sources.input_files(source)) if isinstance(source, str) else inputs)


def _fields(source: Source, caption_field: str | None, id_field: str | None, text_key: str = "caption"):
    """Where a tar sample's or a table row's caption and id are (mosaictool.sources.Fields); the flags
    name fields of those, and are refused for JSONL and records in memory, which they would not change."""
    from mosaictool import sources

    if (caption_field is not None or id_field is not None) and not (
            isinstance(source, (str, os.PathLike)) and sources.kind(os.fspath(source)) not in (None, "jsonl")):
        flag = "--caption-field" if caption_field is not None else "--id-field"
        raise MosaicError(f"{flag} names a field of WebDataset tars and of CSV, TSV or Parquet tables; JSONL records "
                          "(and records in memory) are read as they are: name their caption field with --text-key")
    return sources.Fields(caption=caption_field, id=id_field, target=text_key)


def _csv(value: str | Iterable) -> str:
    """A comma-separated flag value from a string or a sequence, as the command line gives it."""
    return value if isinstance(value, str) else ",".join(str(v) for v in value)


# ---------------------------------------------------------------------------------------------
# Records in and out


@_typed
def read(source: Source, *, skip_bad: bool = False, assign_ids: bool = False, caption_field: str | None = None,
         id_field: str | None = None) -> Records:
    """Stream the records of a JSONL, .jsonl.gz or Parquet file ("-": stdin), WebDataset tars (a .tar,
    a folder of them, a brace pattern) or a CSV/TSV table, each checked to be an object with a unique
    `id` (`assign_ids`: a record without one gets its line number; `caption_field`, `id_field`: where
    a tar sample's or a table row's caption and id are, docs/stages.md "Reading your data").

    >>> records = list(mosaictool.read("examples/captions.jsonl"))
    >>> records[0]["id"], len(records)
    ('ex001', 60)
    """
    return _records(source, skip_bad=skip_bad, assign_ids=assign_ids, fields=_fields(source, caption_field, id_field))


@_typed
def write(records: Iterable[dict], path: PathLike = STDIO) -> int:
    """Write records as JSONL (.jsonl, .jsonl.gz; "-": stdout) or Parquet, whole or not at all (a
    temporary file beside the target, moved into place when every record is written); returns
    how many were written.

    >>> mosaictool.write(mosaictool.read("examples/captions.jsonl"), "captions.parquet")
    60
    """
    from mosaictool.paths import Read, Write, check_outputs

    if isinstance(records, (str, dict)) or not isinstance(records, Iterable):
        raise MosaicError(f"records: give an iterable of records (dicts), not {type(records).__name__}")
    # the whole output is written before it replaces the target, but the target may not be what it reads
    check_outputs([Write("path", os.fspath(path))], [Read("INPUT", p) for p in getattr(records, "inputs", ()) if p != STDIO])

    def dicts() -> Iterator[dict]:
        for i, record in enumerate(records, 1):
            if not isinstance(record, dict):
                raise MosaicError(f"record {i}: expected a dict, got {type(record).__name__}; nothing written")
            yield record

    return write_records(path, dicts())


# ---------------------------------------------------------------------------------------------
# The graph stages


@_typed
def parse(source: Source, *, text_key: str = "caption", model: str | None = None, batch_size: int = 256,
          workers: int = 1, max_chars: int = 2000, repairs: bool = True, spatial_compounds: bool = True,
          skip_bad: bool = False, assign_ids: bool = False, caption_field: str | None = None, id_field: str | None = None,
          quiet: bool = False, tokens: bool = True) -> Records:
    """Add each caption's text scene graph (`graph`: entities, attributes, relations), as
    `mosaictool parse`. `repairs=False` (or its older name `spatial_compounds=False`): SceneGraphParser's
    graphs exactly. `tokens`: also spaCy's tokens and tags (`tokens`), which `negate` reuses.

    >>> graph = next(mosaictool.parse([{"id": 1, "caption": "a red cube left of a blue ball"}]))["graph"]
    >>> [e["head"] for e in graph["entities"]], [r["relation"] for r in graph["relations"]]
    (['cube', 'ball'], ['left of'])
    """
    from mosaictool.stages.parse import make_check
    from mosaictool.stages.parse import parse as parse_records

    if batch_size < 1 or workers < 1 or max_chars < 1:
        raise ArgumentError(f"{_named('batch_size')}, {_named('workers')} and {_named('max_chars')} must be at least 1")
    check_workers(workers, _named("workers"))
    return _records(
        source, check=make_check(text_key, max_chars, _named), skip_bad=skip_bad, assign_ids=assign_ids, quiet=quiet, desc="parse",
        fields=_fields(source, caption_field, id_field, text_key), text_key=text_key,
        transform=lambda recs: parse_records(recs, text_key=text_key, model=model, batch_size=batch_size, workers=workers,
                                             repairs=repairs and spatial_compounds, tokens=tokens),
    )


@_typed
def decompose(source: Source, *, max_subgraphs: int = 3, caption: bool = True, seed: int = 0, text_key: str = "caption",
              vocab: PathLike | None = None, max_keys: int = 256, skip_bad: bool = False, quiet: bool = False) -> Records:
    """Add each scene graph's positive sub-graphs (`subgraphs`, `subgraph_keys`; MosaiCLIP §3.3),
    as `mosaictool decompose` (`max_subgraphs` is its --max).

    >>> subgraphs = list(mosaictool.decompose(mosaictool.parse("examples/captions.jsonl"), max_subgraphs=2))
    >>> [sg["kind"] for sg in subgraphs[0]["subgraphs"]]
    ['caption', 'object', 'relation']
    """
    from mosaictool.records import SeedFlag, check_flags
    from mosaictool.stages.decompose import decompose as decompose_records
    from mosaictool.stages.decompose import make_check
    from mosaictool.vocab import load

    check_flags(SeedFlag(seed), _named)
    if max_subgraphs < 1:
        raise ArgumentError(f"{_named('max_subgraphs')} must be at least 1")
    if max_keys < 1:
        raise ArgumentError(f"{_named('max_keys')} must be at least 1")
    loaded = load(vocab)
    return _records(
        source, check=make_check(text_key, caption, _named), skip_bad=skip_bad, quiet=quiet, desc="decompose", text_key=text_key,
        transform=lambda recs: decompose_records(recs, max_subgraphs=max_subgraphs, keep_caption=caption, seed=seed,
                                                 text_key=text_key, vocab=loaded, max_keys=max_keys),
    )


@_typed
def negate(source: Source, *, max_negatives: int = 6, probs: str | Sequence[float] = "0.15,0.425,0.425",
           text: str | Sequence[str] = "", uniform: bool = False, vocab: PathLike | None = None, seed: int = 0,
           text_key: str = "caption", model: str | None = None, batch_size: int = 256, workers: int = 1,
           skip_bad: bool = False, quiet: bool = False, unseen_rate: float = 0.1, stats=None) -> Records:
    """Add hard negatives of each caption's sub-graphs (`negatives`; MosaiCLIP §3.4), and with
    `text` caption-level ones (negclip, replace, shuffle, order), as `mosaictool negate`
    (`max_negatives` is its --max, `unseen_rate` its --unseen-rate). `stats`, a
    `stages.negate.NegateStats`, counts what was made.

    >>> negs = list(mosaictool.negate(mosaictool.decompose(mosaictool.parse("examples/captions.jsonl")), seed=1))
    >>> sorted({n["category"] for r in negs for n in r["negatives"]})
    ['attr', 'obj', 'rel']
    """
    from mosaictool.records import SeedFlag, check_flags
    from mosaictool.stages.negate import make_check, parse_probs, parse_text_methods
    from mosaictool.stages.negate import negate as negate_records

    check_flags(SeedFlag(seed), _named)
    if max_negatives < 0 or batch_size < 1 or workers < 1:
        raise ArgumentError(f"{_named('max_negatives')} must be at least 0, {_named('batch_size')} and {_named('workers')} at least 1")
    if not 0 <= unseen_rate <= 1:  # NaN too
        raise ArgumentError(f"{_named('unseen_rate')} must be between 0 and 1, got {unseen_rate}")
    check_workers(workers, _named("workers"))
    category_probs = parse_probs(_csv(probs), _named("probs"))
    methods = parse_text_methods(_csv(text), _named("text"))
    return _records(
        source, check=make_check(methods, text_key, _named), skip_bad=skip_bad, quiet=quiet, desc="negate", text_key=text_key,
        transform=lambda recs: negate_records(
            recs, vocab=None if vocab is None else os.fspath(vocab), max_negatives=max_negatives, probs=category_probs,
            seed=seed, type_aware=not uniform, unseen_rate=unseen_rate, text_methods=methods, text_key=text_key, model=model,
            batch_size=batch_size, workers=workers, stats=stats,
        ),
    )


@_typed
def template(source: Source, *, style: str = "plain", vocab: PathLike | None = None, seed: int = 0,
             skip_bad: bool = False, quiet: bool = False) -> Records:
    """Turn sub-graphs and negatives into sentences (`texts`: positives and negatives, the field
    `train` reads), as `mosaictool template`.

    >>> texts = list(mosaictool.template(mosaictool.negate(mosaictool.decompose(mosaictool.parse("examples/captions.jsonl")))))
    >>> texts[0]["texts"]["positives"][1]["text"], texts[0]["texts"]["negatives"][0]["text"]
    ('a red jacket', 'a young man in a red jacket')
    """
    from mosaictool.records import SeedFlag, check_flags
    from mosaictool.stages.template import STYLES, make_check
    from mosaictool.stages.template import template as template_records
    from mosaictool.vocab import load

    check_flags(SeedFlag(seed), _named)
    if style not in STYLES:
        raise ArgumentError(f"{_named('style')} must be one of {', '.join(STYLES)}, got {style!r}")
    loaded = load(vocab)
    return _records(
        source, check=make_check(), skip_bad=skip_bad, quiet=quiet, desc="template",
        transform=lambda recs: template_records(recs, vocab=loaded, style=style, seed=seed),
    )


@dataclass
class TextsReport:
    """What `texts_report` found in a texts file: `figures` (per transform: `rows` of texts, shares
    with out-of-vocabulary words, unseen combinations and symmetric-relation swaps; the captions
    with zero graph negatives; the review `sample`), and the bad records it skipped."""

    figures: dict
    source: str
    skips: Skips = field(default_factory=Skips)

    def summary_text(self) -> str:
        """The per-transform table and the zero-graph-negative line, as `mosaictool texts-report` prints them."""
        from mosaictool.stages.texts_report import summary_markdown

        return summary_markdown(self.figures)

    def page(self, fmt: str = "markdown") -> str:
        """The review page (the summary and the sample per transform), "markdown" or "html"."""
        from mosaictool.stages.texts_report import html_page, markdown_page

        if fmt not in ("markdown", "html"):
            raise MosaicError(f"page format must be markdown or html, not {fmt!r}")
        return (html_page if fmt == "html" else markdown_page)(self.figures, self.source)


@_typed
def texts_report(source: Source, *, vocab: PathLike | None = None, sample: int = 20, seed: int = 0,
                 skip_bad: bool = False) -> TextsReport:
    """Judge a texts file (`template` output) per transform, as `mosaictool texts-report`: texts,
    shares with out-of-vocabulary words, unseen combinations and symmetric-relation swaps, captions
    with zero graph negatives, and a fixed random sample per transform for a human to read.

    >>> report = mosaictool.texts_report("texts.jsonl", sample=2)
    >>> [(row["transform"], row["n"]) for row in report.figures["rows"]][:2]
    [('positive:caption', 60), ('positive:object', 93)]
    """
    from mosaictool import records as contracts
    from mosaictool.records import SeedFlag, check_flags
    from mosaictool.stages.texts_report import report
    from mosaictool.vocab import load

    check_flags(SeedFlag(seed))
    if sample < 0:
        raise MosaicError("--sample must be at least 0")
    loaded = load(vocab)
    train_check = contracts.checker(contracts.TrainRecord)

    def check(record: dict) -> None:
        train_check(record)
        if not isinstance(record.get("texts"), dict):
            raise RecordError("missing 'texts' (run `mosaictool template` first)")

    records = _records(source, check=check, skip_bad=skip_bad)
    figures = report(records, loaded, sample=sample, seed=seed)
    if not figures["zero_graph_negatives"].get("captions"):
        raise MosaicError(f"{records.inputs[0] if records.inputs else 'source'}: no record with `texts`")
    return TextsReport(figures, records.inputs[0] if records.inputs else "records", records.skips)


@dataclass
class Shards:
    """What `shard` wrote: `sizes` (shard file name -> samples, as OUT/sizes.json) in `out`, and the
    bad records and images it skipped."""

    out: Path
    sizes: dict[str, int]
    skips: Skips = field(default_factory=Skips)

    @property
    def samples(self) -> int:
        return sum(self.sizes.values())


@_typed
def shard(source: Source, *, out: PathLike, image_root: PathLike = ".", shard_size: int = 1000, image_key: str = "image",
          skip_bad: bool = False, assign_ids: bool = False, quiet: bool = False, allow_outside_root: bool = False) -> Shards:
    """Pack records and their images into WebDataset tar shards for `train` (OUT/000000.tar, ...,
    OUT/sizes.json), as `mosaictool shard`.

    >>> shards = mosaictool.shard("tiny-world/train/captions.jsonl", out="shards", image_root="tiny-world/train")
    >>> shards.samples, shards.skips.count
    (40, 0)
    """
    from mosaictool.stages.shard import make_check, write_shards

    source = _source(source)
    skips = Skips(enabled=skip_bad)
    records = read_records(source, skips=skips, check=make_check(image_key), assign_ids=assign_ids)
    sizes = write_shards(
        records, out=out, image_root=image_root, shard_size=shard_size, image_key=image_key, skips=skips,
        source=source if isinstance(source, str) else None, allow_outside_root=allow_outside_root,
        progress=lambda it: progress(it, desc="shard", unit="sample", quiet=quiet),
    )
    return Shards(Path(out), sizes, skips)


# ---------------------------------------------------------------------------------------------
# The synthetic world


@dataclass
class World:
    """What `world` made: the folder `out` and its `manifest` (as OUT/manifest.json: generator,
    seed, options, counts, held-out compounds, layout)."""

    out: Path
    manifest: dict

    @property
    def counts(self) -> dict:
        """Records and items per split (`counts["train"]["records"]`, `counts["val"]`, `counts["test"]`)."""
        return self.manifest["counts"]

    def to_dict(self) -> dict:
        """The manifest, as OUT/manifest.json holds it."""
        return self.manifest


@_typed
def world(out: PathLike, *, train: int = 20000, seed: int = 0, twins: bool = False, binding_twins: bool = False,
          shape_twins: bool = False, caption_noise: float = 0.0, noise_kinds: str | Sequence[str] | None = None,
          image_size: int = 64, eval_scale: float = 1.0, workers: int = 1, overwrite: bool = False,
          quiet: bool = False) -> World:
    """Generate the synthetic compositional world in `out` (train captions and images, val/test
    benchmark splits), as `mosaictool world`; returns a `World` (the folder and its manifest).
    Also `mosaictool.api.world`: `mosaictool.world` is the package of the generator.

    >>> world = mosaictool.api.world("tiny-world", train=40, eval_scale=0.02)
    >>> world.counts["train"]["records"]
    40
    """
    from mosaictool.world.generate import check_noise, check_settings, check_size, generate_world, total_items
    from mosaictool.world.noise import NOISE_KINDS

    check_workers(workers)
    check_settings(train=train, image_size=image_size, eval_scale=eval_scale)  # total_items needs them
    check_size(Path(out), train=train, eval_scale=eval_scale, twins=twins + binding_twins + shape_twins)
    if noise_kinds is not None and not caption_noise:
        raise MosaicError("--noise-kinds chooses the kinds of noise: give --caption-noise too (a fraction above 0)")
    kinds = NOISE_KINDS if noise_kinds is None else [k.strip() for k in _csv(noise_kinds).split(",") if k.strip()]
    kinds = check_noise(caption_noise, kinds)
    bar = progress(iter(()), desc="world", unit="img", quiet=quiet, total=total_items(train, eval_scale))
    try:
        return World(Path(out), generate_world(out, train=train, seed=seed, twins=twins, binding_twins=binding_twins,
                                               shape_twins=shape_twins, image_size=image_size, eval_scale=eval_scale, workers=workers,
                                               overwrite=overwrite, progress=bar.update, caption_noise=caption_noise,
                                               noise_kinds=kinds))
    finally:
        bar.close()


# ---------------------------------------------------------------------------------------------
# Training and weights


def _pair(value: str | Sequence[float], flag: str) -> tuple[float, float]:
    try:
        low, high = (float(x) for x in (value.split(",") if isinstance(value, str) else value))
    except (ValueError, TypeError):
        raise MosaicError(f"{flag} {_csv(value)!r}: two numbers LOW,HIGH, e.g. 0.8,1") from None
    return low, high


def _train_config() -> type:
    from mosaictool.training.config import TrainConfig

    return TrainConfig


def _setting_types(config: type) -> dict[str, object]:
    """The type each TrainConfig setting takes from Python: the field's, a path also as os.PathLike,
    a structured one also as its flag text (crop_scale="0.9,1" or (0.9, 1)); None where the field
    has no default (data, out: the API's "not given")."""
    from mosaictool.training.config import flag_fields

    hints = typing.get_type_hints(config)
    types_ = {}
    for f in flag_fields(config):
        tp = hints[f.name]
        if f.metadata.get("path"):
            tp = Union[tuple(os.PathLike if t is str else t for t in _options(tp)) + (str,)]
        if f.metadata.get("text") is not None:
            tp = Union[str, Sequence[typing.get_args(tp)[0]]]
        types_[f.name] = Union[tp, None] if f.default is dataclasses.MISSING else tp
    return types_


def _train_keywords() -> list[str]:
    """train's keywords besides its own parameters: TrainConfig's settings and every method's options."""
    from mosaictool import methods
    from mosaictool.training.config import flag_fields

    return [*(f.name for f in flag_fields(_train_config())), *methods.all_options()]


@_typed(config=_train_config, names=_train_keywords)
def train(data: PathLike | None = None, *, resume: PathLike | None = None, given: Iterable[str] | None = None, **settings) -> Path:
    """Fine-tune a CLIP model with a training method and return the path of OUT/final.pt, as
    `mosaictool train`; `resume=RUN` continues the run in that folder with its stored config.
    The keywords are TrainConfig's settings (`batch_size=8` is --batch-size 8), with their defaults,
    and the method's own options (`max_pos=3` is --max-pos); `data` may also be a whole TrainConfig
    (keywords then replace its settings). With `recipe`, the recipe fills every setting except those
    in `given` (default: the ones that differ from their defaults).

    >>> print(mosaictool.train("shards", out="runs/tiny", batch_size=8, steps=3))
    runs/tiny/final.pt
    """
    from mosaictool.training import loop

    return loop.train(_config_of(data, resume, given, settings), resume=bool(resume))


def _config_of(data: PathLike | TrainConfig | None, resume: PathLike | None, given: Iterable[str] | None,
               settings: dict) -> TrainConfig:
    """train's keywords as the one TrainConfig the training loop runs (the command's flags are these
    keywords): the settings with their defaults, the method's options apart, paths as strings, the
    recipe filled in; with `resume`, only what may change between the parts of a run."""
    from mosaictool import methods
    from mosaictool.training.config import TrainConfig, flag_fields, with_recipe

    fields = {f.name: f for f in flag_fields(TrainConfig)}
    if isinstance(data, TrainConfig):
        settings = {**{name: getattr(data, name) for name in fields}, "method_options": data.method_options, **settings}
        data = settings.pop("data")
    method_options = {**settings.pop("method_options", {}), **{k: settings.pop(k) for k in list(settings) if k not in fields}}
    unknown = sorted(set(method_options) - set(methods.all_options()))
    if unknown:  # neither a setting nor any method's option: as Python says of any function's unknown keyword
        raise TypeError(f"train() got an unexpected keyword argument {unknown[0]!r}")
    method_options = {k: v for k, v in method_options.items() if v is not None}
    defaults = {name: f.default for name, f in fields.items() if f.default is not dataclasses.MISSING}
    settings = {**defaults, **settings, "data": data}
    out, recipe = settings.pop("out", None), settings.pop("recipe")
    if resume:
        resume = os.fspath(resume)
        if out and os.fspath(out) != resume:
            raise MosaicError("--resume names the run folder; leave out --out (or give the same folder)")
        stored = sorted(method_options) + (["recipe"] if recipe else [])
        if stored:
            flags = ", ".join("--" + g.replace("_", "-") for g in stored)
            raise MosaicError(f"--resume uses the run's stored options; leave out {flags}")
        cfg = TrainConfig(data=os.fspath(data) if data else "", out=resume, **{k: settings[k] for k in ("device", "num_workers", "quiet",
                                                                                                       "report_to")})
        return cfg
    if not data or not out:
        raise MosaicError("give --data (shards or records) and --out (the run folder), or --resume RUN_FOLDER")
    settings["crop_scale"] = _pair(settings["crop_scale"], "--crop-scale")
    if given is None:
        given = [name for name, value in settings.items() if name in defaults and value != defaults[name]]
    for name, f in fields.items():
        if f.metadata.get("path") and settings.get(name) is not None:
            settings[name] = os.fspath(settings[name])
    settings["grad_clip"] = settings["grad_clip"] or None
    cfg = TrainConfig(out=os.fspath(out), method_options=method_options, **settings)
    return with_recipe(cfg, recipe, set(given)) if recipe else cfg


def _alphas(alpha: float | str | Sequence[float]) -> list[float]:
    if isinstance(alpha, (int, float)):
        return [float(alpha)]
    items = alpha.split(",") if isinstance(alpha, str) else list(alpha)
    if not str(_csv(alpha)).strip(", "):
        return []  # wise_ft says: give at least one --alpha
    if any(not str(a).strip() for a in items):
        raise MosaicError(f"--alpha {_csv(alpha)!r}: an empty item between commas; give numbers like 0,0.25,0.5,0.75,1")
    try:
        return [float(a) for a in items]
    except ValueError:
        raise MosaicError(f"--alpha {_csv(alpha)!r}: expected comma-separated numbers like 0,0.25,0.5,0.75,1") from None


@_typed
def wise_ft(zeroshot: PathLike, *, finetuned: PathLike, out: PathLike, alpha: float | str | Sequence[float] = 0.5,
            scope: str = "all", rule: str = "linear", device: str | None = None) -> list[Path]:
    """Weight-space ensembles (WiSE-FT): one checkpoint per alpha of (1 - alpha) zero-shot + alpha
    fine-tuned weights in `out`; returns their paths, as `mosaictool wise-ft`.

    >>> paths = mosaictool.wise_ft("runs/base/final.pt", finetuned="runs/tiny/final.pt", out="wise", alpha=[0, 0.5])
    >>> [p.name for p in paths]
    ['wise_ft_alpha_0.000.pt', 'wise_ft_alpha_0.500.pt']
    """
    from mosaictool.model import wise_ft as weights
    from mosaictool.training.device import resolve_device

    device = resolve_device(device)
    return list(weights.wise_ft(os.fspath(zeroshot), os.fspath(finetuned), _alphas(alpha), out=out, scope=scope, rule=rule,
                                device=device))


# ---------------------------------------------------------------------------------------------
# Evaluation


def _model_specs(checkpoints: Sequence[str], model: str | None, pretrained: str | None, model_config: str | None) -> list[dict]:
    specs = [{"checkpoint": c, "label": c} for c in checkpoints]
    if model or model_config:
        label = f"{model or os.path.basename(model_config or '')}:{pretrained or 'random-init'}"
        specs.append({"model": model, "pretrained": pretrained, "model_config_file": model_config, "label": label})
    elif pretrained:
        raise MosaicError("--pretrained needs --model NAME (e.g. --model ViT-B-32-quickgelu --pretrained openai.pt)")
    if not specs:
        raise MosaicError("give --checkpoint FILE (repeatable), or --model NAME --pretrained TAG_OR_FILE")
    from mosaictool.model.openclip import check_weights_path

    for c in checkpoints:
        check_weights_path(c)
    labels = [s["label"] for s in specs]
    for i, s in enumerate(specs):  # two models with one label would merge in the report
        if labels.count(s["label"]) > 1:
            s["label"] = f"{s['label']}#{i + 1}"
    return specs


def _output_check(specs: list[dict], benches, data_root: str, outputs: list[tuple[str, PathLike | None]]) -> None:
    """No output may be a checkpoint, weights or config read, nor replace a file of the benchmarks."""
    from mosaictool.bench import data_names
    from mosaictool.paths import Read, Write, check_outputs, checkpoint, read_path

    reads = [Read("--data-root", os.path.expanduser(data_root), data_names(b), exclusive=False) for b, _ in benches]
    for spec in specs:
        if spec.get("checkpoint"):
            reads += checkpoint("--checkpoint", spec["checkpoint"])
        reads += checkpoint("--pretrained", spec.get("pretrained")) + read_path("--model-config", spec.get("model_config_file"))
    check_outputs([Write(flag, os.fspath(path)) for flag, path in outputs if path], reads)


def _load_models(specs: list[dict], device: str):
    from mosaictool.model.openclip import load_model

    for spec in specs:
        kwargs = {k: v for k, v in spec.items() if k != "label"}
        yield spec["label"], load_model(**kwargs, device=device)


def _present_retrieval(data_root: str) -> list[str]:
    from mosaictool.bench.retrieval import DATASETS

    found = [d for d, (ann, _) in DATASETS.items() if (Path(data_root).expanduser() / ann).is_file()]
    if not found:
        raise MosaicError(f"retrieval: no Karpathy test file under {data_root} "
                          "(aro/coco_karpathy_test.json or aro/flickr30k_test.json)")
    return found


@dataclass
class Evaluation:
    """What `evaluate` scored: `rows`, one per (model, benchmark, subtask, metric), each a dict with
    `model`, `benchmark`, `subtask`, `metric`, `value`, `n` (as `-o` writes them)."""

    rows: list[dict]

    def markdown(self, *, detail: bool = False) -> str:
        """The table `mosaictool evaluate` prints (`detail`: per-group rows too), as `report=` writes it."""
        from mosaictool.bench.report import markdown

        return markdown(self.rows, detail=detail)

    def to_dict(self) -> dict:
        return {"rows": self.rows}


@_typed
def evaluate(bench: str | Sequence[str] | None, *, checkpoints: Sequence[PathLike] = (), model: str | None = None,
             pretrained: str | None = None, model_config: PathLike | None = None, data_root: PathLike = ".",
             output: PathLike | None = None, report: PathLike | None = None, plot: PathLike | None = None,
             detail: bool = False, limit: int | None = None, perturb: bool = False, skip_missing: bool = False,
             device: str | None = None, batch_size: int = 64, workers: int = 0, cache_dir: PathLike | None = None,
             quiet: bool = False, allow_outside_root: bool = False) -> Evaluation:
    """Score models on compositionality benchmarks with each one's official metric, as `mosaictool
    evaluate` (`checkpoints` is its repeated --checkpoint); returns an `Evaluation`, its `rows` one
    per (model, benchmark, subtask, metric). `output` also writes the rows as they come, `report`
    the Markdown table, `plot` a bar chart.

    >>> rows = mosaictool.evaluate("world", checkpoints=["runs/tiny/final.pt"], data_root="tiny-world", limit=10).rows
    >>> rows[0]["benchmark"], rows[0]["subtask"], rows[0]["metric"], rows[0]["n"]
    ('world', 'aro/VG-Relation', 'accuracy', 10)
    """
    from mosaictool.bench import get
    from mosaictool.bench.engine import EngineOptions, parse_bench_spec
    from mosaictool.bench.engine import evaluate as score
    from mosaictool.bench.report import markdown, write_text
    from mosaictool.bench.report import plot as plot_png
    from mosaictool.io import RecordWriter
    from mosaictool.training.device import resolve_device

    bench = _csv(bench) if bench else bench
    if not bench:
        raise MosaicError("choose benchmarks with --bench (e.g. --bench aro,sugarcrepe); `--list` shows them")
    parsed = parse_bench_spec(bench)
    if limit is not None and limit < 1 or batch_size < 1:
        raise MosaicError("--limit and --batch-size must be at least 1")
    check_workers(workers, least=0)
    data_root = os.fspath(data_root)
    if not os.path.isdir(os.path.expanduser(data_root)):
        raise MosaicError(f"--data-root {data_root}: no such folder")
    device = resolve_device(device)
    specs = _model_specs([os.fspath(c) for c in checkpoints], model, pretrained,
                         None if model_config is None else os.fspath(model_config))
    benches = []
    for name, subs in parsed:
        b = get(name)
        if perturb and b.name == "retrieval":
            base = subs or _present_retrieval(data_root)
            subs = list(dict.fromkeys([*base, *(f"{s.removesuffix('-perturbed')}-perturbed" for s in base)]))
        benches.append((b, subs))
    if perturb and not any(b.name == "retrieval" for b, _ in benches):
        raise MosaicError("--perturb applies to the retrieval benchmark; add --bench retrieval")
    _output_check(specs, benches, data_root, [("-o", output), ("--report", report), ("--plot", plot)])
    options = EngineOptions(batch_size=batch_size, device=device, workers=workers,
                            cache_dir=None if cache_dir is None else os.fspath(cache_dir), skip_missing=skip_missing,
                            limit=limit, quiet=quiet, allow_outside_root=allow_outside_root)
    rows = []
    results = score(benches, _load_models(specs, device), data_root, options)
    if output is None:
        rows.extend(results)
    else:
        with RecordWriter(output) as writer:
            for r in results:
                writer.write(r)
                rows.append(r)
    if report:
        write_text(report, markdown(rows, detail=detail))
    if plot:
        plot_png(rows, plot)
    return Evaluation(rows)


class TreeScores(Records):
    """The rows of `tree_score`, one per caption and model (model-major); once exhausted, `summary`
    holds each model's mean tree-score with a bootstrap 95% CI (and paired differences), and
    `captions` how many captions were scored."""

    def __init__(self, rows: Iterable[dict], skips: Skips, settings: dict, inputs: tuple[str, ...] = ()):
        super().__init__(rows, skips, inputs)
        self.settings = settings
        self.captions = 0
        self.summary: dict | None = None

    def summary_text(self, *, markdown: bool = False) -> str:
        """The summary as `mosaictool tree-score` prints it (markdown: as its --report, with the settings)."""
        from mosaictool.analysis.tree_score import summary_text

        if self.summary is None:
            raise MosaicError("the tree-scores are not all computed yet: iterate over every row first")
        settings = {"captions": self.captions, **self.settings} if markdown else None
        return summary_text(self.summary, settings, markdown=markdown)


def _read_gold(path: str) -> dict:
    from mosaictool.analysis.tree_score import parse_tree

    trees = {}

    def check(rec: dict) -> None:
        try:
            trees[rec["id"]] = parse_tree(rec.get("tree"))
        except ValueError as e:
            raise RecordError(f"bad gold `tree`: {e}") from e

    for _ in read_records(path, check=check):
        pass
    return trees


@_typed
def tree_score(source: Source, *, checkpoints: Sequence[PathLike] = (), model: str | None = None,
               pretrained: str | None = None, model_config: PathLike | None = None, text_key: str = "caption",
               layer_threshold: int = 0, positions: str = "original", max_words: int = 40, limit: int | None = None,
               seed: int = 0, batch_size: int = 32, chart: bool = False, gold: PathLike | None = None,
               device: str | None = None, skip_bad: bool = False, assign_ids: bool = False,
               quiet: bool = False) -> TreeScores:
    """Tree-score of open_clip text encoders (Murty et al., ICLR 2023): how tree-like each
    caption's computation is, per caption and model, as `mosaictool tree-score`.

    >>> scores = mosaictool.tree_score("examples/captions.jsonl", checkpoints=["runs/tiny/final.pt"], limit=5)
    >>> rows = list(scores)
    >>> len(rows), scores.summary["models"][0]["n"], rows[0]["id"]
    (5, 5, 'ex001')
    """
    from mosaictool.analysis import tree_score as ts
    from mosaictool.training.device import resolve_device

    device = resolve_device(device)
    if batch_size < 1 or max_words < 2 or (limit is not None and limit < 1):
        raise MosaicError("--batch-size and --limit must be at least 1, --max-words at least 2")
    if seed < 0:  # numpy's bootstrap generator takes no negative seed
        raise MosaicError(f"--seed {seed}: must be >= 0")
    if positions not in ts.POSITIONS:
        raise MosaicError(f"--positions must be one of {', '.join(ts.POSITIONS)}, not {positions!r}")
    model_config = None if model_config is None else os.fspath(model_config)
    specs = [(os.fspath(c), None, None, os.fspath(c)) for c in checkpoints]
    if model or pretrained or model_config:
        specs.append((None, model, pretrained, f"{model or Path(model_config or '').stem}:{pretrained or 'random-init'}"))
    if not specs:
        raise MosaicError("give one or more --checkpoint FILE, or --model NAME --pretrained TAG_OR_FILE")

    def check(rec: dict) -> None:
        if not isinstance(rec.get(text_key), str):
            raise RecordError(f"missing or non-string {text_key!r} (choose the field with --text-key)")

    captions = _records(source, check=check, skip_bad=skip_bad, assign_ids=assign_ids)
    settings = {"text_key": text_key, "layer_threshold": layer_threshold, "positions": positions, "max_words": max_words,
                "seed": seed}

    def rows() -> Iterator[dict]:
        from mosaictool.model.openclip import load_model

        records = []
        for rec in captions:
            if limit is not None and len(records) >= limit:
                break
            records.append(rec)
        scores.captions = len(records)
        gold_trees = _read_gold(os.fspath(gold)) if gold else None
        summaries = []
        for ckpt, name, weights, label in specs:
            bundle = load_model(checkpoint=ckpt, model=name, pretrained=weights, model_config_file=model_config, device=device)
            summary = ts.ModelSummary(label)
            summaries.append(summary)
            scored = ts.score_records(records, bundle, label=label, text_key=text_key, layer_threshold=layer_threshold,
                                      positions=positions, max_words=max_words, seed=seed, batch_size=batch_size,
                                      with_chart=chart, gold=gold_trees, summary=summary)
            yield from progress(scored, desc=f"tree-score {Path(label).name}", unit="caption", quiet=quiet, total=len(records))
            del bundle
        scores.summary = ts.summarize(summaries, seed=seed)

    scores = TreeScores(rows(), captions.skips, settings, captions.inputs)
    return scores


# ---------------------------------------------------------------------------------------------
# The demo


def _experiments(names: Sequence[str] | None) -> tuple[str, ...] | None:
    """The experiment names, checked against the registry before any work."""
    from mosaictool.demo import experiments

    if not names:
        return None
    names = [names] if isinstance(names, str) else list(names)
    for name in names:
        experiments.get(name)
    return tuple(dict.fromkeys(names))


@dataclass
class DemoResult:
    """What `demo` found: the results `table` as text, the `summary` table, the WiSE-FT points (`wise`),
    the result `rows`, the `selection` of each row's lr, the positive `control`, the `headline`
    comparison, the minimal detectable effects (`mde`) and their sentence (`power`), and the `minutes`
    it took (report.md words them)."""

    table: str
    power: str | None
    summary: dict
    wise: dict
    rows: list[dict]
    minutes: float
    selection: str | None
    control: dict
    headline: dict | None
    mde: dict

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _demo_keywords() -> list[str]:
    from mosaictool.demo import DemoConfig

    return [f.name for f in dataclasses.fields(DemoConfig)]


@_typed(names=_demo_keywords)
def demo(*, out: PathLike = "demo-out", quick: bool = False, preset: str | None = None, device: str | None = None,
         experiments: Sequence[str] | None = None, **settings) -> DemoResult:
    """Run the whole pipeline on the synthetic world and compare the methods, as `mosaictool demo`;
    returns a `DemoResult` (the table as text, summary, WiSE-FT points, result rows, minutes, ...); it
    prints nothing (the command prints the table and the verdicts). `settings` are the
    demo's other settings (`mosaictool.demo.DemoConfig`'s fields: seeds, finetune_steps, ...).
    Also `mosaictool.api.demo`: `mosaictool.demo` is the package of the demo.

    >>> result = mosaictool.api.demo(quick=True, out="demo-quick")  # doctest: +SKIP
    >>> sorted(result.to_dict())  # doctest: +SKIP
    ['control', 'headline', 'mde', 'minutes', 'power', 'rows', 'selection', 'summary', 'table', 'wise']
    """
    from mosaictool.demo import DemoConfig, run_demo
    from mosaictool.training.device import resolve_device

    if preset not in (None, "gpu"):
        raise MosaicError(f"--preset {preset!r}: the one preset is gpu (or --quick for a short check)")
    known = {f.name for f in dataclasses.fields(DemoConfig)} - {"quick", "device", "out", "experiments"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise MosaicError(f"unknown demo setting(s) {', '.join(unknown)}; DemoConfig has {', '.join(sorted(known))}")
    cfg = DemoConfig.preset(quick, gpu=preset == "gpu", device=resolve_device(device), out=os.fspath(out),
                            experiments=_experiments(experiments), **settings)
    return DemoResult(**run_demo(cfg))
