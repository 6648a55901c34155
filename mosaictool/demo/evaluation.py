"""Scoring the demo's checkpoints on the world's split (kept per checkpoint), and reading a column's
value out of the result rows."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from mosaictool.demo.config import COLUMNS, digest, file_digest


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
    scope = {"world": load_manifest(world), "bench": split_bench, "families": families, "item_hits": True}
    keys = {label: digest({**scope, "checkpoint": file_digest(path)}) for label, path in models} if cache else {}
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
        new = list(evaluate([(bench, families)], loaded, world, EngineOptions(quiet=True, device=device, workers=workers, batch_size=batch, item_hits=True)))
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



def comp_score(rows: list[dict], model: str) -> float:
    vals = [column_value(rows, model, sub, metric) for col, sub, metric in COLUMNS if col in ("attribute", "relation", "order")]
    vals = [v for v in vals if not math.isnan(v)]
    return sum(vals) / len(vals) if vals else float("nan")
