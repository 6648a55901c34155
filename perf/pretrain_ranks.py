"""The demo's base pretraining on a 2-core CPU: one process with two torch threads against two gloo
ranks of one thread each (training.launch.train_in_local_ranks, what the demo does), at the
same global batch, alternated --repeats times (the machines are shared and noisy). Each is timed at
--steps and at --short steps: the difference of the two is the steady pace, without the start-up
(imports, model, shard index, for the ranks also fork and the gloo group). Prints each one's steady
steps/s (median, min, max), the ratio of the medians, and the largest difference of their logged
losses (the same batch: they should agree to float rounding).

    python perf/pretrain_ranks.py [--steps 150] [--short 30] [--repeats 2] [--world-train 1000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from mosaictool.console import console_logging


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    import torch

    from mosaictool.demo.config import DemoConfig
    from mosaictool.demo.data import make_shards, make_world, plain_records, train_fields
    from mosaictool.training import TrainConfig, train
    from mosaictool.training.launch import train_in_local_ranks

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--short", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--world-train", type=int, default=1000)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp())
    demo = DemoConfig(out=str(root), world_train=args.world_train, eval_scale=0.1)
    world = make_world(demo, root)
    shards = make_shards(train_fields(plain_records(world)), world, root / "shards-plain")
    names = ("1 process, 2 threads", "2 ranks, 1 thread each")

    def run(name: str, steps: int, folder: str) -> tuple[float, str]:
        tc = TrainConfig(data=str(shards), out=str(root / folder), method="clip", model=demo.model, record_hard_images=True,
                         augment=False, steps=steps, lr=demo.pretrain_lr, batch_size=demo.pretrain_batch, warmup=5, seed=0,
                         quiet=True, device="cpu")
        t = time.perf_counter()
        if name == names[1]:
            final = train_in_local_ranks(tc, 2)
        else:
            torch.set_num_threads(2)
            final = train(tc)
        return time.perf_counter() - t, final

    rates: dict[str, list[float]] = {name: [] for name in names}
    losses = {}
    for repeat in range(args.repeats):
        for k, name in enumerate(names):
            long, final = run(name, args.steps, f"{k}-long-{repeat}")
            short, _ = run(name, args.short, f"{k}-short-{repeat}")
            rates[name].append((args.steps - args.short) / (long - short))
            losses[name] = [json.loads(line)["loss"] for line in (Path(final).parent / "metrics.jsonl").read_text().splitlines()]
    for name in names:
        r = rates[name]
        print(f"{name}: {statistics.median(r):.2f} steps/s steady (min {min(r):.2f}, max {max(r):.2f}; {args.repeats} x "
              f"({args.steps} - {args.short}) steps, batch {demo.pretrain_batch} + twins)")
    one, two = (statistics.median(rates[name]) for name in names)
    print(f"ratio: 2 ranks are {two / one:.2f}x faster (medians)")
    a, b = losses.values()
    print(f"largest loss difference over {len(a)} logged steps: {max(abs(x - y) for x, y in zip(a, b)):.2e}")


if __name__ == "__main__":
    main()
