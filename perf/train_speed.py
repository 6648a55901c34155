"""Training speed on CPU: our `clip` method vs open_clip's own loop, and MosaiCLIP vs CLIP step time.

    python perf/train_speed.py [--images 256] [--batch-size 32] [--steps 12] [--repeats 2] [--sections 1,2,3]

1. samples/s, end to end (data loading included), same tiny model (mosaic-tiny), same PNG images,
   same batch size, fp32, 0 workers:
     ours      `mosaictool.training.train(method="clip")`
     open_clip `open_clip_train.train.train_one_epoch` (v3.3's loop, ClipLoss, its cosine schedule)
               fed like its CsvDataset (PIL open + open_clip's preprocess_train + tokenizer per
               sample); `open_clip_train.main` itself cannot run here (its data module imports
               pandas, which is not installed). Run twice: with the AdamW its main() builds
               (torch's default per-tensor implementation) and with fused AdamW (ours), so the
               loop itself is compared too.
2. MosaiCLIP step time / CLIP step time at the same total number of texts, two ways:
     a) end to end: mosaiclip with B images x (pos + neg) texts vs clip with as many images as texts;
     b) model + loss only, identical encoder work: B images + T texts through our slot layout and
        MultiPositiveContrastiveLoss vs the same B images + T texts with open_clip's ClipLoss on the
        first B texts (the extra texts encoded but unused). This isolates our batching/loss overhead;
        shown with the full context and with tokens cut after the longest text (what train does).
3. FSC-CLIP and Probe-FT step time / NegCLIP step time at equal batch (the same B images per step, no
   hard images for any: negclip's would double its images), end to end, on make_world records with
   the HN texts of `negate --text negclip,replace,shuffle` (add_fsc_negatives); fsc-clip also with
   --lambda-local 0 (no dense features), which isolates the cost of the local token-patch loss.
   b) model + loss + optimizer step only, on one fixed micro-batch per method, the methods
      alternating step by step (robust to load from other processes on a shared machine).
Step times are medians over the steps after the first two; runs alternate so that load from other
processes hits both sides alike. Prints a table; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

# isort: split
# Passive OpenMP waits, as `mosaictool` sets them (mosaictool/cli/__init__.py): before torch loads OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from mosaictool.console import console_logging  # noqa: E402
from mosaictool.model import openclip  # noqa: E402
from mosaictool.training import TrainConfig, train  # noqa: E402
from train_fixtures import add_fsc_negatives, make_world  # noqa: E402


def median_step(times: list[float]) -> float:
    steps = [b - a for a, b in zip(times, times[1:])][2:]
    return statistics.median(steps)


def ours(data: Path, out: Path, method: str, batch_size: int, steps: int, **kw) -> float:
    stamps: list[float] = [time.perf_counter()]
    train(TrainConfig(data=str(data), out=str(out), method=method, batch_size=batch_size, steps=steps, warmup=2,
                      quiet=True, seed=0, **kw), on_step=lambda *_: stamps.append(time.perf_counter()))
    return median_step(stamps)


METHOD_RUNS = {  # label -> (method, its options)
    "negclip": ("negclip", {}),
    "fsc-clip": ("fsc-clip", {}),
    "fsc-clip --lambda-local 0": ("fsc-clip", {"lambda_local": 0.0}),
    "probe-ft": ("probe-ft", {}),
}


def methods_at_equal_batch(data: Path, tmp: Path, batch_size: int, steps: int, repeats: int) -> None:
    """Section 3: every method of METHOD_RUNS at the same images per step; ratios to negclip."""
    times: dict[str, list[float]] = {label: [] for label in METHOD_RUNS}
    per_image: dict[str, float] = {}
    for r in range(repeats):  # alternate the methods so that load from other processes hits all alike
        for label, (method, options) in METHOD_RUNS.items():
            out = tmp / f"m{r}-{label.replace(' ', '_')}"
            times[label].append(ours(data, out, method, batch_size, steps, method_options=options,
                                     record_hard_images=False))
            last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
            per_image[label] = last["texts_per_image"]
    med = {label: statistics.median(ts) for label, ts in times.items()}
    print(f"{'method':28s} {'ms/step':>9s} {'texts/image':>12s} {'/ negclip':>10s}")
    for label, step in med.items():
        print(f"{label:28s} {step * 1000:9.1f} {per_image[label]:12.1f} {step / med['negclip']:10.2f}")
    print(f"ratio fsc-clip / negclip: {med['fsc-clip'] / med['negclip']:.2f}; "
          f"probe-ft / negclip: {med['probe-ft'] / med['negclip']:.2f} (batch {batch_size} images)")


class CsvLike(torch.utils.data.Dataset):
    """What open_clip_train.data.CsvDataset does per sample, without pandas."""

    def __init__(self, records, root: Path, transform, tokenizer):
        self.records, self.root, self.transform, self.tokenizer = records, root, transform, tokenizer

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        from PIL import Image

        rec = self.records[i]
        return self.transform(Image.open(self.root / rec["image"])), self.tokenizer([rec["caption"]])[0]


def open_clip_loop(data: Path, batch_size: int, steps: int, fused: bool) -> float:
    import open_clip
    from open_clip_train.scheduler import cosine_lr
    from open_clip_train.train import train_one_epoch

    open_clip.add_model_config(openclip.CONFIG_DIR)
    torch.manual_seed(0)
    model, preprocess_train, _ = open_clip.create_model_and_transforms("mosaic-tiny", output_dict=True)
    tokenizer = open_clip.get_tokenizer("mosaic-tiny")
    records = [json.loads(line) for line in data.read_text().splitlines()]
    dataset = CsvLike(records, data.parent, preprocess_train, tokenizer)
    sampler = torch.utils.data.RandomSampler(dataset, num_samples=steps * batch_size)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True, num_workers=0)
    stamps: list[float] = []

    class Timed:
        num_batches = len(loader)
        num_samples = steps * batch_size

        def __iter__(self):
            stamps.append(time.perf_counter())
            for batch in loader:
                yield batch
                stamps.append(time.perf_counter())

    # open_clip_train.main's parameter groups and optimizer
    exclude = lambda n, p: p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n  # noqa: E731
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if exclude(n, p)], "weight_decay": 0.0},
              {"params": [p for n, p in named if not exclude(n, p)], "weight_decay": 0.1}]
    optimizer = torch.optim.AdamW(groups, lr=5e-4, betas=(0.9, 0.98), eps=1e-6, **({"fused": True} if fused else {}))
    scheduler = cosine_lr(optimizer, 5e-4, 2, steps)
    args = SimpleNamespace(device="cpu", precision="fp32", distill=False, accum_freq=1, batch_size=batch_size,
                           world_size=1, rank=0, local_rank=0, log_local=False, log_every_n_steps=10 ** 9,
                           horovod=False, grad_clip_norm=1.0, skip_scheduler=False, wandb=False)
    data_info = {"train": SimpleNamespace(dataloader=Timed(), set_epoch=lambda epoch: None)}
    loss = open_clip.ClipLoss()
    train_one_epoch(model, data_info, loss, 0, optimizer, None, scheduler, None, args)
    return median_step(stamps)


def model_and_loss_only(batch_size: int, texts: int, steps: int) -> dict[str, float]:
    """Identical encoder work: our slot layout + loss (with and without cutting the tokens after the
    longest text) vs open_clip's forward + ClipLoss. Returns median seconds per step."""
    import open_clip

    from mosaictool.model.losses import ContrastiveLoss
    from mosaictool.training.batch import Batch, ContrastiveForward, batch_features, normalize_images

    bundle = openclip.create("mosaic-tiny", seed=0)
    model = bundle.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (batch_size, 3, 64, 64), dtype=torch.uint8, generator=g)
    tokens = bundle.tokenizer([f"a small red circle left of a large blue square number {i}" for i in range(texts)])
    per_image = texts // batch_size
    kp, kn = 3, per_image - 3
    batch = Batch(images=images, pos_tokens=tokens[: batch_size * kp], pos_mask=torch.ones(batch_size, kp, dtype=torch.bool),
                  neg_tokens=tokens[batch_size * kp: batch_size * per_image], neg_mask=torch.ones(batch_size, kn, dtype=torch.bool),
                  is_hard=torch.zeros(batch_size, dtype=torch.bool), indices=torch.arange(batch_size),
                  pos_ids=torch.arange(batch_size * kp).view(batch_size, kp),
                  neg_ids=-1 - torch.arange(batch_size * kn).view(batch_size, kn))
    ours_loss = ContrastiveLoss()
    clip_loss = open_clip.ClipLoss()
    trimmed, full = ContrastiveForward(model), ContrastiveForward(model)
    full.trim = False
    pp = open_clip.get_model_preprocess_cfg(model)
    times: dict[str, list[float]] = {"ours (trimmed tokens)": [], "ours (full context)": [], "open_clip ClipLoss": []}
    for _ in range(steps):
        for side in times:
            t = time.perf_counter()
            optimizer.zero_grad()
            if side == "open_clip ClipLoss":
                img_f, txt_f, scale = model(normalize_images(images, pp["mean"], pp["std"]),
                                            torch.cat([batch.pos_tokens, batch.neg_tokens]))[:3]
                loss = clip_loss(img_f, txt_f[::kp][:batch_size], scale)
            else:
                forward = trimmed if side.startswith("ours (trimmed") else full
                loss = ours_loss(batch_features(forward, batch, mean=pp["mean"], std=pp["std"], device="cpu"))["loss"]
            loss.backward()
            optimizer.step()
            times[side].append(time.perf_counter() - t)
    return {side: statistics.median(ts[2:]) for side, ts in times.items()}


def clip_vs_open_clip(data: Path, tmp: Path, b: int, steps: int, repeats: int) -> None:
    rows: dict[str, list[float]] = {}
    for r in range(repeats):
        rows.setdefault("ours clip", []).append(ours(data, tmp / f"clip{r}", "clip", b, steps))
        rows.setdefault("open_clip loop (its default AdamW)", []).append(open_clip_loop(data, b, steps, fused=False))
        rows.setdefault("open_clip loop (fused AdamW)", []).append(open_clip_loop(data, b, steps, fused=True))
    print("\n## 1. samples/s, clip, end to end")
    med = {k: statistics.median(v) for k, v in rows.items()}
    for name, step in med.items():
        print(f"{name:40s} {step * 1000:8.1f} ms/step {b / step:8.1f} samples/s")
    print(f"ours / open_clip (default AdamW): {med['open_clip loop (its default AdamW)'] / med['ours clip']:.2f}x; "
          f"ours / open_clip (fused AdamW): {med['open_clip loop (fused AdamW)'] / med['ours clip']:.2f}x")


def mosaiclip_vs_clip(data: Path, tmp: Path, b: int, steps: int, repeats: int) -> None:
    print("\n## 2a. MosaiCLIP vs CLIP at the same total number of texts, end to end")
    mos = [ours(data, tmp / f"mos{r}", "mosaiclip", b, steps) for r in range(repeats)]
    texts_per_image = json.loads((tmp / "mos0" / "metrics.jsonl").read_text().splitlines()[-1])["texts_per_image"]
    n_texts = round(b * texts_per_image)
    clip_same = [ours(data, tmp / f"clipT{r}", "clip", n_texts, steps) for r in range(repeats)]
    print(f"mosaiclip: {b} images x {texts_per_image:.1f} texts = {n_texts} texts: {statistics.median(mos) * 1000:.1f} ms/step")
    print(f"clip:      {n_texts} images, {n_texts} texts: {statistics.median(clip_same) * 1000:.1f} ms/step")
    print(f"ratio mosaiclip / clip: {statistics.median(mos) / statistics.median(clip_same):.2f}")

    print("\n## 2b. same encoder work (B images + T texts), our slots + loss vs open_clip ClipLoss")
    timings = model_and_loss_only(b, 9 * b, steps)
    base = timings["open_clip ClipLoss"]
    print(f"{b} images, {9 * b} texts of 14 tokens (3 pos + 6 neg per image):")
    for side, step in timings.items():
        print(f"{side:28s} {step * 1000:8.1f} ms/step  ratio to ClipLoss {step / base:.3f}")


def methods_interleaved(data: Path, batch_size: int, steps: int) -> dict[str, float]:
    """Section 3b: median seconds of forward + loss + backward + AdamW step per method of METHOD_RUNS,
    one collated micro-batch each (data loading left out), the methods alternating step by step."""
    import open_clip

    from mosaictool import methods
    from mosaictool.training.batch import ContrastiveForward, batch_features
    from mosaictool.training.loader import TrainDataset
    from mosaictool.training.sampler import BatchPlan, SamplerConfig
    from mosaictool.training.traindata import TrainData
    from mosaictool.training.transform import ImageTransform

    runs = {}
    for label, (name, options) in METHOD_RUNS.items():
        bundle = openclip.create("mosaic-tiny", seed=0)
        method = methods.create(name, options)
        records = TrainData.load(str(data), method=method)
        cfg = SamplerConfig(method=method, batch_size=batch_size, seed=0)
        plan = BatchPlan(len(records), cfg, rank=0, world_size=1, start=0, stop=1)
        dataset = TrainDataset(records, cfg, ImageTransform(64, augment=False), bundle.tokenizer)
        batch = dataset.collate([dataset[spec] for spec in plan.micro_batch(0)])
        optimizer = torch.optim.AdamW(bundle.model.parameters(), lr=1e-5, fused=True)
        runs[label] = (ContrastiveForward(bundle.model), method, method.make_loss(), batch, optimizer,
                       open_clip.get_model_preprocess_cfg(bundle.model))
    times: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(steps):
        for label, (forward, method, loss_fn, batch, optimizer, pp) in runs.items():
            t = time.perf_counter()
            optimizer.zero_grad()
            features = batch_features(forward, batch, mean=pp["mean"], std=pp["std"], device="cpu", dense=method.dense)
            loss_fn(features)["loss"].backward()
            optimizer.step()
            times[label].append(time.perf_counter() - t)
    return {label: statistics.median(ts[2:]) for label, ts in times.items()}


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--sections", default="1,2,3", help="which sections to run, e.g. 3 for the methods only")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads())))
    tmp = Path(tempfile.mkdtemp(prefix="train-speed-"))
    data = make_world(tmp / "world", n=args.images, size=64)
    b, steps = args.batch_size, args.steps
    print(f"# CPU threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}, model mosaic-tiny, "
          f"{args.images} PNG images 64 px, batch {b}, fp32, 0 workers")

    if "1" in sections:
        clip_vs_open_clip(data, tmp, b, steps, args.repeats)
    if "2" in sections:
        mosaiclip_vs_clip(data, tmp, b, steps, args.repeats)
    if "3" in sections:
        print(f"\n## 3. FSC-CLIP and Probe-FT vs NegCLIP at equal batch ({b} images per step), end to end")
        # + the replace / shuffle texts fsc-clip needs (a copy: sections 1-2 keep their data)
        hn_data = add_fsc_negatives(make_world(tmp / "world_hn", n=args.images, size=64))
        methods_at_equal_batch(hn_data, tmp, b, steps, args.repeats)
        print(f"\n## 3b. model + loss + optimizer step only, {b} images, methods alternating step by step")
        med = methods_interleaved(hn_data, b, 3 * steps)
        for label, step in med.items():
            print(f"{label:28s} {step * 1000:9.1f} ms/step {step / med['negclip']:10.2f} x negclip")


if __name__ == "__main__":
    main()
