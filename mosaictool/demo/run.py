"""The whole job: data -> base -> fine-tuning -> WiSE-FT -> evaluation -> report."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from mosaictool.demo.base import pretrain_base
from mosaictool.demo.config import MAIN_FAMILIES, PATCH_ALPHA, WISE_FAMILIES, DemoConfig, log
from mosaictool.demo.data import audit_texts, make_shards, make_texts, make_world, plain_records, train_fields
from mosaictool.demo.evaluation import column_value, comp_score, evaluate_all
from mosaictool.demo.finetune import finetune_all, patch_label, wise_models
from mosaictool.demo.report import paired_markdown, plot_methods, plot_wise, summarise, table_markdown
from mosaictool.errors import MosaicError


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
            log(f"select on val: hard images {'on' if hard else 'off'}, lr {lr:g}")
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
    log(f"device: {device}")
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
    log(f"evaluate: {len(models)} checkpoints on the world's {cfg.split} split, {len(wise)} WiSE-FT points on its "
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
        + (" + each one's hard image, its twin, for every row" if cfg.hard_images else ", no hard images for any row")
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
    log(f"report: {out / 'report.md'}, plots: {out / 'methods.png'}, {out / 'wise_ft.png'} ({minutes:.1f} min)")
    return {"summary": summary, "wise": wise_points, "rows": rows, "minutes": minutes, "selection": selection}
