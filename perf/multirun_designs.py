"""Three ways to step R fine-tuning runs of one model in one process, on the same fixed batches (the
data left out), the CPU time of forward + losses + backward + clipping + AdamW per run-step, alternated:

    alone     each run's own model in turn (what `train` does per run)
    vmap      the runs' weights stacked (torch.func.stack_module_state's layout), one forward written
              for one run and vmapped over the runs with torch.func.vmap, every row of the embedding
              trained
    stacked   model/stacked.StackedCLIP as train_many uses it (batched matmuls written out; the last
              blocks at the pooled position; the embedding's untouched rows decayed lazily), and the
              same with every embedding row trained (`--dense-rows` part of the table)

    python perf/multirun_designs.py DEMO_OUT [--method clip] [--runs 5] [--steps 12] [--repeats 2]

DEMO_OUT is a `mosaictool demo` folder (shards/, base.pt). One torch thread, batch 32. Prints ms per
run-step (median over the repeats) and the ratios to `alone`; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.func import vmap

from mosaictool.console import console_logging
from mosaictool.model.stacked import StackedCLIP
from mosaictool.training import TrainConfig
from mosaictool.training.batch import batch_tokens, normalize_images, slot_features
from mosaictool.training.loop import build_optimizer, lr_at, setup


def _ln(x, w, b, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], w, b, eps)


def _block(P, pre, x, heads, causal):
    n, length, d = x.shape
    q, k, v = F.linear(_ln(x, P[pre + "ln_1.weight"], P[pre + "ln_1.bias"]), P[pre + "attn.in_proj_weight"],
                       P[pre + "attn.in_proj_bias"]).view(n, length, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=causal).permute(0, 2, 1, 3).reshape(n, length, d)
    x = x + F.linear(a, P[pre + "attn.out_proj.weight"], P[pre + "attn.out_proj.bias"])
    h = _ln(x, P[pre + "ln_2.weight"], P[pre + "ln_2.bias"])
    h = F.gelu(F.linear(h, P[pre + "mlp.c_fc.weight"], P[pre + "mlp.c_fc.bias"]))
    return x + F.linear(h, P[pre + "mlp.c_proj.weight"], P[pre + "mlp.c_proj.bias"])


def _one_run(P, images, tokens, eot, layers, heads, patch):
    """One run's CLIP forward (open_clip's ViT and text transformer) on plain ops, for vmap."""
    x = F.conv2d(images, P["visual.conv1.weight"], stride=patch).flatten(2).transpose(1, 2)
    x = torch.cat([P["visual.class_embedding"].view(1, 1, -1).expand(x.shape[0], 1, -1), x], 1)
    x = _ln(x + P["visual.positional_embedding"], P["visual.ln_pre.weight"], P["visual.ln_pre.bias"])
    for i in range(layers):
        x = _block(P, f"visual.transformer.resblocks.{i}.", x, heads[0], False)
    image = _ln(x, P["visual.ln_post.weight"], P["visual.ln_post.bias"])[:, 0] @ P["visual.proj"]
    t = F.embedding(tokens, P["token_embedding.weight"]) + P["positional_embedding"][: tokens.shape[1]]
    for i in range(layers):
        t = _block(P, f"transformer.resblocks.{i}.", t, heads[1], True)
    t = _ln(t, P["ln_final.weight"], P["ln_final.bias"])
    text = t.gather(1, eot.view(-1, 1, 1).expand(-1, 1, t.shape[-1]))[:, 0] @ P["text_projection"]
    return F.normalize(image, dim=-1), F.normalize(text, dim=-1), P["logit_scale"].exp()


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser()
    ap.add_argument("demo_out")
    ap.add_argument("--method", default="clip")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    demo = Path(args.demo_out)
    model_name = json.loads((demo / "demo_config.json").read_text())["model"]
    tmp = Path(tempfile.mkdtemp())
    runs = [setup(TrainConfig(data=str(demo / "shards"), out=str(tmp / f"r{s}"), method=args.method, model=model_name,
                              pretrained=str(demo / "base.pt"), augment=False, steps=args.steps, lr=5e-4, batch_size=32,
                              warmup=2, seed=s, quiet=True, device="cpu"), False) for s in range(args.runs)]
    batches = [[next(r.batches) for _ in range(args.steps)] for r in runs]
    start = {k: v.clone() for k, v in runs[0].bundle.model.state_dict().items()}
    cfg, images = runs[0].cfg, runs[0].images
    losses = [r.method.make_loss() for r in runs]
    m0 = runs[0].bundle.model
    layers, patch = len(m0.transformer.resblocks), m0.visual.conv1.kernel_size[0]
    heads = (m0.visual.transformer.resblocks[0].attn.num_heads, m0.transformer.resblocks[0].attn.num_heads)

    def alone() -> None:
        for j, r in enumerate(runs):
            r.bundle.model.load_state_dict(start)
            optimizer = build_optimizer(cfg, r.bundle.model)
            for s in range(args.steps):
                for g in optimizer.param_groups:
                    g["lr"] = lr_at(cfg, s, args.steps)
                optimizer.zero_grad(set_to_none=True)
                r.forward_backward([batches[j][s]])
                r.precision.step(optimizer, r.bundle.model, cfg.grad_clip)

    def together(way: str) -> None:
        for r in runs:
            r.bundle.model.load_state_dict(start)
        stack = StackedCLIP([r.bundle.model for r in runs], lazy_rows=way == "stacked")
        optimizer = build_optimizer(cfg, named=stack.named_leaves())
        if way == "vmap":
            full = dict(stack.leaves)
        for s in range(args.steps):
            lr = lr_at(cfg, s, args.steps)
            for g in optimizer.param_groups:
                g["lr"] = lr
            bs = [batches[j][s] for j in range(len(runs))]
            texts = [batch_tokens(b) for b in bs]
            stack.use_tokens(texts, optimizer)
            optimizer.zero_grad(set_to_none=True)
            pixels = torch.stack([normalize_images(b.images, images.mean, images.std) for b in bs])
            if way == "vmap":  # every run padded to the most texts and the longest text
                width, longest = max(t.shape[0] for t in texts), max(int((t != 0).sum(1).max()) for t in texts)
                tokens = torch.zeros(len(runs), width, longest, dtype=torch.long)
                for j, t in enumerate(texts):
                    tokens[j, : t.shape[0]] = t[:, :longest]
                image_f, text_f, scale = vmap(lambda p, i, t, e: _one_run(p, i, t, e, layers, heads, patch))(
                    full, pixels, tokens, tokens.argmax(-1))
                text_f = [text_f[j, : t.shape[0]] for j, t in enumerate(texts)]
            else:
                out = stack.forward(pixels, texts)
                image_f, text_f, scale = out.image, out.texts, out.logit_scale
            total = sum(losses[j](slot_features(b, image_f[j], text_f[j], scale[j], texts[j], device="cpu"))["loss"]
                        for j, b in enumerate(bs))
            total.backward()
            grads = [p.grad for _, p, _ in stack.named_leaves() if p.grad is not None]
            norm = torch.stack([g.reshape(len(runs), -1).norm(dim=1) for g in grads], 1).norm(dim=1)
            coef = (cfg.grad_clip / (norm + 1e-6)).clamp(max=1.0)
            for g in grads:
                g.mul_(coef.view((-1,) + (1,) * (g.ndim - 1)))
            optimizer.step()
            stack.after_step(lr, cfg.wd)
            with torch.no_grad():
                stack.leaves["logit_scale"].clamp_(0, math.log(100))

    ways = {"alone": alone, "vmap": lambda: together("vmap"), "stacked, every embedding row": lambda: together("dense"),
            "stacked (train_many's)": lambda: together("stacked")}
    cpu: dict[str, list[float]] = {w: [] for w in ways}
    for r in range(args.repeats):
        for way in (list(ways) if r % 2 == 0 else list(ways)[::-1]):
            c = time.process_time()
            ways[way]()
            cpu[way].append((time.process_time() - c) / (len(runs) * args.steps))
    base = statistics.median(cpu["alone"])
    print(f"{args.method}, {len(runs)} runs x {args.steps} steps, batch 32, 1 thread, CPU ms per run-step "
          f"(median of {args.repeats} alternated):")
    for way, times in cpu.items():
        t = statistics.median(times)
        print(f"  {way:30s} {1000 * t:6.1f} ms  ({base / t:.2f}x alone's throughput)")


if __name__ == "__main__":
    main()
