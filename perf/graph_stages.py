"""Cost and yield of decompose + negate + template on real COCO captions (SugarCrepe's).

CPU time of this process (other processes on a shared machine do not count), one worker.
Prints: captions/s of parse and of the three graph stages (graph negatives only, and with each
text-negative method), their time as a share of parse's; the share of captions with at least one
sub-graph positive and at least one negative; 20 random (positive, negative) pairs with provenance.

    nice -n 5 python perf/graph_stages.py --n 1000
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import time
from pathlib import Path

from mosaictool.console import console_logging
from mosaictool.stages.decompose import decompose
from mosaictool.stages.negate import negate
from mosaictool.stages.parse import parse
from mosaictool.stages.template import template
from mosaictool.vocab import load

SUGARCREPE = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / "sugarcrepe" / "data"


def coco_captions(folder: Path, n: int, seed: int) -> list[dict]:
    captions = sorted({item["caption"].strip() for f in sorted(folder.glob("*.json")) for item in json.load(open(f)).values()})
    random.Random(seed).shuffle(captions)
    return [{"id": i, "caption": c} for i, c in enumerate(captions[:n])]


def graph_stages(graphs: list[dict], vocab, text_methods=()) -> tuple[list[dict], float]:
    start = time.process_time()
    out = list(template(negate(decompose(graphs), text_methods=text_methods), vocab=vocab))
    return out, time.process_time() - start


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="captions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", type=Path, default=SUGARCREPE)
    args = ap.parse_args()

    records = coco_captions(args.data, args.n, args.seed)
    n = len(records)
    vocab = load()
    list(parse(records[:8]))  # load spaCy outside the timing
    start = time.process_time()
    graphs = list(parse(records))
    parse_s = time.process_time() - start
    # A streaming stage holds a handful of records; keep the inputs held here out of the garbage
    # collector's scans, which would otherwise dominate the cheap stages' time.
    gc.freeze()
    print(f"captions: {n} unique COCO captions from {args.data}")
    print(f"parse:                              {n / parse_s:8.1f} captions/s")

    out, graph_s = graph_stages(graphs, vocab)
    print(f"decompose+negate+template (graph):  {n / graph_s:8.1f} captions/s  = {100 * graph_s / parse_s:5.2f}% of parse's time")
    for methods in (("replace", "shuffle"), ("negclip",), ("order",)):
        _, s = graph_stages(graphs, vocab, methods)
        label = f"  ... + --text {','.join(methods)}:"
        print(f"{label:<36}{n / s:8.1f} captions/s  = {100 * s / parse_s:5.2f}% of parse's time")

    with_pos = sum(any(p["kind"] != "caption" for p in r["texts"]["positives"]) for r in out)
    with_neg = sum(bool(r["texts"]["negatives"]) for r in out)
    both = sum(any(p["kind"] != "caption" for p in r["texts"]["positives"]) and bool(r["texts"]["negatives"]) for r in out)
    n_pos = sum(len(r["texts"]["positives"]) for r in out)
    n_neg = sum(len(r["texts"]["negatives"]) for r in out)
    print(f"captions with >=1 sub-graph positive: {100 * with_pos / n:.1f}%, >=1 graph negative: {100 * with_neg / n:.1f}%, "
          f"both: {100 * both / n:.1f}%")
    print(f"per caption: {n_pos / n:.2f} positives (caption included), {n_neg / n:.2f} graph negatives")
    counts: dict[str, int] = {}
    for r in out:
        for neg in r["texts"]["negatives"]:
            counts[neg["transform"]] = counts.get(neg["transform"], 0) + 1
    print("negatives by transform: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))

    pairs = [(r, neg) for r in out for neg in r["texts"]["negatives"]]
    print("\n20 random (positive, negative) pairs:")
    for r, neg in random.Random(args.seed).sample(pairs, min(20, len(pairs))):
        pos = r["texts"]["positives"][neg["positive"]]["text"]
        print(f"  [{neg['transform']} {neg['slot']}: {neg['from']} -> {neg['to']}]\n    + {pos}\n    - {neg['text']}")


if __name__ == "__main__":
    main()
