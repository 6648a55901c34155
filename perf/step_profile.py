"""Where a fine-tuning step of the demo's tiny model spends its time (one torch thread, as the demo's
parallel runs train), by operator, from torch.profiler.

    python perf/step_profile.py DEMO_OUT [--method negclip] [--steps 30] [--batch-size 32]

DEMO_OUT is a `mosaictool demo` folder (its shards/ and base.pt). The first 5 steps are skipped
(warm-up, caches), the next ones profiled; the table groups operators into what they are for.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

from mosaictool.console import console_logging

GROUPS = [  # (group, operator name fragments), first match wins
    ("matmul (linear layers)", ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear")),
    ("attention", ("scaled_dot_product", "flash_attention")),
    ("activations, norms", ("gelu", "layer_norm", "softmax", "log_softmax")),
    ("optimizer (AdamW)", ("adamw", "Optimizer.step")),
    ("zeroing, copies", ("aten::fill_", "aten::zero_", "aten::copy_", "aten::clone")),
    ("data (collate, texts, images)", ("DataLoader",)),
    ("gradient norm (clip)", ("linalg_vector_norm", "clip_grad")),
]


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from mosaictool.training import TrainConfig, train

    ap = argparse.ArgumentParser()
    ap.add_argument("demo_out")
    ap.add_argument("--method", default="negclip")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = Path(tempfile.mkdtemp())
    model = json.loads((Path(args.demo_out) / "demo_config.json").read_text())["model"]
    cfg = TrainConfig(data=str(Path(args.demo_out) / "shards"), out=str(out / "run"), method=args.method, model=model,
                      pretrained=str(Path(args.demo_out) / "base.pt"), augment=False, steps=args.steps + 5, lr=2e-4,
                      batch_size=args.batch_size, warmup=2, seed=0, quiet=True, device="cpu")
    prof = profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=3, warmup=2, active=args.steps))
    prof.start()
    train(cfg, on_step=lambda *_: prof.step())
    prof.stop()
    shutil.rmtree(out, ignore_errors=True)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    grouped: dict[str, float] = defaultdict(float)
    for e in events:
        group = next((g for g, keys in GROUPS if any(k in e.key for k in keys)), "other (autograd, Python, small ops)")
        grouped[group] += e.self_cpu_time_total
    per_step = total / args.steps / 1000
    print(f"{args.method}, batch {args.batch_size}, 1 thread: {per_step:.1f} ms per step (self CPU time, {args.steps} steps)")
    for group, t in sorted(grouped.items(), key=lambda kv: -kv[1]):
        print(f"  {group:<38} {100 * t / total:5.1f}%  {t / args.steps / 1000:6.1f} ms")


if __name__ == "__main__":
    main()
