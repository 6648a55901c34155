"""Two of the demo's data costs, each against the obvious alternative, alternated in one session:

1. Reading its texts file (every record's graphs, negatives and texts) into a list with Python's default
   garbage-collector thresholds (700, 10, 10) against those the CLI sets (mosaictool.cli.main):
   the collector re-walks the records ever more often as they pile up.
2. A CLIP fine-tuning run (400 steps, one thread, in a forked process as the demo's pool runs it)
   with every image decoded once before the fork (training.ShardCache.decode) against the run
   decoding its own (the shards indexed before the fork for both); the two runs' weights must be equal.

    python perf/demo_data.py DEMO_OUT [--steps 400] [--repeats 2]

DEMO_OUT is a `mosaictool demo` folder (its texts.jsonl, shards/ and base.pt).
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from mosaictool.console import console_logging

CLI_THRESHOLDS = (50_000, 50, 1000)
# what the forked runs read from this process (fork: inherited, not copied): the shards indexed, and
# the same with every image decoded too
INDEXED = None
DECODED = None


def read_seconds(path: Path, thresholds: tuple[int, int, int]) -> float:
    from mosaictool.io import read_records

    old = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        t = time.perf_counter()
        records = list(read_records(path))  # kept, as the audit and the stages between keep them
        seconds = time.perf_counter() - t
    finally:
        gc.set_threshold(*old)
    assert records
    return seconds


def one_run(job) -> tuple[float, float]:
    """(seconds, sum of the final weights) of one CLIP run; `decoded`: keep this process's decoded images."""
    import torch

    from mosaictool.model.openclip import read_checkpoint
    from mosaictool.training import TrainConfig, train

    out, steps, decoded = job
    torch.set_num_threads(1)
    tc = TrainConfig(data=str(out / "shards"), out=tempfile.mkdtemp(), method="clip", model="mosaic-micro-p16",
                     pretrained=str(out / "base.pt"), augment=False, steps=steps, lr=5e-4, batch_size=32,
                     warmup=min(50, steps // 10), seed=0, quiet=True, device="cpu", num_workers=0)
    t = time.perf_counter()
    final = train(tc, shards=DECODED if decoded else INDEXED)
    seconds = time.perf_counter() - t
    weights = read_checkpoint(final)["state_dict"]
    return seconds, float(sum(v.double().sum() for v in weights.values() if v.is_floating_point()))


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    import open_clip  # noqa: F401  imported before the forks, as the demo does

    from mosaictool.model.openclip import model_config
    from mosaictool.training import ShardCache
    from mosaictool.training.transform import ImagePrep

    global INDEXED, DECODED

    ap = argparse.ArgumentParser()
    ap.add_argument("demo_out")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    out = Path(args.demo_out)

    reads: dict[tuple, list[float]] = {(700, 10, 10): [], CLI_THRESHOLDS: []}
    for _ in range(args.repeats):
        for thresholds in reads:
            reads[thresholds].append(read_seconds(out / "texts.jsonl", thresholds))
    default, cli = (statistics.median(v) for v in reads.values())
    print(f"reading {out / 'texts.jsonl'} (median of {args.repeats} alternated):")
    print(f"  GC thresholds (700, 10, 10): {default:.1f} s; {CLI_THRESHOLDS}: {cli:.1f} s ({default / cli:.1f}x)")

    gc.set_threshold(*CLI_THRESHOLDS)
    INDEXED, DECODED = ShardCache(), ShardCache()
    INDEXED.preload(str(out / "shards"))
    DECODED.preload(str(out / "shards"))
    t = time.perf_counter()
    DECODED.decode(str(out / "shards"), ImagePrep.size_of(model_config("mosaic-micro-p16")))
    decode_seconds = time.perf_counter() - t
    runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    context = multiprocessing.get_context("fork")
    for _ in range(args.repeats):
        for decoded in (True, False):
            with ProcessPoolExecutor(1, mp_context=context) as pool:
                runs[decoded].append(pool.submit(one_run, (out, args.steps, decoded)).result())
    shared, own = (statistics.median(s for s, _ in runs[k]) for k in (True, False))
    same = len({w for pair in runs.values() for _, w in pair}) == 1
    print(f"a CLIP run of {args.steps} steps, one thread, forked (median of {args.repeats} alternated):")
    print(f"  images decoded once before the fork: {shared:.1f} s; decoded by the run: {own:.1f} s ({own / shared:.2f}x);"
          f" decoding them once took {decode_seconds:.1f} s; weights {'equal' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
