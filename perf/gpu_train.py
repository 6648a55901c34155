"""GPU training throughput: `mosaictool train` (every method) vs `python -m open_clip_train.main`.

    python perf/gpu_train.py                                   # ViT-B-32-quickgelu, batch 256, amp_bf16
    python perf/gpu_train.py --methods clip --compile          # also with torch.compile, both sides
    python perf/gpu_train.py --model mosaic-micro --batch-size 128 --steps 40 --device cuda:1

Same images (PNG files on disk, decoded per step by DataLoader workers), same architecture, batch,
precision, loader workers and random-resized-crop preprocessing on both sides, in one run:
  open_clip_train  `open_clip_train.main` on a CSV of the images and captions (its CsvDataset)
  mosaictool       `mosaictool.training.train` per method, on the same images as a JSONL
Each side runs in its own process (clean CUDA memory statistics); per step the wall time between
steps is taken (open_clip_train: its `Batch (t)` per step; mosaictool: `on_step` stamps) and the
median after `--skip` steps is quoted. Figures: samples/s (images per second; negclip's hard images
count, they are images the model encodes), texts/s (texts encoded per second: images x texts per
image for our methods), and peak memory = torch.cuda.max_memory_allocated at the end of the run.
With fsc-clip or probe-ft and negclip among --methods, negclip runs once more without its hard images
and the step time of each at equal batch (the same B images per step) is printed as a ratio to it.
Without a CUDA GPU the script says so and exits 0: it measures nothing on CPU (perf/train_speed.py
does that).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mosaictool.console import console_logging

REPO = Path(__file__).resolve().parent.parent
KNOWN_METHODS = ("clip", "negclip", "mosaiclip")
EQUAL_BATCH_NEGCLIP = "mosaictool negclip (no hard images)"
PRECISIONS = ("fp32", "bf16", "amp", "amp_bf16")


def method_names() -> list[str]:
    try:
        from mosaictool import methods
    except ImportError:
        methods = None
    names = getattr(methods, "names", None)  # the methods registry, once it exists
    return list(names()) if callable(names) else list(KNOWN_METHODS)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="perf/gpu_train.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="ViT-B-32-quickgelu", help="open_clip model name or a shipped mosaictool config")
    ap.add_argument("--model-config", default=None, help="a JSON model config (open_clip schema) instead of --model, for both sides")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--precision", default="amp_bf16", choices=PRECISIONS)
    ap.add_argument("--workers", type=int, default=None, help="DataLoader workers on both sides (default: min(12, CPUs))")
    ap.add_argument("--steps", type=int, default=60, help="optimizer steps per run")
    ap.add_argument("--skip", type=int, default=10, help="steps left out of the median (warm-up, cuDNN autotune, compile)")
    ap.add_argument("--image-size", type=int, default=64, help="side of the generated PNGs (the model resizes them)")
    ap.add_argument("--methods", default=None, help="comma-separated mosaictool methods (default: all registered)")
    ap.add_argument("--compile", action="store_true", help="also run every side with torch.compile (open_clip_train --torchcompile)")
    ap.add_argument("--no-open-clip", action="store_true", help="skip the open_clip_train reference run")
    ap.add_argument("--device", default=None, help="cuda or cuda:N (default: the GPU when CUDA is visible)")
    ap.add_argument("--data-dir", default=None, help="keep the generated images here and reuse them (default: a temp folder)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: one measured run, as JSON
    args = ap.parse_args(argv)
    for name in ("batch_size", "steps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 <= args.skip < args.steps - 1:
        ap.error("--skip must leave at least two measured steps (0 <= skip < steps - 1)")
    if args.workers is not None and args.workers < 0:
        ap.error("--workers must be at least 0")
    if args.workers is None:
        args.workers = min(12, os.cpu_count() or 1)
    known = method_names()
    args.methods = [m.strip() for m in (args.methods or ",".join(known)).split(",") if m.strip()]
    unknown = [m for m in args.methods if m not in known]
    if unknown:
        ap.error(f"--methods: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    return args


# ---- the data: the same PNGs for both sides ------------------------------------------------------

def make_data(folder: Path, n: int, size: int) -> tuple[Path, Path]:
    """Images with records for every method (tests/train_fixtures.py) and open_clip's CSV of them."""
    sys.path.insert(0, str(REPO / "tests"))
    from train_fixtures import add_fsc_negatives, make_world

    jsonl = folder / "captions.jsonl"
    if not jsonl.is_file() or sum(1 for _ in jsonl.open()) < n:
        add_fsc_negatives(make_world(folder, n=n, size=size))  # + the replace / shuffle texts of fsc-clip
    csv = folder / "open_clip.tsv"
    with jsonl.open() as src, csv.open("w") as out:
        out.write("filepath\ttitle\n")
        for line in src:
            rec = json.loads(line)
            out.write(f"{folder / rec['image']}\t{rec['caption']}\n")
    return jsonl, csv


# ---- one measured run per process ----------------------------------------------------------------

def peak_bytes(device: str) -> int | None:
    import torch

    return torch.cuda.max_memory_allocated(device) if device.startswith("cuda") else None


def child_ours(spec: dict) -> dict:
    from mosaictool.model import openclip
    from mosaictool.training import TrainConfig, train

    if spec["compile"]:  # measurement only: compile each tower in place (state-dict keys unchanged)
        create = openclip.create

        def compiled(*a, **k):
            bundle = create(*a, **k)
            bundle.model.visual.compile()
            bundle.model.transformer.compile()
            return bundle

        openclip.create = compiled
    stamps, rates, texts = [time.perf_counter()], [], []

    def on_step(step, metrics, model):
        stamps.append(time.perf_counter())
        rates.append(metrics["samples_per_s"])  # images of the step (hard images included) / its wall time
        texts.append(metrics["texts_per_image"])

    cfg = TrainConfig(data=spec["data"], out=spec["out"], method=spec["method"], model=spec["model"], model_config=spec.get("model_config"),
                      batch_size=spec["batch_size"], steps=spec["steps"], warmup=min(10, spec["steps"]), precision=spec["precision"],
                      num_workers=spec["workers"], device=spec["device"], quiet=True, seed=0,
                      record_hard_images=spec.get("record_hard_images"))
    train(cfg, on_step=on_step)
    step_s = statistics.median([b - a for a, b in zip(stamps, stamps[1:])][spec["skip"]:])
    samples_per_s = statistics.median(rates[spec["skip"]:])
    return {"samples_per_s": samples_per_s, "images_per_step": round(samples_per_s * step_s), "step_s": step_s,
            "texts_per_image": statistics.mean(texts[spec["skip"]:]), "peak_bytes": peak_bytes(spec["device"])}


def child_open_clip(spec: dict) -> dict:
    import re

    import open_clip
    from open_clip_train.main import main

    model = spec["model"]
    if spec.get("model_config"):
        open_clip.add_model_config(spec["model_config"])
        model = Path(spec["model_config"]).stem
    logs = Path(spec["out"])
    argv = ["--train-data", spec["csv"], "--dataset-type", "csv", "--csv-img-key", "filepath", "--csv-caption-key", "title",
            "--train-num-samples", str(spec["steps"] * spec["batch_size"]), "--batch-size", str(spec["batch_size"]),
            "--epochs", "1", "--workers", str(spec["workers"]), "--model", model, "--precision", spec["precision"],
            "--lr", "5e-4", "--warmup", str(min(10, spec["steps"])), "--logs", str(logs), "--name", "run",
            "--log-every-n-steps", "1", "--report-to", "", "--save-frequency", "0", "--seed", "0", "--device", spec["device"]]
    if spec["compile"]:
        argv.append("--torchcompile")
    main(argv)
    log = (logs / "run" / "out.log").read_text()
    batch_t = [float(x) for x in re.findall(r"Batch \(t\): ([0-9.]+)", log)]
    return {"samples_per_s": spec["batch_size"] / statistics.median(batch_t[spec["skip"]:]), "images_per_step": spec["batch_size"],
            "texts_per_image": 1.0, "peak_bytes": peak_bytes(spec["device"])}


def run_child(spec: dict, env: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr or proc.stdout)[-2000:]
    return {"error": f"exit {proc.returncode}: {tail.strip().splitlines()[-1] if tail.strip() else 'no output'}"}


def single_gpu_env(device: str) -> dict:
    """Both sides see only the chosen GPU, as its cuda:0 (open_clip_train uses cuda:0 in one process)."""
    env = dict(os.environ)
    index = int(device.split(":")[1])
    visible = [v for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    env["CUDA_VISIBLE_DEVICES"] = visible[index] if visible else str(index)
    return env


def main(argv: list[str] | None = None) -> int:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    args = parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        result = child_open_clip(spec) if spec["side"] == "open_clip" else child_ours(spec)
        print("RESULT " + json.dumps(result), flush=True)
        return 0

    import torch

    from mosaictool.errors import MosaicError
    from mosaictool.training.device import resolve_device

    if not torch.cuda.is_available() or (args.device or "").startswith("cpu"):
        print("no CUDA GPU visible: nothing measured; this script compares GPU training (perf/train_speed.py measures the CPU loop)")
        return 0
    try:
        device = resolve_device(args.device)
    except MosaicError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1

    tmp = Path(tempfile.mkdtemp(prefix="gpu-train-"))
    data_dir = Path(args.data_dir) if args.data_dir else tmp / "data"
    jsonl, csv = make_data(data_dir, args.steps * args.batch_size, args.image_size)
    env = single_gpu_env(device)
    print(f"# {torch.cuda.get_device_name(device)}, {args.model}, batch {args.batch_size}, {args.precision}, "
          f"{args.workers} loader workers, {args.steps} steps (median after {args.skip}), {args.image_size}px PNGs")
    base = {"model": args.model, "model_config": args.model_config and os.path.abspath(args.model_config), "device": "cuda:0",
            "batch_size": args.batch_size, "precision": args.precision, "workers": args.workers,
            "steps": args.steps, "skip": args.skip}
    runs = []
    for compiled in ([False, True] if args.compile else [False]):
        sides = [] if args.no_open_clip else [("open_clip_train", {"side": "open_clip", "csv": str(csv)})]
        sides += [(f"mosaictool {m}", {"side": "ours", "method": m, "data": str(jsonl)}) for m in args.methods]
        if "negclip" in args.methods and {"fsc-clip", "probe-ft"} & set(args.methods):  # equal batch: B images each
            sides.append((EQUAL_BATCH_NEGCLIP, {"side": "ours", "method": "negclip", "data": str(jsonl), "record_hard_images": False}))
        for label, extra in sides:
            out = tmp / f"run{len(runs)}"
            result = run_child({**base, **extra, "compile": compiled, "out": str(out)}, env)
            runs.append((label + (" +compile" if compiled else ""), result))

    ref = next((r for label, r in runs if label == "open_clip_train" and "error" not in r), None)
    print("\n| run | samples/s | texts/image | texts/s | peak GiB | peak MiB per text | vs open_clip_train |")
    print("|---|---|---|---|---|---|---|")
    for label, r in runs:
        if "error" in r:
            print(f"| {label} | failed: {r['error']} |")
            continue
        sps = r["samples_per_s"]
        texts_per_step = r["images_per_step"] * r["texts_per_image"]
        ratio = f"{sps / ref['samples_per_s']:.2f}x" if ref else "-"
        print(f"| {label} | {sps:,.0f} | {r['texts_per_image']:.2f} | {sps * r['texts_per_image']:,.0f} | "
              f"{r['peak_bytes'] / 2**30:.1f} | {r['peak_bytes'] / 2**20 / texts_per_step:.1f} | {ratio} |")
    done = {label: r for label, r in runs if "error" not in r}
    if EQUAL_BATCH_NEGCLIP in done:
        base_s = done[EQUAL_BATCH_NEGCLIP]["step_s"]
        for m in ("fsc-clip", "probe-ft"):
            if f"mosaictool {m}" in done:
                print(f"step time {m} / negclip at equal batch ({args.batch_size} images): "
                      f"{done[f'mosaictool {m}']['step_s'] / base_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
