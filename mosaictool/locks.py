"""One writer per output folder: `train`, `shard`, `wise-ft`, `world` and `demo` hold a lock on the folder they
write (the demo also one per cached artifact) for as long as they write it.

The lock is filelock's: flock(2) on `FOLDER/.mosaictool.lock`, which the kernel releases when its
process ends however it ends, so a lock left by a killed run is never in the way. The holder
writes its pid, host, start time and command line into the lock file, and a second writer's error
names it. The lock file is removed when the writer is done; one left by a killed run is a dot file
that nothing of mosaictool reads (`*.tar`, `*.pt`, named files), and the next writer takes it over.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mosaictool.errors import MosaicError

LOCK_NAME = ".mosaictool.lock"


def _holder_record(what: str) -> bytes:
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "what": what,
                       "since": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)[:300]}).encode()


def holder(lock_file: str | os.PathLike) -> str:
    """Who holds `lock_file`, as its holder wrote it ('another process' when it cannot be read)."""
    from mosaictool.io import read_json

    try:
        rec = read_json(lock_file)
        return f"{rec['what']} (pid {rec['pid']} on {rec['host']}, since {rec['since']}: {rec['command']})"
    except (OSError, MosaicError, KeyError, TypeError):
        return "another process"


class _Unlinked(Exception):
    """The lock was won on a file its previous holder had just removed: take it again on the new one."""


def _lock(path: Path, what: str):
    from filelock import FileLock

    record = _holder_record(what)

    def write_holder(fd: int) -> None:
        try:
            current = os.lstat(path)
        except FileNotFoundError:
            raise _Unlinked() from None
        if not os.path.samestat(current, os.fstat(fd)):
            raise _Unlinked()
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)

    # a native flock only (no soft-lock fallback, whose marker would outlive a killed holder)
    return FileLock(path, on_acquired=write_holder, preserve_lock_file=True, is_singleton=False, thread_local=False)


def _acquire(lock, timeout: float) -> None:
    while True:
        try:
            lock.acquire(timeout=timeout)
            return
        except _Unlinked:
            continue


def _release(lock, path: Path) -> None:
    """Remove the lock file, then unlock: a run leaves no lock file behind (a waiter that wins the
    removed file notices and locks the new one: _Unlinked)."""
    try:
        path.unlink(missing_ok=True)
    finally:
        lock.release()


@contextmanager
def folder_lock(folder: str | os.PathLike, what: str, *, flag: str = "--out",
                wait: Callable[[str], None] | None = None, name: str = LOCK_NAME) -> Iterator[Path]:
    """Hold the lock of `folder` (created if missing) for the block. Held by another process: a
    MosaicError naming it, or with `wait` a call `wait(holder)` and then waiting for it. A folder this
    call created and the block left empty is removed again. `name`: the lock file's, for writers that
    share a folder by writing disjoint parts of it (a stage's --shard-index runs)."""
    from filelock import Timeout

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise MosaicError(f"{flag} {folder}: is a file, not a folder; choose another {flag}")
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise MosaicError(f"{flag} {folder}: cannot create the folder ({e.strerror or e})") from e
    path = folder / name
    lock = _lock(path, what)
    try:
        _acquire(lock, 0)
    except Timeout:
        if wait is None:
            raise MosaicError(f"{flag} {folder}: another writer is using it: {holder(path)}; wait for it to finish "
                              f"or choose another {flag}") from None
        wait(holder(path))
        _acquire(lock, -1)
    try:
        yield path
    finally:
        _release(lock, path)
        if created:
            with contextlib.suppress(OSError):  # nothing was written: leave no folder, as before the lock
                folder.rmdir()


@contextmanager
def cache_lock(lock_file: str | os.PathLike, what: str, log: Callable[[str], None]) -> Iterator[None]:
    """Hold `lock_file` (beside a cached artifact) for the block, waiting for another holder with one
    log line naming it: an artifact is copied or built by one process at a time."""
    from filelock import Timeout

    path = Path(lock_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = _lock(path, what)
    try:
        _acquire(lock, 0)
    except Timeout:
        log(f"cache: waiting for {holder(path)}, which is writing {path.with_suffix('')}")
        _acquire(lock, -1)
    try:
        yield
    finally:
        _release(lock, path)


def main_process() -> bool:
    """Only the first process of a torchrun job takes a run folder's lock (they all write one run)."""
    return os.environ.get("RANK", "0") == "0"
