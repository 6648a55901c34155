"""Bad input, measured: every kind of broken or unusual input a user can hand a stage.

Each case checks what the user sees and what is left on disk:
- a refused input: exit code 1, ONE line on stderr, `Error: ...` naming the file, the line / record
  and the flag (or stage) that fixes it, and no Python traceback;
- an accepted oddity (a BOM, CRLF, blank lines, CMYK/16-bit/palette/1x1 images): exit 0 and the
  right output;
- in both: the input is byte-for-byte unchanged and no half-written output is left behind.
Signals (SIGINT, SIGTERM) run the real command in a subprocess and are marked slow.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mosaictool.cli import app

sys.path.insert(0, str(Path(__file__).parent))
from train_fixtures import make_world, write_tiny_model  # noqa: E402

runner = CliRunner()


# ---- helpers ------------------------------------------------------------------------------------


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (hidden temp files included) -> its content hash."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "<dir>"
        for p in sorted(Path(folder).rglob("*"))
    }


def jsonl(*records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def invoke(args: list[str], input: str | bytes | None = None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def assert_refused(result, *needles: str, code: int = 1) -> str:
    """Exit `code`, one `Error:` line holding every needle, no traceback; returns the line."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, (result.exit_code, result.stdout[-500:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("Error: "), line
    for needle in needles:
        assert needle in line, (needle, line)
    return line


def assert_ok(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, (result.stdout[-500:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr


class Case:
    """An input folder and an output folder; `untouched()` checks that a failed run lost nothing:
    the input folder is unchanged and the output folder holds nothing (no partial / temp file)."""

    def __init__(self, tmp_path: Path):
        self.src = tmp_path / "in"
        self.dst = tmp_path / "out"
        self.src.mkdir()
        self.dst.mkdir()
        self._before: dict[str, str] | None = None

    def file(self, name: str, content: str | bytes) -> Path:
        path = self.src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
        return path

    def freeze(self) -> None:
        self._before = snapshot(self.src)

    def untouched(self) -> None:
        assert self._before is not None, "call freeze() before running the command"
        assert snapshot(self.src) == self._before, "the input changed"
        assert snapshot(self.dst) == {}, f"output left behind: {snapshot(self.dst)}"


@pytest.fixture
def case(tmp_path) -> Case:
    return Case(tmp_path)


def out_records(path: Path) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


CAP = "A red dog on a blue sofa."


# ---- records, through parse ---------------------------------------------------------------------


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
        ({"id": 2, "caption": 42}, "'caption' must be a string, got int", "--skip-bad"),
        ({"id": 2, "caption": None}, "'caption' must be a string, got null", "--skip-bad"),
        ({"id": 2, "caption": ["a", "dog"]}, "'caption' must be a string, got list", "--skip-bad"),
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
                   "must be a string, got int")
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


# ---- outputs ------------------------------------------------------------------------------------


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
    assert_refused(invoke(["parse", src, "-o", src]), "would overwrite the input", "-o")
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


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_output_folder(case):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    os.chmod(case.dst, 0o555)
    try:
        assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl"]), f"{case.dst / 'g.jsonl'}: cannot write",
                       "-o")
    finally:
        os.chmod(case.dst, 0o755)
    case.untouched()
