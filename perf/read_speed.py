"""Reading captions from img2dataset-style WebDataset tars vs from JSONL, on the real COCO captions of
SugarCrepe.

Writes the captions as img2dataset does (1,000 samples a tar: <key>.jpg, <key>.txt, <key>.json) and as
JSONL, then prints records/s of `mosaictool.read` over each (the tars' images are skipped, not read),
`parse`'s own captions/s for scale, and whether parse gives identical graphs from both.

    python perf/read_speed.py             # every caption (~4,300), parse on 500
    python perf/read_speed.py --quick     # 2 tars, parse on 200
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import webdataset as wds
from PIL import Image

import mosaictool
from mosaictool.console import console_logging

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parse_speed import real_captions  # noqa: E402


def write_tars(folder: Path, captions: list[str]) -> None:
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (128, 128, 3), dtype=np.uint8)).save(buf, "JPEG", quality=90)
    jpeg = buf.getvalue()
    for start in range(0, len(captions), 1000):
        with wds.TarWriter(str(folder / f"{start // 1000:05d}.tar")) as sink:
            for i, caption in enumerate(captions[start:start + 1000]):
                key = f"{start // 1000:05d}{i:04d}"
                sink.write({"__key__": key, "jpg": jpeg, "txt": caption,
                            "json": json.dumps({"key": key, "caption": caption, "status": "success"})})


def timed_read(source) -> tuple[int, float]:
    t = time.perf_counter()
    n = sum(1 for _ in mosaictool.read(source))
    return n, time.perf_counter() - t


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    captions = real_captions()[:2000 if args.quick else None]
    if not captions:
        sys.exit("no SugarCrepe captions under the shared folder: set MOSAICTOOL_SHARED to the folder holding benchmarks/")
    n_parse = 200 if args.quick else 500
    with tempfile.TemporaryDirectory() as tmp:
        tars, jsonl = Path(tmp) / "tars", Path(tmp) / "caps.jsonl"
        tars.mkdir()
        write_tars(tars, captions)
        jsonl.write_text("".join(json.dumps({"id": f"{k // 1000:05d}{k % 1000:04d}", "caption": c}) + "\n"
                                 for k, c in enumerate(captions)))
        size = sum(p.stat().st_size for p in tars.glob("*.tar")) / 2**20
        print(f"{len(captions)} real COCO captions in {len(list(tars.glob('*.tar')))} tars ({size:.0f} MiB) and a JSONL")
        for _ in range(2):  # alternated
            for name, source in (("tars", tars), ("jsonl", jsonl)):
                n, s = timed_read(source)
                print(f"read {name:5s}: {n / s:10,.0f} rec/s  ({n} in {s:.2f} s)")
        first = tars / "00000.tar"
        subset = Path(tmp) / "subset.jsonl"
        subset.write_text("".join(json.dumps({"id": r["id"], "caption": r["caption"]}) + "\n"
                                  for r in itertools.islice(mosaictool.read(first), n_parse)))
        next(mosaictool.parse([{"id": 0, "caption": "a dog"}]))  # spaCy loaded before the clock starts
        t = time.perf_counter()
        from_jsonl = list(mosaictool.parse(subset))
        s = time.perf_counter() - t
        from_tar = list(itertools.islice(mosaictool.parse(first), n_parse))
        same = sum(a["id"] == b["id"] and a["graph"] == b["graph"] for a, b in zip(from_jsonl, from_tar))
        print(f"parse (1 worker): {n_parse / s:,.0f} captions/s; graphs from the tar identical to the JSONL's: {same} of {n_parse}")


if __name__ == "__main__":
    main()
