"""parse throughput and memory, on the real COCO captions of SugarCrepe.

Prints captions/s of:
  - SceneGraphParser called once per caption (the obvious alternative),
  - `mosaictool parse` (the stage function, 1 and 2 worker processes),
  - spaCy's own `nlp.pipe` with the same components (the ceiling: parsing without graph building),
and checks that the graphs are identical. Then the peak RSS of `mosaictool parse` on 10k vs 200k
input lines (streaming: it should not grow with the input).

    python perf/parse_speed.py            # full
    python perf/parse_speed.py --quick    # smaller samples
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mosaictool.console import console_logging

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MOSAICTOOL_SHARED", REPO.parent / "shared"))


def real_captions() -> list[str]:
    seen: dict[str, None] = {}
    for path in sorted((SHARED / "benchmarks" / "sugarcrepe" / "data").glob("*.json")):
        for _k, ex in sorted(json.loads(path.read_text()).items(), key=lambda kv: int(kv[0])):
            seen.setdefault(ex["caption"].strip(), None)
    return list(seen)


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:8.1f} captions/s  ({n} in {seconds:.1f} s)"


def peak_rss_mb(lines: int, tmp: Path) -> float:
    src = tmp / f"caps{lines}.jsonl"
    caps = real_captions()
    with open(src, "w") as f:
        for i in range(lines):
            f.write(json.dumps({"id": i, "caption": caps[i % len(caps)]}) + "\n")
    # A fresh wrapper process per measurement: RUSAGE_CHILDREN is a maximum over all children.
    wrapper = (
        "import resource, subprocess, sys; "
        f"subprocess.run([sys.executable, '-m', 'mosaictool', 'parse', {str(src)!r}, '-o', {str(tmp / 'out.jsonl')!r}, '-q'], check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", wrapper], check=True, capture_output=True, text=True).stdout
    return int(out.split()[-1]) / 1024


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()

    import sng_parser

    from mosaictool.nlp import load_nlp, resolve_model
    from mosaictool.stages.parse import parse

    caps = real_captions()
    n_loop = 300 if args.quick else 1000
    n_all = 1500 if args.quick else len(caps)
    model = resolve_model()
    print(f"{len(caps)} unique real COCO captions; spaCy model {model}; {os.cpu_count()} CPU cores")

    sng = sng_parser.Parser("spacy", model=model)
    t = time.perf_counter()
    reference = [json.loads(json.dumps(sng.parse(c))) for c in caps[:n_loop]]
    loop_s = time.perf_counter() - t
    loop_rate = n_loop / loop_s
    print(f"SceneGraphParser, one caption at a time: {rate(n_loop, loop_s)}")

    recs = [{"id": i, "caption": c} for i, c in enumerate(caps[:n_all])]
    results = {}
    for workers in (1, 2):
        t = time.perf_counter()
        out = list(parse(recs, workers=workers, repairs=False))  # SceneGraphParser's graphs, to compare
        s = time.perf_counter() - t
        results[workers] = (out, n_all / s)
        print(f"mosaictool parse --workers {workers}:         {rate(n_all, s)}   {n_all / s / loop_rate:4.1f}x the loop")

    keys = ("span", "lemma_span", "head", "lemma_head", "span_bounds", "modifiers", "type")
    ours = [
        {"entities": [{k: e[k] for k in keys} for e in r["graph"]["entities"]], "relations": r["graph"]["relations"]}
        for r in results[2][0][:n_loop]
    ]
    same = sum(a == b for a, b in zip(ours, reference))
    print(f"graphs identical to SceneGraphParser's (--no-repairs): {same}/{n_loop}")
    assert results[1][0] == results[2][0], "output depends on --workers"

    nlp = load_nlp(model)
    for n_process in (1, 2):
        t = time.perf_counter()
        for _ in nlp.pipe(caps[:n_all], batch_size=256, n_process=n_process):
            pass
        s = time.perf_counter() - t
        print(f"spaCy nlp.pipe (same components), n_process={n_process}: {rate(n_all, s)}")

    with tempfile.TemporaryDirectory() as tmp:
        small, big = (2_000, 40_000) if args.quick else (10_000, 200_000)
        for lines in (small, big):
            print(f"peak RSS of `mosaictool parse` on {lines:>7} lines: {peak_rss_mb(lines, Path(tmp)):7.1f} MB", flush=True)


if __name__ == "__main__":
    main()
