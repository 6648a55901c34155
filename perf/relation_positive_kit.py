"""A blind review kit of relation sub-graph positives, with graph-relation negatives among them as decoys.

The standard kit (`perf/rubric_sample.py`) holds 50 relation positives: a share of 98% entailed cannot be told from
92% on so few. This draws --positives relation positives (uniformly over the texts file's relation positives) and
--negatives of its f_rel graph negatives (uniformly), shuffles them together and numbers them after the shuffle,
so that a reviewer cannot tell a positive from a negative by its place or by the sheet holding only positives.
Writes to --out (which must not exist):

- review_sheet.jsonl  {id, caption, text} (the text lower-cased, no final period, as the standard kit writes it);
- review_key.jsonl    {id, source, role, stratum, population, record, slot, from, to}, the schema
                      `perf/rubric_tally.py` joins (population: the stratum's size in the texts file);
- sheet_a.jsonl, sheet_b.jsonl: two reviewers' halves that share the 20 middle items (their agreement).

Same texts file, sizes and seed: the same files, byte for byte.

    python perf/relation_positive_kit.py texts.jsonl --positives 160 --negatives 40 --seed 20261221 --out kit/
    python perf/rubric_tally.py kit/labels.jsonl --key kit/review_key.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SHARED = 20  # items both reviewers label


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("texts", type=Path, help="template output of SugarCrepe's COCO captions")
    ap.add_argument("--positives", type=int, default=160)
    ap.add_argument("--negatives", type=int, default=40)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    positives, negatives = [], []
    with open(args.texts) as f:
        for line in f:
            r = json.loads(line)
            texts = r["texts"]
            positives += [(r["id"], r["caption"], p["text"], "positive", "relation") for p in texts["positives"] if p["kind"] == "relation"]
            negatives += [(r["id"], r["caption"], n["text"], "negative", n["transform"]) for n in texts["negatives"]
                          if n["kind"] == "graph" and n["transform"].startswith("f_rel")]
    rng = random.Random(args.seed)
    items = rng.sample(positives, args.positives) + rng.sample(negatives, args.negatives)
    rng.shuffle(items)
    sizes = {"relation": len(positives)} | {t: sum(1 for n in negatives if n[4] == t) for t in {n[4] for n in negatives}}
    args.out.mkdir(parents=True)
    sheet, key = [], []
    for i, (record, caption, text, role, stratum) in enumerate(items, 1):
        item = f"item-{i:03d}"
        sheet.append({"id": item, "caption": caption, "text": text.lower().rstrip(".")})
        key.append({"id": item, "source": "mosaictool", "role": role, "stratum": stratum, "population": sizes[stratum],
                    "record": record, "slot": None, "from": None, "to": None})
    write = lambda name, rows: (args.out / name).write_text("".join(json.dumps(r) + "\n" for r in rows))  # noqa: E731
    write("review_sheet.jsonl", sheet)
    write("review_key.jsonl", key)
    half = (len(sheet) + SHARED) // 2
    write("sheet_a.jsonl", sheet[:half])
    write("sheet_b.jsonl", sheet[len(sheet) - half:])
    print(f"wrote {len(sheet)} items to {args.out}: {args.positives} of {len(positives)} relation positives, "
          f"{args.negatives} of {len(negatives)} f_rel negatives; sheets of {half} items sharing {2 * half - len(sheet)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
