"""The demo's base pretraining on a 2-core CPU: one process with two torch threads against two gloo
ranks of one thread each (training.launch.train_in_local_ranks, what the demo does), at the
same global batch. Prints each one's steps/s, the ratio, and the largest difference of their logged
losses (the same batch: they should agree to float rounding).

    python perf/pretrain_ranks.py [--steps 60] [--world-train 1000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    import torch

    from mosaictool.demo.config import DemoConfig
    from mosaictool.demo.data import make_shards, make_world, plain_records, train_fields
    from mosaictool.training import TrainConfig, train
    from mosaictool.training.launch import train_in_local_ranks

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--world-train", type=int, default=1000)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp())
    demo = DemoConfig(out=str(root), world_train=args.world_train, eval_scale=0.1)
    world = make_world(demo, root)
    shards = make_shards(train_fields(plain_records(world)), world, root / "shards-plain")
    timings, losses = {}, {}
    for name in ("1 process, 2 threads", "2 ranks, 1 thread each"):
        tc = TrainConfig(data=str(shards), out=str(root / name.split(",")[0].replace(" ", "-")), method="clip", model=demo.model,
                         record_hard_images=True, augment=False, steps=args.steps, lr=demo.pretrain_lr,
                         batch_size=demo.pretrain_batch, warmup=5, seed=0, quiet=True, device="cpu")
        t = time.perf_counter()
        if name.startswith("2 ranks"):
            final = train_in_local_ranks(tc, 2)
        else:
            torch.set_num_threads(2)
            final = train(tc)
        timings[name] = time.perf_counter() - t
        losses[name] = [json.loads(line)["loss"] for line in (Path(final).parent / "metrics.jsonl").read_text().splitlines()]
        print(f"{name}: {args.steps / timings[name]:.2f} steps/s ({timings[name]:.1f} s with start-up, batch "
              f"{demo.pretrain_batch} + twins)")
    one, two = timings.values()
    print(f"ratio: 2 ranks are {one / two:.2f}x faster")
    a, b = losses.values()
    print(f"largest loss difference over {len(a)} logged steps: {max(abs(x - y) for x, y in zip(a, b)):.2e}")


if __name__ == "__main__":
    main()
