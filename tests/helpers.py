"""Helpers the test modules share: records as JSONL text and back, a folder's contents to compare
before and after, the command run in this process, and the check of a refused command (exit 1, one
`Error:` line naming what was wrong, no traceback)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mosaictool.cli import app

runner = CliRunner()


def jsonl(*records) -> str:
    """The records as JSONL text, one a line."""
    return "".join(json.dumps(r) + "\n" for r in records)


def read_jsonl(path) -> list:
    """The records of a JSONL file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def snapshot(folder) -> dict[str, str]:
    """Every file under `folder` (hidden temp files included) -> its content hash; folders as "<dir>"."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "<dir>"
        for p in sorted(Path(folder).rglob("*"))
    }


def invoke(args, input: str | bytes | None = None):
    """`mosaictool ARGS` in this process (paths as strings), stdout and stderr apart."""
    return runner.invoke(app, [str(a) for a in args], input=input)


def refused(result, *needles: str, code: int = 1) -> str:
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


def file_bytes(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


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


def out_records(path: Path) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


CAP = "A red dog on a blue sofa."


GRAPH = {"entities": [{"span": "a dog", "lemma_span": "a dog", "head": "dog", "lemma_head": "dog", "span_bounds": [0, 2],
                       "modifiers": [{"dep": "det", "span": "a", "lemma_span": "a"}], "type": "unknown", "attributes": []}],
         "relations": []}


def copy_world(tiny_world: Path, case: Case, replace: dict[int, str] | None = None) -> Path:
    """The world into case.src; record i's image becomes `replace[i]` (a name under images/)."""
    shutil.copytree(tiny_world.parent / "images", case.src / "images")
    records = [json.loads(x) for x in tiny_world.read_text().splitlines()]
    for i, name in (replace or {}).items():
        records[i]["image"] = f"images/{name}"
    return case.file("captions.jsonl", jsonl(*records))


def train_args(data, out, *extra):
    return ["train", "--data", data, "--out", out, "--batch-size", "4", "--steps", "2", "--no-augment",
            "--device", "cpu", "-q", *extra]


def refused_leaving_files(folder: Path, args, *needles) -> str:
    """`args` refused (one line holding `needles`) with every file under `folder` byte-identical and none
    added: inputs untouched, no output written."""
    def files() -> dict:
        return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    before = files()
    line = refused(invoke(args), *map(str, needles))
    assert files() == before
    return line


def refuses_then_skips(args, made: Path, data: Path, *words: str, run=invoke) -> None:
    """`args` (a command reading `data`, whose record img-3 has a bad image) stop with one line naming
    the record and `words`, having made nothing at `made`; with --skip-bad they skip it and say so.
    `data`'s folder is unchanged."""
    before = snapshot(data.parent)
    refused(run(args), "record 'img-3'", *words, "--skip-bad")
    assert not made.exists()
    skipped = run(args + ["--skip-bad"])
    assert skipped.exit_code == 0, skipped.stderr
    assert "skipped 1 bad record(s)" in skipped.stderr and words[-1] in skipped.stderr
    assert snapshot(data.parent) == before


def invoke_within(args, seconds: float, fifo: Path | None = None):
    """`invoke` in a thread that must finish within `seconds`: a command that opened a FIFO for
    reading blocks forever (the FIFO is then opened for writing and closed, which releases it)."""
    import os
    import threading

    box = []
    thread = threading.Thread(target=lambda: box.append(invoke(args)), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None and fifo.exists():
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail(f"{' '.join(map(str, args))} hung")
    return box[0]



def parsed_and_decomposed(captions: list[str], max_subgraphs: int = 20) -> dict[str, dict]:
    """{caption: its record after parse + decompose}, with room for every sub-graph: real captions for the tests
    of what the later stages make of them."""
    from mosaictool.stages.decompose import decompose
    from mosaictool.stages.parse import parse

    records = decompose(parse([{"id": str(i), "caption": c} for i, c in enumerate(captions)]), max_subgraphs=max_subgraphs)
    return {r["caption"]: r for r in records}
