"""The demo's fine-tuning runs on one GPU: stacked (training.train_many: the runs that share their
steps' shape take them together, one kernel per layer for all of them) against one after another
(training.train per run), alternated in one process, on the demo's rows and settings.

    python perf/gpu_multirun.py DEMO_OUT [--steps 100] [--seeds 2] [--repeats 2]

DEMO_OUT is a `mosaictool demo` folder (its shards/ and base.pt; `demo --quick` makes a small one:
a step's cost does not depend on the world's size). Prints the wall time of each way (median over
the repeats, CUDA synchronised), their ratio, and how far each stacked run's weights are from the
same run trained alone: |together - alone| / |alone - base|, worst seed per row. Without a CUDA GPU
it says so and exits 0 (perf/multirun_speed.py measures the CPU's pool). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from multirun_speed import distance  # noqa: E402  one definition of the weight distance

from mosaictool.console import console_logging
from mosaictool.demo.config import DemoConfig  # noqa: E402
from mosaictool.demo.finetune import planned_runs  # noqa: E402
from mosaictool.model.openclip import model_config, read_checkpoint  # noqa: E402
from mosaictool.training import ShardCache, train, train_many  # noqa: E402
from mosaictool.training.transform import ImagePrep  # noqa: E402


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("demo_out")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU visible: nothing measured (perf/multirun_speed.py times the CPU's pool)")
        return
    demo = Path(args.demo_out)
    model = json.loads((demo / "demo_config.json").read_text())["model"]
    cfg = DemoConfig(seeds=args.seeds, finetune_steps=args.steps, finetune_batch=64, model=model, device="cuda")
    shards, base = demo / "shards", demo / "base.pt"
    shared = ShardCache()
    shared.decode(str(shards), ImagePrep.size_of(model_config(model)))
    tmp = Path(tempfile.mkdtemp(prefix="gpu-multirun-"))
    ways = {"alone": lambda todo: [train(tc, shards=shared) for tc in todo],
            "together": lambda todo: train_many(todo, shards=shared)}
    wall: dict[str, list[float]] = {w: [] for w in ways}
    finals: dict[str, dict] = {}
    for r in range(args.repeats):
        for way in (list(ways) if r % 2 == 0 else list(ways)[::-1]):
            runs, todo = planned_runs(cfg, shards, base, tmp / f"{way}{r}")
            torch.cuda.synchronize()
            t = time.perf_counter()
            ways[way](todo)
            torch.cuda.synchronize()
            wall[way].append(time.perf_counter() - t)
            finals[way] = runs
    n = sum(len(v) for v in finals["alone"].values())
    print(f"{torch.cuda.get_device_name()}: {n} runs ({len(finals['alone'])} rows x {args.seeds} seeds), {args.steps} steps, "
          f"64 images a step, median of {args.repeats} alternated:")
    for way in ways:
        w = statistics.median(wall[way])
        print(f"  {way:9s} {w:7.1f} s wall ({60 * n / w:6.1f} runs/min)  all: {', '.join(f'{x:.1f}' for x in wall[way])}")
    print(f"  together / alone throughput: {statistics.median(wall['alone']) / statistics.median(wall['together']):.2f}x")
    base_weights = {k: v.float() for k, v in read_checkpoint(base)["state_dict"].items()}
    worst = {label: max(distance(a, b, base_weights) for a, b in zip(finals["together"][label], finals["alone"][label]))
             for label in finals["alone"]}
    print("  |together - alone| / |alone - base|, worst seed per row: " + ", ".join(f"{k} {d:.1e}" for k, d in worst.items()))


if __name__ == "__main__":
    main()
