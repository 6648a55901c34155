"""A blind review kit: mosaictool's texts and SugarCrepe's own negatives for the same captions, shuffled.

Draws from a texts file (`template` output of SugarCrepe's COCO captions) a fixed random sample:
--negatives N graph negatives, spread evenly over the transforms (f_obj, f_attr:swap, f_rel:join, ...),
and --positives M sub-graph positives (objects and relations, not the caption itself), spread evenly
over their kinds; then, for the captions those came from, up to --sugarcrepe K of SugarCrepe's own
hard negatives (replace_att / replace_obj / replace_rel / swap_att / swap_obj; Hsieh et al. 2023),
spread evenly over its subsets. All items are shuffled together and numbered after the shuffle, so a
reviewer sees only a caption and a text (lower case, no final period: SugarCrepe writes sentences,
template phrases) and is not told which source or role an item has; length and phrasing may still
hint at it, so the labels judge meaning, not style (docs/stages.md, "the review rubric"). Writes to
--out:

- review_sheet.jsonl  {id, caption, text}: what the reviewer reads;
- labels.jsonl        {id, not_false, entailed, uninterpretable, disfluent, implausible, debris, reason}
                      with every label null: what the reviewer fills in (docs/stages.md, "the review
                      rubric", defines the labels);
- review_key.jsonl    {id, source, role, stratum, population, record, slot, from, to}: kept from the
                      reviewer, joined back by perf/rubric_tally.py; `population` is the stratum's
                      size in the texts file (or SugarCrepe's subset among the drawn captions), which
                      the tally weights strata by.

Same texts file, SugarCrepe folder, sizes and seed: the same files, byte for byte.

    python perf/rubric_sample.py texts.jsonl --sugarcrepe ~/data/sugarcrepe/data --negatives 120 --positives 60 \\
        --sugarcrepe-n 60 --seed 0 --out review/
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from mosaictool import records as contracts
from mosaictool.console import console_logging
from mosaictool.errors import MosaicError, RecordError
from mosaictool.io import Skips, read_records, write_records

SUGARCREPE_SUBSETS = ("replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")
LABELS = ("not_false", "entailed", "uninterpretable", "disfluent", "implausible", "debris")


def spread(strata: dict[str, list[dict]], n: int, rng: random.Random) -> list[dict]:
    """Up to `n` items, as evenly over the strata as their sizes allow: each stratum shuffled, then
    one item from each in turn (strata in sorted order) until `n` are drawn or all are used."""
    pools = {name: rng.sample(items, len(items)) for name, items in sorted(strata.items())}
    out: list[dict] = []
    while len(out) < n and any(pools.values()):
        for name in sorted(pools):
            if pools[name] and len(out) < n:
                out.append(pools[name].pop())
    return out


def surface(text: str) -> str:
    """A text as the sheet shows it: lower case, without a final period, so that SugarCrepe's
    capitalised sentences do not give their source away by case and punctuation."""
    return " ".join(text.split()).lower().rstrip(".").rstrip()


def _check_texts(record: dict) -> None:
    contracts.check(contracts.TrainRecord, record)
    if not isinstance(record.get("texts"), dict) or not isinstance(record.get("caption"), str):
        raise RecordError("needs 'caption' and 'texts' (the output of `mosaictool template`)")


def read_sugarcrepe(folder: Path) -> dict[str, list[dict]]:
    """SugarCrepe's negatives by subset, each {caption, text, record}."""
    out = {}
    for subset in SUGARCREPE_SUBSETS:
        path = folder / f"{subset}.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise MosaicError(f"{path}: not found (--sugarcrepe is the folder holding SugarCrepe's {subset}.json ...)") from None
        except (OSError, ValueError) as e:
            raise MosaicError(f"{path}: unreadable: {e}") from None
        if not isinstance(data, dict):
            raise MosaicError(f"{path}: expected SugarCrepe's object of items, got {type(data).__name__}")
        items = []
        for key, item in data.items():
            if not (isinstance(item, dict) and isinstance(item.get("caption"), str) and isinstance(item.get("negative_caption"), str)):
                raise MosaicError(f"{path}: item {key!r} has no 'caption' and 'negative_caption' strings")
            items.append({"caption": item["caption"].strip(), "text": item["negative_caption"], "stratum": subset,
                          "record": f"{subset}/{key}"})
        out[subset] = items
    return out


def build(texts: str, sugarcrepe: Path, *, negatives: int, positives: int, sugarcrepe_n: int, seed: int,
          skips: Skips | None = None) -> tuple[list, list]:
    """The review sheet and its key, both in the shuffled order."""
    graph_negatives: dict[str, list[dict]] = {}
    sub_positives: dict[str, list[dict]] = {}
    for record in read_records(texts, check=_check_texts, skips=skips):
        caption = record["caption"].strip()
        for entry in record["texts"].get("negatives") or ():
            if entry.get("kind") == "graph":
                name = str(entry.get("transform"))
                graph_negatives.setdefault(name, []).append({
                    "caption": caption, "text": entry["text"], "stratum": name, "record": record["id"], "slot": entry.get("slot"),
                    "from": entry.get("from"), "to": entry.get("to")})
        for entry in record["texts"].get("positives") or ():
            if entry.get("kind") not in (None, "caption"):
                name = str(entry["kind"])
                sub_positives.setdefault(name, []).append(
                    {"caption": caption, "text": entry["text"], "stratum": name, "record": record["id"]})
    rng = random.Random(seed)
    drawn = [("mosaictool", "negative", item) for item in spread(graph_negatives, negatives, rng)]
    drawn += [("mosaictool", "positive", item) for item in spread(sub_positives, positives, rng)]
    captions = {item["caption"] for _, _, item in drawn}
    theirs = {subset: [i for i in items if i["caption"] in captions] for subset, items in read_sugarcrepe(sugarcrepe).items()}
    drawn += [("sugarcrepe", "negative", item) for item in spread(theirs, sugarcrepe_n, rng)]
    population = {("mosaictool", "negative", name): len(items) for name, items in graph_negatives.items()}
    population |= {("mosaictool", "positive", name): len(items) for name, items in sub_positives.items()}
    population |= {("sugarcrepe", "negative", name): len(items) for name, items in theirs.items()}
    rng.shuffle(drawn)
    width = len(str(len(drawn)))
    sheet, key = [], []
    for number, (source, role, item) in enumerate(drawn, 1):
        item_id = f"item-{number:0{width}d}"
        sheet.append({"id": item_id, "caption": item["caption"], "text": surface(item["text"])})
        key.append({"id": item_id, "source": source, "role": role, "stratum": item["stratum"],
                    "population": population[(source, role, item["stratum"])], "record": item["record"],
                    "slot": item.get("slot"), "from": item.get("from"), "to": item.get("to")})
    return sheet, key


def main(argv: list[str] | None = None) -> int:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("texts", help="texts file (template output of SugarCrepe's captions)")
    ap.add_argument("--sugarcrepe", required=True, type=Path, help="SugarCrepe's data folder (replace_att.json, ...)")
    ap.add_argument("--negatives", type=int, default=120, help="graph negatives, spread over the transforms (default 120)")
    ap.add_argument("--positives", type=int, default=60, help="sub-graph positives, spread over their kinds (default 60)")
    ap.add_argument("--sugarcrepe-n", type=int, default=60, help="SugarCrepe negatives of the same captions (default 60)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the draws and the shuffle")
    ap.add_argument("--out", required=True, type=Path, help="folder for review_sheet.jsonl, labels.jsonl, review_key.jsonl")
    ap.add_argument("--skip-bad", action="store_true", help="count bad records of the texts file and leave them out")
    args = ap.parse_args(argv)
    skips = Skips(enabled=args.skip_bad)
    try:
        if min(args.negatives, args.positives, args.sugarcrepe_n) < 0:
            raise MosaicError("--negatives, --positives and --sugarcrepe-n must be at least 0")
        if args.out.exists() and not args.out.is_dir():
            raise MosaicError(f"--out {args.out}: is a file; give a folder")
        if (args.out / "labels.jsonl").exists():  # a reviewer's work: never replaced
            raise MosaicError(f"--out {args.out}: already holds labels.jsonl; give a new folder")
        sheet, key = build(args.texts, args.sugarcrepe, negatives=args.negatives, positives=args.positives,
                           sugarcrepe_n=args.sugarcrepe_n, seed=args.seed, skips=skips)
        if not sheet:
            raise MosaicError(f"{args.texts}: no graph negative or sub-graph positive to review")
        args.out.mkdir(parents=True, exist_ok=True)
        write_records(args.out / "review_sheet.jsonl", sheet)
        write_records(args.out / "labels.jsonl", [{"id": row["id"], **dict.fromkeys(LABELS), "reason": ""} for row in sheet])
        write_records(args.out / "review_key.jsonl", key)
    except MosaicError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    skips.report()
    counts = {}
    for row in key:
        counts[(row["source"], row["role"])] = counts.get((row["source"], row["role"]), 0) + 1
    print(f"wrote {len(sheet)} items to {args.out}: " + ", ".join(f"{s} {r} {n}" for (s, r), n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
