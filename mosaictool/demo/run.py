"""The whole job: data -> base -> fine-tuning -> WiSE-FT -> evaluation -> report."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from mosaictool.atomic import write_text
from mosaictool.demo.base import pretrain_base
from mosaictool.demo.config import FINETUNE_LR, MAIN_FAMILIES, METHODS, PATCH_ALPHA, DemoConfig, log
from mosaictool.demo.data import data_cache, keep_data, make_texts, make_world, restore_data, shards_and_audit
from mosaictool.demo.evaluation import column_value, comp_score, evaluate_all
from mosaictool.demo.finetune import finetune_all, patch_label, wise_models
from mosaictool.demo.report import paired_markdown, plot_methods, plot_wise, summarise, table_markdown
from mosaictool.demo.significance import (
    CASE_COLUMNS,
    CONTROL_ALPHA,
    CONTROL_TREATED,
    comparisons,
    comparisons_markdown,
    positive_control,
    power_by_column,
    power_markdown,
)
from mosaictool.errors import MosaicError
from mosaictool.world.audit import relation_prior_accuracy


def _split_bench(split: str) -> str:
    if split not in ("val", "test"):
        raise MosaicError(f"--split {split!r}: choose val (for choosing hyperparameters) or test")
    return "world" if split == "test" else "world-val"


# ARO's criterion (seed 001 App. C.3: each model's lr "based on the retrieval performance in the
# COCO validation set"): the mean of R@1/5/10, image->text and text->image, on the world's val
# captions. Not the compositional columns: choosing by them rewarded the rows that move least.
RETRIEVAL_METRICS = [f"{d}_R@{k}" for d in ("image_to_text", "text_to_image") for k in (1, 5, 10)]


def val_retrieval(rows: list[dict], model: str) -> float:
    return sum(column_value(rows, model, "retrieval/coco", m) for m in RETRIEVAL_METRICS) / len(RETRIEVAL_METRICS)


def select_on_val(cfg: DemoConfig, shards: Path, base: Path, world: Path, out: Path) -> tuple[dict[str, float], str]:
    """Fine-tune every row (seed 0) at each candidate lr of the config, evaluate on the world's val
    split, and give each row the lr of its own best val retrieval (ARO's criterion, RETRIEVAL_METRICS):
    {row: lr} and the markdown table of all candidates (retrieval, and the compositional headline
    for reference). Test is never read."""
    from mosaictool.bench.base import HEADLINE

    device, workers = cfg.runtime()
    scores: dict[str, dict[float, tuple[float, float]]] = {}
    for lr in cfg.select_lrs:
        trial = dataclasses.replace(cfg, seeds=1, finetune_lr=lr)
        log(f"select on val: every row at lr {lr:g}")
        runs = finetune_all(trial, shards, base, out)
        models = [(f"{label}-s0", finals[0]) for label, finals in runs.items()]
        rows = evaluate_all(models, world, "world-val", device=device, workers=workers, families=[*MAIN_FAMILIES, "retrieval"],
                            cache=out / "evals")
        for label in runs:
            scores.setdefault(label, {})[lr] = (val_retrieval(rows, f"{label}-s0"), column_value(rows, f"{label}-s0", HEADLINE, "accuracy"))
    chosen = {label: max(by_lr, key=lambda lr: by_lr[lr][0]) for label, by_lr in scores.items()}  # ties: the first lr
    lines = ["| row | " + " | ".join(f"lr {lr:g}" for lr in cfg.select_lrs) + " |", "|---|" + "---|" * len(cfg.select_lrs)]
    for label, by_lr in scores.items():
        lines.append(f"| {label} | " + " | ".join(f"{100 * by_lr[lr][0]:.1f} ({100 * by_lr[lr][1]:.1f})"
                                                  + (" **(chosen)**" if lr == chosen[label] else "") for lr in cfg.select_lrs) + " |")
    write_text(out / "selection.json", json.dumps({
        "val_retrieval": {k: {str(lr): v[0] for lr, v in d.items()} for k, d in scores.items()},
        "val_headline": {k: {str(lr): v[1] for lr, v in d.items()} for k, d in scores.items()}, "chosen": chosen}, indent=1) + "\n")
    return chosen, "\n".join(lines)


# MosaiCLIP's parts, each taken away (or changed) in one variant: what each costs or gives, on val.
ABLATIONS: list[tuple[str, dict]] = [
    ("MosaiCLIP (the paper's)", {}),
    ("− sub-graph positives (--max-pos 1)", {"max_pos": 1}),
    ("− P(i) by containment (equal texts only)", {"containment": False}),
    ("− curriculum", {"curriculum": False}),
    ("fewer graph negatives (--max-neg 2)", {"max_neg": 2}),
    ("mean loss weighting", {"loss_weighting": "mean"}),
    ("text negatives for graph ones (not the paper's)", {"negatives": "text"}),
    # the batch, not the method: each image with its twin, as NegCLIP trains (DemoConfig.hard_images)
    ("+ hard images (NegCLIP's batch; not the paper's)", {"hard_images": "all"}),
]


def ablate_on_val(cfg: DemoConfig, shards: Path, base: Path, world: Path, out: Path) -> str:
    """MosaiCLIP and its ablations (ABLATIONS), every seed, at MosaiCLIP's lr, scored on val and
    compared with the paper's MosaiCLIP paired by seed and test case: the markdown table."""
    from mosaictool.bench.base import HEADLINE
    from mosaictool.demo.config import METHODS

    device, workers = cfg.runtime()
    label, method, options = next(row for row in METHODS if row[0] == "MosaiCLIP")
    by_batch: dict[str, list] = {}  # hard images -> its variants
    for name, change in ABLATIONS:
        row = (name, method, {**options, **{k: v for k, v in change.items() if k != "hard_images"}})
        by_batch.setdefault(change.get("hard_images", cfg.hard_images), []).append(row)
    log(f"ablation on val: {len(ABLATIONS)} MosaiCLIP variants x {cfg.seeds} seeds at lr {cfg.lr_for(label):g}")
    runs = {}
    for hard_images, rows in by_batch.items():
        trial = dataclasses.replace(cfg, finetune_lr=cfg.lr_for(label), hard_images=hard_images)
        runs.update(finetune_all(trial, shards, base, out, rows=rows))
    runs = {name: runs[name] for name, _ in ABLATIONS}
    groups = {name: [f"ablation {name}-s{seed}" for seed in range(len(finals))] for name, finals in runs.items()}
    models = [(m, path) for name, finals in runs.items() for m, path in zip(groups[name], finals)]
    results = evaluate_all(models, world, "world-val", device=device, workers=workers, families=MAIN_FAMILIES, cache=out / "evals")
    reference = ABLATIONS[0][0]
    found = comparisons(results, groups, reference=reference)
    lines = ["| variant | val headline | " + " | ".join(f"{c} − paper's" for c in CASE_COLUMNS) + " |",
             "|---|---|" + "---|" * len(CASE_COLUMNS)]
    for name in groups:
        head = sum(column_value(results, m, HEADLINE, "accuracy") for m in groups[name]) / len(groups[name])
        cells = []
        for col in CASE_COLUMNS:
            r = found.get(name, {}).get(col)
            cells.append("–" if r is None else f"{100 * r.diff:+.1f} (p={r.p:.2g})")
        lines.append(f"| {name} | {100 * head:.1f} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    write_text(out / "ablation.md", table + "\n")
    return table


def run_demo(cfg: DemoConfig) -> dict:
    """The whole job in OUT, which one demo writes at a time (a lock) and which may neither be, hold,
    nor lie inside the cache folder (a demo replaces what is in OUT with the cache's copies)."""
    from mosaictool.locks import LOCK_NAME, folder_lock
    from mosaictool.paths import Read, Write, check_outputs

    check_outputs([Write("--out", cfg.out, ("**",))], [Read("--cache-dir", cfg.cache_dir, ("**",))])
    out = Path(cfg.out)
    if out.is_dir() and not (out / "demo_config.json").is_file():
        # the demo replaces world/, shards/, texts.jsonl, runs/, ... in OUT: never in someone's own folder
        theirs = sorted(p.name for p in out.iterdir() if p.name != LOCK_NAME)
        if theirs:
            raise MosaicError(f"--out {out}: not a demo folder (no demo_config.json) and it holds {', '.join(theirs[:3])}; "
                              "the demo would replace what it finds there: choose a new or empty folder")
    with folder_lock(out, "mosaictool demo"):
        return _run_demo(cfg)


def _run_demo(cfg: DemoConfig) -> dict:
    from mosaictool.io import write_records

    out = Path(cfg.out)
    device, workers = cfg.runtime()  # a missing GPU is an error before any work
    bench = _split_bench(cfg.split)
    log(f"device: {device}")
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "demo_config.json", json.dumps(dataclasses.asdict(cfg), indent=1) + "\n")
    t0 = time.perf_counter()
    cached_data = data_cache(cfg)  # hashes mosaictool's files: once a run
    restored = restore_data(cached_data, out)
    world = make_world(cfg, out)
    texts = make_texts(cfg, world, out)
    shards, plain_shards, audited = shards_and_audit(cfg, world, texts, out)
    if not restored:
        keep_data(cached_data, out)
    # Pretraining runs alone: tried beside the text stages (a process of its own), its two torch
    # threads kept waiting on each other: in 8.5 min the text stages (~3 min alone) finished and the
    # pretraining (~6 min alone) did half its steps.
    base = pretrain_base(cfg, plain_shards, world, out)
    selection = None
    if cfg.select_on_val:
        chosen, selection = select_on_val(cfg, shards, base, world, out)
        cfg = dataclasses.replace(cfg, row_lrs=chosen, finetune_lr=None)
        write_text(out / "demo_config.json", json.dumps(dataclasses.asdict(cfg), indent=1) + "\n")
    ablation = ablate_on_val(cfg, shards, base, world, out) if cfg.ablate else None
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
    log(f"evaluate: {len(models)} checkpoints and {len(wise)} WiSE-FT points on the world's {cfg.split} split")
    # the WiSE-FT points need aro and zeroshot only; with crepe too (~0.5 s a point) they share the
    # table's pool, its loaded benchmark and the images each process decoded once
    rows = evaluate_all(models + wise, world, bench, device=device, workers=workers, families=MAIN_FAMILIES, cache=out / "evals")
    write_records(out / "results.jsonl", rows)

    summary = summarise(rows, groups)
    table = table_markdown(summary)
    wise_points = {row: [(a, comp_score(rows, name), column_value(rows, name, "zeroshot/*", "top1")) for a, name, _ in points]
                   for row, points in curves.items()}
    plot_methods(summary, out / "methods.png", cfg.split)
    plot_wise(wise_points, out / "wise_ft.png")
    minutes = (time.perf_counter() - t0) / 60
    hard_rows = [label for label, method, _ in METHODS if label in runs and cfg.row_hard_images(method)]
    if cfg.finetune_lr is not None:
        lrs = f"lr {cfg.finetune_lr:g} for every row" + (
            ", calibrated on val by the positive control (world seed 0: the lr at which NegCLIP's known gain over CLIP is "
            "clearest; README)" if cfg.finetune_lr == FINETUNE_LR else " (--finetune-lr)")
    else:
        lrs = ("each row's own lr, " + ", ".join(f"{label} {cfg.lr_for(label):g}" for label in runs)
               + ", chosen on val by the row's own val retrieval (ARO's criterion; --select-on-val, table below)")
    control = positive_control(rows, groups)
    found = comparisons(rows, groups)
    mde = power_by_column(found)
    cases = {col: r.cases for by_col in found.values() for col, r in by_col.items()}
    power = power_markdown(mde, cfg.seeds, cases)
    relation_items = json.loads((world / cfg.split / "aro" / "visual_genome_relation.json").read_text())
    blind = relation_prior_accuracy(relation_items)
    report = "\n".join([
        "# mosaictool demo: the synthetic world",
        "",
        f"Every row is fine-tuned from the same base with the same settings: {cfg.finetune_steps} steps, "
        f"{cfg.finetune_batch} images per step ("
        + (f"{', '.join(hard_rows)}: {cfg.finetune_batch // 2} images + each one's hard image, its twin (NegCLIP's hard "
           "images, ARO App. C.2); the others none" if hard_rows else "no hard images for any row")
        + f"), AdamW, cosine, warmup {min(50, cfg.finetune_steps // 10)}, {cfg.seeds} seed(s) per row; {lrs}. "
        f"World seed {cfg.world_seed}.",
        "",
        f"**{control['verdict']}**",
        "",
        "The positive control: NegCLIP must beat CLIP fine-tuned without negatives on order and relation (ARO, seed 001 "
        f"Table 6; MosaiCLIP Table 1), paired by seed and by test case, p < {CONTROL_ALPHA:g}. Until it passes, no "
        "difference between rows means anything.",
        "",
        power,
        f"The base was pretrained {cfg.pretrain_steps} steps with the plain CLIP loss (plain captions of 1-2-object "
        f"scenes, each with its arrangement twin in the batch); fine-tuning data: every image with its varied and its "
        f"plain caption. Tables on the world's **{cfg.split}** split; mean ± 95% CI over seeds. "
        f"{patch_label()} = WiSE-FT of all weights at α={PATCH_ALPHA:g} between the base and each Probe-FT seed "
        "(the Probe paper's patching).",
        f"The world places shapes by priors, as real scenes do: a reader blind to the image who knows them scores "
        f"{100 * blind:.1f} on relation (chance 50), the share a text prior alone can win (ARO's VG-Relation swaps are "
        "mostly implausible ones).",
        "attribute = VG-Attribution-style swap (micro accuracy), relation = VG-Relation-style swap, order = COCO-Order-style "
        "(1 true + 4 shuffled captions), seen/unseen = CREPE systematicity R@1 (comp negatives), productivity = CREPE "
        "productivity R@1 (mean over atom/swap/negate × complexity), recognition = zero-shot top-1 (mean over tasks).",
        "",
        table,
        "",
        *([f"Each method minus CLIP fine-tuning ({cfg.split} split), paired by seed and by test case (seeds and cases both "
           "random: two-way random-effects ANOVA, Satterthwaite t; mosaictool.analysis.stats): difference [95% CI] "
           "(p; the MDE of that comparison).", "", cases_table, ""] if (cases_table := comparisons_markdown(found)) else []),
        *(["The method under study against the control's winner, the same way:", "", versus, ""]
          if (versus := comparisons_markdown({m: r for m, r in comparisons(rows, groups, reference=CONTROL_TREATED).items()
                                              if m == "MosaiCLIP"}, reference=CONTROL_TREATED)) else []),
        *([f"Every column, paired by seed only ({cfg.seeds} seeds; scipy's paired t-test over the seeds' column values): "
           "difference ± 95% CI (p).", "", paired, ""] if (paired := paired_markdown(rows, groups)) else []),
        *(["Learning rates chosen on the **val** split: each row at each candidate (seed 0), scored by val retrieval "
           "(mean R@1/5/10 both ways on the world's val captions, ARO's criterion; in brackets the compositional "
           "headline, not used); each row takes its own best:", "",
           selection, ""] if selection else []),
        *([f"MosaiCLIP's parts on the **val** split ({cfg.seeds} seeds each, MosaiCLIP's lr; each variant minus the "
           "paper's MosaiCLIP, paired by seed and test case):", "", ablation, ""] if ablation else []),
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
        f"Total time: {minutes:.1f} min. Artifacts: {out}/ (graphs.parquet, texts.jsonl, shards/, runs/, "
        "wise/, evals/, results.jsonl).",
        "",
    ])
    write_text(out / "report.md", report)
    print(table)
    print()
    print(control["verdict"])
    if power:
        print(power)
    log(f"report: {out / 'report.md'}, plots: {out / 'methods.png'}, {out / 'wise_ft.png'} ({minutes:.1f} min)")
    return {"summary": summary, "wise": wise_points, "rows": rows, "minutes": minutes, "selection": selection,
            "control": control, "mde": mde}
