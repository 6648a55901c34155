"""Result rows as a Markdown table (one column per model) and as a PNG bar chart comparing models."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from mosaictool.atomic import atomic_output
from mosaictool.atomic import write_text as atomic_write_text
from mosaictool.bench.base import HEADLINE

COUNT_METRICS = {"groups_kept", "skipped_missing_images", "cases_without_negatives"}
NOT_PLOTTED = COUNT_METRICS | {"mu_c", "micro_accuracy"}


def is_fraction(metric: str) -> bool:
    return metric not in COUNT_METRICS and "rank" not in metric


def fmt(value: float | None, metric: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100 * value:.2f}" if is_fraction(metric) else f"{value:.4g}"


def _models(rows: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(r["model"] for r in rows))


def _keys(rows: Sequence[dict], detail: bool) -> list[tuple[str, str, str]]:
    keys = dict.fromkeys((r["benchmark"], r["subtask"], r["metric"]) for r in rows if detail or not r.get("detail"))
    # headline rows last within their benchmark, benchmarks in first-seen order
    bench_order = {b: i for i, b in enumerate(dict.fromkeys(k[0] for k in keys))}
    return sorted(keys, key=lambda k: (bench_order[k[0]], k[1] == HEADLINE))


def markdown(rows: Sequence[dict], *, detail: bool = False) -> str:
    """One line per (benchmark, subtask, metric), one column per model; fractions as percent."""
    models = _models(rows)
    table = {(r["model"], r["benchmark"], r["subtask"], r["metric"]): r for r in rows}
    lines = [
        "| benchmark | subtask | metric | n | " + " | ".join(models) + " |",
        "|---|---|---|---:|" + "---:|" * len(models),
    ]
    for bench, sub, metric in _keys(rows, detail):
        cells = [table.get((m, bench, sub, metric)) for m in models]
        n = next((c["n"] for c in cells if c is not None), "")
        values = [fmt(c["value"] if c else None, metric) for c in cells]
        name = f"**{sub}**" if sub == HEADLINE else sub
        lines.append(f"| {bench} | {name} | {metric}{' (%)' if is_fraction(metric) else ''} | {n} | " + " | ".join(values) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[dict], path: str | os.PathLike) -> None:
    """Grouped horizontal bars: one group per main (benchmark, subtask, metric), one bar per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = _models(rows)
    keys = [k for k in _keys(rows, detail=False) if k[2] not in NOT_PLOTTED and is_fraction(k[2])]
    table = {(r["model"], r["benchmark"], r["subtask"], r["metric"]): r["value"] for r in rows}
    height = 0.8 / max(len(models), 1)
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.22 * len(keys) * max(len(models), 1) + 1)))
    for j, model in enumerate(models):
        ys = [i + j * height for i in range(len(keys))]
        vals = [100 * (table.get((model, *k)) or 0.0) for k in keys]
        ax.barh(ys, [0 if v is None or math.isnan(v) else v for v in vals], height=height, label=model)
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(keys))])
    ax.set_yticklabels([f"{b} · {s} · {m}" for b, s, m in keys], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("%")
    ax.set_xlim(0, 100)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_output(path, flag="--plot") as tmp:
            fig.savefig(tmp, dpi=120, format="png")
    finally:
        plt.close(fig)


def write_text(path: str | os.PathLike, text: str, flag: str = "--report") -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, flag=flag)
