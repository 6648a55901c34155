"""Scoring the demo's checkpoints on the world's split (kept per checkpoint), and reading a column's
value out of the result rows."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

from mosaictool.demo.config import COLUMNS, digest, file_digest
from mosaictool.io import parse_json

SCORING_CODE = ("bench", "model")  # mosaictool's packages whose code decides a checkpoint's rows


def scoring_code_digest(root: Path | None = None) -> str:
    """The digest of the code that turns a checkpoint into result rows (the benchmarks and the model wrappers):
    rows cached by an older scorer lack what a newer one adds (a new column's subtask) or differ, and are not
    reused."""
    root = root or Path(__file__).resolve().parents[1]
    files = sorted(p for sub in SCORING_CODE for p in (root / sub).rglob("*.py"))
    return digest([(str(p.relative_to(root)), file_digest(p)) for p in files])


def evaluate_all(models: list[tuple[str, Path]], world: Path, split_bench: str, device: str = "cpu", workers: int = 0,
                 families: list[str] | None = None, cache: Path | None = None) -> list[dict]:
    """Result rows of every (label, checkpoint) on `split_bench` (`families`: a subset of the world's).
    With `cache`, a checkpoint's rows are kept under the digest of its bytes, the world, the split,
    the families and the scoring code (scoring_code_digest), and reused: a second run, or a run whose settings share checkpoints with an
    earlier one (the val selection's seed 0), evaluates only what is new. On a CPU the checkpoints
    are scored in one process per core, each with one torch thread (the tiny model keeps two threads
    half idle), after the benchmark's items are loaded once; one thread everywhere, so the scores do
    not depend on how many processes there were."""
    from mosaictool.bench import get
    from mosaictool.bench.engine import EngineOptions, prepare
    from mosaictool.world.generate import load_manifest

    if not models:
        return []
    scope = {"world": load_manifest(world), "bench": split_bench, "families": families, "item_hits": True,
             "scoring": scoring_code_digest(), **({"threads": 1} if device == "cpu" else {})}
    keys = {label: digest({**scope, "checkpoint": file_digest(path)}) for label, path in models} if cache else {}
    rows: list[dict] = []
    todo = []
    for label, path in models:
        hit = cache / f"{keys[label]}.jsonl" if cache else None
        if hit is not None and hit.is_file():
            rows += [{**parse_json(line, f"{hit}:{n}", hint="delete it to score again"), "model": label}
                     for n, line in enumerate(hit.read_text().splitlines(), 1)]
        else:
            todo.append((label, path))
    if todo:
        options = EngineOptions(quiet=True, device=device, workers=workers, batch_size=256 if device.startswith("cuda") else 64,
                                item_hits=True)
        _PREPARED[:] = [prepare(get(split_bench), Path(world), families, options)]
        forks = sys.platform.startswith("linux")  # the workers inherit the loaded items
        at_once = min(len(todo), os.cpu_count() or 1) if device == "cpu" and forks else 1
        try:
            if at_once > 1:
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                import open_clip  # noqa: F401  imported once here, not ~4 s in every worker

                context = multiprocessing.get_context("fork")
                with ProcessPoolExecutor(at_once, mp_context=context) as pool:
                    new = [r for part in pool.map(_score_one, [(label, path, options) for label, path in todo]) for r in part]
            else:
                new = [r for label, path in todo for r in _score_one((label, path, options))]
        finally:
            _PREPARED.clear()
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


_PREPARED: list = []  # the benchmark's loaded items while evaluate_all runs (forked workers read it)


def _score_one(job) -> list[dict]:
    """One checkpoint's rows, with one torch thread on a CPU (restored after)."""
    import torch

    from mosaictool.bench.engine import score_model
    from mosaictool.model.openclip import load_checkpoint

    label, path, options = job
    threads = torch.get_num_threads()
    if options.device == "cpu":
        torch.set_num_threads(1)
    try:
        return list(score_model(_PREPARED, label, load_checkpoint(path, device=options.device), options))
    finally:
        torch.set_num_threads(threads)


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
