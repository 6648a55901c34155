"""Small helpers the benchmark loaders share: reading annotation files with clear errors,
choosing subtasks, and the headline/group rows every scorer emits.

Private (leading underscore), so the registry does not look for a BENCHMARK here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from mosaictool.bench.base import HEADLINE, row
from mosaictool.errors import MosaicError
from mosaictool.io import parse_json as json_value


class _RepeatedKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose key repeats would silently keep only the last case: refused."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _RepeatedKey(f"key {key!r} appears twice in one object")
    return out


def read_text(path: Path, bench: str) -> str:
    """An annotation file's text (UTF-8); other bytes are a user error naming the file."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise MosaicError(f"{bench}: {path}: not UTF-8 text (byte {e.start}); download the file again") from None


def parse_json(text: str, path: Path, bench: str):
    """JSON text of `path` (NaN is left to the schemas); a broken file or a repeated key names it."""
    return json_value(text, f"{bench}: {path}", hint="download the file again", pairs_hook=_unique_keys)


def read_json(path: Path, bench: str):
    """Parse one annotation file; a missing or broken file is a user error naming the file."""
    if not path.is_file():
        raise MosaicError(f"{bench}: annotation file {path} not found; put it there (see `mosaictool evaluate --list`) or fix --data-root")
    return parse_json(read_text(path, bench), path, bench)


def require_files(paths: Iterable[Path], bench: str, layout: str) -> None:
    """Every annotation file a run needs must be there: list the missing ones in one error."""
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        shown = "\n  ".join(missing[:10])
        more = f"\n  ... and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise MosaicError(
            f"{bench}: {len(missing)} annotation file(s) missing:\n  {shown}{more}\n"
            f"Expected layout under --data-root:\n{layout}\n"
            f"Fix --data-root, add the files, or pick the subtasks you have with --bench {bench}:<subtask>"
        )


def chosen(all_subtasks: Sequence[str], subtasks: Sequence[str] | None, bench: str) -> list[str]:
    """The subtasks to load, in the benchmark's own order."""
    if not subtasks:
        return list(all_subtasks)
    unknown = [s for s in subtasks if s not in all_subtasks]
    if unknown:
        raise MosaicError(f"{bench}: unknown subtask(s) {', '.join(unknown)}; choose from {', '.join(all_subtasks)}")
    return [s for s in all_subtasks if s in subtasks]


def bad_record(bench: str, path: Path, where: str, problem: str) -> MosaicError:
    return MosaicError(f"{bench}: {path}: {where}: {problem}; the file does not follow the benchmark's format (download it again)")


def mean_row(subtask: str, metric: str, parts: Sequence[dict]) -> dict:
    """A macro average of rows (plain mean of their values; n = total cases)."""
    return row(subtask, metric, float(np.mean(np.asarray([p["value"] for p in parts], dtype=np.float64))), sum(p["n"] for p in parts))


def headline(metric: str, parts: Sequence[dict | None]) -> list[dict]:
    """The headline row: plain mean of `parts`, emitted only when every part was scored (a run
    restricted to some subtasks, or one where skipped images emptied a subtask, gets none)."""
    if not parts or any(p is None for p in parts):
        return []
    return [mean_row(HEADLINE, metric, parts)]
