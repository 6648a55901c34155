"""The precision of decompose's sub-graph positives, measured on the hand-annotated gold scene graphs.

A positive must be entailed by its caption (MosaiCLIP, Singh et al. 2023, Sec. 3.3). This parses every gold
caption (`mosaictool parse`, all repairs), takes EVERY candidate sub-graph of `decompose.candidate_subgraphs`
(not a sample), and matches:

- each relation positive (subject, relation, object) against the caption's gold relations, as
  `analysis.graph_score` matches relations leniently (ends by lemmatised head noun, predicates sharing a
  key), one-to-one;
- each object positive's noun against the caption's gold objects (multiset, lemmatised).

It prints, for each, positives, matched, precision with its Wilson 95% interval, the gold relations
covered (recall), and with --unmatched the unmatched relation positives (caption => text). A gold miss may
still be entailed (the gold kept another reading, or a paraphrase): judge the list by hand;
docs/reviews/positive_precision_dev.jsonl holds the development set's judgements, and --judged counts the
matched and the judged-entailed positives as entailed (an unjudged miss as not).

    python perf/positive_precision.py --unmatched --judged docs/reviews/positive_precision_dev.jsonl   # development set
    python perf/positive_precision.py --gold tests/data/gold_graphs/heldout.jsonl   # held out: once, never tuned on
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from parse_gold import gold_files, read_gold  # noqa: E402

from mosaictool.console import console_logging  # noqa: E402


def relation_text(sg: dict) -> str:
    """A relation sub-graph as plain words: "attributes subject relation attributes object"."""
    a, b = sg["objects"]
    return " ".join([*a["attributes"], a["noun"], sg["relations"][0]["relation"], *b["attributes"], b["noun"]])


def measure(gold: list[dict]) -> dict:
    """Per caption, the relation and object positives of the full parse, matched against the gold graphs.
    Returns the totals, and all relation positives and the unmatched ones as (caption, text) pairs."""
    from mosaictool.analysis.graph_score import _multiset_matches, gold_tuples, lenient_matches, name_lemma, predicate_lemma
    from mosaictool.stages.decompose import candidate_subgraphs
    from mosaictool.stages.parse import parse
    from mosaictool.vocab import load

    vocab = load()
    totals = {"relations": 0, "relations_matched": 0, "objects": 0, "objects_matched": 0, "gold_relations": 0, "gold_covered": 0}
    unmatched, positives = [], []
    parsed = parse({"id": n, "caption": g["caption"]} for n, g in enumerate(gold))
    for rec, out in zip(gold, parsed, strict=True):
        candidates = candidate_subgraphs(out["graph"], vocab, words=(out.get("tokens") or {}).get("words"))
        want = gold_tuples(rec)
        objects = [name_lemma(sg["objects"][0]["noun"]) for sg in candidates if sg["kind"] == "object"]
        relations = [sg for sg in candidates if sg["kind"] == "relation"]
        triples = [(name_lemma(a["noun"]), predicate_lemma(sg["relations"][0]["relation"]), name_lemma(b["noun"]))
                   for sg in relations for a, b in [sg["objects"]]]
        matched = lenient_matches(triples, want["relations"])
        totals["relations"] += len(triples)
        totals["relations_matched"] += matched
        totals["gold_relations"] += len(want["relations"])
        totals["gold_covered"] += matched
        totals["objects"] += len(objects)
        totals["objects_matched"] += _multiset_matches(objects, want["objects"])
        # which positives are unmatched: each one alone against the gold (a one-to-one miss of a duplicate shows too)
        for sg, t in zip(relations, triples):
            positives.append((rec["caption"], relation_text(sg)))
            if not lenient_matches([t], want["relations"]):
                unmatched.append((rec["caption"], relation_text(sg)))
    return {"totals": totals, "unmatched": unmatched, "positives": positives}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion k/n (Wilson 1927), (0, 0) for n = 0."""
    if not n:
        return 0.0, 0.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return centre - half, centre + half


def entailed(result: dict, judgements: list[dict]) -> int:
    """The relation positives entailed by their caption: the matched ones, and the unmatched ones a reader judged
    entailed (`judgements`: records with caption, text and entailed); an unjudged one counts as not entailed."""
    said = {(j["caption"], j["text"]) for j in judgements if j["entailed"]}
    return result["totals"]["relations_matched"] + sum((c, t) in said for c, t in result["unmatched"])


def read_judgements(path: Path) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        raise SystemExit(f"Error: {path}: cannot read the judgements: {e}") from None


def precision_line(name: str, k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{name}: {k} of {n}, precision {k / n if n else 0:.3f} [95% CI {lo:.3f}-{hi:.3f}]"


def report(result: dict, captions: int, judgements: list[dict] | None = None) -> str:
    t = result["totals"]
    lines = [f"{captions} gold captions"]
    for kind in ("relations", "objects"):
        lines.append(precision_line(f"{kind[:-1]} positives matched", t[f"{kind}_matched"], t[kind]))
    if judgements is not None:
        lines.append(precision_line("relation positives entailed (matched or judged so)", entailed(result, judgements), t["relations"]))
    g = t["gold_relations"]
    lines.append(f"gold relations covered by a relation positive: {t['gold_covered']} of {g} ({t['gold_covered'] / g if g else 0:.3f})")
    return "\n".join(lines)


def main() -> None:
    console_logging()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gold", nargs="+", type=Path, help="gold .jsonl files (default: the development set, coco.jsonl + other.jsonl)")
    ap.add_argument("--unmatched", action="store_true", help="also list the relation positives no gold relation matches")
    ap.add_argument("--judged", type=Path, help="judgements of unmatched positives (jsonl: caption, text, entailed, reason); "
                    "adds the entailed precision, e.g. --judged docs/reviews/positive_precision_dev.jsonl")
    ap.add_argument("-o", "--output", type=Path, help="write the totals and the relation positives (all, unmatched) here as JSON")
    args = ap.parse_args()
    gold = read_gold(args.gold or gold_files())
    result = measure(gold)
    print(report(result, len(gold), read_judgements(args.judged) if args.judged else None))
    if args.unmatched:
        print("\nunmatched relation positives (caption => text):")
        print("\n".join(f"{c} => {t}" for c, t in result["unmatched"]))
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
