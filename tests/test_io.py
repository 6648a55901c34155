"""Record I/O: formats, validation with physical line numbers, skips, atomic output."""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import orjson
import polars as pl
import pytest

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
