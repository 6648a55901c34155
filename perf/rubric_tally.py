"""Join a reviewer's labels to the key of perf/rubric_sample.py and print the shares per source.

Reads labels.jsonl (one line per item: {id, not_false, entailed, uninterpretable, disfluent,
implausible, debris, reason}; each label true or false, or all null for an item not reviewed yet; a
reason is required for a flaw, and for `not_false` on an item that is not `entailed`) and review_key.jsonl, and prints, per
source and role (mosaictool's graph negatives, its sub-graph positives, SugarCrepe's negatives) and
per transform / kind / subset within them, the share of items with each label and its 95% Wilson
score interval (statsmodels' proportion_confint), and, for each source, the share weighted by its
strata's sizes in the texts file (the key's `population`): a stratified sample drawn evenly over the
transforms estimates the texts file's own rates only so weighted (Cochran 1977, ch. 5: sum of
W_s p_s, variance sum of W_s^2 p_s (1 - p_s) / n_s, a normal 95% interval). docs/stages.md, "the review rubric", defines the
labels; for a negative `not_false` is a failure, for a positive `entailed` is the aim. --skip-bad
counts bad label lines and leaves them out instead of stopping at the first.

    python perf/rubric_tally.py review/labels.jsonl --key review/review_key.jsonl
"""

from __future__ import annotations

import argparse
import sys

from statsmodels.stats.proportion import proportion_confint

from mosaictool.console import console_logging
from mosaictool.errors import MosaicError, RecordError
from mosaictool.io import Skips, read_records

LABELS = ("not_false", "entailed", "uninterpretable", "disfluent", "implausible", "debris")
FLAWS = ("uninterpretable", "disfluent", "implausible", "debris")
SOURCES = {("mosaictool", "negative"): "mosaictool graph negatives", ("mosaictool", "positive"): "mosaictool sub-graph positives",
           ("sugarcrepe", "negative"): "SugarCrepe negatives"}


def check_label(record: dict) -> None:
    values = [record.get(name) for name in LABELS]
    if all(v is None for v in values):
        return
    for name, value in zip(LABELS, values):
        if not isinstance(value, bool):
            raise RecordError(f"{name!r} must be true or false (or every label null for an item not reviewed), got {value!r}")
    reason = record.get("reason")
    if not isinstance(reason, str):
        raise RecordError("'reason' must be a string")
    if record["entailed"] and not record["not_false"]:
        raise RecordError("'entailed' is true but 'not_false' false: what the caption says cannot be false")
    flagged = [name for name in FLAWS if record[name]] + (["not_false"] if record["not_false"] and not record["entailed"] else [])
    if flagged and not reason.strip():
        raise RecordError(f"{', '.join(flagged)} without a reason: say why in 'reason'")


def check_key(record: dict) -> None:
    if (record.get("source"), record.get("role")) not in SOURCES or not isinstance(record.get("stratum"), str):
        raise RecordError("not a line of review_key.jsonl (source, role, stratum)")


def tally(labels_path: str, key_path: str, skips: Skips | None = None) -> tuple[list[dict], int]:
    """Rows {group, n, <label>: (count, low, high)} and the number of keyed items not labelled."""
    key = {rec["id"]: rec for rec in read_records(key_path, check=check_key)}
    groups: dict[tuple, list[dict]] = {}
    labelled = set()
    for rec in read_records(labels_path, check=check_label, skips=skips):
        item = key.get(rec["id"])
        if item is None:
            raise MosaicError(f"{labels_path}: item {rec['id']!r} is not in {key_path} (labels of another sample?)")
        if rec["not_false"] is None:
            continue
        labelled.add(rec["id"])
        source = (item["source"], item["role"])
        groups.setdefault((source, ""), []).append(rec)
        groups.setdefault((source, item["stratum"]), []).append(rec)
    rows = []
    for source in SOURCES:
        strata = {stratum: recs for (src, stratum), recs in groups.items() if src == source and stratum}
        sizes = {stratum: keyed_population(key, source, stratum) for stratum in strata}
        if strata and all(sizes.values()):
            rows.append(weighted_row(SOURCES[source] + " (weighted by stratum size)", strata, sizes))
    for (source, stratum), recs in sorted(groups.items(), key=lambda kv: (list(SOURCES).index(kv[0][0]), kv[0][1])):
        row = {"group": SOURCES[source] + (f": {stratum}" if stratum else " (all)"), "n": len(recs)}
        for name in LABELS:
            count = sum(r[name] for r in recs)
            low, high = proportion_confint(count, len(recs), alpha=0.05, method="wilson")
            row[name] = (count, float(low), float(high))
        rows.append(row)
    return rows, len(key) - len(labelled)


def keyed_population(key: dict, source: tuple, stratum: str) -> int | None:
    sizes = {item.get("population") for item in key.values() if (item["source"], item["role"]) == source and item["stratum"] == stratum}
    size = sizes.pop() if len(sizes) == 1 else None
    return size if isinstance(size, int) and size > 0 else None


def weighted_row(group: str, strata: dict[str, list[dict]], sizes: dict[str, int]) -> dict:
    """The stratified estimate of each label's share (Cochran 1977, eq. 5.1 and 5.6)."""
    total = sum(sizes.values())
    row = {"group": group, "n": sum(len(recs) for recs in strata.values()), "weighted": True}
    for name in LABELS:
        share = var = 0.0
        for stratum, recs in strata.items():
            w, p = sizes[stratum] / total, sum(r[name] for r in recs) / len(recs)
            share += w * p
            var += w * w * p * (1 - p) / len(recs)
        half = 1.959964 * var ** 0.5
        row[name] = (share, max(0.0, share - half), min(1.0, share + half))
    return row


def markdown(rows: list[dict]) -> str:
    lines = ["| group | n | " + " | ".join(LABELS) + " |", "|---|---|" + "---|" * len(LABELS)]
    for row in rows:
        scale = 1 if row.get("weighted") else row["n"]
        cells = [f"{c / scale:.0%} [{lo:.0%}, {hi:.0%}]" for c, lo, hi in (row[name] for name in LABELS)]
        lines.append(f"| {row['group']} | {row['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("labels", help="the reviewer's labels.jsonl")
    ap.add_argument("--key", required=True, help="review_key.jsonl of the same sample")
    ap.add_argument("--skip-bad", action="store_true", help="count bad label lines and leave them out")
    args = ap.parse_args(argv)
    skips = Skips(enabled=args.skip_bad)
    try:
        rows, missing = tally(args.labels, args.key, skips)
    except MosaicError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    skips.report()
    if not rows:
        print(f"Error: {args.labels}: no item is labelled yet", file=sys.stderr)
        return 1
    print("Share of items with each label [95% interval: Wilson; normal for the weighted rows].\n")
    print(markdown(rows), end="")
    if missing:
        print(f"\n{missing} item(s) of the key not labelled yet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
