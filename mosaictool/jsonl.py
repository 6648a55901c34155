"""The bytes under every record reader (mosaictool.io's JSONL, mosaictool.sources' tables and tars):
an input file checked before it is opened, the longest line read as a record, the encodings refused,
a record as JSON bytes and the numbers JSON cannot hold."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import orjson

from mosaictool.errors import MosaicError

BOM = b"\xef\xbb\xbf"
# Byte-order marks of the wider Unicode encodings (Notepad's "Unicode", PowerShell's `>`), UTF-32's
# first: its little-endian mark begins with UTF-16's
WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
             (b"\xfe\xff", "UTF-16"))


def check_input_file(path: str) -> None:
    """A clear error for an input path that is missing, a folder, or unreadable."""
    if not os.path.exists(path):
        raise MosaicError(f"{path}: no such file")
    if os.path.isdir(path):
        raise MosaicError(f"{path}: is a directory; give the JSONL or Parquet file inside it")
    if not os.access(path, os.R_OK):
        raise MosaicError(f"{path}: permission denied (cannot read it)")


# The longest line read as a record: a caption record with its graph and texts is kilobytes; a longer
# line (a file with no newlines, a 2 GB caption) is a bad record, read past without holding it
LINE_LIMIT = 16 << 20


def check_not_wide(head: bytes, name: str) -> None:
    """MosaicError when `head`, a file's first bytes, starts with a UTF-16 or UTF-32 byte-order mark."""
    for mark, wide in WIDE_BOMS:
        if head.startswith(mark):
            raise MosaicError(f"{name}: the file is {wide} text (byte-order mark {mark.hex(' ')}), not UTF-8; "
                              f"convert it: iconv -f {wide} -t UTF-8 {name} > {name}.utf8")


def dumps(record: dict) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY)


def non_finite(value: Any, at: str = "") -> tuple[str, Any] | None:
    """(field path, value) of the first NaN or infinite number in a record (`scores[2]`), or None."""
    import numpy as np

    if isinstance(value, (float, np.floating)):
        return None if math.isfinite(value) else (at, value)
    if isinstance(value, dict):
        items = ((f"{at}.{k}" if at else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{at}[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        bad = np.argwhere(~np.isfinite(value))
        return None if not len(bad) else (f"{at}[{']['.join(map(str, bad[0]))}]", value[tuple(bad[0])].item())
    else:
        return None
    return next((found for k, v in items if (found := non_finite(v, k)) is not None), None)


_STRICT_JSON = json.JSONEncoder(allow_nan=False, check_circular=False)


def _finite_json(record: Any) -> bool:
    """Whether the standard library's C encoder writes `record` without a NaN or infinity: its check
    (allow_nan=False) costs a fraction of `non_finite`'s walk in Python. False also for what it cannot
    encode (numpy values), which the walk then checks."""
    try:
        _STRICT_JSON.encode(record)
    except (ValueError, TypeError):
        return False
    return True


def non_finite_error(record: Any, line: bytes) -> str | None:
    """Why `record` (written as `line`) cannot be JSON: a NaN or infinity, which JSON lacks and
    orjson writes as null. Only a line holding null that the C encoder does not clear is searched."""
    found = non_finite(record) if b"null" in line and not _finite_json(record) else None
    if found is None:
        return None
    return (f"{found[0]}: {found[1]} is not a finite number (JSON has no NaN or infinity; it would be written as null): "
            "fix the value or drop the field")
