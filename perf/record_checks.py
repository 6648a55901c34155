"""What validating every record costs: each stage's throughput with its record check and without.

For parse, decompose, negate and template (and train's record load), on real COCO captions
(SugarCrepe's): records are read from a JSONL file, checked (the stage's `make_check`, the typed
schemas of mosaictool.records) or not, and run through the stage. CPU time of this process, best of
--repeat runs, one worker. Prints records/s with and without the check and their ratio, and the
check alone in microseconds per record.

    nice -n 5 python perf/record_checks.py --n 1000
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import tempfile
import time
from pathlib import Path

from mosaictool.console import console_logging
from mosaictool.io import read_records, write_records
from mosaictool.stages import decompose, negate, parse, template
from mosaictool.vocab import load

SUGARCREPE = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / "sugarcrepe" / "data"


def coco_captions(folder: Path, n: int, seed: int) -> list[dict]:
    captions = sorted({item["caption"].strip() for f in sorted(folder.glob("*.json")) for item in json.load(open(f)).values()})
    random.Random(seed).shuffle(captions)
    return [{"id": i, "caption": c} for i, c in enumerate(captions[:n])]


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="captions")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", type=Path, default=SUGARCREPE)
    args = ap.parse_args()

    vocab = load()
    caps = coco_captions(args.data, args.n, args.seed)
    list(parse.parse(caps[:8]))  # spaCy loaded outside the timing
    graphs = list(parse.parse(caps))
    subs = list(decompose.decompose(graphs, vocab=vocab))
    negs = list(negate.negate(subs))
    texts = list(template.template(negs, vocab=vocab))
    stages = [
        ("parse", caps, parse.make_check(), lambda recs: parse.parse(recs, memo=0)),
        ("decompose", graphs, decompose.make_check(), lambda recs: decompose.decompose(recs, vocab=vocab)),
        ("negate", subs, negate.make_check(), lambda recs: negate.negate(recs)),
        ("template", negs, template.make_check(), lambda recs: template.template(recs, vocab=vocab)),
    ]
    try:
        from mosaictool import records

        stages.append(("train load", texts, records.checker(records.TrainRecord), lambda recs: recs))
    except ImportError:  # a tree without mosaictool.records
        pass

    print(f"{len(caps)} COCO captions from {args.data}; CPU s, best of {args.repeat}")
    print(f"{'stage':<11} {'checked rec/s':>14} {'unchecked rec/s':>16} {'ratio':>7} {'check us/rec':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, recs, check, run in stages:
            path = Path(tmp) / f"{name}.jsonl"
            write_records(path, recs)
            n = len(recs)
            with_check = best(lambda: list(run(read_records(path, check=check))), args.repeat)
            without = best(lambda: list(run(read_records(path))), args.repeat)
            loaded = list(read_records(path))
            check_only = best(lambda: [check(r) for r in loaded], args.repeat)
            print(f"{name:<11} {n / with_check:14.1f} {n / without:16.1f} {without / with_check:7.3f} "
                  f"{check_only / n * 1e6:13.1f}")
    try:
        from mosaictool.io import ColumnTypes, dumps
    except ImportError:
        return

    def column_types():
        types = ColumnTypes("out.parquet")
        for i, rec in enumerate(texts, 1):
            types.add(rec, i)

    typed = best(column_types, args.repeat)
    dumped = best(lambda: [dumps(r) for r in texts], args.repeat)
    print(f"Parquet column types: {typed / len(texts) * 1e6:.1f} us per template record "
          f"({typed / dumped:.2f}x its JSON serialisation)")


if __name__ == "__main__":
    main()
