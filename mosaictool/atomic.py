"""Every output file is written the same way: into a temporary file beside its target, moved into
place (os.replace) only when it is complete, with the permissions the user's umask gives a new file.
A full disk (or a `ulimit -f`) is one line naming the file; the temporary file is removed and the
previous version of the target is left as it was.

A target that is a symbolic link is followed: the file it points to is replaced, the link stays
(os.replace on the link itself would put a regular file in its place).
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mosaictool.errors import MosaicError


def umask() -> int:
    """The process's umask, read without changing it where Linux shows it (/proc/self/status: setting
    and restoring it, the only portable way, races with other threads creating files)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def new_file_mode() -> int:
    """The mode open(path, "w") gives a new file: 0o666 less the umask (mkstemp makes 0o600)."""
    return 0o666 & ~umask()


def resolve_output(path: str | os.PathLike) -> Path:
    """The file a write to `path` must replace: a symbolic link's target (a dangling link's too). A
    link to a device or a pipe (/dev/stdout) is kept: such outputs are written in place."""
    path = Path(path)
    if path.is_symlink() and (path.is_file() or not path.exists()):
        return Path(os.path.realpath(path))
    return path


def write_error(name: str | os.PathLike, e: OSError, flag: str = "-o") -> MosaicError:
    """One line for a failed write: the file, the reason, and what to do about it."""
    hint = {
        errno.ENOSPC: "the disk is full; free space or choose another " + flag,
        errno.EDQUOT: "the disk quota is exhausted; free space or choose another " + flag,
        errno.EFBIG: "the disk is full for this file (larger than the file system or `ulimit -f` allows); "
                     "free space, raise the limit or choose another " + flag,
        errno.EROFS: "the file system is read-only; choose another " + flag,
        errno.EACCES: "permission denied; choose a writable " + flag,
        errno.EPERM: "permission denied; choose a writable " + flag,
    }.get(e.errno, "choose another " + flag)
    return MosaicError(f"{name}: cannot write ({e.strerror or e}): {hint}")


_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def os_error_of(exc: BaseException) -> OSError | None:
    """The OSError behind `exc`: itself, its explicit cause, or the errno that Rust-backed writers
    (polars) put in their message ("File too large (os error 27)")."""
    seen = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno is not None:
            return seen
        seen = seen.__cause__
    match = _RUST_OS_ERROR.search(str(exc))
    if match:
        code = int(match.group(1))
        return OSError(code, os.strerror(code))
    return None


@contextmanager
def atomic_output(path: str | os.PathLike, *, flag: str = "-o", fsync: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside `path` (a symlink's target) for the caller to write; when the
    block ends without an exception the file gets the umask's mode and replaces the target. On any
    exception the temporary file is removed; an OS error of the write (a full disk, EFBIG under
    `ulimit -f`, a read-only folder) becomes one MosaicError line naming the target."""
    target = resolve_output(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
    except OSError as e:
        raise write_error(target, e, flag) from e
    try:
        yield Path(tmp)
        os.chmod(tmp, new_file_mode())
        if fsync:
            with open(tmp, "rb+") as f:  # on disk before it replaces anything
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except MosaicError:
        raise
    except Exception as e:
        cause = os_error_of(e)
        if cause is None or isinstance(e, BrokenPipeError):
            raise
        raise write_error(target, cause, flag) from e
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def write_bytes(path: str | os.PathLike, data: bytes, *, flag: str = "-o") -> None:
    with atomic_output(path, flag=flag) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str, *, flag: str = "-o") -> None:
    write_bytes(path, text.encode("utf-8"), flag=flag)


def append_line(path: str | os.PathLike, line: str, *, flag: str = "--out") -> None:
    """Append one line to a log (metrics.jsonl): whole or not at all; a failed write (a full disk) is
    cut back off, so a reader never meets half a line."""
    data = line.encode("utf-8")
    try:
        with open(path, "ab") as f:
            start = f.tell()
            try:
                f.write(data)
                f.flush()
            except OSError:
                f.truncate(start)
                raise
    except OSError as e:
        raise write_error(path, e, flag) from e


class _RecordingWriter:
    """A file object that keeps the OSError of a failed write: torch.save turns it into a bare
    RuntimeError ("unexpected pos ...") that no longer says the disk was full."""

    def __init__(self, f):
        self.f = f
        self.error: OSError | None = None

    def write(self, data) -> int:
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.f.flush()


def torch_save_to(obj, tmp: str | os.PathLike, *, fsync: bool = True) -> None:
    """torch.save(obj) into the temporary file `tmp` of an atomic_output block (flushed to disk with
    `fsync`), its write errors as the OSError they were."""
    import torch

    with open(tmp, "wb") as f:
        writer = _RecordingWriter(f)
        try:
            torch.save(obj, writer)
        except RuntimeError as e:
            if writer.error is not None:
                raise writer.error from e
            raise
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def torch_save(obj, path: str | os.PathLike, *, flag: str = "--out") -> None:
    """torch.save(obj) at `path` through atomic_output: all or nothing, a full disk one line."""
    with atomic_output(path, flag=flag) as tmp:
        torch_save_to(obj, tmp)
