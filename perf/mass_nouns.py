"""Learn which nouns are uncountable from how a corpus of captions uses them (candidates for vocab/mass_nouns.txt).

A noun is countable when a caption writes it in the plural or after "a"/"an"/"one"/"each"/"every"/"another" or
a number; it is read as a mass noun when it is never so written and is written at least `--min` times in the
singular as a phrase's head with no determiner or with "some"/"much"/"more"/"any" ("a herd of livestock",
"some broth"). A noun in -ing ("flooring", "seating", "bedding") needs only one such use: nominalised -ing
forms are mostly uncountable (Quirk et al. 1985, A Comprehensive Grammar of the English Language). A
possessive ("her lap") says nothing either way. Headline-style captions drop articles from countable nouns too
("man in blue shirt"), which the countable uses elsewhere in the corpus outvote; a noun only used once or
twice is left for a reader to judge, and what this prints is a list to review, not a list to ship unread.

    python perf/mass_nouns.py                     # the COCO (SugarCrepe) and VALSE captions in /work/shared/benchmarks
    python perf/mass_nouns.py captions.jsonl --min 3

Prints one candidate per line with its number of bare uses, those already in
vocab/mass_nouns.txt left out.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from mosaictool.nlp import load_nlp
from mosaictool.stages.template import mass_nouns

BENCHMARKS = Path("/work/shared/benchmarks")
DEFAULT_FILES = sorted((BENCHMARKS / "sugarcrepe" / "data").glob("*.json")) + sorted((BENCHMARKS / "valse" / "data").glob("*.json"))
COUNTING = {"a", "an", "one", "each", "every", "another", "either", "neither", "both", "many", "several", "few", "these", "those"}
MASS_DETERMINERS = {"some", "much", "more", "any", "less", "little"}


def captions(path: Path) -> list[str]:
    """Every "caption" string of a JSON (dict of rows, list of rows) or JSON-lines file."""
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
        rows = data.values() if isinstance(data, dict) else data
    except json.JSONDecodeError:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [row["caption"] for row in rows if isinstance(row, dict) and isinstance(row.get("caption"), str)]


def countability(texts: list[str]) -> tuple[Counter, Counter]:
    """(bare singular uses, countable uses) of each noun lemma."""
    nlp = load_nlp()
    bare, countable = Counter(), Counter()
    for doc in nlp.pipe(texts, batch_size=256):
        for token in doc:
            if token.pos_ != "NOUN" or token.dep_ == "compound" or any(c.dep_ == "poss" for c in token.children):
                continue
            lemma = token.lemma_.lower()
            dets = {c.lower_ for c in token.children if c.dep_ in ("det", "nummod")}
            if token.tag_ == "NNS" or any(c.dep_ == "nummod" for c in token.children) or dets & COUNTING:
                countable[lemma] += 1
            elif token.tag_ == "NN" and (not dets or dets <= MASS_DETERMINERS):
                bare[lemma] += 1
    return bare, countable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, default=DEFAULT_FILES)
    parser.add_argument("--min", type=int, default=2, help="bare uses needed (an -ing noun needs one)")
    args = parser.parse_args()
    texts = sorted({c for path in args.files for c in captions(path)})
    bare, countable = countability(texts)
    known = mass_nouns()
    print(f"# {len(texts)} captions")
    for lemma, n in sorted(bare.items()):
        if countable[lemma] == 0 and lemma not in known and lemma.isalpha() and n >= (1 if lemma.endswith("ing") else args.min):
            print(f"{lemma}\t{n}")


if __name__ == "__main__":
    main()
