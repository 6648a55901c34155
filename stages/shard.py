"""`shard`: records + images -> WebDataset tar shards that `train` reads.

Each sample of a shard is `<key>.<ext>` (the image file's bytes, unchanged), `<key>.json` (the
whole record: id, caption, texts, hard_images, image path, ...) and `<key>.txt` (the caption, UTF-8:
the img2dataset / open_clip_train webdataset convention, so `python -m open_clip_train.main
--dataset-type webdataset` trains on these shards; written when the record has a string caption). Keys are the record's position,
zero-padded (WebDataset splits member names at the first dot, and ids may contain dots). Shards are
`000000.tar`, `000001.tar`, ... with `--shard-size` samples each, and `sizes.json` maps each shard's
name to its sample count (open_clip's convention), so a reader knows the dataset size up front.
Everything is written into a hidden folder inside the output folder and moved into place at the end,
so a failed run leaves no shard behind. Tar members get mtime 0: same input, same bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from mosaictool.atomic import new_file_mode, write_error
from mosaictool.errors import MosaicError, RecordError
from mosaictool.io import Skips
from mosaictool.locks import folder_lock
from mosaictool.paths import Read, Write, check_outputs
from mosaictool.sources import IMAGE_EXTENSIONS, IN_TAR_HINT, in_tar

SIZES_FILE = "sizes.json"


def make_check(image_key: str = "image"):
    """The check of a record shard reads: the image path in `image_key` and what train will read
    (records.TrainRecord), so that a record train would refuse is refused here."""
    from mosaictool import records

    return records.checker(records.train_record(image_key))


def read_image(path: Path) -> tuple[bytes, str]:
    """The file's bytes and the extension to store them under; RecordError if unreadable (also a FIFO,
    a device or a folder, never opened, and an image declaring more pixels than images.MAX_PIXELS)."""
    from mosaictool.images import check_regular, open_image

    check_regular(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RecordError(f"image not found: {path}") from None
    except OSError as e:
        raise RecordError(f"cannot read image {path}: {e}") from None
    try:
        with open_image(data, path) as im:
            fmt = (im.format or "").lower()
            im.draft("RGB", (64, 64))  # JPEGs decode at reduced scale: a full pass over the data, cheaply
            im.load()
    except RecordError:
        raise
    except (OSError, SyntaxError, ValueError) as e:
        raise RecordError(f"corrupt image {path}: {e}") from None
    ext = path.suffix.lower().lstrip(".")
    if ext not in IMAGE_EXTENSIONS:
        ext = {"jpeg": "jpg"}.get(fmt, fmt) or "img"
    return data, ext


@contextlib.contextmanager
def _writing(target: Path):
    """A failed write (a full disk) as one line naming the file it was for."""
    try:
        yield
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            raise
        raise write_error(target, e, "--out") from e


def write_shards(
    records: Iterable[dict],
    *,
    out: str | os.PathLike,
    image_root: str | os.PathLike = ".",
    shard_size: int = 1000,
    image_key: str = "image",
    skips: Skips | None = None,
    progress=lambda it: it,
    source: str | None = None,
    allow_outside_root: bool = False,
) -> dict[str, int]:
    """Write the shards; returns {shard file name: sample count} (also saved as sizes.json).
    `source` (the records' file) prefixes the location of a bad image. The folder is locked while
    they are written (one writer), and may not be the image root or hold `source` under a shard's name.
    An image path leading out of `image_root` is a bad record unless `allow_outside_root` (images.image_path)."""
    if shard_size < 1:
        raise MosaicError("--shard-size must be at least 1")
    out = Path(out)
    # the image root is no place for shards (a later glob of it would read them as data)
    check_outputs([Write("--out", out, ("*.tar", SIZES_FILE))],
                  [*([Read("INPUT", source)] if source else []), Read("--image-root", image_root, ())])
    with folder_lock(out, "mosaictool shard"):
        return _write_shards(records, out, Path(image_root), shard_size, image_key, skips or Skips(), progress, source,
                             allow_outside_root)


def _write_shards(records, out: Path, root: Path, shard_size: int, image_key: str, skips: Skips, progress,
                  source: str | None, allow_outside_root: bool) -> dict[str, int]:
    import webdataset as wds

    from mosaictool.images import image_path

    if any(out.glob("*.tar")) or (out / SIZES_FILE).exists():
        raise MosaicError(f"{out}: already holds shards; choose another --out or delete them first")
    staging = Path(tempfile.mkdtemp(prefix=".shard-partial-", dir=out))
    sizes: dict[str, int] = {}
    writer = None
    try:
        count = 0
        for record in progress(records):
            try:
                data, ext = read_image(image_path(root, record[image_key], allow_outside=allow_outside_root))
            except RecordError as e:
                hint = f" ({IN_TAR_HINT})" if in_tar(record[image_key]) else ""
                skips.handle(f"{source}: record {record['id']!r}" if source else f"record {record['id']!r}", f"{e}{hint}")
                continue
            name = f"{count // shard_size:06d}.tar"
            sample = {"__key__": f"{count:09d}", ext: data, "json": json.dumps(record, ensure_ascii=False).encode()}
            if isinstance(record.get("caption"), str):
                sample["txt"] = record["caption"].encode()
            with _writing(out / name):
                if writer is None:
                    writer = wds.ShardWriter(str(staging / "%06d.tar"), maxcount=shard_size, verbose=0, mtime=0)
                writer.write(sample)
            sizes[name] = sizes.get(name, 0) + 1
            count += 1
        if writer is None:
            raise MosaicError("no records with a readable image: nothing to shard")
        with _writing(out / name):
            writer.close()
        writer = None
        with _writing(out / SIZES_FILE):
            (staging / SIZES_FILE).write_text(json.dumps(sizes, indent=1) + "\n")
            mode = new_file_mode()
            for name in [*sizes, SIZES_FILE]:
                os.chmod(staging / name, mode)
                os.replace(staging / name, out / name)
    finally:
        if writer is not None:  # stopped by an error: close the open tar before discarding it
            with contextlib.suppress(OSError):
                writer.close()
        shutil.rmtree(staging, ignore_errors=True)
    return sizes
