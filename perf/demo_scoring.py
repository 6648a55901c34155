"""Scoring the demo's checkpoints, one after another in one process with one thread (as each of the
demo's scoring processes does): the engine as it is (each benchmark's decoded images and tokens kept
for the next model; texts in batches of like lengths, cut after the longest) against the same engine
with both turned off (every model decodes and tokenizes again; texts padded to the context length),
alternated, on the same checkpoints. Prints seconds per checkpoint, the ratio, and the largest
difference between the two ways' scores.

    python perf/demo_scoring.py DEMO_OUT [--checkpoints 4] [--split world]

DEMO_OUT is a `mosaictool demo` folder (its world/, base.pt and runs/).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from unittest import mock

from mosaictool.console import console_logging


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    import torch

    from mosaictool.bench import engine, get
    from mosaictool.demo.config import MAIN_FAMILIES
    from mosaictool.model.openclip import load_checkpoint

    ap = argparse.ArgumentParser()
    ap.add_argument("demo_out")
    ap.add_argument("--checkpoints", type=int, default=4)
    ap.add_argument("--split", default="world", choices=["world", "world-val"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = Path(args.demo_out)
    paths = [out / "base.pt", *sorted(out.glob("runs/*/final.pt"))][: args.checkpoints]
    options = engine.EngineOptions(quiet=True, device="cpu", batch_size=64, item_hits=True)

    def score(keep: bool) -> tuple[float, list[dict]]:
        prepared = [engine.prepare(get(args.split), out / "world", MAIN_FAMILIES, options)]
        patches = [] if keep else [
            mock.patch.object(engine.Encoder, "_tokens", lambda self, texts, memo: self.bundle.tokenizer(texts)),
            mock.patch.object(engine.Encoder, "_pixels", lambda self, refs, desc, memo, real=engine.Encoder._pixels:
                              real(self, refs, desc, None)),
            mock.patch("mosaictool.model.text_tower.trims_text", lambda model: False),
        ]
        for p in patches:
            p.start()
        try:
            t = time.perf_counter()
            rows = [r for path in paths for r in engine.score_model(prepared, str(path), load_checkpoint(path), options)]
            return (time.perf_counter() - t) / len(paths), rows
        finally:
            for p in patches:
                p.stop()

    times: dict[bool, list[float]] = {True: [], False: []}
    rows: dict[bool, list[dict]] = {}
    for _ in range(2):
        for keep in (False, True):
            seconds, rows[keep] = score(keep)
            times[keep].append(seconds)
    plain, kept = statistics.median(times[False]), statistics.median(times[True])
    values = {(r["model"], r["subtask"], r["metric"]): r["value"] for r in rows[False] if r["metric"] != "hits"}
    diff = max(abs(r["value"] - values[(r["model"], r["subtask"], r["metric"])]) for r in rows[True]
               if r["metric"] != "hits" and r["value"] == r["value"])
    print(f"{len(paths)} checkpoints on {args.split} ({', '.join(MAIN_FAMILIES)}), one thread, median of 2 alternated repeats:")
    print(f"  decode + tokenize per model, full-length texts: {plain:.2f} s per checkpoint")
    print(f"  kept images and tokens, texts cut by length:    {kept:.2f} s per checkpoint ({plain / kept:.2f}x)")
    print(f"  largest difference between the two ways' scores: {diff:.2g} (float rounding on near ties)")


if __name__ == "__main__":
    main()
