"""What the demo's data cache costs now that a restore copies and checks every byte (mosaictool.demo.cache)
instead of hard-linking the files into OUT: both timed in one session on a cache of the demo's size.

The world is a real one (`generate_world` at the demo's settings: 8,000 scenes with their twins, eval
scale 0.5, 64-pixel images), so the number and sizes of its files are the demo's; the other artifacts
are files of random bytes of the sizes the demo writes (texts.jsonl, the shards, graphs.parquet), or
those of a real demo folder with --from DEMO_OUT.

    python perf/demo_cache.py [--from DEMO_OUT | --entry CACHE_ENTRY] [--world-train 8000] [--scale 1] [--repeats 3] [--workdir DIR]

Prints the cache's size and file count and, per method, the median seconds of a restore into a new
folder (and of the first copy into the cache), with the ratios to the hard links of before and to a
plain copy (shutil.copytree: what any copy costs). --entry times an entry `cache.store` made before.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from mosaictool.console import console_logging

# the sizes of a demo's artifacts besides the world (MB), as a demo at the default settings wrote them
SIZES_MB = {"texts.jsonl": 287, "graphs.parquet": 60, "shards": (8, 30), "shards-plain": (2, 20)}


def hard_link_restore(cached: Path, out: Path) -> None:
    """The restore before: every file hard-linked (mosaictool.demo.data before the manifest)."""
    for name in sorted(os.listdir(cached)):
        src, dst = cached / name, out / name
        if src.is_dir():
            shutil.copytree(src, dst, copy_function=os.link)
        else:
            os.link(src, dst)


def plain_copy(cached: Path, out: Path) -> None:
    """A copy with no check: shutil.copytree / copy2, the floor of any copy."""
    for name in sorted(os.listdir(cached)):
        src = cached / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, out / name)


def build_out(root: Path, world_train: int, source: Path | None, scale: float = 1.0) -> Path:
    from mosaictool.demo.data import DATA_ARTIFACTS
    from mosaictool.world.generate import generate_world

    out = root / "out"
    out.mkdir()
    if source is not None:
        for name in DATA_ARTIFACTS:
            (shutil.copytree if (source / name).is_dir() else shutil.copyfile)(source / name, out / name)
        return out
    generate_world(out / "world", train=world_train, seed=0, twins=True, binding_twins=True, shape_twins=True,
                   image_size=64, eval_scale=0.5, workers=os.cpu_count() or 1)
    for name, size in SIZES_MB.items():
        if isinstance(size, tuple):
            (out / name).mkdir()
            for i in range(size[0]):
                (out / name / f"{i:06d}.tar").write_bytes(os.urandom(int(scale * (size[1] << 20))))
            (out / name / "sizes.json").write_text("{}\n")
        else:
            (out / name).write_bytes(os.urandom(int(scale * (size << 20))))
    for name in DATA_ARTIFACTS:
        if not (out / name).exists():
            (out / name).mkdir() if "." not in name else (out / name).write_text("{}\n")
    return out


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    from mosaictool.demo import cache
    from mosaictool.demo.data import DATA_ARTIFACTS

    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="source", type=Path)
    ap.add_argument("--world-train", type=int, default=8000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--entry", type=Path, default=None)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the sizes of the artifacts besides the world")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="demo-cache-perf-", dir=args.workdir))
    try:
        entry = args.entry
        if entry is None:
            out = build_out(root, args.world_train, args.source, args.scale)
            entry = root / "cache" / "data-x"
            entry.parent.mkdir()
            t = time.perf_counter()
            cache.store({name: out / name for name in DATA_ARTIFACTS}, entry)
            print(f"first copy into the cache (copy + SHA-256): {time.perf_counter() - t:.1f} s")
        files = sum(len(names) for _, _, names in os.walk(entry))
        size = sum(f.stat().st_size for f in entry.rglob("*") if f.is_file())
        print(f"cache: {size / 2**30:.2f} GiB in {files} files")
        methods = {"hard links (before)": hard_link_restore, "plain copy": plain_copy,
                   "verified copy (now)": lambda src, dst: cache.restore(src, dst)}
        times: dict[str, list[float]] = {m: [] for m in methods}
        for i in range(args.repeats):  # alternated, so that all see the same page cache and load
            for method, restore in methods.items():
                target = root / f"restore-{i}-{len(times[method])}"
                target.mkdir()
                os.sync()  # the previous method's writes do not land on this one's clock
                t = time.perf_counter()
                assert restore(entry, target) is None
                times[method].append(time.perf_counter() - t)
                shutil.rmtree(target)
        med = {m: statistics.median(v) for m, v in times.items()}
        for method, values in times.items():
            print(f"restore, {method}: median {med[method]:.2f} s over {len(values)} ({', '.join(f'{v:.2f}' for v in values)})")
        now = med["verified copy (now)"]
        print(f"verified copy / hard links: {now / med['hard links (before)']:.1f}x; verified copy / plain copy: "
              f"{now / med['plain copy']:.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
