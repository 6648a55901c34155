"""Record I/O: formats, validation with physical line numbers, skips, atomic output."""

from __future__ import annotations

import gzip
import os

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
