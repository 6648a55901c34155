"""evaluate's engine vs a per-example loop like the ARO repo's, on SugarCrepe with placeholder images.

The per-example loop does what `main_aro.py`-style code does: for every test case, open and
preprocess its image, encode it, tokenize and encode its two captions, compare. Our engine encodes
each unique image and text once, in batches. Both use the same model and the same strict tie rule;
the script prints the time of each, the speed-up, and both accuracy tables (they must match).

    python perf/evaluate_speed.py                         # mosaic-tiny, 300 cases per subset, CPU
    python perf/evaluate_speed.py --model ViT-B-32-quickgelu --limit 1000 --device cuda
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from mosaictool.bench import metrics
from mosaictool.bench.engine import EngineOptions, evaluate, open_image
from mosaictool.bench.sugarcrepe import BENCHMARK as SUGARCREPE
from mosaictool.bench.sugarcrepe import SUBTASKS
from mosaictool.console import console_logging
from mosaictool.model.openclip import create

REAL = Path("/work/shared/benchmarks/sugarcrepe/data")


def make_root(src: Path, dst: Path, size: int) -> None:
    (dst / "sugarcrepe").mkdir(parents=True)
    (dst / "coco" / "val2017").mkdir(parents=True)
    names = set()
    for f in src.glob("*.json"):
        shutil.copy(f, dst / "sugarcrepe" / f.name)
        names |= {r["filename"] for r in json.loads(f.read_text()).values()}
    rng = np.random.default_rng(0)
    for n in sorted(names):  # noisy JPEGs of a realistic-ish size, so decoding costs something
        Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(dst / "coco" / "val2017" / n, quality=90)


def per_example(bundle, items, device: str) -> dict[str, float]:
    import torch

    model = bundle.model.to(device).eval()
    hits: dict[str, list[bool]] = {s: [] for s in SUBTASKS}
    with torch.inference_mode():
        for it in items:
            image = bundle.preprocess_val(open_image(it.images[0])).unsqueeze(0).to(device)
            img = model.encode_image(image, normalize=True)
            txt = model.encode_text(bundle.tokenizer(it.texts).to(device), normalize=True)
            scores = (img @ txt.T).float().cpu().numpy()
            hits[it.meta["subtask"]].append(bool(metrics.choice_correct(scores, 0, "strict")[0]))
    return {s: float(np.mean(v)) for s, v in hits.items() if v}


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mosaic-tiny")
    ap.add_argument("--pretrained", default=None)
    ap.add_argument("--limit", type=int, default=300, help="cases per subset (0 = all 7,511)")
    ap.add_argument("--image-size", type=int, default=320)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--data", default=str(REAL))
    args = ap.parse_args()

    import torch

    torch.manual_seed(0)
    bundle = create(args.model, args.pretrained, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_root(Path(args.data), root, args.image_size)
        limit = args.limit or None
        items = SUGARCREPE.load(root, limit=limit)
        n_images = len({it.images[0] for it in items})
        n_texts = len({t for it in items for t in it.texts})
        print(f"model {args.model} on {args.device}; {len(items)} SugarCrepe cases, {n_images} unique images, {n_texts} unique texts")

        per_example(bundle, items[:8], args.device)  # warm-up
        t0 = time.perf_counter()
        loop_acc = per_example(bundle, items, args.device)
        t_loop = time.perf_counter() - t0

        opts = EngineOptions(batch_size=args.batch_size, device=args.device, workers=args.workers, limit=limit, quiet=True)
        t0 = time.perf_counter()
        rows = list(evaluate([(SUGARCREPE, None)], [("m", bundle)], root, opts))
        t_engine = time.perf_counter() - t0
        engine_acc = {r["subtask"]: r["value"] for r in rows if r["metric"] == "accuracy" and r["subtask"] in SUBTASKS}

    print(f"{'subset':<12} {'per-example':>12} {'engine':>8}")
    for s in SUBTASKS:
        print(f"{s:<12} {100 * loop_acc[s]:>12.2f} {100 * engine_acc[s]:>8.2f}")
    same = all(abs(loop_acc[s] - engine_acc[s]) < 1e-12 for s in SUBTASKS)
    print(f"per-example loop: {t_loop:.1f} s ({len(items) / t_loop:.1f} cases/s)")
    print(f"engine:           {t_engine:.1f} s ({len(items) / t_engine:.1f} cases/s)  [includes loading the annotations]")
    print(f"speed-up: {t_loop / t_engine:.2f}x; accuracies identical: {same}")


if __name__ == "__main__":
    main()
