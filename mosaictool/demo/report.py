"""The demo's report: its tables, the statistics they print, and its plots."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from mosaictool.analysis.stats import format_p, holm
from mosaictool.atomic import atomic_output
from mosaictool.demo.config import COLUMNS, FINETUNE_LR, METHODS, MINED_NEIGHBOURS, PATCH_ALPHA, DemoConfig
from mosaictool.demo.evaluation import column_value, comp_score
from mosaictool.demo.finetune import MINED_TWINS, patch_label, twins_sentence
from mosaictool.demo.significance import (
    CONTROL_ALPHA,
    CONTROL_TREATED,
    HEADLINE_COLUMN,
    HEADLINE_METHOD,
    comparisons,
    comparisons_markdown,
    headline,
    holm_family,
    positive_control,
    power_by_column,
    power_markdown,
)
from mosaictool.demo.tuning import describe
from mosaictool.io import read_json


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
    and sees the same batches), per column: difference ± 95% CI (p of the paired t-test, Holm-adjusted
    over the table: exploratory)."""
    methods = [m for m, models in groups.items()
               if m != reference and len(models) == len(groups.get(reference, [])) and len(models) >= 2]
    found = {(m, col): paired_diff([column_value(rows, x, sub, metric) for x in groups[reference]],
                                   [column_value(rows, x, sub, metric) for x in groups[m]])
             for m in methods for col, sub, metric in COLUMNS}
    tested = [k for k, (d, _, _) in found.items() if not math.isnan(d)]
    adjusted = dict(zip(tested, holm([found[k][2] for k in tested])))
    lines = ["| method − " + reference + " | " + " | ".join(c for c, _, _ in COLUMNS) + " |",
             "|---|" + "---|" * len(COLUMNS)]
    for m in methods:
        cells = []
        for col, _, _ in COLUMNS:
            d, half, _ = found[m, col]
            cells.append("–" if math.isnan(d) else f"{100 * d:+.1f} ± {100 * half:.1f} ({format_p(adjusted[m, col])})")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
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
    with atomic_output(path, flag="--out") as tmp:
        fig.savefig(tmp, dpi=120, format="png")
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
    with atomic_output(path, flag="--out") as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


@dataclass
class Report:
    text: str  # report.md
    table: str
    summary: dict
    wise_points: dict
    control: dict
    headline: dict | None
    mde: dict
    power: str


def mined_twins_line(runs: dict[str, list[Path]], hard_rows: list[str]) -> str:
    """How many of the first hard-image row's mined neighbours are the images' twins (its seed 0's
    MINED_TWINS, written beside its mined hard images), or "" when that row's were not mined."""
    if not hard_rows or not runs.get(hard_rows[0]):
        return ""
    found = runs[hard_rows[0]][0].parent / MINED_TWINS
    return f"Mined hard images ({hard_rows[0]}): {twins_sentence(read_json(found))}." if found.is_file() else ""


def build_report(cfg: DemoConfig, rows: list[dict], groups: dict[str, list[str]], runs: dict, curves: dict, world: Path,
                 out: Path, minutes: float, *, selection: str | None = None, sections: list | None = None,
                 audited: str = "", preregistration: str = "") -> Report:
    """report.md of a demo run, and the plots beside it (methods.png, wise_ft.png); `preregistration`: its
    statement (mosaictool.demo.prereg.report_line), right after the settings."""
    from mosaictool.world.audit import relation_forms_prior_accuracy, relation_prior_accuracy

    summary = summarise(rows, groups)
    table = table_markdown(summary)
    wise_points = {row: [(a, comp_score(rows, name), column_value(rows, name, "zeroshot/*", "top1")) for a, name, _ in points]
                   for row, points in curves.items()}
    plot_methods(summary, out / "methods.png", cfg.split)
    plot_wise(wise_points, out / "wise_ft.png")
    hard_rows = [label for label, method, _ in METHODS if label in runs and cfg.row_hard_images(method)]
    hard_image = ("its world twin (an oracle, --hard-image-source twin-oracle: a minimal pair aimed at the test, where "
                  "NegCLIP's paper mined nearest neighbours" if cfg.hard_image_source == "twin-oracle" else
                  f"one of its {MINED_NEIGHBOURS} nearest neighbours in the base's image space, mined once before fine-tuning "
                  "(NegCLIP's hard images")
    mined_twins = mined_twins_line(runs, hard_rows)
    if cfg.finetune_lr is not None:
        lrs = f"lr {cfg.finetune_lr:g} for every row" + (
            ", calibrated on val by the positive control (world seed 0: the lr at which NegCLIP's known gain over CLIP is "
            "clearest; docs/results.md)" if cfg.finetune_lr == FINETUNE_LR else " (--finetune-lr)")
    else:
        lrs = ("each row's own settings, " + "; ".join(f"{label} {describe(cfg.lr_for(label), cfg.row_options.get(label, {}))}"
                                                      for label in runs)
               + f", chosen on val by one criterion, val retrieval (ARO's), from {cfg.tuning_budget} trials per row over its "
               "own grid (--select-on-val, table below)" if cfg.select_on_val else
               "each row's own lr, " + ", ".join(f"{label} {cfg.lr_for(label):g}" for label in runs))
    control = positive_control(rows, groups)
    head = headline(rows, groups)
    found = comparisons(rows, groups)
    mde = power_by_column(found)
    cases = {col: r.cases for by_col in found.values() for col, r in by_col.items()}
    power = power_markdown(mde, cfg.seeds, cases)
    versus = {m: r for m, r in comparisons(rows, groups, reference=CONTROL_TREATED).items() if m == HEADLINE_METHOD}
    relation_items = read_json(world / cfg.split / "aro" / "visual_genome_relation.json")
    blind = relation_prior_accuracy(relation_items)
    forms_file = world / cfg.split / "relforms" / "relation_forms.jsonl"
    blind_forms = (relation_forms_prior_accuracy(json.loads(line) for line in forms_file.read_text().splitlines() if line.strip())
                   if forms_file.is_file() else None)
    cases_table = comparisons_markdown(found, adjusted=holm_family(found))
    # the headline's p is confirmatory, at its own level: the table's other columns are one Holm family without it
    exploratory = {m: {c: r for c, r in by_col.items() if c != HEADLINE_COLUMN} for m, by_col in versus.items()}
    versus_table = comparisons_markdown(versus, reference=CONTROL_TREATED, adjusted=holm_family(exploratory))
    paired = paired_markdown(rows, groups)
    text = "\n".join([
        "# mosaictool demo: the synthetic world",
        "",
        f"Every row is fine-tuned from the same base with the same settings: {cfg.finetune_steps} steps, "
        f"{cfg.finetune_batch} images per step ("
        + (f"{', '.join(hard_rows)}: {cfg.finetune_batch // 2} images + each one's hard image, {hard_image}, "
           "Yuksekgonul et al. 2023, App. C.2); the others none" if hard_rows else "no hard images for any row")
        + f"), AdamW, cosine, warmup {min(50, cfg.finetune_steps // 10)}, {cfg.seeds} seed(s) per row; {lrs}. "
        f"World seed {cfg.world_seed}.",
        "",
        *([preregistration, ""] if preregistration else []),
        *([mined_twins, ""] if mined_twins else []),
        f"**{control['verdict']}**",
        "",
        *([f"**{head['verdict']}**", ""] if head else []),
        "The positive control: NegCLIP must beat CLIP fine-tuned without negatives on order and relation (Yuksekgonul et "
        f"al. 2023, Table 6; Singh et al. 2023, Table 1), paired by seed and by test case, p < {CONTROL_ALPHA:g} on both "
        "(an intersection-union test: its level is that α). Until it passes, no difference between rows means anything.",
        "",
        "Statistics: each comparison pairs seed s of one row with seed s of the other over the same test cases; seeds "
        "and cases are both random (two-way random-effects ANOVA, the seed mean square never pooled), and the test is "
        f"Student's t with {max(cfg.seeds - 1, 1)} df (seeds − 1: exact when the seed noise dominates, conservative "
        "otherwise; its size and power were checked by simulation at this design, tests/test_stats_calibration.py). "
        "p-values below 1e-4 are printed as p < 1e-4. **Multiplicity:** the control and the headline are confirmatory "
        "(fixed before any run); every other p in this report is exploratory and Holm-adjusted over the table it is "
        "printed in.",
        "",
        power,
        f"The base was pretrained {cfg.pretrain_steps} steps with the plain CLIP loss (plain captions of 1-2-object "
        f"scenes, each with its arrangement twin in the batch); fine-tuning data: every image with its varied and its "
        f"plain caption. Tables on the world's **{cfg.split}** split; mean ± 95% CI over seeds. "
        f"{patch_label()} = WiSE-FT of all weights at α={PATCH_ALPHA:g} between the base and each Probe-FT seed "
        "(the Probe paper's patching).",
        f"The world places shapes by priors, as real scenes do: a reader blind to the image who knows them scores "
        f"{100 * blind:.1f} on relation (chance 50), the share a text prior alone can win (ARO's VG-Relation swaps are "
        "mostly implausible ones)."
        + (f" On the relation-form columns (rel ...) the same reader scores {100 * blind_forms['accuracy']:.1f} (every item "
           f"is an image and its twin, one with the prior and one against it) and {100 * blind_forms['group']:.0f} on the "
           "group score." if blind_forms else ""),
        "attribute = VG-Attribution-style swap (micro accuracy), relation = VG-Relation-style swap, order = COCO-Order-style "
        "(1 true + 4 shuffled captions), seen/unseen = CREPE systematicity R@1 (comp negatives), productivity = CREPE "
        "productivity R@1 (mean over atom/swap/negate × complexity), recognition = zero-shot top-1 (mean over tasks). "
        "rel copular / sub-graph / fronted / with = relation on an image and its twin (the two objects trade cells), the "
        "caption against its swap on each image, said as \"the A is REL the B\" (VG-Relation's and the plain captions' "
        "form), \"a A REL a B\" (MosaiCLIP's sub-graph texts), \"REL the B is the A\" and \"a B with a A REL it\" (held "
        "out: no train text has these forms); rel group = Winoground's group score (Thrush et al. 2022) in the held-out "
        "forms, rel group trained = the same in the copular and sub-graph forms pooled (NegCLIP's and MosaiCLIP's own "
        "forms, one each); rel violate = the held-out forms on the images whose relation goes against the placement prior. "
        f"The confirmatory headline is on {HEADLINE_COLUMN} (docs/demo.md, \"headline measure\").",
        "",
        table,
        "",
        *([f"Each method minus CLIP fine-tuning ({cfg.split} split), paired by seed and by test case: difference [95% CI] "
           "(Holm-adjusted p over this table; the estimated MDE of that comparison).", "", cases_table, ""]
          if cases_table else []),
        *([f"The method under study against the control's winner, the same way ({HEADLINE_COLUMN} is the confirmatory "
           "headline above; the other columns Holm-adjusted over this table):", "", versus_table, ""] if versus_table else []),
        *([f"Every column, paired by seed only ({cfg.seeds} seeds; scipy's paired t-test over the seeds' column values, "
           "Holm-adjusted over this table): difference ± 95% CI (p).", "", paired, ""] if paired else []),
        *([f"Settings chosen on the **val** split with an equal budget: {cfg.tuning_budget} fine-tuning runs per row over its "
           "own grid (the lr for every row; MosaiCLIP's p_obj and caps, FSC-CLIP's loss components, as their papers tuned "
           f"them; drawn with seed {cfg.tuning_seed} where the grid is larger, repeated at further seeds where it is smaller), "
           "each point scored by val retrieval (mean R@1/5/10 both ways on the world's val captions, ARO's criterion; the "
           "mean over its runs; in brackets the compositional headline, not used); each row takes its own best:", "",
           selection, ""] if selection else []),
        *[part for section in sections or [] for part in (f"## {section.title}", "", section.text, "")],
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
    return Report(text=text, table=table, summary=summary, wise_points=wise_points, control=control, headline=head,
                  mde=mde, power=power)
