"""Small training fixtures built on the fly: coloured-shape images + template-shaped records
(`texts` as template writes them, image records as shard reads them), and a tiny open_clip config for fast CPU tests."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

TINY_MODEL = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 8},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}

COLORS = {"red": (220, 30, 30), "green": (30, 180, 40), "blue": (40, 60, 220), "yellow": (230, 210, 40)}
SHAPES = ["circle", "square"]


def write_tiny_model(folder: Path) -> Path:
    path = Path(folder) / "test-tiny.json"
    path.write_text(json.dumps(TINY_MODEL))
    return path


def world_keys(c1: str, s1: str, c2: str, s2: str) -> list[str]:
    """A make_world record's `subgraph_keys` in decompose's canonical form (stages/subgraph.py): the
    caption's graph first, then each object with and without its colour, then the relation over those."""
    whole = f"{s1}[{c1}] >left of> {s2}[{c2}]"
    nodes = [f"{s1}[{c1}]", s1, f"{s2}[{c2}]", s2]
    relations = [f"{a} >left of> {b}" for a in nodes[:2] for b in nodes[2:]]
    return list(dict.fromkeys([whole, *nodes, *relations]))


def make_world(folder: Path, n: int = 12, size: int = 40, seed: int = 0, hard_images: bool = True,
               keys: bool = True) -> Path:
    """Write folder/captions.jsonl and folder/images/*.png; returns the JSONL path. With `keys`, the
    records carry `subgraph_keys` and a `key` per text, as decompose and template write them."""
    from PIL import Image, ImageDraw

    folder = Path(folder)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    records = []
    for i in range(n):
        c1, c2 = rng.sample(sorted(COLORS), 2)
        s1, s2 = rng.choice(SHAPES), rng.choice(SHAPES)
        im = Image.new("RGB", (size, size), (245, 245, 245))
        draw = ImageDraw.Draw(im)
        for (c, s), x in (((c1, s1), 4), ((c2, s2), size // 2 + 2)):
            box = (x, size // 3, x + size // 2 - 6, size // 3 + size // 2 - 6)
            (draw.ellipse if s == "circle" else draw.rectangle)(box, fill=COLORS[c])
        im.save(folder / "images" / f"{i:03d}.png")
        caption = f"a {c1} {s1} left of a {c2} {s2}"
        twin = i ^ 1 if (i ^ 1) < n else None
        records.append({
            "id": f"img-{i}",
            "image": f"images/{i:03d}.png",
            "caption": caption,
            "hard_images": [f"img-{twin}"] if hard_images and twin is not None else [],
            "texts": {
                "positives": [
                    {"text": caption, "kind": "caption", "subgraph": None},
                    {"text": f"a {c1} {s1}", "kind": "object", "subgraph": 0},
                    {"text": f"a {c2} {s2}", "kind": "object", "subgraph": 1},
                    {"text": f"{c1} {s1} left of {c2} {s2}", "kind": "relation", "subgraph": 2},
                ],
                "negatives": [
                    {"text": f"a {c2} {s1} left of a {c1} {s2}", "positive": 0, "kind": "text", "category": "attr",
                     "transform": "negclip:ADJ", "slot": None, "from": None, "to": None},
                    {"text": f"a {c2} {s2} left of a {c1} {s1}", "positive": 0, "kind": "text", "category": "text",
                     "transform": "negclip:np", "slot": None, "from": None, "to": None},
                    {"text": f"a {c2} {s1}", "positive": 1, "kind": "graph", "category": "obj",
                     "transform": "f_obj", "slot": "attr", "from": c1, "to": c2},
                    {"text": f"{c2} {s2} left of {c1} {s1}", "positive": 3, "kind": "graph", "category": "rel",
                     "transform": "f_rel:swap", "slot": None, "from": None, "to": None},
                    {"text": f"{c2} {s1} left of {c1} {s2}", "positive": 3, "kind": "graph", "category": "attr",
                     "transform": "f_attr:swap", "slot": None, "from": None, "to": None},
                    {"text": f"{c1} {s1} right of {c2} {s2}", "positive": 3, "kind": "graph", "category": "rel",
                     "transform": "f_rel:replace_relation", "slot": None, "from": "left of", "to": "right of"},
                ],
            },
        })
        if keys:
            whole = f"{s1}[{c1}] >left of> {s2}[{c2}]"
            records[-1]["subgraph_keys"] = world_keys(c1, s1, c2, s2)
            text_keys = [[whole, f"{s1}[{c1}]", f"{s2}[{c2}]", whole],
                         [None, None, f"{s1}[{c2}]", f"{s2}[{c2}] >left of> {s1}[{c1}]",
                          f"{s1}[{c2}] >left of> {s2}[{c1}]", f"{s1}[{c1}] >right of> {s2}[{c2}]"]]
            for side, side_keys in zip(("positives", "negatives"), text_keys):
                for text, key in zip(records[-1]["texts"][side], side_keys):
                    text["key"] = key
    path = folder / "captions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def add_fsc_negatives(path: Path, without_hn: tuple[int, ...] = ()) -> Path:
    """Give every record of a make_world file the replace and shuffle negatives of
    `negate --text negclip,replace,shuffle` (it has negclip swaps already); records whose index is in
    `without_hn` lose all their text negatives. Rewrites the file; returns it."""
    records = [json.loads(line) for line in Path(path).read_text().splitlines()]
    for i, rec in enumerate(records):
        words = rec["caption"].split()  # "a <colour> <shape> left of a <colour> <shape>"
        c1 = words[1]
        extra = [
            {"text": rec["caption"].replace(c1, "purple", 1), "positive": 0, "kind": "text", "category": "attr",
             "transform": "replace:att", "slot": "attr", "from": c1, "to": "purple"},
            {"text": " ".join(words[2:4] + words[:2] + words[4:]), "positive": 0, "kind": "text", "category": "text",
             "transform": "shuffle:bigram", "slot": None, "from": None, "to": None},
        ]
        negatives = rec["texts"]["negatives"] + extra
        if i in without_hn:
            negatives = [n for n in negatives if n["kind"] != "text"]
        rec["texts"]["negatives"] = negatives
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in records))
    return Path(path)


def train_killed_at(cfg, step: int, timeout: int = 300):
    """Run `train(cfg)` in a subprocess that SIGKILLs itself when step `step` is done (kill -9
    mid-run); returns the CompletedProcess. The config travels as JSON (TrainConfig's fields are plain)."""
    import dataclasses
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import json, os, signal
        from mosaictool.training import TrainConfig, train

        def die(step, metrics, model):
            if step == {step}:
                os.kill(os.getpid(), signal.SIGKILL)

        train(TrainConfig(**json.loads({json.dumps(dataclasses.asdict(cfg))!r})), on_step=die)
    """)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)


def lora_reference_weights(base: dict, lora_model, rank: int) -> dict:
    """The plain state dict LoRA should merge into, by hand (Hu et al. 2022, Eq. 3): every adapted weight
    W + (B A).view(W's shape) / rank (lora_alpha 1), the rest `base`. Adapters are found by their
    parameter names: `<layer>.lora_A.default.weight` adapts `<layer>.weight`, and an attention block's
    own adapter (`...attn.lora_A...`) its `in_proj_weight`."""
    params = dict(lora_model.named_parameters())
    want = {k: v.clone() for k, v in base.items()}
    for name, a in params.items():
        if not name.endswith(".lora_A.default.weight"):
            continue
        layer = name.removesuffix(".lora_A.default.weight")
        b = params[f"{layer}.lora_B.default.weight"]
        plain = layer.replace(".base_layer", "")
        key = f"{plain}.in_proj_weight" if plain.endswith(".attn") else f"{plain}.weight"
        want[key] = base[key] + (b.detach() @ a.detach()).view(base[key].shape) / rank
    return want


def spawned_rank(rank: int, worker, *args) -> None:
    """Run `worker(rank, *args)` in a rank started by torch.multiprocessing.spawn, then leave without
    interpreter finalization. A spawned child ends with sys.exit, and gloo's threads can still drop
    tensors while Python is torn down, which aborts the rank now and then (SIGABRT, "terminate called
    without an active exception": pytorch/pytorch#179291). Forked ranks (training/launch.py) end with
    os._exit already; the test's ranks now end the same way once their work and shutdown are done."""
    worker(rank, *args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def tiny_config(world, out, **kw):
    """A TrainConfig of the tiny model on `world` (its records and its model config first): batch 4,
    3 steps, warmup 1, quiet; `kw` wins."""
    from mosaictool.training import TrainConfig

    data, model_cfg = world[:2]
    base = dict(data=str(data), out=str(out), model_config=str(model_cfg), batch_size=4, steps=3, warmup=1, quiet=True)
    return TrainConfig(**{**base, **kw})


def weights(path) -> dict:
    """A checkpoint's weights (its state_dict), read as the library reads them."""
    from mosaictool.model import openclip

    return openclip.read_checkpoint(path)["state_dict"]


def free_port() -> int:
    """A TCP port free on this machine now, for a distributed run's MASTER_PORT."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
