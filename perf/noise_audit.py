"""What noisy captions do to MosaiCLIP's texts: the texts audit of a noisy world, clean vs noisy.

Samples train records of a world made with `mosaictool world --caption-noise R` and runs the demo's
text stages on their captions (parse -> vocab build on the world's words -> decompose -> negate ->
template, the demo's settings), twice: the captions as written (noisy ones included), and the same
records' clean captions (`clean_caption`: the world at noise 0). Prints the audit's split by caption
(world.audit.noise_markdown) and, paired, the share of sub-graph positives false of the image on the
same images with clean and with noisy text.

    python perf/noise_audit.py --world noisy/ --sample 2000 --workers 2
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from mosaictool.console import console_logging
from mosaictool.demo.config import TEXT_METHODS
from mosaictool.io import read_records
from mosaictool.stages.decompose import decompose
from mosaictool.stages.negate import negate
from mosaictool.stages.parse import parse
from mosaictool.stages.template import template
from mosaictool.stages.vocab_tools import build_from_graphs
from mosaictool.vocab import load, save
from mosaictool.world.audit import audit, noise_markdown
from mosaictool.world.vocab import base_vocab


def texts_of(records: list[dict], min_count: int, workers: int) -> list[dict]:
    """The demo's text stages (mosaictool.demo.data.make_texts) on these records."""
    parsed = list(parse(records, workers=workers))
    with tempfile.TemporaryDirectory() as tmp:
        save(build_from_graphs(parsed, min_count=min_count, base=base_vocab()), tmp)
        vocab = load(tmp)
        return list(template(negate(decompose(parsed, max_subgraphs=3, vocab=tmp), vocab=tmp, max_negatives=6,
                                    text_methods=TEXT_METHODS, workers=workers), vocab=vocab))


def subgraph_false(result: dict) -> tuple[int, int]:
    rows = [r for g, r in result["own"].items() if g in ("positive:object", "positive:relation")]
    return sum(r["wrong"] for r in rows), sum(r["checked"] for r in rows)


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}% ({a}/{b})" if b else "–"


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", required=True, help="a world made with --caption-noise")
    ap.add_argument("--sample", type=int, default=2000, help="train records sampled (varied captions, twins included)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--min-count", type=int, default=2,
                    help="vocab build's count: the demo's 20 over 38,000 captions is ~1 per 1,900; 2 at 2,000")
    ap.add_argument("--json", help="also write both audits here")
    args = ap.parse_args()

    records = list(read_records(str(Path(args.world) / "train" / "captions.jsonl")))
    if not records or "noise" not in records[0]:
        raise SystemExit(f"{args.world}: not a noisy world (make it with `mosaictool world --caption-noise R`)")
    sample = sorted(random.Random(args.seed).sample(range(len(records)), min(args.sample, len(records))))
    noisy = [records[k] for k in sample]
    clean = [{**r, "caption": r["clean_caption"], "mentions": r["clean_mentions"], "noise": []} for r in noisy]
    was_noisy = {r["id"] for r in noisy if r["noise"]}

    out = {}
    for name, recs in (("noisy", noisy), ("clean", clean)):
        start = time.perf_counter()
        texts = texts_of(recs, args.min_count, args.workers)
        result = audit(texts, batches=0)
        paired = {which: audit([t for t in texts if (t["id"] in was_noisy) == (which == "noisy")], batches=0)
                  for which in ("noisy", "clean")}
        out[name] = {"audit": result, "paired": {k: subgraph_false(v) for k, v in paired.items()},
                     "negatives_true": {k: v["summary"]["negatives_true"] for k, v in paired.items()},
                     "seconds": time.perf_counter() - start}
        print(f"\n## {len(recs)} records, captions {'as written' if name == 'noisy' else 'clean (clean_caption)'} "
              f"({out[name]['seconds']:.0f} s)")
        summary = result["summary"]
        print(f"sub-graph positives false of the image: {pct(*subgraph_false(result))}; "
              f"positives false (caption included) {100 * summary['positives_false']:.1f}%, "
              f"positives with debris {100 * summary['positives_debris']:.1f}%, "
              f"graph negatives true {100 * summary['negatives_true']:.1f}%, with debris {100 * summary['negatives_debris']:.1f}%")
        if name == "noisy":
            print("(the vocabulary built from noisy captions holds their unrelated words: negatives of clean captions draw them too)")
            print(noise_markdown(result["noise"]))
    print(f"\n## Paired: the {len(was_noisy)} records whose caption is noisy, and the {len(noisy) - len(was_noisy)} left clean")
    print("| records | text | sub-graph positives false of the image | graph negatives true |")
    print("|---|---|---|---|")
    for which in ("noisy", "clean"):
        for name, label in (("clean", "clean_caption"), ("noisy", "as written")):
            print(f"| caption {which} in the world | {label} | {pct(*out[name]['paired'][which])} | "
                  f"{100 * (out[name]['negatives_true'][which] or 0):.1f}% |")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
