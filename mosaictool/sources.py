"""Caption data as researchers hold it, read as records: what `io.read_records` reads besides JSONL.

- WebDataset tars, as img2dataset writes them (Beaumont 2021) and `mosaictool shard` does: one tar, a
  folder of tars, a brace pattern (`shards/{00000..00999}.tar`) or a glob (`shards/*.tar`). A sample
  is the consecutive members that share a key (`000000123.jpg`, `000000123.txt`, `000000123.json`);
  its record is `id`: the key (or a field of the .json: --id-field), the caption from `<key>.txt` (or
  a field of the .json: --caption-field; without a .txt, the .json's own caption), `image`: a
  reference into the tar, `<tar path as given>#<member name>` (`shards/00000.tar#000000123.jpg`), and
  the .json's other fields. Members are read in order and only .txt/.json payloads are read: images
  are skipped over, never extracted or decoded, and one tar is open at a time, so memory does not
  grow with the number of tars. `read_tar` is the one tar reader: training indexes its shards with it too.
- Tables: CSV and TSV (`.gz` too; img2dataset's inputs: a header row, then url and caption columns;
  a TSV has no quoting) and Parquet (🤗 datasets' files, img2dataset's `{shard}.parquet`, and what the
  stages write): one file, or a brace pattern or glob of them (`data/train-*.parquet`). A row is a
  record: its `id` is the --id-field column, by default `id`, else `key`, else the row's number (from
  1, as --assign-ids numbers JSONL lines, counted on from one file to the next); the --caption-field column is
  renamed to the caption field (parse's --text-key). A Parquet column that holds bytes (🤗's `image:
  {bytes, path}`, any binary column) is never read: each row's value becomes a reference
  `<file as given>#<row index from 0>` (`train.parquet#12`, the index pyarrow's `take` and 🤗's
  `dataset[12]` use), so no image bytes reach a text output.
- Several JSONL files (a stage's per-shard output, `graphs/`): a folder of .jsonl/.jsonl.gz files
  (sorted by name), a brace pattern or a glob; read in turn as one input.

Each reader yields io's raw records: (location, number, value, error). A bad sample or row is one
location (`shards/00000.tar#000000123`, `caps.csv:7`, `caps.parquet:row 3`) with its error, which
read_records reports or, with --skip-bad, counts; a file that cannot be read on (a corrupt tar, a
file that is not UTF-8) stops the stage with one line naming it.
"""

from __future__ import annotations

import csv
import glob
import gzip
import io
import os
import posixpath
import tarfile
import zlib
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import orjson

from mosaictool.errors import MosaicError
from mosaictool.jsonl import LINE_LIMIT, check_input_file, check_not_wide, dumps, non_finite_error

Raw = tuple[str, int, Any, Optional[str]]  # (location, number, value, error): what io's readers yield
PARQUET_BATCH = 4096
IMAGE_EXTENSIONS = frozenset({"jpg", "jpeg", "png", "webp", "bmp", "gif", "tif", "tiff", "ppm"})  # image files' (shard keeps them)
IMAGE_MEMBERS = IMAGE_EXTENSIONS | {"img"}  # a tar sample's image: shard stores an image of another format as .img
TEXT_MEMBER_LIMIT = 64 << 20  # a .txt or .json member above this is no caption or metadata: refused, never read
TABLE_SUFFIXES = (".csv", ".tsv", ".csv.gz", ".tsv.gz")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")
ROW = object()  # the id column when a table has none: the row's number


@dataclass(frozen=True)
class Fields:
    """Where a tar sample's or a table row's caption and id are. `caption`: a .json field or a column
    (--caption-field; None: the .txt member, else the field named `target`); `id`: a .json field or a
    column (--id-field; None: the sample key, or the column `id`, else `key`, else the row number);
    `target`: the record field the caption is written to (parse's --text-key)."""

    caption: str | None = None
    id: str | None = None
    target: str = "caption"


def kind(path: str) -> str | None:
    """'tar', 'table', 'parquet' or 'jsonl' (several JSONL files: a folder of them, a brace pattern or
    glob) for what this module reads; None for one JSONL file (io reads it). A folder holds shards of
    one kind: its .tar files (img2dataset's, beside which its .parquet files are metadata), else its
    .jsonl/.jsonl.gz files (a stage's per-shard output), else its .parquet files."""
    if path == "-":
        return None
    if os.path.isdir(path):
        return _folder_kind(path)
    lower = path.lower()
    if lower.endswith(".parquet"):
        return "parquet"
    if lower.endswith(TABLE_SUFFIXES):
        return "table"
    if lower.endswith(".tar"):
        return "tar"
    if not os.path.exists(path) and any(c in path for c in "{*?["):
        return "jsonl"
    return None


def _folder_kind(folder: str) -> str:
    names = [n.lower() for n in os.listdir(folder) if not n.startswith(".")]
    if any(n.endswith(".tar") for n in names):
        return "tar"
    if any(n.endswith(JSONL_SUFFIXES) for n in names):
        return "jsonl"
    if any(n.endswith(".parquet") for n in names):
        return "parquet"
    return "tar"  # tar_paths says the folder holds no shards


def _folder_files(folder: str, suffixes: tuple[str, ...]) -> list[str]:
    """A folder's files of these suffixes, sorted by name; dot files (a writer's temporary files and
    completion records) are never shards."""
    return sorted(os.path.join(folder, n) for n in os.listdir(folder)
                  if n.lower().endswith(suffixes) and not n.startswith(".") and os.path.isfile(os.path.join(folder, n)))


IN_TAR_HINT = "an image inside a WebDataset tar, where it stays: train on it with `train --data SHARDS --texts FILE`"


def in_tar(image: str) -> bool:
    """Whether an `image` value is a reference into a tar (`shards/00000.tar#000000123.jpg`), not a file."""
    return ".tar#" in image


def input_files(path: str) -> list[str]:
    """The files `path` stands for (a folder or pattern: each file, in order), for the check that no
    output replaces one, and as the shards of a per-shard run."""
    what = kind(path)
    if what == "tar":
        return tar_paths(path)
    if what is None:
        return [path]
    if os.path.isdir(path):
        return _folder_files(path, JSONL_SUFFIXES if what == "jsonl" else (".parquet",))
    return expand(path)


def raw_records(path: str, fields: Fields, jsonl_file: Callable[[str], Iterator[Raw]]) -> Iterator[Raw]:
    """The raw records of a tar spec, of several JSONL files (each read by `jsonl_file`: mosaictool.io's
    reader, passed down so that io uses this module and not the other way round), or of CSV/TSV or
    Parquet files (one, or a pattern of them: 🤗's `data/train-*.parquet`), see the module's docstring."""
    what = kind(path)
    if what == "tar":
        return _tars(path, fields)
    if what == "jsonl":
        return _jsonl_files(input_files(path), jsonl_file)
    return _tables(input_files(path), _parquet if what == "parquet" else _delimited, fields)


def _jsonl_files(files: list[str], jsonl_file: Callable[[str], Iterator[Raw]]) -> Iterator[Raw]:
    """The records of several JSONL files in turn, numbered on from one file to the next (so that
    --assign-ids numbers stay unique)."""
    before = 0
    for path in files:
        check_input_file(path)
        last = 0
        for where, last, value, error in jsonl_file(path):
            yield where, before + last, value, error
        before += last


def expand(spec: str) -> list[str]:
    """The files of a brace pattern (each part globbed if it holds * ? or [) in order, or the one file;
    a missing one is refused up front."""
    import braceexpand

    files: list[str] = []
    for pattern in braceexpand.braceexpand(spec):
        if any(c in pattern for c in "*?[") and not os.path.exists(pattern):
            matched = sorted(glob.glob(pattern))
            if not matched:
                raise MosaicError(f"{pattern}: matched no file")
            files.extend(matched)
        else:
            files.append(pattern)
    for f in files:
        check_input_file(f)
    return files


# ---- WebDataset tars ----------------------------------------------------------------------------------


def tar_paths(spec: str) -> list[str]:
    """The tars `spec` names, in order: a folder's *.tar (sorted by name), a brace pattern's expansion
    (each part globbed if it holds * ? or [), or the one file; a missing one is refused up front."""
    if os.path.isdir(spec):
        tars = sorted(os.path.join(spec, n) for n in os.listdir(spec) if n.lower().endswith(".tar"))
        if not tars:
            raise MosaicError(f"{spec}: is a directory holding no shards (.tar, .jsonl, .jsonl.gz or .parquet files); give the "
                              "JSONL or Parquet file inside it, or a folder of shards")
        return tars
    return expand(spec)


def _tars(spec: str, fields: Fields) -> Iterator[Raw]:
    number = 0
    for path in tar_paths(spec):
        for where, value, error, _ in tar_samples(path, fields):
            number += 1
            yield where, number, value, error


REDO = "download or write it again, or leave it out"  # what to do about a broken tar, unless the reader's caller says better


@dataclass
class TarSample:
    """One WebDataset sample as read from its tar: the payloads of its .txt and .json members (bytes,
    undecoded), where its first image is, or the error that keeps it from being a sample."""

    key: str
    txt: bytes | None = None
    json: bytes | None = None
    image: str | None = None  # the member name of its first image
    image_at: tuple[int, int] | None = None  # its bytes' (offset, size) in the tar
    error: str | None = None
    members: set[str] = field(default_factory=set)  # its member names so far


def tar_samples(path: str, fields: Fields = Fields(),
                redo: str = REDO) -> Iterator[tuple[str, dict | None, str | None, tuple[int, int] | None]]:
    """(location `path#key`, record or None, error or None, its image's (offset, size) in the tar or
    None) per sample of one tar, in member order. `redo`: what a broken tar's line tells the user to do."""
    for sample in read_tar(path, redo):
        yield _record(path, sample, fields)


def read_tar(path: str, redo: str = REDO) -> Iterator[TarSample]:
    """The samples of one tar in member order: the one tar reader (the text stages' records and
    training's shard index are both read here). Only .txt and .json payloads are read; a problem of one
    sample is its `error`, a tar that cannot be read on is MosaicError `path: what; redo`."""
    try:
        tar = tarfile.open(path, "r:")
    except (tarfile.TarError, OSError) as e:
        raise MosaicError(f"{path}: not a readable tar shard: {e}; {redo}") from None
    size = os.path.getsize(path)
    sample: TarSample | None = None
    keys: set[str] = set()  # one tar's: a key seen again after other samples would split a sample in two
    with tar:
        try:
            while (member := tar.next()) is not None:
                tar.members = []  # TarFile keeps every header it read (webdataset clears them too): memory stays flat
                if not member.isfile():
                    continue
                if member.offset_data + member.size > size:
                    raise MosaicError(f"{path}: truncated tar shard ({member.name} is cut off at byte {size}{_after(sample)}); "
                                      f"{redo}")
                stem, dot, ext = posixpath.basename(member.name).partition(".")
                key = posixpath.join(posixpath.dirname(member.name), stem)
                if sample is None or key != sample.key:
                    if sample is not None:
                        yield sample
                    sample = TarSample(key)
                    if key in keys:
                        sample.error = (f"key {key!r} again after other samples ({member.name}): a tar's keys are unique and "
                                        "a sample's members follow each other")
                    keys.add(key)
                if not sample.error:
                    _add_member(tar, member, sample, ext.lower() if stem and dot else None)
            # tarfile stops quietly at a cut-off or corrupt header: a whole tar ends with a zero block there
            with open(path, "rb") as f:
                f.seek(tar.offset)
                end = f.read(512)
        except tarfile.TarError as e:
            raise MosaicError(f"{path}: corrupt tar shard{_after(sample)} ({e}); {redo}") from None
        if len(end) < 512 or end.strip(b"\0"):
            raise MosaicError(f"{path}: truncated or corrupt tar shard (no end-of-archive block at byte {tar.offset}"
                              f"{_after(sample)}); {redo}")
        if sample is not None:
            yield sample


def _add_member(tar: tarfile.TarFile, member: tarfile.TarInfo, sample: TarSample, ext: str | None) -> None:
    """One member into its sample: its caption (.txt) or metadata (.json), its first image; a member not
    named <key>.<extension> (`ext` None) or named twice marks the sample bad."""
    if ext is None:
        sample.error = f"member {member.name!r} is not named <key>.<extension> (not a WebDataset sample)"
    elif member.name in sample.members:  # two captions or two images: neither is guessed to be the sample's
        sample.error = f"{member.name} twice in the sample (a tar's member names are unique)"
    else:
        sample.members.add(member.name)
        if ext in ("txt", "json"):
            if member.size > TEXT_MEMBER_LIMIT:
                sample.error = f"{member.name} is {member.size} bytes, over {TEXT_MEMBER_LIMIT} (not a caption)"
            else:
                setattr(sample, ext, tar.extractfile(member).read())
        elif ext in IMAGE_MEMBERS and sample.image is None:
            sample.image, sample.image_at = member.name, (member.offset_data, member.size)


def _after(sample: TarSample | None) -> str:
    """Where in a tar a problem is: after the last sample read."""
    return f" after sample {sample.key!r}" if sample else ""


def _record(path: str, sample: TarSample, fields: Fields) -> tuple[str, dict | None, str | None, tuple[int, int] | None]:
    """A sample's record (or the error that keeps it from being one), and where its image is."""
    where, (record, error) = f"{path}#{sample.key}", _fields_of(path, sample, fields)
    return where, record, error, sample.image_at


def _fields_of(path: str, sample: TarSample, fields: Fields) -> tuple[dict | None, str | None]:
    key = sample.key
    if sample.error:
        return None, sample.error
    meta, error = _meta_of(sample)
    if error is None:
        caption, error = _caption_of(sample, meta, fields)
    if error is not None:
        return None, error
    if fields.id is not None:
        if fields.id not in meta:
            return None, f"{key}.json has no {fields.id!r} field (--id-field; it has {_names(meta)})"
        rid = meta[fields.id]
    else:
        rid = key
    record = {"id": rid, fields.target: caption}
    if sample.image is not None:
        record["image"] = f"{path}#{sample.image}"
    taken = {"id", fields.target, "image", fields.caption}
    record.update((k, v) for k, v in meta.items() if k not in taken)
    return record, None


def _meta_of(sample: TarSample) -> tuple[dict, str | None]:
    """The sample's .json member as a dict ({} without one), or why it is not one."""
    if sample.json is None:
        return {}, None
    try:
        meta = orjson.loads(sample.json)
    except orjson.JSONDecodeError as e:
        return {}, f"{sample.key}.json: invalid JSON: {e}"
    if not isinstance(meta, dict):
        return {}, f"{sample.key}.json: expected a JSON object, got {type(meta).__name__}"
    return meta, None


def _caption_of(sample: TarSample, meta: dict, fields: Fields) -> tuple[Any, str | None]:
    """(the sample's caption, None) or (None, why it has none): --caption-field's .json field, else its
    .txt member, else the .json's caption field."""
    key = sample.key
    if fields.caption is not None:
        if sample.json is None:
            return None, f"no {key}.json member to take --caption-field {fields.caption!r} from"
        if fields.caption not in meta:
            return None, f"{key}.json has no {fields.caption!r} field (--caption-field; it has {_names(meta)})"
        return meta[fields.caption], None
    if sample.txt is not None:
        try:
            caption = sample.txt.decode("utf-8")
        except UnicodeDecodeError as e:
            return None, f"{key}.txt is not UTF-8 text ({e})"
        return caption.removesuffix("\n").removesuffix("\r"), None  # a text file's final newline ends it, no part of the caption
    if fields.target in meta:
        return meta[fields.target], None
    return None, (f"no caption: no {key}.txt member and no {fields.target!r} field in {key}.json "
                  "(name the .json field with --caption-field)" if sample.json is not None else
                  f"no caption: the sample has neither a {key}.txt nor a {key}.json member")


def _names(meta: dict) -> str:
    names = list(meta)
    return ", ".join(repr(n) for n in names[:12]) + (", ..." if len(names) > 12 else "") if names else "no fields"


# ---- tables: CSV, TSV, Parquet --------------------------------------------------------------------------


def _columns(path: str, names: Sequence[str], fields: Fields) -> tuple[Any, str | None]:
    """(the id column or ROW, the caption column or None) of a table with columns `names`."""
    for flag, name in (("--id-field", fields.id), ("--caption-field", fields.caption)):
        if name is not None and name not in names:
            raise MosaicError(f"{path}: no column {name!r} ({flag}); its columns: {', '.join(map(repr, names))}")
    if fields.id is not None:
        id_column = fields.id
    else:
        id_column = "id" if "id" in names else "key" if "key" in names else ROW
    return id_column, fields.caption


def _row(rec: dict, number: int, id_column: Any, caption_column: str | None, target: str) -> dict:
    """A table row as a record: the caption column renamed to `target`, `id` first."""
    if caption_column is not None and caption_column != target:
        rec[target] = rec.pop(caption_column)
    if id_column == "id":
        return rec
    rid = number if id_column is ROW else rec[id_column]
    rec.pop("id", None)
    return {"id": rid, **rec}


def _holds_bytes(tp) -> bool:
    """Whether an Arrow type holds binary data anywhere (a struct's field, a list's items)."""
    import pyarrow as pa

    if pa.types.is_binary(tp) or pa.types.is_large_binary(tp) or pa.types.is_fixed_size_binary(tp):
        return True
    if pa.types.is_struct(tp):
        return any(_holds_bytes(tp.field(i).type) for i in range(tp.num_fields))
    if pa.types.is_list(tp) or pa.types.is_large_list(tp) or pa.types.is_fixed_size_list(tp):
        return _holds_bytes(tp.value_type)
    if pa.types.is_map(tp):
        return _holds_bytes(tp.key_type) or _holds_bytes(tp.item_type)
    return False


def _tables(files: list[str], reader, fields: Fields) -> Iterator[Raw]:
    """The rows of several tables in turn, numbered on from one file to the next (so that row-number
    ids stay unique)."""
    before = 0
    for path in files:
        before = yield from reader(path, fields, before)


def _parquet(path: str, fields: Fields, before: int = 0) -> Generator[Raw, None, int]:
    """A Parquet file's rows, numbered from `before` + 1; returns the last number."""
    import pyarrow.parquet as pq

    check_input_file(path)
    try:
        pf = pq.ParquetFile(path, page_checksum_verification=True)  # pages written with a CRC are checked
    except Exception as e:  # pyarrow raises several types for a non-Parquet file
        raise MosaicError(f"{path}: not a readable Parquet file: {e}") from e
    schema = pf.schema_arrow
    repeated = sorted({n for n in schema.names if schema.names.count(n) > 1})
    if repeated:  # Arrow allows it; as a record, the last column of the name would replace the others unsaid
        raise MosaicError(f"{path}: column {repeated[0]!r} appears {schema.names.count(repeated[0])} times in the schema; "
                          "rename or drop the copies")
    binary = [f.name for f in schema if _holds_bytes(f.type)]
    id_column, caption_column = _columns(path, schema.names, fields)
    if id_column in binary or caption_column in binary:
        raise MosaicError(f"{path}: column {id_column if id_column in binary else caption_column!r} holds bytes, not text")
    row = 0
    batches = pf.iter_batches(batch_size=PARQUET_BATCH, columns=[n for n in schema.names if n not in binary])
    while True:
        try:
            batch = next(batches, None)
        except (OSError, ValueError) as e:  # a truncated or corrupt row group
            raise MosaicError(f"{path}: corrupt Parquet data after row {row}: {e}; re-create the file") from e
        if batch is None:
            return before + row
        rows = _parquet_rows(batch) if batch.num_columns else (({}, None) for _ in range(batch.num_rows))
        for rec, error in rows:
            row += 1
            if error is not None:
                yield f"{path}:row {row}", before + row, None, error
                continue
            for name in binary:
                rec[name] = f"{path}#{row - 1}"
            rec = _row(rec, before + row, id_column, caption_column, fields.target)
            yield f"{path}:row {row}", before + row, rec, non_finite_error(rec, dumps(rec))


def _parquet_rows(batch) -> Iterator[tuple[Any, str | None]]:
    """(row, None) per row of a Parquet record batch; a row whose string column holds bytes that are
    not UTF-8 (pyarrow checks them only when converting) is (None, the column and byte)."""
    try:
        yield from ((rec, None) for rec in batch.to_pylist())
        return
    except UnicodeDecodeError:
        pass
    for i in range(batch.num_rows):
        row = batch.slice(i, 1)
        try:
            yield row.to_pylist()[0], None
        except UnicodeDecodeError:
            for column in row.column_names:
                try:
                    row.column(column).to_pylist()
                except UnicodeDecodeError as e:
                    yield None, f"column {column!r}: not UTF-8 text (byte {e.start}); re-create the file with UTF-8 strings"
                    break


def _bounded_lines(text: io.TextIOWrapper, path: str) -> Iterator[str]:
    """`text`'s lines for the csv module, which would hold a line of any length (a 200 MB line: 443 MB
    of memory) before refusing its field; a line over io.LINE_LIMIT characters is refused unread."""
    number = 0
    while line := text.readline(LINE_LIMIT + 1):
        number += 1
        if len(line) > LINE_LIMIT and not line.endswith(("\n", "\r")):
            raise MosaicError(f"{path}:{number}: line longer than {LINE_LIMIT >> 20} MiB characters (not a table row)")
        yield line


def _delimited(path: str, fields: Fields, before: int = 0) -> Generator[Raw, None, int]:
    """A CSV or TSV file with a header row (a TSV has no quoting: tabs and newlines cannot be in a field),
    its rows numbered from `before` + 1; returns the last number."""
    check_input_file(path)
    lower = path.lower()
    raw = gzip.open(path, "rb") if lower.endswith(".gz") else open(path, "rb")
    try:
        head = raw.peek(4)[:4]
    except (OSError, EOFError, zlib.error):  # a corrupt .gz: said below, where it is read
        head = b""
    check_not_wide(head, path)
    text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")  # -sig: a spreadsheet's BOM is no part of the first column
    lines = _bounded_lines(text, path)
    reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE) if ".tsv" in lower else csv.reader(lines)
    try:
        header = next(reader, None)
        if header is None:
            return before
        repeated = sorted({c for c in header if header.count(c) > 1})
        if repeated:
            raise MosaicError(f"{path}:1: column {repeated[0]!r} appears twice in the header row")
        id_column, caption_column = _columns(path, header, fields)
        number = before
        for row in reader:
            if not row:  # a blank line
                continue
            number += 1
            where = f"{path}:{reader.line_num}"
            if len(row) != len(header):
                yield where, number, None, f"{len(row)} fields where the header row has {len(header)}"
                continue
            yield where, number, _row(dict(zip(header, row)), number, id_column, caption_column, fields.target), None
        return number
    except UnicodeDecodeError as e:
        raise MosaicError(f"{path}: not UTF-8 text (after line {reader.line_num}: {e}); save it as UTF-8") from None
    except csv.Error as e:
        raise MosaicError(f"{path}:{reader.line_num}: {e}") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise MosaicError(f"{path}: truncated or corrupt gzip file ({e}); re-create or re-download it") from None
    finally:
        text.close()

