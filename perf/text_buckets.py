"""Text tower on length buckets vs one cut after the longest text (ContrastiveForward, model/batch.py).

    python perf/text_buckets.py [--model mosaic-micro] [--captions 64] [--short 480] [--repeats 9] [--threads 1]

A MosaiCLIP-like text batch through the open_clip tokenizer: `--captions` scene captions of ~24
tokens and `--short` sub-graph texts of 5-12 tokens (object, attribute + object, relation), shuffled.
Times forward + backward of ContrastiveForward (one 64 px image, so almost all of it is the text
tower) with the default buckets (max 3) vs max_buckets=1 (the single cut), and the same with
`dense` (FSC-CLIP's per-token features). The sides alternate repeat by repeat so that load from
other processes hits both alike. Prints token positions, min / median ms and the ratio; nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

# isort: split
# Passive OpenMP waits, as `mosaictool` sets them (mosaictool/cli/__init__.py): before torch loads OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from mosaictool.console import console_logging
from mosaictool.model import openclip
from mosaictool.model.text_tower import length_buckets
from mosaictool.training.batch import ContrastiveForward

COLORS = ["red", "green", "blue", "yellow", "purple", "orange", "white", "black"]
SIZES = ["small", "large", "tiny", "big"]
SHAPES = ["circle", "square", "triangle", "star", "cube", "sphere"]
RELATIONS = ["left of", "right of", "above", "below", "next to", "behind"]


def texts(n_captions: int, n_short: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)

    def obj(size: bool = True) -> str:
        return " ".join([rng.choice(SIZES)] * size + [rng.choice(COLORS), rng.choice(SHAPES)])

    captions = [f"a {obj()} {rng.choice(RELATIONS)} a {obj()} and a {obj()} {rng.choice(RELATIONS)} a {obj()} "
                f"on a {rng.choice(COLORS)} table" for _ in range(n_captions)]
    short_kinds = [lambda: f"a {obj(False)}", lambda: f"a {obj()}",
                   lambda: f"a {obj(False)} {rng.choice(RELATIONS)} a {obj(False)}",
                   lambda: f"a {obj()} {rng.choice(RELATIONS)} a {obj()}"]
    short = [rng.choice(short_kinds)() for _ in range(n_short)]
    out = captions + short
    rng.shuffle(out)
    return out


def step(forward: ContrastiveForward, image: torch.Tensor, tokens: torch.Tensor, dense: bool, weight: torch.Tensor) -> float:
    forward.model.zero_grad(set_to_none=True)
    t = time.perf_counter()
    out = forward(image, tokens, dense) if dense else forward(image, tokens)
    loss = (out[1] * weight).sum() + (out[4].sum() if dense else 0)
    loss.backward()
    return time.perf_counter() - t


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mosaic-micro")
    ap.add_argument("--captions", type=int, default=64)
    ap.add_argument("--short", type=int, default=480)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    bundle = openclip.create(args.model, seed=0)
    tokens = bundle.tokenizer(texts(args.captions, args.short))
    lengths = (tokens != 0).sum(1)
    groups = length_buckets(lengths)
    single = len(lengths) * int(lengths.max())
    bucketed = sum(len(g) * int(lengths[g].max()) for g in groups)
    t = time.perf_counter()
    for _ in range(100):
        length_buckets(lengths)
    plan_ms = (time.perf_counter() - t) * 10
    print(f"# {args.model}, CPU threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}, fp32")
    print(f"{len(lengths)} texts, lengths max {int(lengths.max())} median {int(lengths.median())}, context {tokens.shape[1]}")
    print(f"buckets {[(len(g), int(lengths[g].max())) for g in groups]} (texts, length); length_buckets {plan_ms:.2f} ms")
    print(f"token positions: single cut {single}, buckets {bucketed} ({bucketed / single:.2f}x), "
          f"ideal {int(lengths.sum())} ({int(lengths.sum()) / single:.2f}x)")
    image = torch.randn(1, 3, 64, 64)
    weight = torch.randn(len(tokens), bundle.model.text_projection.shape[-1], generator=torch.Generator().manual_seed(0))
    sides = {"buckets": ContrastiveForward(bundle.model), "single cut": ContrastiveForward(bundle.model, max_buckets=1)}
    for dense in (False, True):
        times: dict[str, list[float]] = {side: [] for side in sides}
        for side, forward in sides.items():  # warm-up
            step(forward, image, tokens, dense, weight)
        for _ in range(args.repeats):
            for side, forward in sides.items():
                times[side].append(step(forward, image, tokens, dense, weight))
        print(f"\n## forward + backward{' (dense token features)' if dense else ''}, {args.repeats} repeats")
        for side, ts in times.items():
            print(f"{side:12s} min {min(ts) * 1000:8.1f} ms  median {statistics.median(ts) * 1000:8.1f} ms")
        ratio = statistics.median(times["buckets"]) / statistics.median(times["single cut"])
        best = min(times["buckets"]) / min(times["single cut"])
        print(f"buckets / single cut: median {ratio:.2f}x, min {best:.2f}x")


if __name__ == "__main__":
    main()
