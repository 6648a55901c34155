"""No output may destroy an input: the one check every command runs before it does any work.

A command declares what it reads (`Read`: a file, a checkpoint, a folder) and what it writes
(`Write`: a file, or a folder and the names it writes there), and `check_outputs` refuses, with one
line naming both, an output that is one of the inputs (by any name: a symbolic link, a hard link,
`..`, the shell's `< file` / `>> file`), a file of the run folder a checkpoint comes from, a file
inside a folder read whole that already exists, a folder that holds or is an input folder, and two
outputs that are one file.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mosaictool.errors import MosaicError

STDIO = "-"
# what `train` writes in its run folder (mosaictool.training.loop): a checkpoint's folder keeps these
RUN_FILES = ("config.json", "metrics.jsonl", "metrics.*.jsonl",  # metrics.N.jsonl: an earlier attempt's (reporting)
             "last.pt", "last.prev.pt", "final.pt", "mined_hard_images.json", "tensorboard/")


@dataclass(frozen=True)
class Read:
    """An input. `names` is None for a file; for a folder, the names read in it: shell patterns of
    files directly inside ("*.tar"), "sub/" for a whole subfolder, ("**",) for every file below, or ()
    for none (an image root: only `exclusive` applies). `exclusive`: no output folder may be this
    folder itself."""

    flag: str
    path: str | os.PathLike
    names: tuple[str, ...] | None = None
    exclusive: bool = True


@dataclass(frozen=True)
class Write:
    """An output. `names` is None for a file; for a folder, the names written in it (as Read's), or
    ("**",) when anything below it may be written or replaced."""

    flag: str
    path: str | os.PathLike
    names: tuple[str, ...] | None = None


def checkpoint(flag: str, path: str | os.PathLike | None) -> list[Read]:
    """A checkpoint read: the file, and the files of the run folder it sits in (a run's config.json,
    metrics.jsonl and checkpoints are its record, whatever else is written beside them)."""
    if not path or not os.path.isfile(path):
        return []
    folder = os.path.dirname(os.path.abspath(path))
    return [Read(flag, path), Read(flag, folder, RUN_FILES, exclusive=False)]


def read_path(flag: str, path: str | os.PathLike | None) -> list[Read]:
    """An input that may be a file or a folder (or not a path at all: a model tag): as it is on disk."""
    if not path:
        return []
    if str(path) == STDIO:
        return [Read(flag, STDIO)]
    if os.path.isdir(path):
        return [Read(flag, path, ("**",))]
    return [Read(flag, path)] if os.path.exists(path) else []


def check_outputs(writes: Iterable[Write], reads: Iterable[Read]) -> None:
    """Refuse (MosaicError, one line) an output that would replace or mix into one of the inputs."""
    writes = [w for w in writes if w.path is not None and str(w.path) != ""]
    reads = [r for r in reads if r.path is not None and str(r.path) != ""]
    files = [w for w in writes if w.names is None and str(w.path) != STDIO]
    for i, a in enumerate(files):
        for b in files[i + 1:]:
            if _same(a.path, b.path):
                raise MosaicError(f"{a.flag} {a.path} and {b.flag} {b.path} are the same file: one output would "
                                  "replace the other; give them different paths")
    for w in writes:
        for r in reads:
            problem = _file_conflict(w.path, r) if w.names is None else _folder_conflict(w, r)
            if problem:
                where = f"stdout ({w.flag} -)" if str(w.path) == STDIO else f"{w.flag} {w.path}"
                raise MosaicError(f"{where}: {problem}, which it would destroy: choose another {w.flag} "
                                  "(nothing was written)")


def _folder_conflict(w: Write, r: Read) -> str | None:
    """Why writing the folder `w` (its names) would destroy the input `r` (None: it would not)."""
    folder = Path(w.path)
    if str(r.path) == STDIO:
        return None
    if r.names is not None and r.exclusive and _same(folder, r.path):
        return f"is the folder that {r.flag} reads"
    if "**" in w.names:  # anything below it may be written: no input may lie there, nor it in a folder read whole
        if _inside(r.path, folder):
            return f"holds the input {r.flag} {r.path}"
        if r.names == ("**",) and _inside(folder, r.path):
            return f"lies inside the folder that {r.flag} reads ({r.path})"
        return None
    if not folder.is_dir():
        return None  # a new folder replaces nothing
    for name in w.names:
        if name.endswith("/"):
            if _inside(r.path, folder / name):
                return f"{name} there holds the input {r.flag} {r.path}"
            continue
        for target in sorted(folder.glob(name)):
            problem = _file_conflict(target, r)
            if problem:
                return f"its {target.name} {problem}"
    return None


def _file_conflict(target: str | os.PathLike, r: Read) -> str | None:
    """Why writing the file `target` would destroy the input `r` (None: it would not)."""
    if r.names is None:
        if _same(target, r.path):
            linked = "" if STDIO in (str(target), str(r.path)) or _real(target) == _real(r.path) else \
                " (the same file under another name: a link)"
            return f"is the input {_input_name(r)}{linked}"
        return None
    if str(target) == STDIO or not os.path.lexists(target):
        return None  # a new file replaces nothing
    folder, real = _real(r.path), _real(target)
    if real == folder:
        return f"is the folder that {r.flag} reads"
    if not _inside(real, folder):
        return None
    rel = os.path.relpath(real, folder)
    for name in r.names:
        whole = name == "**" or (name.endswith("/") and rel.startswith(name.rstrip("/") + os.sep))
        if whole or (os.sep not in rel and fnmatch.fnmatch(rel, name)):
            what = "the run" if r.names == RUN_FILES else "the folder"
            return f"would replace {os.path.join(str(r.path), rel)}, a file of {what} that {r.flag} reads"
    return None


def _input_name(r: Read) -> str:
    return f"on stdin ({r.flag} -)" if str(r.path) == STDIO else f"{r.flag} {r.path}"


def _stat(path: str | os.PathLike) -> os.stat_result | None:
    """The file `path` names; for '-', the regular file the shell connected stdin or stdout to."""
    try:
        if str(path) == STDIO:
            return None
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _std_stat(fd: int) -> os.stat_result | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _same(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """One file or folder: the same inode (links, hard links, '..') or, not yet existing, one real path."""
    sa = _std_stat(1) if str(a) == STDIO else _stat(a)
    sb = _std_stat(0) if str(b) == STDIO else _stat(b)
    if sa is not None and sb is not None:
        return os.path.samestat(sa, sb)
    if STDIO in (str(a), str(b)):
        return False
    return _real(a) == _real(b)


def _real(path: str | os.PathLike) -> str:
    return os.path.normcase(os.path.realpath(os.path.expanduser(str(path))))


def _inside(path: str | os.PathLike, folder: str | os.PathLike) -> bool:
    """`path` lies below `folder` (or is it)."""
    p, f = _real(path), _real(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)
