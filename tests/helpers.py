"""Helpers the test modules share: records as JSONL text and back, a folder's contents to compare
before and after, the command run in this process, and the check of a refused command (exit 1, one
`Error:` line naming what was wrong, no traceback)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

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
