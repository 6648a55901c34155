"""The demo's cache (the data of a world, the pretrained base) as copies that nothing can edit through,
each file listed with its size and SHA-256 in a manifest that every restore checks.

A demo folder gets copies of the cached files, never links: appending to OUT/texts.jsonl changes that
folder only. The copy is made in the same pass that checks a file's bytes against the manifest (one
read of each byte), and a cache entry that fails the check (edited, truncated, a file added, removed
or replaced by a link, no manifest) is thrown away and built again, with one line saying why. One
process at a time copies or builds an entry (a lock beside it; others wait, with one line).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

from mosaictool.errors import MosaicError
from mosaictool.io import read_json
from mosaictool.locks import LOCK_NAME, cache_lock

logger = logging.getLogger(__name__)

MANIFEST = "cache-manifest.json"
CHUNK = 1 << 20


def lock_of(entry: Path):
    """The lock of a cache entry (beside it: the entry itself appears by one rename)."""
    return cache_lock(entry.with_name(f".{entry.name}.lock"), "mosaictool demo", logger.info)


FICLONE = 0x40049409  # linux/fs.h: share the source's blocks, copy-on-write (btrfs, XFS, bcachefs)


def copy_hashed(src: Path, dst: Path) -> tuple[int, str]:
    """Copy `src` to a new file `dst` (a reflink where the file system has them: no bytes copied, and
    still no link: a write to either makes it its own); the size and SHA-256 of what `dst` holds."""
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        if not _reflink(fi, fo):
            return _hashed(fi, fo)
    with open(dst, "rb") as f:
        return _hashed(f, None)


def _hashed(fi, fo) -> tuple[int, str]:
    """Size and SHA-256 of what `fi` holds, written on to `fo` (if any) in the same pass."""
    h = hashlib.sha256()
    size = 0
    while chunk := fi.read(CHUNK):
        h.update(chunk)
        if fo is not None:
            fo.write(chunk)
        size += len(chunk)
    return size, h.hexdigest()


def _reflink(fi, fo) -> bool:
    if not hasattr(os, "O_PATH"):  # not Linux
        return False
    import fcntl

    try:
        fcntl.ioctl(fo.fileno(), FICLONE, fi.fileno())
        return True
    except OSError:  # ext4, tmpfs, another file system: copy the bytes
        return False


def _files(root: Path) -> list[str]:
    """Every file below `root` (relative, sorted); a link is refused (it could point anywhere)."""
    found = []
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(folder) / name
            if path.is_symlink():
                raise ValueError(f"{path.relative_to(root)} is a link")
        found += [str((Path(folder) / n).relative_to(root)) for n in names if n != LOCK_NAME]
    return sorted(found)


def store(sources: dict[str, Path], entry: Path) -> None:
    """Copy `sources` (name in the entry -> file or folder) into the cache entry `entry`, with its
    manifest; the entry appears whole (built beside it, then renamed) or not at all."""
    tmp = entry.with_name(f".{entry.name}.partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        files, dirs = {}, []
        for name, src in sources.items():
            if src.is_dir():
                dirs.append(name)
                for folder, subdirs, _ in os.walk(src):
                    dirs += [str(Path(name) / Path(folder, d).relative_to(src)) for d in subdirs]
                members = {str(Path(name) / rel): src / rel for rel in _files(src)}
            else:
                members = {name: src}
            for rel, path in members.items():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                files[rel] = list(copy_hashed(path, tmp / rel))
        for d in dirs:
            (tmp / d).mkdir(parents=True, exist_ok=True)
        (tmp / MANIFEST).write_text(json.dumps({"files": files, "dirs": sorted(dirs)}, sort_keys=True) + "\n")
        os.replace(tmp, entry)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def restore(entry: Path, out: Path, rename: dict[str, str] | None = None) -> str | None:
    """Copy the cache entry's files into `out` (each top-level name, or its `rename`, replacing what is
    there), checking every byte against the manifest: None when all matched. Else what did not: the
    entry is removed (the caller builds it anew) and `out` is left as it was (the copy is made beside
    it first)."""
    rename = rename or {}
    try:
        manifest = read_json(entry / MANIFEST)
        files: dict[str, list] = manifest["files"]
        dirs: list[str] = manifest["dirs"]
        present = _files(entry)
    except MosaicError as e:
        return _discard(entry, f"its manifest is unreadable ({e})")
    except ValueError as e:
        return _discard(entry, str(e) if "is a link" in str(e) else f"its manifest is unreadable ({e})")
    except (OSError, KeyError, TypeError) as e:
        return _discard(entry, f"no readable manifest ({e.__class__.__name__}: {e})")
    extra = sorted(set(present) - set(files) - {MANIFEST})
    missing = sorted(set(files) - set(present))
    if extra or missing:
        return _discard(entry, f"{(extra or missing)[0]} is {'not in' if extra else 'missing from'} its manifest")
    staging = out / f".{entry.name}.restoring"
    _remove(staging)
    try:
        for d in dirs:
            (staging / d).mkdir(parents=True, exist_ok=True)
        for rel in sorted(files):
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            if copy_hashed(entry / rel, staging / rel) != tuple(files[rel]):
                return _discard(entry, f"{rel} does not match its manifest (size or SHA-256)")
        for top in sorted({Path(rel).parts[0] for rel in files} | {Path(d).parts[0] for d in dirs}):
            _remove(out / rename.get(top, top))
            os.replace(staging / top, out / rename.get(top, top))
    finally:
        _remove(staging)
    return None


def _discard(entry: Path, problem: str) -> str:
    shutil.rmtree(entry, ignore_errors=True)
    return problem


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
