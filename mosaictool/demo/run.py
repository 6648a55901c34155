"""The whole job: data -> base -> fine-tuning -> WiSE-FT -> evaluation -> report."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mosaictool.atomic import write_text
from mosaictool.demo import experiments, prereg
from mosaictool.demo.base import pretrain_base
from mosaictool.demo.config import MAIN_FAMILIES, METHODS, DemoConfig
from mosaictool.demo.data import data_cache, keep_data, make_texts, make_world, restore_data, shards_and_audit
from mosaictool.demo.evaluation import column_value, evaluate_all
from mosaictool.demo.finetune import finetune_all, patch_label, wise_models
from mosaictool.demo.report import build_report
from mosaictool.demo.tuning import CRITERION, draw_trials
from mosaictool.errors import MosaicError
from mosaictool.io import read_json

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # the demo's stages import torch only where they train
    from mosaictool.training.shards import ShardCache


def _split_bench(split: str) -> str:
    if split not in ("val", "test"):
        raise MosaicError(f"--split {split!r}: choose val (for choosing hyperparameters) or test")
    return "world" if split == "test" else "world-val"


# ARO's criterion (Yuksekgonul et al. 2023, App. C.3: each model's lr "based on the retrieval performance in the
# COCO validation set"), one for every row: the mean of R@1/5/10, image->text and text->image, on the
# world's val captions. Not the compositional columns: choosing by them rewarded the rows that move least,
# and a criterion a method was built for would favour it.
RETRIEVAL_METRICS = [f"{d}_R@{k}" for d in ("image_to_text", "text_to_image") for k in (1, 5, 10)]


def val_retrieval(rows: list[dict], model: str) -> float:
    return sum(column_value(rows, model, "retrieval/coco", m) for m in RETRIEVAL_METRICS) / len(RETRIEVAL_METRICS)


def select_on_val(cfg: DemoConfig, shards: Path, base: Path, world: Path, out: Path,
                  shard_cache: ShardCache | None = None) -> tuple[dict[str, dict], str]:
    """Every row's equal budget of trials on the world's val split (mosaictool.demo.tuning: the same
    number of fine-tuning runs for every row, over its own grid), each scored by val retrieval (ARO's
    criterion, RETRIEVAL_METRICS); each row takes its best grid point. Returns {row: {"lr", "options"}}
    and the markdown table of every point (retrieval, and the compositional headline for reference).
    Test is never read."""
    from mosaictool.bench.base import HEADLINE

    device, workers = cfg.runtime()
    trials = {label: draw_trials(cfg, label) for label, _, _ in METHODS}
    scores: dict[str, list[tuple[float, float]]] = {label: [] for label in trials}
    for k in range(cfg.tuning_budget):  # the k-th trial of every row: one round of runs, trained together
        logger.info(f"select on val: trial {k + 1} of {cfg.tuning_budget} of every row")
        by_seed: dict[int, list[tuple[str, str, dict]]] = {}
        for label, method, options in METHODS:
            by_seed.setdefault(trials[label][k].seed, []).append((label, method, {**options, **trials[label][k].options}))
        models = []
        for seed, group in sorted(by_seed.items()):  # a repeat at seed s: seeds < s of its point were run in earlier rounds
            trial = dataclasses.replace(cfg, seeds=seed + 1, finetune_lr=None, row_options={},
                                        row_lrs={label: trials[label][k].lr for label, _, _ in group})
            runs = finetune_all(trial, shards, base, out, rows=group, shard_cache=shard_cache)
            models += [(f"{label}-trial{k}", finals[seed]) for label, finals in runs.items()]
        rows = evaluate_all(models, world, "world-val", device=device, workers=workers, families=[*MAIN_FAMILIES, "retrieval"],
                            cache=out / "evals")
        for label in trials:
            name = f"{label}-trial{k}"
            scores[label].append((val_retrieval(rows, name), column_value(rows, name, HEADLINE, "accuracy")))
    chosen, lines = {}, ["| row | grid point | runs | val retrieval (val relation) |", "|---|---|---|---|"]
    for label, row_trials in trials.items():
        points: dict[str, list[int]] = {}
        for k, t in enumerate(row_trials):
            points.setdefault(t.point, []).append(k)
        mean = {p: [sum(scores[label][k][j] for k in ks) / len(ks) for j in (0, 1)] for p, ks in points.items()}
        best = max(points, key=lambda p: mean[p][0])  # ties: the first in grid order
        first = row_trials[points[best][0]]
        chosen[label] = {"lr": first.lr, "options": first.options}
        lines += [f"| {label} | {p} | {len(ks)} | {100 * mean[p][0]:.1f} ({100 * mean[p][1]:.1f})"
                  + (" **(chosen)**" if p == best else "") + " |" for p, ks in points.items()]
    write_text(out / "selection.json", json.dumps({
        "budget": cfg.tuning_budget, "seed": cfg.tuning_seed, "criterion": CRITERION,
        "trials": {label: [{"lr": t.lr, "options": t.options, "seed": t.seed, "val_retrieval": scores[label][k][0],
                            "val_headline": scores[label][k][1]} for k, t in enumerate(row_trials)]
                   for label, row_trials in trials.items()},
        "chosen": chosen}, indent=1) + "\n")
    return chosen, "\n".join(lines)


def run_demo(cfg: DemoConfig) -> dict:
    """The whole job in OUT, which one demo writes at a time (a lock) and which may neither be, hold,
    nor lie inside the cache folder (a demo replaces what is in OUT with the cache's copies)."""
    from mosaictool.locks import LOCK_NAME, folder_lock
    from mosaictool.paths import Read, Write, check_outputs

    check_outputs([Write("--out", cfg.out, ("**",))], [Read("--cache-dir", cfg.cache_dir, ("**",))])
    cache = Path(cfg.cache_dir)
    above = next((p for p in (cache, *cache.parents) if p.exists()), None)
    if above is not None and not above.is_dir():  # found before OUT gets a demo_config.json
        raise MosaicError(f"--cache-dir {cache}: {above} is a file, not a folder; choose another --cache-dir")
    out = Path(cfg.out)
    if out.is_dir() and not (out / "demo_config.json").is_file():
        # the demo replaces world/, shards/, texts.jsonl, runs/, ... in OUT: never in someone's own folder
        theirs = sorted(p.name for p in out.iterdir() if p.name != LOCK_NAME)
        if theirs:
            raise MosaicError(f"--out {out}: not a demo folder (no demo_config.json) and it holds {', '.join(theirs[:3])}; "
                              "the demo would replace what it finds there: choose a new or empty folder")
    with folder_lock(out, "mosaictool demo"):
        return _run_demo(cfg)


def _settings_differ(config_file: Path, cfg: DemoConfig) -> bool:
    """Whether the demo that last wrote OUT (its demo_config.json) ran other settings than `cfg`; its
    experiments aside: a report of another experiment at the same settings still holds."""
    try:
        earlier = read_json(config_file)
    except (OSError, MosaicError):
        return True
    now = json.loads(json.dumps(dataclasses.asdict(cfg)))
    return not isinstance(earlier, dict) or {**earlier, "experiments": None} != {**now, "experiments": None}


def _run_demo(cfg: DemoConfig) -> dict:
    from mosaictool.io import write_records
    from mosaictool.training.shards import ShardCache

    out = Path(cfg.out)
    device, workers = cfg.runtime()  # a missing GPU is an error before any work
    bench = _split_bench(cfg.split)
    logger.info(f"device: {device}")
    out.mkdir(parents=True, exist_ok=True)
    # declared first, before any work: a plan other than the one this folder declared is refused here
    preregistration = prereg.declare(cfg, out) if cfg.split == "test" else None
    other_settings = _settings_differ(out / "demo_config.json", cfg)
    write_text(out / "demo_config.json", json.dumps(dataclasses.asdict(cfg), indent=1) + "\n")
    t0 = time.perf_counter()
    cached_data = data_cache(cfg)  # hashes mosaictool's files: once a run
    restored = restore_data(cached_data, out)
    world = make_world(cfg, out)
    texts = make_texts(cfg, world, out)
    shard_cache = ShardCache()  # the fine-tuning shards indexed (and their images decoded) once for every run
    shards, plain_shards, audited = shards_and_audit(cfg, world, texts, out, shard_cache)
    if not restored:
        keep_data(cached_data, out)
    # Pretraining runs alone: tried beside the text stages (a process of its own), its two torch
    # threads kept waiting on each other: in 8.5 min the text stages (~3 min alone) finished and the
    # pretraining (~6 min alone) did half its steps.
    base = pretrain_base(cfg, plain_shards, world, out)
    selection = None
    if cfg.select_on_val:
        chosen, selection = select_on_val(cfg, shards, base, world, out, shard_cache)
        cfg = dataclasses.replace(cfg, row_lrs={label: c["lr"] for label, c in chosen.items()}, finetune_lr=None,
                                  row_options={label: c["options"] for label, c in chosen.items()})
        write_text(out / "demo_config.json", json.dumps(dataclasses.asdict(cfg), indent=1) + "\n")
    runs = finetune_all(cfg, shards, base, out, shard_cache=shard_cache)
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
    logger.info(f"evaluate: {len(models)} checkpoints and {len(wise)} WiSE-FT points on the world's {cfg.split} split")
    # the WiSE-FT points need aro and zeroshot only; with crepe too (~0.5 s a point) they share the
    # table's pool, its loaded benchmark and the images each process decoded once
    rows = evaluate_all(models + wise, world, bench, device=device, workers=workers, families=MAIN_FAMILIES, cache=out / "evals")
    if preregistration is not None:
        prereg.read_once(out, preregistration, rows)
    write_records(out / "results.jsonl", rows)

    context = experiments.Context(cfg, shards, plain_shards, base, world, out, table_rows=rows, groups=groups,
                                  shard_cache=shard_cache)
    sections = [experiments.run(name, context) for name in cfg.experiments]
    minutes = (time.perf_counter() - t0) / 60
    report = build_report(cfg, rows, groups, runs, curves, world, out, minutes, selection=selection, sections=sections,
                          audited=audited, preregistration=prereg.report_line(preregistration) if preregistration else "")
    write_text(out / "report.md", report.text)
    if other_settings:  # an earlier demo's report files in OUT, of other settings, never stand beside this one's
        written = {out / "selection.json"} if selection is not None else set()
        written |= {Path(f) for section in sections for f in section.files}
        for name in ("selection.json", *experiments.files()):  # beside report.md, results.jsonl, the plots
            if out / name not in written:
                (out / name).unlink(missing_ok=True)
    logger.info(f"report: {out / 'report.md'}, plots: {out / 'methods.png'}, {out / 'wise_ft.png'} ({minutes:.1f} min)")
    # the table and the verdicts are returned for the command to print: the library does not print
    return {"table": report.table, "power": report.power, "summary": report.summary, "wise": report.wise_points, "rows": rows,
            "minutes": minutes, "selection": selection,
            "control": report.control, "headline": report.headline, "mde": report.mde}
