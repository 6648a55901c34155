"""A training step at the demo's size in plain torch (no open_clip, no mosaictool), one thread: for telling a
slow machine from a slow torch build. Run it under two interpreters on one machine, in turn:

    farm-bench -n 5 --timeout 900 --vs "/other/venv/bin/python perf/torch_step.py" -- .venv/bin/python perf/torch_step.py

Two pre-norm transformer towers of width 128 and 4 layers (17 image tokens, 77 text tokens, as the demo's
`mosaic-micro-p16`), batch 32, a contrastive loss, backward and AdamW; prints ms a step after 5 warm-up steps.
"""

from __future__ import annotations

import argparse
import time

import torch


def tower(tokens: int, width: int = 128, layers: int = 4) -> torch.nn.Module:
    layer = torch.nn.TransformerEncoderLayer(width, 4, 4 * width, batch_first=True, activation="gelu", norm_first=True)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(1)  # as each of the demo's parallel runs trains
    torch.manual_seed(0)
    image, text = tower(17), tower(77)
    opt = torch.optim.AdamW([*image.parameters(), *text.parameters()], lr=1e-4)
    xi, xt, labels = torch.randn(32, 17, 128), torch.randn(32, 77, 128), torch.arange(32)

    def step() -> None:
        logits = image(xi)[:, 0] @ text(xt)[:, -1].T
        loss = torch.nn.functional.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    print(f"{(time.perf_counter() - start) / args.steps * 1000:.1f} ms a step, torch {torch.__version__}")


if __name__ == "__main__":
    main()
