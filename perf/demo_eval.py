"""The demo's evaluation of several checkpoints on the world's val split: one process per core with
one torch thread each (demo.evaluation.evaluate_all, after loading the items once) against the
obvious alternative, every checkpoint in one process with torch's threads (bench.engine.evaluate).
Time it from outside, the two ways side by side:

    farm-bench -n 3 --timeout 900 -- python perf/demo_eval.py --way processes DEMO_OUT \\
        --vs "python perf/demo_eval.py --way one DEMO_OUT"

DEMO_OUT is a `mosaictool demo` folder (its world/ and runs/*/final.pt; the first 8 checkpoints).
Both ways print a digest of the rows they scored: the same digest, the same scores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--way", choices=("processes", "one"), required=True)
    ap.add_argument("--models", type=int, default=8)
    args = ap.parse_args()
    models = [(p.parent.name, p) for p in sorted(args.out.glob("runs/*/final.pt"))[: args.models]]
    world = args.out / "world"
    if args.way == "processes":
        from mosaictool.demo.evaluation import evaluate_all

        rows = evaluate_all(models, world, "world-val", families=["aro", "crepe", "zeroshot"])
    else:
        from mosaictool.bench import get
        from mosaictool.bench.engine import EngineOptions, evaluate
        from mosaictool.model.openclip import load_checkpoint

        loaded = ((label, load_checkpoint(path)) for label, path in models)
        options = EngineOptions(quiet=True, item_hits=True)
        rows = list(evaluate([(get("world-val"), ["aro", "crepe", "zeroshot"])], loaded, world, options))
    scores = sorted((r["model"], r["subtask"], r["metric"], round(r["value"], 6)) for r in rows if r["metric"] != "hits")
    print(len(models), "checkpoints,", hashlib.sha256(json.dumps(scores).encode()).hexdigest()[:12], file=sys.stderr)


if __name__ == "__main__":
    main()
