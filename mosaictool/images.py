"""Opening image files safely, for shard, train and evaluate alike.

- Only regular files are opened: reading a named pipe (FIFO) blocks until a writer comes, a device
  streams without end, and a folder is no image; `os.stat` tells them apart without opening them.
- An image named by a record is read from inside its root (--image-root, --images) unless the user
  says otherwise (--allow-outside-root): an absolute path, `..` or a symbolic link leading out of the
  root is refused, so records from elsewhere cannot make `shard` pack (and pass on) any file the user
  can read. Links are resolved before the check.
- An image's declared size is checked before a pixel is decoded: a 370-byte PNG may declare
  30000 x 30000 pixels (2.7 GB decoded). The limit is Pillow's own default (`MAX_PIXELS`), enforced
  as an error rather than Pillow's warning, so that `--skip-bad` can skip the file.
"""

from __future__ import annotations

import io
import os
import stat
import warnings
from pathlib import Path

from mosaictool.errors import RecordError

MAX_PIXELS = 89_478_485  # Pillow's Image.MAX_IMAGE_PIXELS default: ~0.27 GB decoded as RGB


class ImageError(RecordError):
    """One image file is unusable (not a regular file, too large, not an image, corrupt): a record
    error, so `--skip-bad` skips the record that names it."""


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_regular(path: str | os.PathLike) -> None:
    """ImageError unless `path` is a regular file (a symlink to one is), found without opening it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ImageError(f"image not found: {path}") from None
    except OSError as e:
        raise ImageError(f"cannot read image {path}: {e.strerror or e}") from None
    if not stat.S_ISREG(mode):
        what = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise ImageError(f"{path} is {what}, not an image file")


ALLOW_OUTSIDE_ROOT = "--allow-outside-root"


def image_path(root: str | os.PathLike, name: str, *, allow_outside: bool = False, flag: str = "--image-root") -> Path:
    """`root / name`; ImageError when it leads out of `root` once links are resolved (an absolute
    `name`, `..`, a link), unless `allow_outside`."""
    path = Path(root) / name
    if allow_outside:
        return path
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise ImageError(f"image {name!r} leads outside {flag} {root} (to {real}); pass {ALLOW_OUTSIDE_ROOT} "
                         "to read images from anywhere")
    return path


def open_image(source: bytes | str | os.PathLike, name: str | os.PathLike | None = None):
    """The PIL image of `source` (encoded bytes, or a path: checked with `check_regular`), its header
    read and its declared size checked, its pixels not yet decoded. ImageError if it is not an
    image or declares more than MAX_PIXELS pixels."""
    from PIL import Image, UnidentifiedImageError

    name = name or (source if not isinstance(source, bytes) else "<image>")
    if not isinstance(source, bytes):
        check_regular(source)
    with warnings.catch_warnings():  # Pillow warns between 1x and 2x its limit, raises above: both are errors here
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            im = Image.open(io.BytesIO(source) if isinstance(source, bytes) else source)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageError(f"{name}: declares more than {MAX_PIXELS} pixels (a decompression bomb?); "
                             "refused before decoding") from None
        except UnidentifiedImageError:
            raise ImageError(f"not an image file: {name}") from None
        except (OSError, SyntaxError, ValueError) as e:
            raise ImageError(f"corrupt image {name}: {e}") from None
    width, height = im.size
    if width * height > MAX_PIXELS:
        im.close()
        raise ImageError(f"{name}: declares {width}x{height} pixels, more than {MAX_PIXELS} (a decompression bomb?); "
                         "refused before decoding")
    return im


def image_to_rgb(im):
    """A PIL image as 8-bit RGB, as open_clip's `convert("RGB")` gives, except where that is wrong:
    16- and 32-bit greyscale (PIL clips it to white) is scaled down to 8 bits, and a palette image
    with a transparent colour goes through RGBA (the same pixels, without PIL's warning)."""
    from PIL import Image

    if im.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        import numpy as np

        grey = np.asarray(im, dtype=np.float64) / 257.0  # 0..65535 -> 0..255
        return Image.fromarray(np.clip(np.rint(grey), 0, 255).astype(np.uint8), "L").convert("RGB")
    if im.mode == "F":
        import numpy as np

        return Image.fromarray(np.clip(np.rint(np.asarray(im)), 0, 255).astype(np.uint8), "L").convert("RGB")
    if im.mode == "P" and "transparency" in im.info:
        im = im.convert("RGBA")
    return im.convert("RGB")
