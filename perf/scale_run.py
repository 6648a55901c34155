"""The text pipeline over a large img2dataset-style corpus, one node: captions per CPU-second and peak
RSS per stage, each stage a `mosaictool STAGE shards/ -o out/` child (one output per shard, one
worker, `nice -n 10`), measured by os.wait4 (the child's own user + system time and maximum RSS).

The corpus: --captions samples in tars of --per-shard (img2dataset's default: 10,000), each sample a
`<key>.txt` caption and a `<key>.json` of img2dataset's fields (no image: the readers skip image
members unread). The captions are SugarCrepe's real COCO captions (4,345 distinct) recombined, the
first half of one caption's words and the second half of another's: caption k joins captions
k mod n and (k div n + k) mod n, distinct pairs for the first n² = 18.9M, so parse's memo of
repeated texts does not flatter it. Everything is written in a new folder under --work (/tmp by
default), removed at the end unless --keep.

Memory at a size spaCy would take hours for: `--repeat` takes the 4,345 captions over and over
instead, so parse's memo parses each once and the run exercises what holds memory per record (the
readers, the duplicate-id check, the memo, the writers) at 1M records in minutes; `--format jsonl`
writes JSONL shards (tarfile reads ~1,000 samples a second), `--one-file` writes each stage's output
to one file (`-o parse.jsonl`) instead of a folder.

    python perf/scale_run.py --captions 100000
    python perf/scale_run.py --captions 10000 --stages parse
    python perf/scale_run.py --captions 1000000 --stages parse --repeat --format jsonl
    python perf/scale_run.py --captions 1000000 --stages parse --repeat --format jsonl --one-file
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MOSAICTOOL_SHARED", REPO.parent / "shared"))
STAGES = {  # stage -> its flags beyond input and -o: the pipeline, negate with caption-level negatives too
    "parse": ["--workers", "1"],
    "decompose": [],
    "negate": ["--workers", "1", "--text", "negclip,replace,shuffle"],
    "template": [],
}


def real_captions(folder: Path) -> list[str]:
    seen: dict[str, None] = {}
    for path in sorted(folder.glob("*.json")):
        for _k, ex in sorted(json.loads(path.read_text()).items(), key=lambda kv: int(kv[0])):
            seen.setdefault(" ".join(ex["caption"].split()), None)
    return list(seen)


def caption(k: int, caps: list[str], repeat: bool = False) -> str:
    n = len(caps)
    if repeat:
        return caps[k % n]
    first, second = caps[k % n].split(), caps[(k // n + k) % n].split()
    return " ".join(first[: (len(first) + 1) // 2] + second[len(second) // 2:])


def write_corpus(folder: Path, captions: int, per_shard: int, caps: list[str], *, repeat: bool, fmt: str) -> None:
    folder.mkdir(parents=True)
    for shard, start in enumerate(range(0, captions, per_shard)):
        samples = []
        for k in range(start, min(start + per_shard, captions)):
            key = f"{shard:05d}{k - start:04d}"
            text = caption(k, caps, repeat)
            samples.append((key, text, {"url": f"https://example.com/{key}.jpg", "caption": text, "key": key, "status": "success"}))
        if fmt == "jsonl":
            with open(folder / f"{shard:05d}.jsonl", "w") as f:
                f.writelines(json.dumps({"id": key, **meta}) + "\n" for key, _, meta in samples)
            continue
        with tarfile.open(folder / f"{shard:05d}.tar", "w") as tar:
            for key, text, meta in samples:
                for ext, data in (("txt", text.encode()), ("json", json.dumps(meta).encode())):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


def run_stage(stage: str, source: Path, out: Path, one_file: bool) -> tuple[float, float, float]:
    """(CPU seconds, wall seconds, peak RSS in MB) of `mosaictool STAGE source -o out/` (or `-o out`)."""
    cmd = ["nice", "-n", "10", sys.executable, "-m", "mosaictool", stage, str(source), "-o", str(out) if one_file else f"{out}/", "-q",
           *STAGES[stage]]
    start = time.monotonic()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed (exit {proc.returncode})")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--captions", type=int, default=100_000)
    ap.add_argument("--per-shard", type=int, default=10_000)
    ap.add_argument("--stages", default=",".join(STAGES), help="the first ones of parse,decompose,negate,template")
    ap.add_argument("--work", type=Path, default=Path("/tmp"), help="a new folder in it holds the corpus and the outputs")
    ap.add_argument("--keep", action="store_true", help="leave the corpus and outputs in --work")
    ap.add_argument("--sugarcrepe", type=Path, default=SHARED / "benchmarks" / "sugarcrepe" / "data")
    ap.add_argument("--repeat", action="store_true", help="the real captions over and over, not recombined")
    ap.add_argument("--format", choices=("tar", "jsonl"), default="tar", help="the corpus's shards")
    ap.add_argument("--one-file", action="store_true", help="each stage writes one file (-o STAGE.jsonl), not a folder")
    args = ap.parse_args()
    stages = args.stages.split(",")
    if stages != list(STAGES)[: len(stages)]:
        sys.exit(f"--stages: the first ones of {','.join(STAGES)}, in order")
    work = Path(tempfile.mkdtemp(prefix="mosaictool-scale-", dir=args.work))
    try:
        caps = real_captions(args.sugarcrepe)
        if not caps:
            sys.exit(f"no SugarCrepe captions in {args.sugarcrepe}")
        start = time.monotonic()
        write_corpus(work / "shards", args.captions, args.per_shard, caps, repeat=args.repeat, fmt=args.format)
        size = sum(p.stat().st_size for p in (work / "shards").iterdir())
        print(f"corpus: {args.captions} captions in {len(list((work / 'shards').iterdir()))} {args.format} shards, "
              f"{size / 2**20:.0f} MiB, written in {time.monotonic() - start:.0f} s ({len(caps)} real captions "
              f"{'repeated' if args.repeat else 'recombined'}); outputs: {'one file' if args.one_file else 'a folder'} per stage")
        source, total_cpu = work / "shards", 0.0
        for stage in stages:
            out = work / (f"{stage}.jsonl" if args.one_file else stage)
            cpu, wall, rss = run_stage(stage, source, out, args.one_file)
            total_cpu += cpu
            lines = sum(1 for p in ([out] if args.one_file else out.glob("*.jsonl")) for _ in p.open("rb"))
            assert lines == args.captions, f"{stage} wrote {lines} records of {args.captions}"
            print(f"{stage:9} {args.captions / cpu:8.1f} captions per CPU-second  (CPU {cpu:7.1f} s, wall {wall:7.1f} s, "
                  f"peak RSS {rss:6.0f} MB)")
            source = out
        print(f"{'+'.join(stages)}: {args.captions / total_cpu:.1f} captions per CPU-second ({total_cpu:.0f} CPU s); "
              f"15M captions on 64 such cores: {15e6 / (64 * args.captions / total_cpu) / 3600:.2f} h")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
