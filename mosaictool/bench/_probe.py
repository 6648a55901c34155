"""Reading the Probe benchmarks' JSONL (written by `mosaictool probe build` or `mosaictool world`):
one record per line, image paths relative to the file's folder. Private: no BENCHMARK here."""

from __future__ import annotations

import json
from pathlib import Path

from mosaictool.errors import MosaicError


def read_jsonl(path: Path, bench: str, fields: tuple[str, ...], limit: int | None = None) -> list[dict]:
    """The records of `path`; a broken line or a missing field names the file and line."""
    if not path.is_file():
        raise MosaicError(f"{bench}: {path} not found; build it with `mosaictool probe build {bench[-1]} --out <data root>` "
                          "(see `mosaictool evaluate --list`) or fix --data-root")
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            if limit is not None and len(out) >= limit:
                break
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise MosaicError(f"{bench}: {path}:{lineno}: invalid JSON ({e}); build the file again") from e
            missing = [k for k in fields if not isinstance(rec, dict) or k not in rec]
            if missing:
                raise MosaicError(f"{bench}: {path}:{lineno}: missing field(s) {', '.join(missing)} "
                                  f"(not a {bench} file; build it with `mosaictool probe build`)")
            out.append(rec)
    return out
