"""The text pipeline's captions per CPU-second, stage by stage, on SugarCrepe's real COCO captions.

    parse | decompose --max 3 | negate --max 6 --text negclip,replace,shuffle --seed 0 | template

Each stage runs as its own process, one worker, as a user runs it; its CPU time (user + system) and
peak RSS come from the kernel's accounting of that process (os.wait4). With --baseline (another
checkout's `mosaictool`, e.g. main's before a change) the two run in turn, stage by stage, so that a
loaded machine slows both alike; the outputs of negate and template are compared byte for byte.
--scale N also measures peak RSS on the captions repeated N times with new ids (N x the CPU time).

    python perf/text_pipeline_speed.py
    python perf/text_pipeline_speed.py --baseline ../main/.venv/bin/mosaictool --repeat 3
    python perf/text_pipeline_speed.py --scale 10 --repeat 1
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from parse_speed import SHARED, real_captions  # the same SugarCrepe captions as parse_speed.py, one reader

REPO = Path(__file__).resolve().parent.parent
STAGES = (
    ("parse", ["parse", "{input}", "-q", "-o", "{out}"]),
    ("decompose", ["decompose", "--max", "3", "{input}", "-q", "-o", "{out}"]),
    ("negate", ["negate", "--max", "6", "--text", "negclip,replace,shuffle", "--seed", "0", "{input}", "-q", "-o", "{out}"]),
    ("template", ["template", "{input}", "-q", "-o", "{out}"]),
)


def write_captions(path: Path, captions: list[str], times: int) -> int:
    with open(path, "w") as f:
        for i in range(times * len(captions)):
            f.write(json.dumps({"id": i, "caption": captions[i % len(captions)]}) + "\n")
    return times * len(captions)


def run(command: list[str]) -> tuple[float, float]:
    """(CPU seconds, peak RSS in MB) of one process, from the kernel's accounting of it alone."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.exit(f"{' '.join(command)} failed: {proc.stderr.read().decode()[-2000:]}")
    proc.stderr.close()
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def pipeline(tool: list[str], captions: Path, folder: Path) -> dict[str, tuple[float, float]]:
    """Each stage's (CPU s, peak RSS MB), its output in `folder`."""
    folder.mkdir(exist_ok=True)
    figures, source = {}, captions
    for name, args in STAGES:
        out = folder / f"{name}.jsonl"
        figures[name] = run([*tool, *(a.format(input=source, out=out) for a in args)])
        source = out
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", help="another `mosaictool` executable to compare with (e.g. main's)")
    ap.add_argument("--repeat", type=int, default=1, help="pipelines of each, alternated; medians are printed")
    ap.add_argument("--scale", type=int, default=0, help="also peak RSS with the captions repeated this many times")
    args = ap.parse_args()

    captions = real_captions()
    if not captions:
        sys.exit(f"no SugarCrepe captions under {SHARED}/benchmarks/sugarcrepe/data (set MOSAICTOOL_SHARED)")
    ours = [sys.executable, "-m", "mosaictool"]
    tools = {"this checkout": ours, **({"baseline": [args.baseline]} if args.baseline else {})}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        n = write_captions(tmp / "captions.jsonl", captions, 1)
        print(f"{n} unique real COCO captions (SugarCrepe); one worker; {os.cpu_count()} CPUs; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        runs: dict[str, list[dict]] = {name: [] for name in tools}
        for r in range(args.repeat):
            for name, tool in tools.items():
                runs[name].append(pipeline(tool, tmp / "captions.jsonl", tmp / f"{name}-{r}".replace(" ", "_")))
        medians = {name: {stage: statistics.median(f[stage][0] for f in figs) for stage, _ in STAGES} for name, figs in runs.items()}
        print(f"{'stage':<10}" + "".join(f"{name + ': CPU s, captions/CPU-s':>40}" for name in tools)
              + ("   speed-up" if args.baseline else ""))
        for stage in [s for s, _ in STAGES] + ["total"]:
            row = f"{stage:<10}"
            cpu = {name: sum(m.values()) if stage == "total" else m[stage] for name, m in medians.items()}
            for name in tools:
                row += f"{cpu[name]:>28.2f} {n / cpu[name]:>11.1f}"
            if args.baseline:
                row += f"   {cpu['baseline'] / cpu['this checkout']:8.2f}x"
            print(row)
        for name, figs in runs.items():
            print(f"peak RSS, {name}: " + ", ".join(f"{stage} {max(f[stage][1] for f in figs):.0f} MB" for stage, _ in STAGES))
        if args.baseline:
            a, b = tmp / "this_checkout-0", tmp / "baseline-0"
            for stage in ("negate", "template"):
                same = filecmp.cmp(a / f"{stage}.jsonl", b / f"{stage}.jsonl", shallow=False)
                print(f"{stage} output byte-identical to the baseline's: {same}")
        if args.scale > 1:
            big = write_captions(tmp / "big.jsonl", captions, args.scale)
            figs = pipeline(ours, tmp / "big.jsonl", tmp / "big")
            print(f"peak RSS on {n} vs {big} captions (the same repeated, new ids), this checkout: "
                  + ", ".join(f"{stage} {runs['this checkout'][0][stage][1]:.0f} vs {figs[stage][1]:.0f} MB" for stage, _ in STAGES))
            print(f"captions per CPU-second on {big}: " + ", ".join(f"{stage} {big / figs[stage][0]:.0f}" for stage, _ in STAGES)
                  + f", total {big / sum(f[0] for f in figs.values()):.0f}")


if __name__ == "__main__":
    main()
