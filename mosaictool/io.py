"""Streaming record I/O shared by every stage.

Records are JSON objects, one per line (JSONL, optionally .gz), or rows of a Parquet file; WebDataset
tars and CSV/TSV tables are read too (mosaictool.sources, which also reads Parquet). `-` is
stdin/stdout (always JSONL). Reading streams with bounded memory; every bad record is reported by
its physical line number (`captions.jsonl:3: invalid JSON: ...`) or, with `--skip-bad`, counted and
reported at exit. Files are written to a temporary file beside the target and moved into place
only when the whole stage succeeded, so a failed run leaves no partial output.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

import orjson

from mosaictool.atomic import new_file_mode, os_error_of, resolve_output
from mosaictool.atomic import write_error as _write_error
from mosaictool.atomic import write_text as _write_text
from mosaictool.errors import MosaicError, RecordError
from mosaictool.jsonl import BOM, LINE_LIMIT, WIDE_BOMS, check_input_file, check_not_wide, dumps, non_finite_error

STDIO = "-"
logger = logging.getLogger(__name__)


def is_parquet(path: str | os.PathLike) -> bool:
    return str(path).lower().endswith(".parquet")


def display_name(path: str | os.PathLike) -> str:
    return "<stdin>" if str(path) == STDIO else str(path)


@dataclass
class Skips:
    """Bad records turned into skips by `--skip-bad`; reported on stderr at the end of a stage.
    When `enabled` is False the first bad record stops the stage instead."""

    enabled: bool = False
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def handle(self, where: str, message: str) -> None:
        if not self.enabled:
            raise MosaicError(f"{where}: {message} (use --skip-bad to skip bad records)")
        self.count += 1
        if len(self.examples) < 5:
            self.examples.append(f"{where}: {message}")

    def report(self) -> None:
        """The count and the first few skipped records, as a warning (the command shows it on stderr)."""
        if self.count:
            logger.warning("\n".join([f"skipped {self.count} bad record(s); the first:", *(f"  {line}" for line in self.examples)]))


def _open_binary_in(path: str) -> IO[bytes]:
    if path == STDIO:
        if sys.stdin is None:  # started with `<&-`: Python has no sys.stdin at all
            raise MosaicError("<stdin>: standard input is closed; give an input file, or pipe records in")
        return sys.stdin.buffer
    check_input_file(path)
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def _lines(stream: IO[bytes], name: str) -> Iterator[tuple[int, bytes | None]]:
    """Physical lines, numbered from 1, each None when longer than LINE_LIMIT; a leading UTF-8 BOM
    (Windows tools, spreadsheet exports) is skipped, and a truncated or corrupt .gz becomes one clear
    error naming the file. A file in UTF-16 or UTF-32 (a byte-order mark, or NUL bytes in its first
    line, which JSON text never holds) is one error whatever --skip-bad says: every line of it would
    be a bad record, and skipping them all gave an empty output."""
    try:
        lineno = 0
        while line := stream.readline(LINE_LIMIT + 1):
            lineno += 1
            if len(line) > LINE_LIMIT and not line.endswith(b"\n"):
                del line
                while (rest := stream.readline(LINE_LIMIT)) and not rest.endswith(b"\n"):
                    pass
                yield lineno, None
                continue
            if lineno == 1:
                line = _first_line(line, name)
            yield lineno, line
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise MosaicError(f"{name}: truncated or corrupt gzip file ({e}); re-create or re-download it") from e


def _first_line(line: bytes, name: str) -> bytes:
    """`line` without a UTF-8 BOM; MosaicError for a file whose first line shows it is not UTF-8."""
    if line.startswith(BOM):
        return line[len(BOM):]
    check_not_wide(line, name)
    if b"\x00" in line:
        convert = f"convert it: iconv -f {{}} -t UTF-8 {name} > {name}.utf8"
        raise MosaicError(f"{name}: line 1 holds NUL bytes: UTF-16 or UTF-32 text without a byte-order mark, or not "
                          "text at all; records are UTF-8 JSON lines (" + convert.format("UTF-16LE") + ")")
    return line


def _raw_records(path: str, fields=None) -> Iterator[tuple[str, int, Any, str | None]]:
    """Yield (location, line or row number, value, parse_error) per record, unvalidated. WebDataset
    tars, CSV/TSV and Parquet are read by mosaictool.sources (`fields`: its Fields), JSONL here."""
    from mosaictool import sources

    if sources.kind(path):
        yield from sources.raw_records(path, fields or sources.Fields(), _raw_records)
        return
    name = display_name(path)
    stream = _open_binary_in(path)
    try:
        for lineno, line in _lines(stream, name):
            if line is None:
                yield f"{name}:{lineno}", lineno, None, f"line longer than {LINE_LIMIT >> 20} MiB (not a record)"
                continue
            if not line.strip():
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                yield f"{name}:{lineno}", lineno, None, f"invalid JSON: {e}"
                continue
            yield f"{name}:{lineno}", lineno, value, repeated_field(line, value)
    finally:
        if sys.stdin is None or stream is not sys.stdin.buffer:
            stream.close()


def repeated_field(line: bytes, value: Any) -> str | None:
    """Why `line` cannot be one record: a field named twice in one object (`{"caption": "a", "caption":
    "b"}`), which JSON parsers, orjson included, read as the last value without a word. A line as
    orjson writes it (every mosaictool output) has none and is recognised by one comparison; only
    other lines (spaces after ':' and ',', escapes) are read again to look."""
    if not isinstance(value, (dict, list)) or dumps(value) == line.strip():
        return None

    def pairs(items: list[tuple[str, Any]]) -> dict:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                raise KeyError(key)
            seen.add(key)
        return dict(items)

    try:
        json.loads(line, object_pairs_hook=pairs)
    except KeyError as e:
        return f"field {e.args[0]!r} is given twice in one object (JSON keeps only the last): remove one"
    except ValueError:  # what orjson accepts and json refuses (none known): orjson's reading stands
        return None
    return None


def _in_memory_records(records: Iterable[Any]) -> Iterator[tuple[str, int, Any, str | None]]:
    """(location `record N`, N, value, error) per record of an iterable, numbered from 1. Each
    record is copied through JSON, so a stage sees what it would read from a file (tuples become
    lists) and never changes the caller's dicts."""
    for number, rec in enumerate(records, start=1):
        try:
            line = dumps(rec)
        except orjson.JSONEncodeError as e:  # a value JSON cannot hold (a set, an object)
            yield f"record {number}", number, None, f"not JSON: {e}"
            continue
        yield f"record {number}", number, orjson.loads(line), non_finite_error(rec, line)


def _id_error(rec: dict, number: int, assign_ids: bool, seen: set | None) -> str | None:
    """What is wrong with the record's id (None: nothing); with `assign_ids` a missing id becomes
    `number`; `seen` (the ids so far, None when ids need not be unique) gains this one."""
    rid = rec.get("id")
    if rid is None:
        if not assign_ids:
            return "missing 'id' (add ids, or pass --assign-ids to number records)"
        rec["id"] = rid = number
    elif isinstance(rid, bool) or not isinstance(rid, (str, int)):
        return f"'id' must be a string or an integer, got {type(rid).__name__}"
    if seen is not None:
        if rid in seen:
            return f"duplicate id {rid!r}"
        seen.add(rid)
    return None


def read_records(
    path: str | os.PathLike | Iterable[dict] = STDIO,
    *,
    skips: Skips | None = None,
    check: Callable[[dict], None] | None = None,
    assign_ids: bool = False,
    unique_ids: bool = True,
    fields=None,
    captions: tuple[str, ...] = ("caption",),
) -> Iterator[dict]:
    """Stream the records of `path` (a file, "-" for stdin, or an iterable of dicts), validated.

    Every record must be a JSON object with an `id` (a string or an integer) that is unique in the
    input; with `assign_ids` a record without one gets its line (or row, or record) number.
    `check(record)` is the stage's own validation: it raises `RecordError`, which becomes
    `path:line: message` (`record N: message` for records in memory). `fields` (sources.Fields): where
    the caption and id of a WebDataset tar's samples or a table's rows are.

    The string fields named in `captions` enter as records.clean_caption makes them (NFC, no
    invisible format characters), before `check`: a caption of zero-width characters alone is blank.
    Removed characters are said once per input, in one log line.
    """
    from mosaictool.records import clean_caption

    cleaned, first = 0, ""
    skips = skips or Skips()
    seen: set[Any] = set()
    raw = _raw_records(str(path), fields) if isinstance(path, (str, os.PathLike)) else _in_memory_records(path)
    for where, number, rec, error in raw:
        if error is None and not isinstance(rec, dict):
            error = f"expected a JSON object, got {type(rec).__name__}"
        if error is None:
            error = _id_error(rec, number, assign_ids, seen if unique_ids else None)
        if error is None:
            for key in captions:
                if isinstance(rec.get(key), str):
                    rec[key], removed = clean_caption(rec[key])
                    if removed:
                        cleaned += 1
                        first = first or f"{where} ({key!r})"
        if error is None and check is not None:
            try:
                check(rec)
            except RecordError as e:
                error = str(e)
        if error is not None:
            skips.handle(where, error)
            continue
        yield rec
    if cleaned:
        name = display_name(path) if isinstance(path, (str, os.PathLike)) else "records"
        logger.warning(f"{name}: removed invisible format characters (zero-width, bidi controls) from {cleaned} "
                       f"caption(s), first at {first}")


class RecordWriter:
    """Write records as JSONL (stdout or a file, `.gz` compressed if so named) or Parquet.

    Use as a context manager: the output appears at its path only when the block exits without an
    exception. Parquet is produced by streaming a temporary JSONL through polars, whose schema
    inference sees every row (so a field that is null or empty in the first rows is still typed).
    A Parquet column holds one type: a field whose type changes between records (an integer id here,
    a string id there) is refused, naming the field and both records, rather than converted (polars
    would write 1 as "1", an object as its JSON text); integers among floats become floats.
    """

    def __init__(self, path: str | os.PathLike = STDIO):
        self.path = str(path)
        self.count = 0
        self._types: ColumnTypes | None = ColumnTypes(self.path) if is_parquet(self.path) else None
        self._tmp: str | None = None
        self._stream: IO[bytes] | None = None

    def __enter__(self) -> "RecordWriter":
        if self.path == STDIO:
            if sys.stdout is None:  # started with `>&-`
                raise MosaicError("<stdout>: standard output is closed; give -o a file, or redirect the output")
            self._stream = sys.stdout.buffer
            self._raw = None
            return self
        target = resolve_output(self.path)  # through a symlink: its target is replaced, the link stays
        self._target = str(target)
        if target.is_dir():
            raise MosaicError(f"{self.path}: is a directory; give -o a file path such as {target / 'out.jsonl'}")
        if target.parent and not target.parent.exists():
            raise MosaicError(f"{self.path}: directory {target.parent} does not exist")
        if target.exists() and not target.is_file():
            # A device or a pipe (/dev/null, a FIFO): written in place; renaming a temp file over it
            # would replace the device itself.
            if is_parquet(self.path):
                raise MosaicError(f"{self.path}: not a regular file; Parquet needs a file path for -o")
            raw = self._guard(lambda: open(self.path, "wb"))
        else:
            fd, self._tmp = self._guard(
                lambda: tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
            )
            raw = os.fdopen(fd, "wb")
        if self.path.endswith(".gz"):
            self._stream = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)
            self._raw = raw
        else:
            self._stream = raw
            self._raw = None
        return self

    def _guard(self, action: Callable[[], Any]) -> Any:
        """Run a file operation; an OS error (full disk, read-only folder) becomes a MosaicError."""
        try:
            return action()
        except BrokenPipeError:
            raise  # the reader went away (`| head`): the CLI stops quietly
        except OSError as e:
            raise write_error("<stdout>" if self.path == STDIO else self.path, e) from e

    def write(self, record: dict) -> None:
        assert self._stream is not None, "RecordWriter used outside `with`"
        line = dumps(record) + b"\n"
        problem = non_finite_error(record, line)
        if problem is not None:
            raise MosaicError(f"{self.path if self.path != STDIO else '<stdout>'}: record {self.count + 1}: {problem}")
        if self._types is not None:
            self._types.add(record, self.count + 1)
        self._guard(lambda: self._stream.write(line))
        self.count += 1

    def write_all(self, records: Iterable[dict]) -> int:
        for rec in records:
            self.write(rec)
        return self.count

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.path == STDIO:
            if exc_type is None:
                self._guard(self._stream.flush)
            return
        try:
            self._guard(self._stream.close)
            if self._raw is not None:
                self._guard(self._raw.close)
            if exc_type is None and self._tmp is not None:
                if is_parquet(self.path):
                    self._guard(self._jsonl_to_parquet)
                else:
                    self._guard(lambda: os.chmod(self._tmp, new_file_mode()))  # mkstemp's 0600 -> the umask's
                    self._guard(lambda: os.replace(self._tmp, self._target))
        finally:
            if self._tmp and os.path.exists(self._tmp):
                os.unlink(self._tmp)

    def _jsonl_to_parquet(self) -> None:
        import polars as pl

        tmp_polars, tmp_parquet = self._tmp + ".polars.parquet", self._tmp + ".parquet"
        try:
            try:
                if self.count == 0:
                    pl.DataFrame({"id": []}).write_parquet(tmp_polars)
                else:
                    pl.scan_ndjson(self._tmp, infer_schema_length=None).sink_parquet(tmp_polars)
            except pl.exceptions.PolarsError as e:  # a full disk is "(os error 28)" in polars' message
                cause = os_error_of(e)
                if cause is None:
                    raise
                raise cause from e
            _with_page_checksums(tmp_polars, tmp_parquet)
            os.chmod(tmp_parquet, new_file_mode())
            os.replace(tmp_parquet, self._target)
        finally:
            for tmp in (tmp_polars, tmp_parquet):
                if os.path.exists(tmp):
                    os.unlink(tmp)


def _with_page_checksums(source: str, target: str) -> None:
    """`source` rewritten to `target` batch by batch with a CRC of every data page (polars cannot
    write them): a flipped byte in a page is then an error on read (sources reads Parquet with
    page_checksum_verification), not a changed caption."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(source)
    with pq.ParquetWriter(target, pf.schema_arrow, write_page_checksum=True) as writer:
        for i in range(pf.num_row_groups):
            writer.write_table(pf.read_row_group(i))


def write_error(name: str, e: OSError) -> MosaicError:
    """One line for a failed write: the file, the reason, and what to do about it."""
    return _write_error(name, e)


def write_records(path: str | os.PathLike, records: Iterable[dict]) -> int:
    with RecordWriter(path) as w:
        return w.write_all(records)


JSON_DEPTH = 1024  # orjson's nesting limit; no file mosaictool reads nests a hundredth as deep


def parse_json(data: bytes | str, where: str, *, label: str = "invalid JSON", hint: str = "", pairs_hook=None) -> Any:
    """The value of the JSON text `data` (bytes must be UTF-8; a leading BOM is skipped). Every JSON
    file mosaictool reads goes through here, so text that is not UTF-8, not JSON, or nested deeper
    than JSON_DEPTH (which overflows the standard library's recursive parser: a RecursionError
    traceback) is one MosaicError line, `WHERE: LABEL: line L column C: what; HINT`. NaN and Infinity
    are read as the standard library reads them: judging values is the schemas' job. `pairs_hook`:
    json's object_pairs_hook (a ValueError it raises becomes the message)."""
    def error(detail: str) -> MosaicError:
        return MosaicError(f"{where}: {label}: {detail}" + (f"; {hint}" if hint else ""))

    def at(e) -> str:
        return f"line {e.lineno} column {e.colno}" if "\n" in text else f"column {e.colno}"

    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            wide = next((f"{enc} text (byte-order mark {mark.hex(' ')}), not UTF-8" for mark, enc in WIDE_BOMS
                         if bytes(data[:4]).startswith(mark)), None)
            raise error(wide or f"not UTF-8 text (byte {e.start})") from None
    else:
        text = data
    text = text.removeprefix("\ufeff")
    try:
        value = orjson.loads(text)  # bounded depth, and the fast path
        if pairs_hook is None:
            return value
    except orjson.JSONDecodeError as e:
        if "depth" in str(e) or "recursion" in str(e):
            raise error(f"{at(e)}: nested deeper than {JSON_DEPTH} levels") from None
    try:  # what orjson refuses and the standard library reads (NaN), and the hook's checks
        return json.loads(text, object_pairs_hook=pairs_hook)
    except json.JSONDecodeError as e:
        raise error(f"{at(e)}: {e.msg}") from None
    except RecursionError:
        raise error(f"nested deeper than Python's parser can follow ({JSON_DEPTH} levels at most)") from None
    except ValueError as e:
        raise error(str(e)) from None


def read_json(path: str | os.PathLike, *, label: str = "invalid JSON", hint: str = "", where: str | None = None,
              pairs_hook=None) -> Any:
    """parse_json of the file at `path` (an OSError is the caller's)."""
    return parse_json(Path(path).read_bytes(), where or str(path), label=label, hint=hint, pairs_hook=pairs_hook)


def write_json(path: str | os.PathLike, value) -> None:
    """`value` as indented JSON at `path`, atomically (a temporary file beside it, then os.replace)."""
    _write_text(path, json.dumps(value, indent=1) + "\n", flag="--out")


def progress(iterable: Iterable, *, desc: str, unit: str = "rec", quiet: bool = False, total: int | None = None):
    """tqdm on stderr, only when stderr is a terminal and the user did not ask for --quiet."""
    from tqdm import tqdm

    disable = quiet or not sys.stderr.isatty()
    return tqdm(iterable, desc=desc, unit=unit, total=total, disable=disable, file=sys.stderr, dynamic_ncols=True)


class ColumnTypes:
    """The type of every field (nested ones by path: `texts.positives[].key`) over the records written
    to one Parquet file; MosaicError naming the field and both records when a type changes. null fits
    every type; an integer and a float make a float (as JSON has one number type)."""

    NAMES: ClassVar[dict[type, str]] = {
        bool: "true/false", int: "an integer", float: "a number", str: "a string", list: "a list", dict: "an object",
    }

    def __init__(self, path: str):
        self.path = path
        self.seen: dict[str, tuple[type, int]] = {}
        self.paths: dict[tuple[str, Any], str] = {}  # (parent path, key) -> path, built once

    def add(self, record: dict, number: int) -> None:
        self._object("", record, number)

    def _object(self, prefix: str, value: dict, number: int) -> None:
        paths = self.paths
        for key, item in value.items():
            if item is None:
                continue
            path = paths.get((prefix, key))
            if path is None:
                path = paths[(prefix, key)] = f"{prefix}.{key}" if prefix else str(key)
            self._value(path, item, number)

    def _value(self, path: str, value: Any, number: int) -> None:
        kind = value.__class__
        known = self.seen.get(path)
        if known is None or known[0] is not kind:
            kind = self._note(path, value, kind, known, number)
        if kind is dict:
            self._object(path, value, number)
        elif kind is list:
            item_path = path + "[]"
            for item in value:
                if item is not None:
                    self._value(item_path, item, number)

    def _note(self, path: str, value: Any, kind: type, known: tuple[type, int] | None, number: int) -> type:
        if kind not in self.NAMES:  # numpy scalars and other values orjson writes as numbers
            kind = float if isinstance(value, float) else int if isinstance(value, int) else kind
        if known is None:
            self.seen[path] = (kind, number)
        elif known[0] is not kind:
            if {known[0], kind} == {int, float}:
                self.seen[path] = (float, known[1])
            else:
                was, now = self.NAMES.get(known[0], known[0].__name__), self.NAMES.get(kind, kind.__name__)
                raise MosaicError(
                    f"{self.path}: cannot write Parquet: {path} is {was} in output record {known[1]} but {now} in output record "
                    f"{number}, and a Parquet column holds one type; make them agree, or write JSONL (-o *.jsonl)"
                )
        return kind
