"""Run every performance script and print a summary of their figures.

Each script runs in its own process at a size that fits a few minutes on 2 CPU cores; its whole
output goes to perf/logs/<script>.log and the lines that carry its figures are collected into one
summary. The machines are shared and noisy: every comparison is a ratio measured within one run.

    python perf/run_all.py            # all of them
    python perf/run_all.py parse evaluate
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

from mosaictool.console import console_logging

HERE = Path(__file__).resolve().parent

# name: (script and arguments, what the summary keeps: lines matching this pattern)
SCRIPTS = {
    "parse": (["parse_speed.py", "--quick"], r"captions/s|identical|peak RSS"),
    "graph-stages": (["graph_stages.py", "--n", "1000"], r"% of parse|captions with"),
    "text-pipeline": (["text_pipeline_speed.py"], r"^total|peak RSS"),
    "read": (["read_speed.py", "--quick"], r"rec/s|identical"),
    "train": (["train_speed.py"], r"samples/s|ratio|ms/step|faster|slower"),
    "evaluate": (["evaluate_speed.py", "--limit", "100"], r"speed-up|cases/s|identical|same"),
    "tree-score": (["tree_score_speed.py", "--models", "mosaic-tiny", "--prefix-captions", "100", "--span-captions", "10"],
                   r"speed-up|captions/s|5000 captions"),
    "pretrain-ranks": (["pretrain_ranks.py"], r"steps/s|ratio|loss difference"),
    "world": (["world_speed.py", "--train", "1000", "--parse-sample", "300"], r"images/s|objects|attributes|relations"),
    "startup": (["startup_speed.py"], r"--help"),
    "demo-cache": (["demo_cache.py", "--world-train", "1000", "--scale", "0.25"], r"GiB|median|verified copy /"),
}


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="scripts to run (default: all)")
    args = ap.parse_args()
    logs = HERE / "logs"
    logs.mkdir(exist_ok=True)
    summary: list[str] = []
    for name in args.names or SCRIPTS:
        argv, pattern = SCRIPTS[name]
        t = time.perf_counter()
        print(f"[{name}] python perf/{' '.join(argv)}", file=sys.stderr, flush=True)
        proc = subprocess.run([sys.executable, str(HERE / argv[0]), *argv[1:]], capture_output=True, text=True)
        (logs / f"{name}.log").write_text(proc.stdout + proc.stderr)
        kept = [line.strip() for line in proc.stdout.splitlines() if re.search(pattern, line)]
        status = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode}; see perf/logs/{name}.log)"
        summary.append(f"## {name}: {status}, {time.perf_counter() - t:.0f} s")
        summary += [f"  {line}" for line in kept]
    print("\n".join(summary))


if __name__ == "__main__":
    main()
