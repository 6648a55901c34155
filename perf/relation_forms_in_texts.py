"""Which train texts of a demo say a relation in which of the relation-form columns' forms (docs/demo.md,
"Relation where no template or prior helps").

    python perf/relation_forms_in_texts.py DEMO_OUT/texts.jsonl

Reads every text a row can train on: each record's caption, its sub-graph positives and its graph and
text negatives (NegCLIP's swaps, FSC-CLIP's replacements and shuffles). Per source (kind, and for
negatives their category and transform), counts the texts in the copular and sub-graph forms (two-word
noun phrases only), in the held-out fronted and with forms, and the looser patterns a held-out form
would need (a text that starts with a relation word; one that says "with" or "it"). Prints one line per
source and the totals; nothing is asserted.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

import orjson

REL = r"(to the left of|to the right of|above|below)"
NP = r"(\w+) (\w+)"
FORMS = {
    "copular": re.compile(rf"^the {NP} is {REL} the {NP}$"),
    "sub-graph": re.compile(rf"^an? {NP} {REL} an? {NP}$"),
    "fronted": re.compile(rf"^{REL} the {NP} is the {NP}$"),
    "with": re.compile(rf"^an? {NP} with an? {NP} {REL} it$"),
    "starts with a relation": re.compile(rf"^{REL}\b"),
    "says with / it": re.compile(r"\bwith\b|\bit\b"),
}


def sources(record: dict):
    texts = record.get("texts") or {}
    positives = texts.get("positives") or [{"text": record["caption"], "kind": "caption"}]
    for p in positives:
        yield f"positive {p.get('kind')}", p["text"]
    for n in texts.get("negatives") or []:
        yield f"negative {n.get('kind')} {n.get('category')} {str(n.get('transform') or '').split(':')[0]}".rstrip(), n["text"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("texts", help="a demo's texts.jsonl")
    args = parser.parse_args()
    found, total = Counter(), Counter()
    with open(args.texts, "rb") as f:
        for line in f:
            for source, text in sources(orjson.loads(line)):
                text = text.lower().strip().rstrip(".")
                total[source] += 1
                for name, rx in FORMS.items():
                    found[source, name] += bool(rx.search(text))
    for source in sorted(total):
        hits = ", ".join(f"{name} {found[source, name]}" for name in FORMS if found[source, name])
        print(f"{source}: {total[source]} texts" + (f"; {hits}" if hits else ""))
    print(f"all: {sum(total.values())} texts; " + ", ".join(f"{name} {sum(found[s, name] for s in total)}" for name in FORMS))


if __name__ == "__main__":
    main()
