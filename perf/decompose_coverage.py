"""How often decompose's sample leaves a caption without a sub-graph that can make a negative.

Reads `mosaictool decompose` output (and, with --negatives, `mosaictool negate` output of it) and
prints: captions, those whose graph has a relation or attribute sub-graph (a key in `subgraph_keys`
with a relation `>r>` or an attribute `[a]`), those of them whose sampled
positives hold none, and with --negatives the captions with zero graph negatives, split by whether
the graph had a relation or attribute sub-graph.

    mosaictool parse caps.jsonl -o graphs.jsonl
    mosaictool decompose --max 3 graphs.jsonl -o sub.jsonl
    mosaictool negate --max 6 sub.jsonl -o neg.jsonl
    python perf/decompose_coverage.py sub.jsonl --negatives neg.jsonl
"""

from __future__ import annotations

import argparse

from mosaictool.console import console_logging
from mosaictool.io import read_records


def informative(subgraph: dict) -> bool:
    """A sub-graph f_obj, f_attr or f_rel can perturb: a relation, or an object with attributes."""
    return bool(subgraph["relations"]) or any(o["attributes"] for o in subgraph["objects"])


def graph_has_one(record: dict) -> bool:
    # the whole caption's key (first) holds every kept object, attribute and relation
    return any(" >" in key or "[" in key for key in record["subgraph_keys"])


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("subgraphs", help="decompose output")
    ap.add_argument("--negatives", help="negate output of the same records")
    args = ap.parse_args()
    total = has = missed = 0
    has_ids = set()
    for rec in read_records(args.subgraphs):
        total += 1
        if graph_has_one(rec):
            has += 1
            has_ids.add(rec["id"])
            missed += not any(informative(sg) for sg in rec["subgraphs"] if sg["kind"] != "caption")
    print(f"captions: {total}")
    print(f"graph has a relation or attribute sub-graph: {has} ({has / total:.1%})")
    print(f"... but the sampled positives hold none: {missed} ({missed / total:.1%} of captions, {missed / max(has, 1):.1%} of those)")
    if args.negatives:
        zero = {True: 0, False: 0}
        for rec in read_records(args.negatives):
            if not any(n["kind"] == "graph" for n in rec["negatives"]):
                zero[rec["id"] in has_ids] += 1
        both = zero[True] + zero[False]
        print(f"zero graph negatives: {both} ({both / total:.1%}); graph had a relation/attribute sub-graph: {zero[True]}, "
              f"had none: {zero[False]}")


if __name__ == "__main__":
    main()
