"""The demo's statistics, tables and plots."""

from __future__ import annotations

import math
from pathlib import Path

from mosaictool.atomic import atomic_output
from mosaictool.demo.config import COLUMNS
from mosaictool.demo.evaluation import column_value


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
