"""`mosaictool parse` against hand-annotated gold scene graphs of real captions.

Parses the gold captions with SceneGraphParser alone (`repairs=False`), with each prefix of the
repairs in `stages.parse.REPAIRS` order (so each row's change is that repair's), and with all of
them, and prints precision / recall / F1 per kind (mosaictool.analysis.graph_score: objects,
attributes, relations strict and lenient; definitions in docs/parse_quality.md). Writes nothing
unless -o (then the table as JSON).

    python perf/parse_gold.py                              # development set: coco.jsonl + other.jsonl
    python perf/parse_gold.py --gold tests/data/gold_graphs/heldout.jsonl   # held-out set (docs/gold_graphs.md)
    python perf/parse_gold.py --gold ../gold/tests/data/gold_graphs/coco.jsonl --misses 20
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mosaictool.console import console_logging

REPO = Path(__file__).resolve().parent.parent
GOLD_DIR = REPO / "tests" / "data" / "gold_graphs"
# Not in the default (development) set: the drawn captions, and the held-out graphs, which are scored only when
# asked for by --gold so that the repairs are never tuned on them.
NOT_DEVELOPMENT = {"selection.jsonl", "heldout.jsonl"}


def gold_files() -> list[Path]:
    return sorted(p for p in GOLD_DIR.glob("*.jsonl") if p.name not in NOT_DEVELOPMENT)


def read_gold(paths: list[Path]) -> list[dict]:
    out = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                out += [json.loads(line) for line in f if line.strip()]
        except (OSError, ValueError) as e:  # not found, not UTF-8, not JSON lines
            raise SystemExit(f"Error: {path}: cannot read the gold file: {e}") from None
    return out


def configurations() -> list[tuple[str, object]]:
    """(row name, `repairs` argument): none, each prefix of REPAIRS, all."""
    from mosaictool.stages.parse import REPAIRS

    rows: list[tuple[str, object]] = [("SceneGraphParser (--no-repairs)", False)]
    for n in range(1, len(REPAIRS) + 1):
        rows.append(("+ " + REPAIRS[n - 1] + (" (all: default)" if n == len(REPAIRS) else ""), REPAIRS[:n]))
    return rows


def graphs_for(gold: list[dict], repairs) -> list[dict]:
    from mosaictool.stages.parse import parse

    return [r["graph"] for r in parse(({"id": n, "caption": g["caption"]} for n, g in enumerate(gold)), repairs=repairs)]


def table(rows: list[tuple[str, dict]]) -> str:
    from mosaictool.analysis.graph_score import KINDS

    head = "| parse | " + " | ".join(f"{k} P / R / F1" for k in KINDS) + " |"
    lines = [head, "|" + "---|" * (len(KINDS) + 1)]
    for name, scores in rows:
        cells = [f"{s['precision']:.2f} / {s['recall']:.2f} / **{s['f1']:.2f}**" for s in (scores[k] for k in KINDS)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def misses(gold: list[dict], graphs: list[dict], n: int) -> str:
    """The first n captions whose relations do not all match leniently, gold vs predicted triples."""
    from mosaictool.analysis.graph_score import caption_counts, gold_tuples, predicted_tuples

    out = []
    for rec, graph in zip(gold, graphs):
        pred, want = predicted_tuples(graph), gold_tuples(rec)
        matched, predicted, wanted = caption_counts(pred, want)["relations_lenient"]
        if matched < max(predicted, wanted) and len(out) < n:
            out.append(f"{rec['caption']}\n  gold: {want['relations']}\n  ours: {pred['relations']}"
                       f"\n  objects gold {want['objects']} ours {pred['objects']}")
    return "\n".join(out)


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gold", nargs="+", type=Path, help="gold .jsonl files (default: the development set, coco.jsonl + other.jsonl)")
    ap.add_argument("--misses", type=int, default=0, help="also print this many captions whose relations the full parse misses")
    ap.add_argument("-o", "--output", type=Path, help="write the scores here as JSON")
    args = ap.parse_args()

    from mosaictool.analysis.graph_score import score

    paths = args.gold or gold_files()
    if not paths:
        raise SystemExit(f"no gold files under {GOLD_DIR}; pass --gold")
    gold = read_gold(paths)
    rows, last = [], None
    for name, repairs in configurations():
        last = graphs_for(gold, repairs)
        rows.append((name, score(last, gold)))
    print(f"{len(gold)} gold captions from {', '.join(str(p) for p in paths)}\n")
    print(table(rows))
    if args.misses:
        print("\n" + misses(gold, last, args.misses))
    if args.output:
        args.output.write_text(json.dumps({"captions": len(gold), "rows": dict(rows)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
