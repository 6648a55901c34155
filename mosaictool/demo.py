"""The main job: the whole pipeline on the synthetic world, and the comparison it exists to show.

    world -> parse -> decompose -> negate -> template -> shard   (every image with both its captions)
          -> pretrain a tiny base model once with the plain CLIP loss on plain captions (cached)
          -> fine-tune it with every registered method's demo rows (mosaictool.methods: CLIP, NegCLIP,
             MosaiCLIP, MosaiCLIP-NoCurric, FSC-CLIP, Probe-FT, ...), several seeds, all with the same
             steps, batch, learning rate and images per step (hard images for every row or for none)
          -> WiSE-FT of all weights: curves (alpha 0..1 step 0.1) for MosaiCLIP and FSC-CLIP, and the
             Probe paper's "patching" (alpha 0.2) of every Probe-FT seed as a row of its own
          -> evaluate on the world's test (or, to choose settings, val) split -> table, report.md, plots

It calls the same stage functions the CLI commands call, and keeps every artifact on disk
(graphs and negatives as Parquet, texts, shards, checkpoints, result rows) for inspection.
Settings are chosen on the world's validation split (`world-val`), never on test: `--select-on-val`
fine-tunes every row at each candidate setting on val and takes the best one for all rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from mosaictool.errors import MosaicError


def demo_rows() -> list[tuple[str, str, dict]]:
    """(label, train method, method options) of every row: each registered method's demo_rows."""
    from mosaictool import methods

    return [(row.label, name, dict(row.options)) for name in methods.names() for row in methods.get(name).demo_rows]


METHODS = demo_rows()
# The caption-level hard negatives `negate --text` writes for the rows: NegCLIP's swaps, and the
# replace and bigram-shuffle texts FSC-CLIP's three HN kinds need (text negatives come on top of
# the graph ones, drawn from their own RNGs: adding kinds leaves the others unchanged).
TEXT_METHODS = ("negclip", "replace", "shuffle")
# WiSE-FT curves (all weights) of these rows' seed 0; the Probe paper's patching of every seed of PATCH_ROW
WISE_ROWS = ("MosaiCLIP", "FSC-CLIP")
PATCH_ROW, PATCH_ALPHA = "Probe-FT", 0.2
# the families a WiSE-FT point needs: compositionality (ARO) and recognition (zero-shot)
WISE_FAMILIES = ["aro", "zeroshot"]
# the families of the table's columns (the split's other benchmarks are not in the table)
MAIN_FAMILIES = ["aro", "crepe", "zeroshot"]

# The columns of the paper's Table 1, scaled down to the world: (column, subtask, metric).
COLUMNS: list[tuple[str, str, str]] = [
    ("attribute", "aro/VG-Attribution", "micro_accuracy"),
    ("relation", "aro/VG-Relation", "accuracy"),
    ("order", "aro/COCO-Order", "accuracy"),
    ("seen", "crepe/syst/seen_compounds_in_laion/comp", "R@1"),
    ("unseen", "crepe/syst/unseen_compounds_in_laion/comp", "R@1"),
    ("productivity", "crepe/*", "R@1"),
    ("recognition", "zeroshot/*", "top1"),
]


@dataclass
class DemoConfig:
    out: str = "demo-out"
    cache_dir: str = field(default_factory=lambda: os.environ.get("MOSAICTOOL_CACHE", str(Path.home() / ".cache" / "mosaictool")))
    quick: bool = False
    seeds: int = 3
    # world
    world_train: int = 8000
    twins: bool = True  # counterfactual twins of every scene: arrangement, binding (colours traded), shape
    image_size: int = 64
    eval_scale: float = 0.5
    world_seed: int = 0
    # base model: plain CLIP from scratch on the world's plain captions of 1-2-object scenes (one
    # fixed form: the text tower learns word order, the image tower arrangement), each scene's
    # arrangement twin in its batch, so that the batch holds images a bag-of-words model cannot
    # tell apart. On the varied captions both towers stayed at chance on relations for 3,000 steps
    # (perf/world_probe.py), and a second stage on them took val relation from 62% to 46-52%.
    model: str = "mosaic-micro"
    pretrain_steps: int = 1500
    pretrain_lr: float = 1e-3
    pretrain_batch: int = 64
    # fine-tuning: every method gets the same steps and the same scenes per step
    finetune_steps: int = 100
    # finetune_lr and hard_images were chosen on val (`demo --select-on-val` at these defaults, seed 0
    # of every row; mean val headline over the six rows): hard images off / lr 5e-5 37.0, on / 5e-5
    # 36.8, off / 2e-4 36.2, on / 2e-4 35.5. The lower lr helps MosaiCLIP most (37.7 vs 33.1).
    finetune_lr: float = 5e-5
    finetune_batch: int = 32
    # each image's hard image (its twin: arrangement, binding or shape; NegCLIP's hard images) in the
    # batch, for every row or for none: with it a step holds 2 x finetune_batch images
    hard_images: bool = False
    max_pos: int = 3
    max_neg: int = 6
    wise_alphas: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))
    split: str = "test"  # "val" to choose hyperparameters; the reported table is test's
    # --select-on-val: these candidate settings (every combination), one seed each, on val
    select_on_val: bool = False
    select_hard_images: tuple[bool, ...] = (False, True)
    select_lrs: tuple[float, ...] = (2e-4, 5e-5)
    # the texts audit's simulated batches of 32 (issue 13 measured with 150; --quick: fewer)
    audit_batches: int = 150
    workers: int = 2
    # runtime: where the models train and are evaluated (None: the GPU when CUDA is visible, see
    # mosaictool.model.device) and the DataLoader processes that decode shards for train and
    # evaluate (None: 0 on CPU, where they would compete with the step for the cores; on a GPU
    # up to 8, so that decoding overlaps the GPU's step)
    device: str | None = None
    loader_workers: int | None = None
    # fine-tuning runs trained at once on a CPU, each in its own process with one torch thread (the
    # tiny model keeps two threads ~70% busy: two runs of one thread do twice the work in the same
    # time on 2 cores). None: one per core, at most 8; 1: one run at a time in this process (torch's
    # default threads). On a GPU, always one at a time. The thread setting is part of a run's name.
    parallel_runs: int | None = None

    @classmethod
    def preset(cls, quick: bool = False, gpu: bool = False, **overrides) -> "DemoConfig":
        """quick: a check of the pipeline (minutes on CPU); gpu: a larger world and longer runs sized
        for one GPU (issue 14's configuration); neither: the default, sized for a CPU machine."""
        if quick and gpu:
            raise MosaicError("--quick and --preset gpu are different sizes: choose one")
        if quick:
            base = cls(quick=True, seeds=1, world_train=600, eval_scale=0.1, pretrain_steps=40,
                       finetune_steps=15, pretrain_batch=16, finetune_batch=16, wise_alphas=(0.0, 0.5, 1.0),
                       audit_batches=20)
        elif gpu:
            base = cls(seeds=3, world_train=20000, pretrain_steps=4000, pretrain_batch=128, finetune_steps=500, finetune_batch=64)
        else:
            base = cls()
        return dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})

    def runtime(self) -> tuple[str, int]:
        """The resolved device and loader workers."""
        from mosaictool.model.device import resolve_device

        device = resolve_device(self.device)
        if self.loader_workers is not None:
            return device, self.loader_workers
        return device, (min(8, os.cpu_count() or 1) if device.startswith("cuda") else 0)

    def runs_at_once(self) -> int:
        device, _ = self.runtime()
        if device != "cpu":
            return 1
        return max(1, self.parallel_runs if self.parallel_runs is not None else min(8, os.cpu_count() or 1))


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _slug(label: str) -> str:
    """A folder / model name for a row label ("Probe-FT patched (α=0.2)" -> "probe-ft-patched-a0.2")."""
    return "-".join("".join(c if c.isalnum() or c in ".-" else " " for c in label.lower().replace("α=", "a")).split())


# ---- the stages ---------------------------------------------------------------------------------

def make_world(cfg: DemoConfig, out: Path) -> Path:
    from mosaictool.world.generate import generate_world, load_manifest

    world = out / "world"
    wanted = {"seed": cfg.world_seed, "train": cfg.world_train, "twins": cfg.twins, "binding_twins": cfg.twins,
              "shape_twins": cfg.twins, "image_size": cfg.image_size, "eval_scale": cfg.eval_scale}
    if (world / "manifest.json").is_file():
        m = load_manifest(world)
        if {"seed": m.get("seed"), **m.get("options", {})} == wanted:
            _log(f"world: reusing {world}")
            return world
    _log(f"world: {cfg.world_train} scenes{' + twins' if cfg.twins else ''} -> {world}")
    generate_world(world, train=cfg.world_train, seed=cfg.world_seed, twins=cfg.twins, binding_twins=cfg.twins,
                   shape_twins=cfg.twins, image_size=cfg.image_size, eval_scale=cfg.eval_scale, workers=cfg.workers,
                   overwrite=True)
    return world


def two_captions(world: Path):
    """The fine-tuning data: every train image twice, as COCO gives an image several captions, with
    its varied caption and, as `<id>-plain`, with its plain one (whose hard images are the twins'
    plain records). Continuing the base on the varied captions alone took val relation from 62% to
    46% in 300 steps; with both captions, to 52%."""
    from mosaictool.io import read_records

    for rec in read_records(world / "train" / "captions.jsonl"):
        yield rec
        hard = [f"{h}-plain" for h in rec["hard_images"] or []] or None
        yield {**rec, "id": f"{rec['id']}-plain", "caption": rec["plain_caption"], "hard_images": hard}


def make_texts(cfg: DemoConfig, world: Path, out: Path) -> Path:
    """parse -> vocab build -> decompose -> negate -> template, each kept on disk."""
    from mosaictool.io import read_records, write_records
    from mosaictool.stages.decompose import decompose
    from mosaictool.stages.negate import negate
    from mosaictool.stages.parse import parse
    from mosaictool.stages.template import template
    from mosaictool.stages.vocab_tools import build_from_graphs
    from mosaictool.vocab import load as load_vocab
    from mosaictool.vocab import save as save_vocab

    from mosaictool.world.generate import load_manifest
    from mosaictool.world.vocab import base_vocab

    texts = out / "texts.jsonl"
    recipe_file = out / "texts.recipe.json"
    recipe = {"world": load_manifest(world), "vocab_min_count": 20, "vocab_base": "world", "max_subgraphs": 3,
              "max_negatives": 6, "text_methods": list(TEXT_METHODS)}
    if texts.is_file() and recipe_file.is_file() and json.loads(recipe_file.read_text()) == recipe:
        _log(f"texts: reusing {texts}")
        return texts
    recipe_file.unlink(missing_ok=True)
    graphs = out / "graphs.parquet"
    _log("parse: captions -> scene graphs")
    write_records(graphs, parse(two_captions(world), workers=cfg.workers))
    # Negatives drawn from the world's own vocabulary (objects/attributes/relations seen >= 20
    # times), as MosaiCLIP drew them from Visual Genome's: replacements are then in-distribution.
    # Its base is the world's words (`vocab build --base world`): their synonym and hypernym groups
    # keep a replacement from being true ("diamond" -> "rhombus") and give sub-graph keys the same
    # head for the same meaning (the texts audit: 2.3% -> 1.3% of graph negatives true of their image).
    vocab_dir = out / "vocab"
    save_vocab(build_from_graphs(read_records(graphs), min_count=20, base=base_vocab()), vocab_dir)
    _log("decompose + negate: sub-graph positives and hard negatives")
    negatives = out / "negatives.parquet"
    write_records(negatives, negate(decompose(read_records(graphs), max_subgraphs=recipe["max_subgraphs"], vocab=str(vocab_dir)),
                                    vocab=str(vocab_dir),
                                    max_negatives=recipe["max_negatives"], text_methods=TEXT_METHODS, workers=cfg.workers))
    _log("template: sub-graphs -> texts")
    write_records(texts, template(read_records(negatives), vocab=load_vocab(vocab_dir)))
    recipe_file.write_text(json.dumps(recipe, sort_keys=True) + "\n")
    return texts


# The fields of a texts record that training reads (mosaictool.model.data._slim's inputs) and the
# shard writer needs: the fine-tuning shards carry only these. Each run decodes every record's JSON
# when it starts, and the graphs, raw negatives and scenes were two thirds of it (~24 s a run at
# 8,000 scenes, 18 runs).
TRAIN_FIELDS = ("id", "image", "caption", "hard_images", "subgraph_keys", "texts")


def train_fields(records):
    for rec in records:
        yield {k: rec[k] for k in TRAIN_FIELDS if k in rec}


def make_shards(records, world: Path, shards: Path, source: Path | None = None) -> Path:
    """Shards of `records`, reused only when they were written from the same world and `source` file."""
    from mosaictool.stages.shard import write_shards
    from mosaictool.world.generate import load_manifest

    recipe_file = shards.with_name(shards.name + ".recipe.json")
    recipe = {"world": load_manifest(world), "source": _file_digest(source) if source else None, "fields": list(TRAIN_FIELDS)}
    if (shards / "sizes.json").is_file() and recipe_file.is_file() and json.loads(recipe_file.read_text()) == recipe:
        _log(f"shards: reusing {shards}")
        return shards
    recipe_file.unlink(missing_ok=True)
    if shards.exists():
        shutil.rmtree(shards)
    _log(f"shard: WebDataset tar shards -> {shards}")
    write_shards(records, out=shards, image_root=world / "train", shard_size=2000)
    recipe_file.write_text(json.dumps(recipe, sort_keys=True) + "\n")
    return shards


def plain_records(world: Path):
    """The base's pretraining data: the world's scenes of one or two objects and their
    arrangement twins (the only hard images kept), each with its plain caption as the caption.
    With 1-4 objects from the start, 500 steps left shape recognition at chance (0.22 vs 0.62 on
    val); with binding and shape twins in the batch too, relation stayed at 0.52 after 1,200 steps."""
    from mosaictool.io import read_records

    records = [r for r in read_records(world / "train" / "captions.jsonl")
               if len(r["scene"]["objects"]) <= 2 and r["twin_kind"] in (None, "arrangement")]
    kept = {r["id"] for r in records}
    for rec in records:
        hard = [h for h in rec["hard_images"] or [] if h in kept]
        yield {**rec, "caption": rec["plain_caption"], "hard_images": hard or None}


def pretrain_base(cfg: DemoConfig, plain_shards: Path, world: Path, out: Path) -> Path:
    """The base model, pretrained once with the plain CLIP loss on the plain captions of one- and
    two-object scenes, and cached by everything it depends on."""
    from mosaictool.model.train import TrainConfig, train
    from mosaictool.world.generate import load_manifest

    device, workers = cfg.runtime()
    recipe = {"world": load_manifest(world), "shards": json.loads((plain_shards / "sizes.json").read_text()), "model": cfg.model,
              "steps": cfg.pretrain_steps, "lr": cfg.pretrain_lr, "batch": cfg.pretrain_batch, "twins_in_batch": True}
    cached = Path(cfg.cache_dir) / f"base-{_digest(recipe)}.pt"
    if cached.is_file():
        _log(f"pretrain: reusing cached base model {cached}")
    else:
        _log(f"pretrain: base model, plain CLIP loss, {cfg.pretrain_steps} steps on plain captions (cached as {cached})")
        run = out / "runs" / "base"
        if run.exists():
            shutil.rmtree(run)
        final = train(TrainConfig(data=str(plain_shards), out=str(run), method="clip", model=cfg.model, record_hard_images=True,
                                  augment=False, steps=cfg.pretrain_steps, lr=cfg.pretrain_lr, batch_size=cfg.pretrain_batch,
                                  warmup=min(100, cfg.pretrain_steps // 10), seed=0, quiet=not sys.stderr.isatty(),
                                  device=device, num_workers=workers))
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        shutil.copyfile(final, tmp)
        os.replace(tmp, cached)
    link = out / "base.pt"
    if link.exists() or link.is_symlink():
        link.unlink()
    shutil.copyfile(cached, link)
    return link


def _expected_texts(method: str, options: dict, steps: int) -> int:
    """Texts a run encodes per image over its steps (the slots of every step): the longest runs go
    to the pool first, so that no core waits alone for one at the end."""
    from mosaictool.methods import create

    m = create(method, options)
    return sum(sum(m.slots(step, steps)) for step in range(steps))


def finetune_all(cfg: DemoConfig, shards: Path, base: Path, out: Path) -> dict[str, list[Path]]:
    """Every row x seed from the base, all with the same steps, batch, learning rate and hard-image
    setting (cfg.hard_images for every row, never the method's own default); a run is reused only
    when its base and settings are the same (its folder is named by their digest), so changing a
    flag never returns a stale run."""
    from mosaictool.methods import get as get_method
    from mosaictool.model.train import TrainConfig, train

    device, workers = cfg.runtime()
    at_once = cfg.runs_at_once()
    base_sha = _file_digest(base)
    recipe = shards.with_name(shards.name + ".recipe.json")  # what the shards hold: a new recipe, new runs
    data_sha = _file_digest(recipe) if recipe.is_file() else None
    runs: dict[str, list[Path]] = defaultdict(list)
    todo: list[TrainConfig] = []
    for seed in range(cfg.seeds):
        for label, method, options in METHODS:
            declared = {o.name for o in get_method(method).options}  # the demo's --max-pos reaches who has it
            options = {**{k: v for k, v in (("max_pos", cfg.max_pos), ("max_neg", cfg.max_neg)) if k in declared}, **options}
            tc = TrainConfig(data=str(shards), out="", method=method, method_options=options, model=cfg.model,
                             pretrained=str(base), augment=False, steps=cfg.finetune_steps, lr=cfg.finetune_lr,
                             batch_size=cfg.finetune_batch, warmup=min(50, cfg.finetune_steps // 10),
                             record_hard_images=cfg.hard_images, seed=seed, quiet=not sys.stderr.isatty())
            threads = 1 if at_once > 1 else None
            key = _digest({**dataclasses.asdict(tc), "quiet": None, "base": base_sha, "data": data_sha,
                           **({"threads": threads} if threads else {})})
            run = out / "runs" / f"{_slug(label)}-seed{seed}-{key}"
            final = run / "final.pt"
            if not final.is_file():
                if run.exists():
                    shutil.rmtree(run)
                _log(f"fine-tune: {label}, seed {seed}, {cfg.finetune_steps} steps, lr {cfg.finetune_lr:g}, "
                     f"hard images {'on' if cfg.hard_images else 'off'}")
                # device and loader workers are runtime: not in the run's digest
                todo.append(dataclasses.replace(tc, out=str(run), device=device, num_workers=workers))
            runs[label].append(final)
    if at_once > 1 and len(todo) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from mosaictool.model.data import preload_shards

        _log(f"fine-tuning {len(todo)} runs, {min(at_once, len(todo))} at once (one thread each)")
        preload_shards(str(shards))  # indexed once here, read by every forked run
        todo.sort(key=lambda tc: -_expected_texts(tc.method, tc.method_options, tc.steps))
        # fork (as DataLoader workers): no re-import of the main module; each run sets one thread first
        context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        with ProcessPoolExecutor(min(at_once, len(todo)), mp_context=context) as pool:
            list(pool.map(_train_one_thread, todo))  # re-raises a run's error here
    elif at_once > 1:
        for tc in todo:
            _train_one_thread(tc)  # the same single thread as in the pool: the same weights
    else:
        for tc in todo:
            train(tc)
    return runs


def _train_one_thread(tc) -> str:
    """One fine-tuning run with one torch thread (a pool process, or this one and then restored)."""
    import torch

    from mosaictool.model.train import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return str(train(tc))
    finally:
        torch.set_num_threads(threads)


def _wise(base: Path, finetuned: Path, alphas: list[float], folder: Path, device: str) -> list[Path]:
    """WiSE-FT checkpoints of all weights, written once per (base, fine-tuned run, alpha): the folder
    is named by the base's digest and the run (itself named by its settings), so a second demo reuses
    them and their kept evaluations."""
    from mosaictool.model.wise_ft import wise_ft

    folder = folder.with_name(f"{folder.name}-{_digest([_file_digest(base), str(finetuned.parent.name)])}")
    paths = [folder / f"wise_ft_alpha_{a:.3f}.pt" for a in alphas]
    if all(p.is_file() for p in paths):
        return paths
    return wise_ft(str(base), str(finetuned), alphas, out=folder, scope="all", device=device)


def wise_models(cfg: DemoConfig, base: Path, runs: dict[str, list[Path]], out: Path) -> tuple[dict, dict]:
    """WiSE-FT of all weights. Curves: {row: [(alpha, model label, path or None)]} for WISE_ROWS' seed 0;
    alpha 0 is the base itself and alpha 1 the fine-tuned model (path None: their full evaluation is
    reused). Patched: {model label: path}, PATCH_ALPHA of every seed of PATCH_ROW."""
    device, _ = cfg.runtime()
    curves: dict[str, list[tuple[float, str, Path | None]]] = {}
    for row in WISE_ROWS:
        if row not in runs:
            continue
        inner = [a for a in cfg.wise_alphas if 0 < a < 1]
        _log(f"wise-ft: {row} seed 0, all weights, alpha in {list(cfg.wise_alphas)}")
        paths = dict(zip(inner, _wise(base, runs[row][0], inner, out / "wise" / _slug(row), device))) if inner else {}
        curves[row] = [(a, "base" if a == 0 else f"{row}-s0" if a == 1 else f"wise-{_slug(row)}-a{a:g}", paths.get(a))
                       for a in cfg.wise_alphas]
    patched: dict[str, Path] = {}
    if PATCH_ROW in runs:
        _log(f"wise-ft: {PATCH_ROW} patched, all weights, alpha {PATCH_ALPHA:g}, every seed")
        for seed, final in enumerate(runs[PATCH_ROW]):
            [path] = _wise(base, final, [PATCH_ALPHA], out / "wise" / f"{_slug(PATCH_ROW)}-patched-seed{seed}", device)
            patched[f"{patch_label()}-s{seed}"] = path
    return curves, patched


def patch_label() -> str:
    return f"{PATCH_ROW} patched (α={PATCH_ALPHA:g})"


def evaluate_all(models: list[tuple[str, Path]], world: Path, split_bench: str, device: str = "cpu", workers: int = 0,
                 families: list[str] | None = None, cache: Path | None = None) -> list[dict]:
    """Result rows of every (label, checkpoint) on `split_bench` (`families`: a subset of the world's).
    With `cache`, a checkpoint's rows are kept under the digest of its bytes, the world, the split
    and the families, and reused: a second run, or a run whose settings share checkpoints with an
    earlier one (the val selection's seed 0), evaluates only what is new."""
    from mosaictool.bench import get
    from mosaictool.bench.engine import EngineOptions, evaluate
    from mosaictool.model.openclip import load_checkpoint
    from mosaictool.world.generate import load_manifest

    if not models:
        return []
    scope = {"world": load_manifest(world), "bench": split_bench, "families": families}
    keys = {label: _digest({**scope, "checkpoint": _file_digest(path)}) for label, path in models} if cache else {}
    rows: list[dict] = []
    todo = []
    for label, path in models:
        hit = cache / f"{keys[label]}.jsonl" if cache else None
        if hit is not None and hit.is_file():
            rows += [{**json.loads(line), "model": label} for line in hit.read_text().splitlines()]
        else:
            todo.append((label, path))
    if todo:
        bench = get(split_bench)
        loaded = ((label, load_checkpoint(path, device=device)) for label, path in todo)
        batch = 256 if device.startswith("cuda") else 64
        new = list(evaluate([(bench, families)], loaded, world, EngineOptions(quiet=True, device=device, workers=workers, batch_size=batch)))
        rows += new
        if cache:
            cache.mkdir(parents=True, exist_ok=True)
            for label, _ in todo:  # json keeps NaN (a score a small split cannot give) as NaN
                lines = [json.dumps(r) for r in new if r["model"] == label]
                tmp = cache / f"{keys[label]}.tmp"
                tmp.write_text("".join(line + "\n" for line in lines))
                os.replace(tmp, cache / f"{keys[label]}.jsonl")
    order = {label: i for i, (label, _) in enumerate(models)}
    return sorted(rows, key=lambda r: order[r["model"]])


# ---- the table ----------------------------------------------------------------------------------

def column_value(rows: list[dict], model: str, subtask: str, metric: str) -> float:
    """One model's value of a column; `prefix/*` = mean over the non-detail subtasks under prefix."""
    if subtask.endswith("/*"):
        prefix = subtask[:-1]
        vals = [r["value"] for r in rows if r["model"] == model and r["subtask"].startswith(prefix)
                and r["metric"] == metric and not r.get("detail") and "/syst/" not in r["subtask"]]
    else:
        vals = [r["value"] for r in rows if r["model"] == model and r["subtask"] == subtask and r["metric"] == metric]
    vals = [v for v in vals if v is not None and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else float("nan")


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval over seeds (NaN with a single value)."""
    from scipy import stats

    values = [v for v in values if not math.isnan(v)]
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    mean = sum(values) / n
    if n == 1:
        return mean, float("nan")
    return mean, float(stats.t.ppf(0.975, n - 1) * stats.sem(values))


def paired_diff(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """b - a paired by seed: mean difference, half-width of its 95% t-interval, and the paired t-test's
    two-sided p (scipy.stats.ttest_rel); NaN where fewer than two pairs have both values."""
    from scipy import stats

    pairs = [(x, y) for x, y in zip(a, b) if not (math.isnan(x) or math.isnan(y))]
    if len(pairs) < 2:
        return float("nan"), float("nan"), float("nan")
    x, y = zip(*pairs)
    test = stats.ttest_rel(y, x)
    low, high = test.confidence_interval(0.95)
    return float(sum(y) - sum(x)) / len(pairs), float(high - low) / 2, float(test.pvalue)


def paired_markdown(rows: list[dict], groups: dict[str, list[str]], reference: str = "CLIP") -> str:
    """Each fine-tuned method minus `reference`, paired by seed (seed s of both starts from the same base
    and sees the same batches), per column: difference ± 95% CI (p of the paired t-test)."""
    lines = ["| method − " + reference + " | " + " | ".join(c for c, _, _ in COLUMNS) + " |",
             "|---|" + "---|" * len(COLUMNS)]
    for method, models in groups.items():
        if method == reference or len(models) != len(groups.get(reference, [])) or len(models) < 2:
            continue
        cells = []
        for col, sub, metric in COLUMNS:
            d, half, p = paired_diff([column_value(rows, m, sub, metric) for m in groups[reference]],
                                     [column_value(rows, m, sub, metric) for m in models])
            cells.append("–" if math.isnan(d) else f"{100 * d:+.1f} ± {100 * half:.1f} (p={p:.2g})")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def summarise(rows: list[dict], groups: dict[str, list[str]]) -> dict[str, dict[str, tuple[float, float]]]:
    """{method: {column: (mean, ci)}} over each method's models (its seeds)."""
    return {
        method: {col: mean_ci([column_value(rows, m, sub, metric) for m in models]) for col, sub, metric in COLUMNS}
        for method, models in groups.items()
    }


def table_markdown(summary: dict[str, dict[str, tuple[float, float]]]) -> str:
    head = "| method | " + " | ".join(c for c, _, _ in COLUMNS) + " |"
    sep = "|---|" + "---|" * len(COLUMNS)
    lines = [head, sep]
    for method, cols in summary.items():
        cells = []
        for col, _, _ in COLUMNS:
            mean, ci = cols[col]
            cells.append("–" if math.isnan(mean) else f"{100 * mean:.1f}" + ("" if math.isnan(ci) else f" ± {100 * ci:.1f}"))
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_methods(summary: dict, path: Path, split: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = [c for c, _, _ in COLUMNS]
    methods = list(summary)
    width = 0.8 / max(1, len(methods))
    fig, ax = plt.subplots(figsize=(11, 4))
    for i, method in enumerate(methods):
        means = [100 * summary[method][c][0] for c in cols]
        cis = [0.0 if math.isnan(summary[method][c][1]) else 100 * summary[method][c][1] for c in cols]
        xs = [j + (i - (len(methods) - 1) / 2) * width for j in range(len(cols))]
        ax.bar(xs, means, width, yerr=cis, capsize=2, label=method)
    ax.set_xticks(range(len(cols)), cols)
    ax.set_ylabel("accuracy / R@1 (%)")
    ax.set_title(f"Synthetic world, {split} split: mean ± 95% CI over seeds")
    ax.legend(fontsize=8, ncol=len(methods))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_wise(curves: dict[str, list[tuple[float, float, float]]], path: Path) -> None:
    """Compositionality vs recognition across WiSE-FT alphas, one curve per row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    for row, points in curves.items():
        xs = [100 * p[2] for p in points]
        ys = [100 * p[1] for p in points]
        ax.plot(xs, ys, "o-", label=row, markersize=3)
        for alpha, y, x in points:
            if alpha in (0.0, 0.5, 1.0):
                ax.annotate(f"α={alpha:g}", (100 * x, 100 * y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("recognition (zero-shot top-1, %)")
    ax.set_ylabel("compositionality (mean of attribute, relation, order, %)")
    ax.set_title("WiSE-FT of all weights (seed 0)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def comp_score(rows: list[dict], model: str) -> float:
    vals = [column_value(rows, model, sub, metric) for col, sub, metric in COLUMNS if col in ("attribute", "relation", "order")]
    vals = [v for v in vals if not math.isnan(v)]
    return sum(vals) / len(vals) if vals else float("nan")


# ---- the whole job ------------------------------------------------------------------------------

def audit_texts(cfg: DemoConfig, texts: Path, out: Path) -> str:
    """The texts audit (mosaictool.world.audit) as markdown, kept in OUT/audit.json for the same texts."""
    from mosaictool.io import read_records
    from mosaictool.world.audit import audit, audit_markdown

    kept = out / "audit.json"
    key = {"texts": _file_digest(texts), "batches": cfg.audit_batches}
    if kept.is_file():
        old = json.loads(kept.read_text())
        if old.get("key") == key:
            return old["markdown"]
    _log(f"audit: the texts against the world's truth ({cfg.audit_batches} simulated batches)")
    result = audit(read_records(texts), batches=cfg.audit_batches)
    markdown = audit_markdown(result)
    kept.write_text(json.dumps({"key": key, "result": result, "markdown": markdown}, indent=1) + "\n")
    return markdown


def _split_bench(split: str) -> str:
    if split not in ("val", "test"):
        raise MosaicError(f"--split {split!r}: choose val (for choosing hyperparameters) or test")
    return "world" if split == "test" else "world-val"


def select_on_val(cfg: DemoConfig, shards: Path, base: Path, world: Path, out: Path) -> tuple[dict, str]:
    """Fine-tune every row (seed 0) at each candidate (hard images, lr) of the config, evaluate on
    the world's val split, and return the candidate with the best val headline (the world's mean
    compositional score: ARO accuracies + CREPE productivity) averaged over the rows, one setting for
    every row, with the markdown table of all candidates. Test is never read."""
    from mosaictool.bench.base import HEADLINE

    device, workers = cfg.runtime()
    results = []
    for hard in cfg.select_hard_images:
        for lr in cfg.select_lrs:
            trial = dataclasses.replace(cfg, seeds=1, hard_images=hard, finetune_lr=lr)
            _log(f"select on val: hard images {'on' if hard else 'off'}, lr {lr:g}")
            runs = finetune_all(trial, shards, base, out)
            models = [(f"{label}-s0", finals[0]) for label, finals in runs.items()]
            rows = evaluate_all(models, world, "world-val", device=device, workers=workers, families=MAIN_FAMILIES,
                                cache=out / "evals")
            per_row = {label: column_value(rows, f"{label}-s0", HEADLINE, "accuracy") for label in runs}
            recog = {label: column_value(rows, f"{label}-s0", "zeroshot/*", "top1") for label in runs}
            score = sum(per_row.values()) / len(per_row)
            results.append({"hard_images": hard, "lr": lr, "score": score, "per_row": per_row,
                            "recognition": sum(recog.values()) / len(recog)})
    best = max(results, key=lambda r: r["score"])  # ties: the first candidate
    labels = list(results[0]["per_row"])
    lines = ["| hard images | lr | mean val headline | " + " | ".join(labels) + " | mean val recognition |",
             "|---|---|---|" + "---|" * len(labels) + "---|"]
    for r in results:
        mark = " **(chosen)**" if r is best else ""
        lines.append(f"| {'on' if r['hard_images'] else 'off'} | {r['lr']:g}{mark} | {100 * r['score']:.1f} | "
                     + " | ".join(f"{100 * r['per_row'][label]:.1f}" for label in labels) + f" | {100 * r['recognition']:.1f} |")
    (out / "selection.json").write_text(json.dumps(results, indent=1) + "\n")
    return best, "\n".join(lines)


def run_demo(cfg: DemoConfig) -> dict:
    from mosaictool.io import read_records, write_records

    out = Path(cfg.out)
    device, workers = cfg.runtime()  # a missing GPU is an error before any work
    bench = _split_bench(cfg.split)
    _log(f"device: {device}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1) + "\n")
    t0 = time.perf_counter()
    world = make_world(cfg, out)
    texts = make_texts(cfg, world, out)
    shards = make_shards(train_fields(read_records(texts)), world, out / "shards", source=texts)
    plain_shards = make_shards(train_fields(plain_records(world)), world, out / "shards-plain")
    # Pretraining runs alone: tried beside the text stages (a process of its own), its two torch
    # threads kept waiting on each other: in 8.5 min the text stages (~3 min alone) finished and the
    # pretraining (~6 min alone) did half its steps.
    base = pretrain_base(cfg, plain_shards, world, out)
    audited = audit_texts(cfg, texts, out)
    selection = None
    if cfg.select_on_val:
        best, selection = select_on_val(cfg, shards, base, world, out)
        cfg = dataclasses.replace(cfg, hard_images=best["hard_images"], finetune_lr=best["lr"])
        (out / "demo_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1) + "\n")
    runs = finetune_all(cfg, shards, base, out)
    curves, patched = wise_models(cfg, base, runs, out)

    models = [("base", base)]
    groups: dict[str, list[str]] = {"base (CLIP pretrain)": ["base"]}
    for label, finals in runs.items():
        groups[label] = [f"{label}-s{seed}" for seed in range(len(finals))]
        models += list(zip(groups[label], finals))
    if patched:
        groups[patch_label()] = list(patched)
        models += list(patched.items())
    wise = [(name, path) for points in curves.values() for _, name, path in points if path is not None]
    _log(f"evaluate: {len(models)} checkpoints on the world's {cfg.split} split, {len(wise)} WiSE-FT points on its "
         f"{' and '.join(WISE_FAMILIES)} subtasks")
    rows = evaluate_all(models, world, bench, device=device, workers=workers, families=MAIN_FAMILIES, cache=out / "evals")
    rows += evaluate_all(wise, world, bench, device=device, workers=workers, families=WISE_FAMILIES, cache=out / "evals")
    write_records(out / "results.jsonl", rows)

    summary = summarise(rows, groups)
    table = table_markdown(summary)
    wise_points = {row: [(a, comp_score(rows, name), column_value(rows, name, "zeroshot/*", "top1")) for a, name, _ in points]
                   for row, points in curves.items()}
    plot_methods(summary, out / "methods.png", cfg.split)
    plot_wise(wise_points, out / "wise_ft.png")
    minutes = (time.perf_counter() - t0) / 60
    per_step = 2 * cfg.finetune_batch if cfg.hard_images else cfg.finetune_batch
    chosen = ("chosen on val by --select-on-val in this run (table below)" if selection else
              "the defaults, chosen on val (`mosaictool demo --select-on-val`); this run did not select")
    report = "\n".join([
        "# mosaictool demo: the synthetic world",
        "",
        f"Every row is fine-tuned from the same base with the same settings: {cfg.finetune_steps} steps, "
        f"{per_step} images per step ({cfg.finetune_batch} images"
        + (f" + each one's hard image, its twin, for every row" if cfg.hard_images else ", no hard images for any row")
        + f"), lr {cfg.finetune_lr:g} (AdamW, cosine, warmup {min(50, cfg.finetune_steps // 10)}), "
        f"{cfg.seeds} seed(s) per row; settings {chosen}.",
        f"The base was pretrained {cfg.pretrain_steps} steps with the plain CLIP loss (plain captions of 1-2-object "
        f"scenes, each with its arrangement twin in the batch); fine-tuning data: every image with its varied and its "
        f"plain caption. Tables on the world's **{cfg.split}** split; mean ± 95% CI over seeds. "
        f"{patch_label()} = WiSE-FT of all weights at α={PATCH_ALPHA:g} between the base and each Probe-FT seed "
        "(the Probe paper's patching).",
        "attribute = VG-Attribution-style swap (micro accuracy), relation = VG-Relation-style swap, order = COCO-Order-style "
        "(1 true + 4 shuffled captions), seen/unseen = CREPE systematicity R@1 (comp negatives), productivity = CREPE "
        "productivity R@1 (mean over atom/swap/negate × complexity), recognition = zero-shot top-1 (mean over tasks).",
        "",
        table,
        "",
        *([f"Paired by seed ({cfg.seeds} seeds), each method minus CLIP fine-tuning ({cfg.split} split): difference ± 95% CI "
           "(p of the paired t-test).", "", paired, ""] if (paired := paired_markdown(rows, groups)) else []),
        *(["Settings chosen on the **val** split (seed 0 of every row per candidate; score: the world's compositional "
           "headline, ARO accuracies + CREPE productivity, averaged over the rows; one setting for all rows):", "",
           selection, ""] if selection else []),
        f"WiSE-FT of all weights (seed 0, {cfg.split} split; α=0 is the base, α=1 the fine-tuned model): "
        "alpha -> compositionality (mean of attribute, relation, order) / recognition",
        "",
        "| alpha | " + " | ".join(f"{row} comp | {row} recognition" for row in wise_points) + " |",
        "|---|" + "---|---|" * len(wise_points),
        *[f"| {a:g} | " + " | ".join(f"{100 * pts[k][1]:.1f} | {100 * pts[k][2]:.1f}" for pts in wise_points.values()) + " |"
          for k, a in enumerate(cfg.wise_alphas)],
        "",
        audited,
        "",
        f"Total time: {minutes:.1f} min. Artifacts: {out}/ (graphs.parquet, negatives.parquet, texts.jsonl, shards/, runs/, "
        "wise/, evals/, results.jsonl).",
        "",
    ])
    (out / "report.md").write_text(report)
    print(table)
    _log(f"report: {out / 'report.md'}, plots: {out / 'methods.png'}, {out / 'wise_ft.png'} ({minutes:.1f} min)")
    return {"summary": summary, "wise": wise_points, "rows": rows, "minutes": minutes, "selection": selection}
