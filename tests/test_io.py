"""Record I/O: formats, validation with physical line numbers, skips, atomic output."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import stat
import sys
from pathlib import Path

import orjson
import polars as pl
import pytest

from helpers import CAP, assert_ok, invoke, jsonl, out_records, refused, snapshot
from helpers import refused as assert_refused
from mosaictool.errors import MosaicError, RecordError
from mosaictool.io import RecordWriter, Skips, read_records, write_records


def write_lines(path, lines):
    path.write_bytes(b"".join(line.encode() + b"\n" for line in lines))
    return path


def test_jsonl_roundtrip_keeps_keys_order_and_unicode(tmp_path):
    recs = [{"id": 1, "caption": "un café ☕", "extra": {"a": [1, 2]}}, {"id": "b", "caption": "狗", "extra": None}]
    out = tmp_path / "out.jsonl"
    assert write_records(out, recs) == 2
    assert list(read_records(out)) == recs
    assert out.read_bytes().splitlines()[0] == orjson.dumps(recs[0])


def test_parquet_roundtrip_with_nested_fields_null_first(tmp_path):
    recs = [
        {"id": 1, "graph": {"entities": [], "relations": []}, "note": None},
        {"id": 2, "graph": {"entities": [{"head": "dog", "span_bounds": [0, 2]}], "relations": []}, "note": "x"},
    ]
    out = tmp_path / "g.parquet"
    write_records(out, recs)
    back = list(read_records(out))
    assert back[1]["graph"]["entities"][0]["head"] == "dog"
    assert back[0]["graph"]["entities"] == [] and back[0]["note"] is None
    assert pl.read_parquet(out).height == 2


def test_gzip_jsonl(tmp_path):
    out = tmp_path / "a.jsonl.gz"
    write_records(out, [{"id": 1}])
    assert gzip.decompress(out.read_bytes()) == b'{"id":1}\n'
    assert list(read_records(out)) == [{"id": 1}]


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"caption": "x"}', "missing 'id'"),
        ('{"id": [1], "caption": "x"}', "'id' must be a string or an integer"),
        ('{"id": 1, "caption": "dup"}', "duplicate id 1"),
    ],
)
def test_bad_line_names_its_physical_line(tmp_path, line, message):
    path = write_lines(tmp_path / "c.jsonl", ['{"id": 1, "caption": "a"}', "", line])
    with pytest.raises(MosaicError, match=rf"c.jsonl:3: {message}"):
        list(read_records(path))


def test_skip_bad_counts_and_keeps_the_rest(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", ['{"id": 1}', "oops", '{"id": 2}', '{"id": 2}'])
    skips = Skips(enabled=True)
    assert [r["id"] for r in read_records(path, skips=skips)] == [1, 2]
    assert skips.count == 2 and "c.jsonl:2" in skips.examples[0] and "c.jsonl:4" in skips.examples[1]


def test_assign_ids_uses_line_numbers(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", ['{"caption": "a"}', "", '{"caption": "b"}'])
    assert [r["id"] for r in read_records(path, assign_ids=True)] == [1, 3]


def test_stage_check_errors_are_located(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", ['{"id": 1, "n": 1}', '{"id": 2, "n": -1}'])

    def check(rec):
        if rec["n"] < 0:
            raise RecordError("n must be positive")

    with pytest.raises(MosaicError, match="c.jsonl:2: n must be positive"):
        list(read_records(path, check=check))


def test_failed_write_leaves_no_file(tmp_path):
    out = tmp_path / "out.jsonl"

    def records():
        yield {"id": 1}
        raise MosaicError("boom")

    with pytest.raises(MosaicError):
        write_records(out, records())
    assert os.listdir(tmp_path) == []


def test_missing_input_and_missing_output_dir(tmp_path):
    with pytest.raises(MosaicError, match="no such file"):
        list(read_records(tmp_path / "nope.jsonl"))
    with pytest.raises(MosaicError, match="does not exist"):
        with RecordWriter(tmp_path / "no" / "dir.jsonl"):
            pass


def test_reading_is_streaming(tmp_path):
    """The reader yields the first record before it has seen a bad last line."""
    path = write_lines(tmp_path / "c.jsonl", ['{"id": 1}', '{"id": 2}', "bad"])
    it = read_records(path)
    assert next(it) == {"id": 1}


# --- one JSON reader (io.parse_json) for every JSON file: depth, UTF-8, one line naming file and position ------

DEEP = "[" * 100_000 + "]" * 100_000  # 10^5 levels: the standard library's parser overflows Python's stack


def _deep_tar(path: Path) -> None:
    import io
    import tarfile

    with tarfile.open(path, "w") as tar:
        for name, data in (("000000000.json", DEEP.encode()), ("000000000.png", b"png")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _read_deep(kind: str, tmp_path: Path):
    """Read a deep JSON file the way one reader of mosaictool does."""
    from mosaictool.bench import _files, _probe

    f = tmp_path / {"model-config": "m.json", "config.json": "config.json", "mined": "mined_hard_images.json",
                    "aro": "visual_genome_relation.json", "probe_c": "probe_c.jsonl", "manifest": "manifest.json",
                    "shard": "000000.tar", "metrics": "metrics.jsonl"}[kind]
    if kind == "shard":
        _deep_tar(f)
    elif kind == "metrics":
        f.write_text('{"step": 1}\n' + DEEP + "\n" + '{"step": 2}\n')
    else:
        f.write_text(DEEP + ("\n" if kind == "probe_c" else ""))
    if kind == "model-config":
        from mosaictool.model import openclip

        return f, lambda: openclip.create("m", model_config_file=f)
    if kind == "config.json":
        from mosaictool.training.checkpoints import read_stored_config

        return f, lambda: read_stored_config(f)
    if kind == "mined":
        from mosaictool.training.data import read_mined

        return f, lambda: read_mined(f, 3)
    if kind == "aro":
        return f, lambda: _files.read_json(f, "aro")
    if kind == "probe_c":
        return f, lambda: _probe.read_jsonl(f, "probe_c", ("image",))
    if kind == "manifest":
        from mosaictool.world import load_manifest

        return f, lambda: load_manifest(tmp_path)
    if kind == "metrics":
        from mosaictool.training.reporting import _truncate_jsonl

        return f, lambda: _truncate_jsonl(f, 5)
    from mosaictool.training.shards import ShardCache

    return f, lambda: ShardCache().samples(str(f))


@pytest.mark.parametrize("kind", ["model-config", "config.json", "mined", "aro", "probe_c", "manifest", "shard", "metrics"])
def test_deeply_nested_json_is_one_line_naming_the_file_and_position(kind, tmp_path):
    f, read = _read_deep(kind, tmp_path)
    with pytest.raises(MosaicError) as e:
        read()
    message = str(e.value)
    assert "\n" not in message and str(f) in message and "nested deeper than 1024 levels" in message, message
    assert "column 1026" in message


def test_the_json_reader_says_where(tmp_path):
    from mosaictool.io import parse_json, read_json

    assert parse_json(b"\xef\xbb\xbf[1, NaN]", "a.json")[0] == 1  # a BOM skipped, NaN left to the schemas
    for data, words in [(b'{"a": "\xff"}', "a.json: invalid JSON: not UTF-8 text (byte 7)"),
                        ('{"a": 1,\n "b": }', "a.json: invalid JSON: line 2 column 7: Expecting value"),
                        ("[1,", "a.json: invalid JSON: column 4: Expecting value")]:
        with pytest.raises(MosaicError, match=re.escape(words)):
            parse_json(data, "a.json")
    (tmp_path / "b.json").write_text("[" * 2000)
    with pytest.raises(MosaicError, match=r"b\.json: bad: column 1026: nested deeper than 1024 levels; fix it$"):
        read_json(tmp_path / "b.json", label="bad", hint="fix it")


def test_a_lock_holder_record_nested_deep_is_another_process(tmp_path):
    from mosaictool.locks import holder

    (tmp_path / "lock").write_text(DEEP)
    assert holder(tmp_path / "lock") == "another process"


def test_a_demo_cache_entry_whose_manifest_nests_deep_is_discarded(tmp_path):
    from mosaictool.demo import cache

    entry = tmp_path / "cache" / "data-x"
    entry.mkdir(parents=True)
    (entry / cache.MANIFEST).write_text(DEEP)
    problem = cache.restore(entry, tmp_path / "out")
    assert "its manifest is unreadable" in problem and "nested deeper" in problem and not entry.exists()


# --- NaN and infinity have no JSON: refused where records are read or written, never written as null --------


@pytest.mark.parametrize("record, field", [({"id": 1, "x": float("nan")}, "x: nan"),
                                           ({"id": 1, "v": [1.0, float("inf")]}, "v[1]: inf"),
                                           ({"id": 1, "g": {"s": [{"w": -float("inf")}]}}, "g.s[0].w: -inf"),
                                           ({"id": 1, "a": __import__("numpy").array([[1.0, 2.0], [3.0, float("nan")]])},
                                            "a[1][1]: nan"),
                                           # a null of its own besides; numpy scalars (float64 is a float, float32 not)
                                           ({"id": 1, "t": None, "s": __import__("numpy").float64("nan")}, "s: nan"),
                                           ({"id": 1, "t": None, "s": [__import__("numpy").float32("-inf")]}, "s[0]: -inf")])
def test_write_refuses_nan_and_infinity(tmp_path, record, field):
    import mosaictool

    for name in ("out.jsonl", "out.parquet"):
        with pytest.raises(MosaicError, match=rf"{name}: record 2: {re.escape(field)} is not a finite number \(JSON has no NaN"):
            mosaictool.write([{"id": 0}, record], tmp_path / name)
        assert not (tmp_path / name).exists()
    with pytest.raises(MosaicError, match=rf"record 1: {re.escape(field)} is not a finite number"):
        list(mosaictool.read([record]))


def test_parquet_rows_with_nan_are_refused_and_skippable(tmp_path):
    src = tmp_path / "t.parquet"
    pl.DataFrame({"id": [1, 2, 3], "caption": ["a", "b", "c"], "score": [0.5, float("nan"), float("inf")]}).write_parquet(src)
    with pytest.raises(MosaicError, match=r"t\.parquet:row 2: score: nan is not a finite number"):
        list(read_records(str(src)))
    skips = Skips(enabled=True)
    assert [r["id"] for r in read_records(str(src), skips=skips)] == [1] and skips.count == 2


def test_parse_refuses_parquet_nan_instead_of_writing_null(tmp_path):
    from typer.testing import CliRunner

    from mosaictool.cli import app

    src = tmp_path / "t.parquet"
    pl.DataFrame({"id": [1, 2], "caption": ["a red cube", "a blue ball"], "score": [0.5, float("nan")]}).write_parquet(src)
    result = CliRunner().invoke(app, ["parse", str(src), "-o", str(tmp_path / "g.jsonl")])
    assert result.exit_code == 1 and not (tmp_path / "g.jsonl").exists()
    assert result.stderr.strip().splitlines() == [
        f"Error: {src}:row 2: score: nan is not a finite number (JSON has no NaN or infinity; it would be written as null): "
        "fix the value or drop the field (use --skip-bad to skip bad records)"]


# --- captions enter normalised: NFC, no invisible format characters, emoji sequences whole -------------------

ZWJ, ZWSP, RLO, PDF = "\u200d", "\u200b", "\u202e", "\u202c"
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji: man ZWJ woman ZWJ girl


@pytest.mark.parametrize("caption, expected", [
    ("a dog", "a dog"),
    (ZWSP * 3, ""),
    (ZWJ, ""),
    (f"a red{ZWJ} cube", "a red cube"),
    (f"a {RLO}red cube{PDF}", "a red cube"),
    ("caf\u0065\u0301", "caf\u00e9"),  # NFD -> NFC
    (f"a family {FAMILY} on a bench", f"a family {FAMILY} on a bench"),
    (f"a coder \U0001f469\U0001f3fd{ZWJ}\U0001f4bb{ZWSP}", f"a coder \U0001f469\U0001f3fd{ZWJ}\U0001f4bb"),
])
def test_captions_are_read_normalised(caption, expected):
    assert [r["caption"] for r in read_records([{"id": 1, "caption": caption}])] == [expected]


def test_removed_characters_are_said_once_per_file(tmp_path, caplog):
    src = tmp_path / "c.jsonl"
    src.write_text("".join(orjson.dumps({"id": i, "caption": c}).decode() + "\n"
                           for i, c in enumerate(["a dog", f"a{ZWSP} cat", f"{RLO}a cow", "a hen"])))
    with caplog.at_level("WARNING", logger="mosaictool.io"):
        assert [r["caption"] for r in read_records(str(src))] == ["a dog", "a cat", "a cow", "a hen"]
    assert [r.getMessage() for r in caplog.records] == [
        f"{src}: removed invisible format characters (zero-width, bidi controls) from 2 caption(s), first at {src}:2 ('caption')"]


def test_a_caption_of_zero_width_characters_alone_is_refused_as_blank():
    import mosaictool

    with pytest.raises(MosaicError, match=r"record 2: 'caption' is empty"):
        list(mosaictool.parse([{"id": 1, "caption": "a red cube"}, {"id": 2, "caption": ZWSP + ZWJ + RLO}]))


# --- closed standard streams and Parquet strings that are not UTF-8: one line -------------------------------


@pytest.mark.parametrize("closed, args, words", [
    (0, ["parse", "-", "-o", "{tmp}/o.jsonl"], "Error: <stdin>: standard input is closed; give an input file, or pipe records in"),
    (1, ["parse", "{tmp}/c.jsonl"], "Error: <stdout>: standard output is closed; give -o a file, or redirect the output"),
])
def test_a_closed_stdin_or_stdout_is_one_line(tmp_path, closed, args, words):
    import subprocess

    from clirun import argv

    (tmp_path / "c.jsonl").write_text('{"id": 1, "caption": "a red cube"}\n')
    result = subprocess.run(argv(*[a.replace("{tmp}", str(tmp_path)) for a in args]), preexec_fn=lambda: os.close(closed),
                            stdout=subprocess.DEVNULL if closed != 1 else None, stderr=subprocess.PIPE, text=True, timeout=300)
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [words], result.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_a_parquet_string_that_is_not_utf8_is_a_bad_record(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "t.parquet"
    captions = pa.array([b"a red cube", b"a bad \xff byte", b"a blue ball"], type=pa.binary()).view(pa.string())
    pq.write_table(pa.table({"id": [1, 2, 3], "caption": captions}), src)
    with pytest.raises(MosaicError, match=r"t\.parquet:row 2: column 'caption': not UTF-8 text \(byte 6\)"):
        list(read_records(str(src)))
    skips = Skips(enabled=True)
    assert [r["id"] for r in read_records(str(src), skips=skips)] == [1, 3] and skips.count == 1


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_input_is_one_line_naming_the_encoding_even_with_skip_bad(tmp_path, encoding):
    """A JSONL saved as UTF-16 (Windows Notepad, PowerShell's `>`) is not records to skip one by one:
    --skip-bad read it as an empty input and exited 0."""
    path = tmp_path / "c.jsonl"
    text = '{"id": 1, "caption": "a dog"}\n{"id": 2, "caption": "a cat"}\n'
    path.write_bytes(("\ufeff" + text).encode(encoding) if encoding != "utf-16" else text.encode("utf-16"))
    for skip in (False, True):
        with pytest.raises(MosaicError) as e:
            list(read_records(path, skips=Skips(enabled=skip)))
        line = str(e.value)
        assert str(path) in line and encoding.split("-")[0].upper().replace("UTF", "UTF-") in line and "UTF-8" in line
        assert "\n" not in line


def test_utf16_without_a_byte_order_mark_is_refused_not_skipped_line_by_line(tmp_path):
    """Without a mark the NUL bytes between ASCII letters give it away (JSON text holds no raw NUL)."""
    path = tmp_path / "c.jsonl"
    path.write_bytes('{"id": 1, "caption": "a dog"}\n{"id": 2, "caption": "a cat"}\n'.encode("utf-16-le"))
    with pytest.raises(MosaicError) as e:
        list(read_records(path, skips=Skips(enabled=True)))
    assert f"{path}: line 1 holds NUL bytes" in str(e.value) and "UTF-16" in str(e.value)


class _EndlessLine:
    """A binary stream of `size` bytes `x` without a newline, then one short record: a 2 GB caption
    line that is never in memory."""

    def __init__(self, size: int):
        self.left, self.tail = size, b'\n{"id": 2, "caption": "a cat"}\n'

    def readline(self, limit: int = -1) -> bytes:
        if self.left:
            n = min(self.left, limit if limit > 0 else self.left)
            self.left -= n
            return b"x" * n
        line, _, self.tail = self.tail.partition(b"\n")
        return line + b"\n" if line or self.tail else line

    def close(self) -> None:
        pass


def test_a_2gb_line_is_one_bad_record_read_in_bounded_memory(monkeypatch):
    import tracemalloc

    from mosaictool import io as mio

    monkeypatch.setattr(mio, "_open_binary_in", lambda path: _EndlessLine(2 << 30))
    tracemalloc.start()
    try:
        with pytest.raises(MosaicError) as e:
            list(read_records("big.jsonl"))
        assert "big.jsonl:1: line longer than" in str(e.value) and "\n" not in str(e.value)
        monkeypatch.setattr(mio, "_open_binary_in", lambda path: _EndlessLine(2 << 30))
        skips = Skips(enabled=True)
        assert [r["id"] for r in read_records("big.jsonl", skips=skips)] == [2] and skips.count == 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * mio.LINE_LIMIT, peak  # a few buffers of the limit, never the line's 2 GB


def test_a_utf16_json_file_is_named_utf16():
    """config.json, annotation files: the one JSON reader says what the bytes are, not only 'byte 0'."""
    from mosaictool.io import parse_json

    with pytest.raises(MosaicError) as e:
        parse_json('{"a": 1}'.encode("utf-16"), "x.json")
    assert str(e.value).startswith("x.json: invalid JSON: UTF-16 text (byte-order mark ff fe), not UTF-8")


def test_a_flipped_byte_in_a_parquet_page_is_an_error_not_a_changed_caption(tmp_path):
    """Parquet written by mosaictool carries a CRC per data page, checked on read: a byte flipped
    inside a caption's page is one line naming the file, never a silently different caption."""
    path = tmp_path / "caps.parquet"
    write_records(path, [{"id": i, "caption": f"a red square number {i} beside a blue circle"} for i in range(50)])
    import pyarrow.parquet as pq

    assert pq.ParquetFile(path).metadata.num_rows == 50
    data = bytearray(path.read_bytes())
    at = data.find(b"beside a blue circle")
    assert at > 0  # the page is stored plain: the flip lands in a caption
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(MosaicError, match="caps.parquet"):
        list(read_records(path))


def test_a_field_given_twice_in_a_line_is_a_bad_record_not_the_last_value(tmp_path):
    """JSON parsers keep the last of two equal keys without a word: a record naming its caption twice is
    one line naming the field, skippable; lines as mosaictool writes them are checked by one comparison."""
    path = tmp_path / "caps.jsonl"
    path.write_text('{"id": 1, "caption": "a red cube"}\n{"id": 2, "caption": "a cat", "caption": "a dog"}\n'
                    '{"id": 3, "texts": {"positives": [{"text": "a"}, {"text": "b"}]}}\n')
    with pytest.raises(MosaicError, match=r"caps.jsonl:2: field 'caption' is given twice"):
        list(read_records(path))
    skips = Skips(enabled=True)
    assert [r["id"] for r in read_records(path, skips=skips)] == [1, 3]  # the same key in two objects is no repeat
    nested = tmp_path / "nested.jsonl"
    nested.write_text('{"id": 1, "graph": {"entities": [{"head": "dog", "head": "cat"}]}}\n')
    with pytest.raises(MosaicError, match="'head' is given twice"):
        list(read_records(nested))


# --- bad input (moved from test_bad_input.py) ---

def test_bom_is_skipped(case):
    src = case.file("caps.jsonl", "\ufeff" + jsonl({"id": 1, "caption": CAP}, {"id": 2, "caption": CAP}))
    case.freeze()
    result = invoke(["parse", src, "-o", case.dst / "g.jsonl", "-q"])
    assert_ok(result)
    assert [r["id"] for r in out_records(case.dst / "g.jsonl")] == [1, 2]
    assert snapshot(case.src) == case._before


def test_bom_in_gzip_is_skipped(case):
    src = case.src / "caps.jsonl.gz"
    src.write_bytes(gzip.compress(b"\xef\xbb\xbf" + jsonl({"id": 1, "caption": CAP}).encode()))
    result = invoke(["parse", src, "-q"])
    assert_ok(result)
    assert json.loads(result.stdout)["id"] == 1


def test_crlf_and_blank_lines_are_accepted(case):
    body = jsonl({"id": 1, "caption": CAP}).replace("\n", "\r\n") + "\r\n   \n\n" + jsonl({"id": 2, "caption": CAP})
    src = case.file("caps.jsonl", body.encode())
    result = invoke(["parse", src, "-q"])
    assert_ok(result)
    recs = [json.loads(x) for x in result.stdout.splitlines()]
    assert [r["id"] for r in recs] == [1, 2] and recs[0]["caption"] == CAP  # no stray \r in the caption


def test_crlf_bad_line_is_numbered_physically(case):
    src = case.file("caps.jsonl", b'{"id": 1, "caption": "a dog"}\r\n\r\n{"id": 2}\r\n')
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl"]), f"{src}:3:", "missing 'caption'", "--text-key")
    case.untouched()


@pytest.mark.parametrize(
    "record, message, flag",
    [
        ({"id": 2}, "missing 'caption'", "--text-key"),
        ({"id": 2, "caption": 42}, "caption: expected a string, got int", "--skip-bad"),
        ({"id": 2, "caption": None}, "caption: expected a string, got null", "--skip-bad"),
        ({"id": 2, "caption": ["a", "dog"]}, "caption: expected a string, got list", "--skip-bad"),
        ({"id": 2, "caption": ""}, "'caption' is empty", "--skip-bad"),
        ({"id": 2, "caption": "  \t "}, "'caption' is empty", "--skip-bad"),
        ({"id": 2, "caption": "dog " * 25_000}, "100000 characters, more than --max-chars 2000", "--max-chars"),
        ({"id": 1, "caption": CAP}, "duplicate id 1", "--skip-bad"),
        ({"caption": CAP}, "missing 'id'", "--assign-ids"),
        ({"id": 2.5, "caption": CAP}, "'id' must be a string or an integer, got float", "--skip-bad"),
        ({"id": True, "caption": CAP}, "'id' must be a string or an integer, got bool", "--skip-bad"),
        ([1, 2], "expected a JSON object, got list", "--skip-bad"),
        ("just a caption", "expected a JSON object, got str", "--skip-bad"),
    ],
    ids=["no-caption", "int-caption", "null-caption", "list-caption", "empty-caption", "blank-caption",
         "100k-caption", "duplicate-id", "no-id", "float-id", "bool-id", "array-line", "string-line"],
)
def test_bad_record_is_refused_with_its_line(case, record, message, flag):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}, record))
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl"]), f"{src}:2:", message, flag)
    case.untouched()


def test_bad_records_skipped_and_counted_with_skip_bad(case):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}, {"id": 2}, {"id": 1, "caption": CAP},
                                        {"id": 3, "caption": "dog " * 25_000}, {"id": 4, "caption": CAP}))
    result = invoke(["parse", src, "-o", case.dst / "g.jsonl", "--skip-bad", "-q"])
    assert_ok(result)
    assert [r["id"] for r in out_records(case.dst / "g.jsonl")] == [1, 4]
    assert "skipped 3 bad record(s)" in result.stderr and f"{src}:2:" in result.stderr


def test_invalid_json_and_invalid_utf8(case):
    src = case.file("caps.jsonl", b'{"id": 1, "caption": "a dog"}\n{"id": 2, "caption": "a \xff cat"}\n')
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl"]), f"{src}:2:", "invalid JSON", "--skip-bad")
    src2 = case.file("more.jsonl", '{"id": 1, "caption": "a dog"}\n{"id": 2, "caption": "a cat"\n')
    case.freeze()
    assert_refused(invoke(["parse", src2, "-o", case.dst / "g.jsonl"]), f"{src2}:2:", "invalid JSON")
    case.untouched()


def test_empty_file_gives_empty_output(case):
    # A 1:1 stage maps no records to no records (a filter upstream may have kept none); the
    # commands that need data (shard, train) refuse an empty input themselves.
    for name in ("empty.jsonl", "blank.jsonl"):
        src = case.file(name, "" if name == "empty.jsonl" else "\n\n  \n")
        result = invoke(["parse", src, "-o", case.dst / f"{name}.out.jsonl", "-q"])
        assert_ok(result)
        assert (case.dst / f"{name}.out.jsonl").read_text() == ""


def test_directory_as_input(case):
    case.freeze()
    assert_refused(invoke(["parse", case.src, "-o", case.dst / "g.jsonl"]), f"{case.src}: is a directory",
                   "give the JSONL or Parquet file")
    case.untouched()


def test_missing_input(case):
    assert_refused(invoke(["parse", case.src / "nope.jsonl", "-o", case.dst / "g.jsonl"]), "nope.jsonl: no such file")
    assert snapshot(case.dst) == {}


def test_truncated_gzip(case):
    blob = gzip.compress(jsonl(*({"id": i, "caption": CAP} for i in range(200))).encode())
    src = case.file("caps.jsonl.gz", blob[: len(blob) // 2])
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl", "-q"]), f"{src}: truncated or corrupt gzip",
                   "re-create")
    case.untouched()


def test_parquet_of_the_wrong_schema(case):
    import polars as pl

    src = case.src / "caps.parquet"
    pl.DataFrame({"id": [1, 2], "text": [CAP, CAP]}).write_parquet(src)
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl"]), f"{src}:row 1:", "missing 'caption'",
                   "--text-key")
    wrong_type = case.src / "ints.parquet"
    pl.DataFrame({"id": [1], "caption": [7]}).write_parquet(wrong_type)
    case.freeze()
    assert_refused(invoke(["parse", wrong_type, "-o", case.dst / "g.jsonl"]), f"{wrong_type}:row 1:",
                   "caption: expected a string, got int")
    case.untouched()


def test_not_parquet_and_truncated_parquet(case):
    import polars as pl

    fake = case.file("caps.parquet", jsonl({"id": 1, "caption": CAP}))
    good = case.src / "good.parquet"
    pl.DataFrame({"id": list(range(500)), "caption": [CAP] * 500}).write_parquet(good)
    cut = case.file("cut.parquet", good.read_bytes()[: good.stat().st_size // 2])
    case.freeze()
    assert_refused(invoke(["parse", fake, "-o", case.dst / "g.jsonl"]), f"{fake}: not a readable Parquet file")
    assert_refused(invoke(["parse", cut, "-o", case.dst / "g.jsonl"]), f"{cut}: not a readable Parquet file")
    case.untouched()


def test_output_is_a_directory(case):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst]), f"{case.dst}: is a directory", "-o")
    case.untouched()


def test_output_folder_missing(case):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    assert_refused(invoke(["parse", src, "-o", case.dst / "no" / "g.jsonl"]), "does not exist")
    assert snapshot(case.dst) == {}


def test_output_equals_input(case):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", src]), "is the input INPUT", "-o")
    assert snapshot(case.src) == case._before


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_full_disk_dev_full(case):
    src = case.file("caps.jsonl", jsonl(*({"id": i, "caption": CAP} for i in range(3))))
    case.freeze()
    before = os.stat("/dev/full")
    assert_refused(invoke(["parse", src, "-o", "/dev/full", "-q"]), "/dev/full: cannot write (No space left on device)",
                   "disk is full", "-o")
    after = os.stat("/dev/full")  # written in place: the device itself was not replaced by a file
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino
    case.untouched()
    assert not list(Path("/dev").glob(".full.*"))


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_full_disk_as_stdout(case):
    import subprocess

    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([sys.executable, "-m", "mosaictool", "decompose", str(src)], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              input=None)
    # decompose refuses a record without a graph before writing; parse's graphs are what it reads
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    graphs = case.file("graphs.jsonl", jsonl({"id": 1, "caption": "a dog", "graph": {
        "entities": [{"span": "a dog", "lemma_span": "a dog", "head": "dog", "lemma_head": "dog", "span_bounds": [0, 2],
                      "modifiers": [{"dep": "det", "span": "a", "lemma_span": "a"}], "type": "unknown",
                      "attributes": []}], "relations": []}}))
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([sys.executable, "-m", "mosaictool", "decompose", str(graphs), "-q"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == "Error: <stdout>: cannot write (No space left on device): the disk is full; " \
                                  "free space or choose another -o"


@contextlib.contextmanager
def unwritable(folder: Path):
    """`folder` made unwritable: by its permission bits, or, for root (whom they do not stop), by the
    immutable flag (chattr +i; ext4, xfs, btrfs)."""
    import subprocess

    if os.geteuid() != 0:
        os.chmod(folder, 0o555)
        try:
            yield
        finally:
            os.chmod(folder, 0o755)
        return
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("running as root on a file system without chattr +i: no folder is unwritable for root here")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_read_only_output_folder(case):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    with unwritable(case.dst):
        assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl"]), f"{case.dst / 'g.jsonl'}: cannot write",
                       "permission denied", "-o")
    case.untouched()


# --- bad input (moved from test_bad_values.py) ---

def decompose_input(*extras: dict, ids=None) -> str:
    graph = json.loads((Path(__file__).parent / "data" / "decompose" / "input.jsonl").read_text().splitlines()[0])
    ids = ids or list(range(1, len(extras) + 1))
    return "".join(json.dumps({**graph, "id": i, **extra}) + "\n" for i, extra in zip(ids, extras))


def test_parquet_keeps_integer_ids_and_equals_jsonl(tmp_path):
    from mosaictool.io import read_records

    src = tmp_path / "in.jsonl"
    src.write_text(decompose_input({}, {}, {}, ids=[7, 12, 3]))
    assert invoke(["decompose", src, "-o", tmp_path / "o.parquet", "-q"]).exit_code == 0
    assert invoke(["decompose", src, "-o", tmp_path / "o.jsonl", "-q"]).exit_code == 0
    parquet, jsonl = list(read_records(tmp_path / "o.parquet")), list(read_records(tmp_path / "o.jsonl"))
    assert [r["id"] for r in parquet] == [7, 12, 3] and all(type(r["id"]) is int for r in parquet)
    assert [r["subgraph_keys"] for r in parquet] == [r["subgraph_keys"] for r in jsonl]


PARQUET_CONFLICTS = [
    (({"meta": 1}, {"meta": "a"}), None, "meta is an integer in output record 1 but a string in output record 2"),
    (({}, {}), [1, "b"], "id is an integer in output record 1 but a string in output record 2"),
    (({"meta": {"a": 1}}, {"meta": {"a": "s"}}), None, "meta.a is an integer in output record 1 but a string in output record 2"),
    (({"meta": {"a": 1}}, {"meta": "s"}), None, "meta is an object in output record 1 but a string in output record 2"),
    (({"meta": [1]}, {"meta": ["x"]}), None, "meta[] is an integer in output record 1 but a string in output record 2"),
    (({"meta": True}, {"meta": 3}), None, "meta is true/false in output record 1 but an integer in output record 2"),
    (({"meta": [1]}, {"meta": {"a": 1}}), None, "meta is a list in output record 1 but an object in output record 2"),
]


@pytest.mark.parametrize("extras, ids, message", PARQUET_CONFLICTS,
                         ids=[m.split(" is ")[0] + "-" + m.split(" but ")[1].split(" in ")[0] for _, _, m in PARQUET_CONFLICTS])
def test_parquet_refuses_a_field_whose_type_changes(tmp_path, extras, ids, message):
    src = tmp_path / "in.jsonl"
    src.write_text(decompose_input(*extras, ids=ids))
    out = tmp_path / "out"
    out.mkdir()
    before = snapshot(tmp_path)
    refused(invoke(["decompose", src, "-o", out / "o.parquet", "-q"]), f"{out / 'o.parquet'}: cannot write Parquet", message)
    assert snapshot(tmp_path) == before  # no output, no temp file


def test_parquet_integers_among_floats_become_floats(tmp_path):
    from mosaictool.io import read_records

    src = tmp_path / "in.jsonl"
    src.write_text(decompose_input({"score": 1}, {"score": 2.5}, {"score": None}))
    assert invoke(["decompose", src, "-o", tmp_path / "o.parquet", "-q"]).exit_code == 0
    assert [r["score"] for r in read_records(tmp_path / "o.parquet")] == [1.0, 2.5, None]

