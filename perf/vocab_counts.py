"""Rebuild the shipped co-occurrence counts, vocab/object_attributes.tsv and vocab/relation_triples.tsv.

`negate` prefers replacements a corpus has shown with the object or in the relation (--unseen-rate);
the counts shipped with the vocabulary come from the real captions of the benchmarks in
../shared/benchmarks that are not SugarCrepe's (Hsieh et al. 2023): ARO's COCO captions
(Yuksekgonul et al. 2023, aro/temp_data/valid_neg_clip.tsv) and VALSE's captions (Parcalabescu et
al. 2022, valse/data/*.json). SugarCrepe's captions are what the texts of real captions are reviewed
on, so any caption of one of its COCO images is left out, as is any caption it contains: counts from
them would tell negate what the reviewed captions say.

The captions are parsed with `parse` (a graphs file is written next to nothing: pass --graphs to keep
and reuse it) and counted as `vocab build` counts them (`stages.vocab_tools.cooccurrences`), each name
written as the shipped vocabulary lists it.

    python perf/vocab_counts.py                                   # rewrites vocab/*.tsv counts
    python perf/vocab_counts.py --graphs /tmp/bench_graphs.jsonl  # keeps (or reuses) the parsed graphs
    python perf/vocab_counts.py --captions-only -o captions.jsonl # the captions alone
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO.parent.parent / "shared" / "benchmarks"
COCO_ID = re.compile(r"(\d{6,12})\.jpg$")


def _coco_id(path: str) -> int | None:
    found = COCO_ID.search(path or "")
    return int(found.group(1)) if found else None


def sugarcrepe(bench: Path) -> tuple[set[int], set[str]]:
    """SugarCrepe's COCO image ids and its captions (normalised)."""
    images, captions = set(), set()
    for path in sorted(glob.glob(str(bench / "sugarcrepe" / "data" / "*.json"))):
        with open(path, encoding="utf-8") as f:
            for item in json.load(f).values():
                images.add(_coco_id(item["filename"]))
                captions.add(_norm(item["caption"]))
    return images, captions


def _norm(text: str) -> str:
    return " ".join(text.lower().replace(".", " ").split())


def captions(bench: Path) -> list[dict]:
    """{"id", "caption"} of every ARO and VALSE caption, once each, in a fixed order, without SugarCrepe's
    images and captions."""
    images, held_out = sugarcrepe(bench)
    found: list[tuple[str, str, int | None]] = []  # (source, caption, COCO image id)
    with open(bench / "aro" / "temp_data" / "valid_neg_clip.tsv", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            found.append(("aro", row["title"], _coco_id(row["filepath"])))
    for path in sorted(glob.glob(str(bench / "valse" / "data" / "*.json"))):
        with open(path, encoding="utf-8") as f:
            for item in json.load(f).values():
                coco = "coco" in str(item.get("dataset", "")).lower()
                found.append(("valse", item["caption"], _coco_id(item.get("image_file", "")) if coco else None))
    out, seen = [], set()
    for source, caption, image in found:
        key = _norm(caption)
        if not key or key in seen or key in held_out or (image is not None and image in images):
            continue
        seen.add(key)
        out.append({"id": f"{source}{len(out)}", "caption": " ".join(caption.split())})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", type=Path, default=BENCH, help="the benchmarks folder (default: ../shared/benchmarks)")
    ap.add_argument("--graphs", type=Path, help="parsed graphs: read if present, else written there")
    ap.add_argument("--captions-only", action="store_true", help="write the captions (-o) and stop")
    ap.add_argument("-o", "--output", type=Path, default=REPO / "vocab", help="folder for the two count files (default: vocab/)")
    args = ap.parse_args()

    from mosaictool.console import console_logging

    console_logging()
    rows = captions(args.bench)
    if args.captions_only:
        args.output.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        print(f"{len(rows):,} captions -> {args.output}")
        return
    from mosaictool.stages.parse import parse
    from mosaictool.stages.vocab_tools import cooccurrences
    from mosaictool.vocab import load as load_vocab
    from mosaictool.vocab import save_cooccurrences

    if args.graphs and args.graphs.exists():
        with open(args.graphs, encoding="utf-8") as f:
            graphs = [json.loads(line) for line in f if line.strip()]
        if [g["caption"] for g in graphs] != [r["caption"] for r in rows]:
            raise SystemExit(f"Error: {args.graphs}: not the graphs of these {len(rows):,} captions; delete it to parse again")
    else:
        graphs = list(parse(rows))
        if args.graphs:
            args.graphs.write_text("".join(json.dumps(g) + "\n" for g in graphs), encoding="utf-8")
    pairs, triples = cooccurrences(graphs, load_vocab())
    save_cooccurrences(args.output, pairs, triples)
    print(f"{len(rows):,} captions: {len(pairs):,} object-attribute pairs ({sum(pairs.values()):,} seen), "
          f"{len(triples):,} subject-relation-object triples ({sum(triples.values()):,} seen) -> {args.output}")


if __name__ == "__main__":
    main()
