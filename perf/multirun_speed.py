"""Fine-tuning throughput of the demo's runs: each run alone (the pool the demo used: one process of
one torch thread per core, each training one run after another with `train`) against the runs'
steps taken together (training.train_many: each process trains its share of the runs as one
stacked model, demo.finetune.share_out), alternated in one session, on the demo's rows and settings.

    python perf/multirun_speed.py DEMO_OUT [--steps 100] [--seeds 5] [--processes 2] [--repeats 2] [--steady]

DEMO_OUT is a `mosaictool demo` folder (its shards/ and base.pt; `demo --quick` makes a small one:
the step's cost does not depend on the world's size). The demo's settings otherwise: 32 images per
step (NegCLIP 16 + each one's hard image), lr 5e-4, warmup steps // 10, every registered row.
Prints, per way, the wall time (median over the repeats), runs per minute and the CPU seconds the
processes used (robust to other load on a shared machine, which stretches wall time), their ratios;
the steady-state step ratio (from each run's metrics.jsonl: the median seconds of one step of every
run, alone summed over the runs, together over each process's groups; without the runs' set-up,
which weighs more at fewer steps than the demo's 400); and how far each run's weights are from its
weights alone: |together - alone| / |alone - base|. With --steady instead, in this process (one
thread), the CPU seconds of the steps alone (set-up left out) of one process's share of the runs:
each run's steps alone (loop.run_loop), then all of them together (multirun.train_stacked),
alternated: the ratio the pool reaches when set-up is negligible (the demo's 400 steps). Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from mosaictool.console import console_logging
from mosaictool.demo.config import DemoConfig
from mosaictool.demo.finetune import _expected_texts, _train_in_processes, planned_runs, share_out
from mosaictool.model.openclip import model_config, read_checkpoint
from mosaictool.training import ShardCache, train
from mosaictool.training.loop import run_loop, setup
from mosaictool.training.multirun import shared_key, train_stacked
from mosaictool.training.transform import ImagePrep

SHARED: ShardCache | None = None  # the pool's processes read the parent's (forked), as the demo's did


def _alone(tc) -> str:
    torch.set_num_threads(1)
    return str(train(tc, shards=SHARED))


def train_alone(todo: list, processes: int) -> None:
    """The demo's former pool: the longest runs first, each alone in the next free process."""
    todo = sorted(todo, key=lambda tc: -_expected_texts(tc.method, tc.method_options, tc.steps))
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
        list(pool.map(_alone, todo))


def train_together(todo: list, processes: int) -> None:
    _train_in_processes(share_out(todo, processes), SHARED)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def step_seconds(run: Path) -> float:
    """The median wall seconds of the run's steps (its images per step / samples per s), the first
    ten left out (tokenizing the texts seen first)."""
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()][10:]
    images = json.loads((run / "config.json").read_text())
    per_step = images["batch_size"] * (2 if images["record_hard_images"] else 1)
    return statistics.median(per_step / line["samples_per_s"] for line in lines)


def steady_work(way: str, todo: list, processes: int) -> float:
    """Seconds of one step of every run: alone, the sum over runs; together, over each process's groups
    (runs of one process with the same images per step, whose steps are one)."""
    if way == "alone":
        return sum(step_seconds(Path(tc.out)) for tc in todo)
    total = 0.0
    for share in share_out(todo, processes):
        groups: dict[tuple, list] = {}
        for tc in share:
            groups.setdefault((tc.batch_size, tc.record_hard_images), []).append(tc)
        total += sum(statistics.median(step_seconds(Path(tc.out)) for tc in g) for g in groups.values())
    return total


def steady_cpu(cfg: DemoConfig, shards: Path, base: Path, tmp: Path, processes: int, repeats: int) -> None:
    """CPU seconds of the steps of one process's share, alone vs together (see the module doc)."""
    torch.set_num_threads(1)
    cpu: dict[str, list[float]] = {"alone": [], "together": []}
    for r in range(repeats):
        for way in (["alone", "together"] if r % 2 == 0 else ["together", "alone"]):
            _, todo = planned_runs(cfg, shards, base, tmp / f"steady-{way}{r}")
            share = share_out(todo, processes)[0]
            fresh = ShardCache()  # no texts tokenized by the way measured before
            fresh.decode(str(shards), ImagePrep.size_of(model_config(cfg.model)))
            runs = [setup(tc, False, fresh) for tc in share]
            c = time.process_time()
            if way == "alone":
                for run in runs:
                    run_loop(run)
            else:
                groups: dict[tuple, list] = {}
                for run in runs:
                    groups.setdefault(shared_key(run), []).append(run)
                for group in groups.values():
                    train_stacked(group)
            cpu[way].append(time.process_time() - c)
    alone, together = statistics.median(cpu["alone"]), statistics.median(cpu["together"])
    steps = len(share) * cfg.finetune_steps
    print(f"steady state, one process's share ({len(share)} runs, {cfg.finetune_steps} steps, 1 thread, CPU seconds of "
          f"the steps, median of {repeats} alternated): alone {alone:.1f} s ({1000 * alone / steps:.1f} ms a run-step), "
          f"together {together:.1f} s ({1000 * together / steps:.1f} ms): {alone / together:.2f}x")


def distance(a: Path, b: Path, base: dict) -> float:
    wa, wb = read_checkpoint(a)["state_dict"], read_checkpoint(b)["state_dict"]
    diff = torch.cat([(wa[k] - wb[k]).flatten() for k in wb]).norm()
    moved = torch.cat([(wb[k] - base[k]).flatten() for k in wb]).norm()
    return float(diff / moved)


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    global SHARED
    import open_clip  # noqa: F401  imported before the forks, as the demo does

    ap = argparse.ArgumentParser()
    ap.add_argument("demo_out")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steady", action="store_true", help="only the steps' CPU time, in this process")
    args = ap.parse_args()
    demo = Path(args.demo_out)
    model = json.loads((demo / "demo_config.json").read_text())["model"]
    cfg = DemoConfig(seeds=args.seeds, finetune_steps=args.steps, finetune_batch=32, model=model, device="cpu",
                     parallel_runs=args.processes)
    shards, base = demo / "shards", demo / "base.pt"
    SHARED = ShardCache()
    SHARED.decode(str(shards), ImagePrep.size_of(model_config(model)))
    tmp = Path(tempfile.mkdtemp(prefix="multirun-speed-"))
    if args.steady:
        steady_cpu(cfg, shards, base, tmp, args.processes, args.repeats)
        return
    ways = {"alone": train_alone, "together": train_together}
    wall: dict[str, list[float]] = {w: [] for w in ways}
    cpu: dict[str, list[float]] = {w: [] for w in ways}
    finals: dict[str, dict] = {}
    steady: dict[str, list[float]] = {w: [] for w in ways}
    n_runs = 0
    for r in range(args.repeats):
        for way in (list(ways) if r % 2 == 0 else list(ways)[::-1]):  # alternated: load from others hits both
            runs, todo = planned_runs(cfg, shards, base, tmp / f"{way}{r}")
            n_runs = len(todo)
            c, t = children_cpu(), time.perf_counter()
            ways[way](todo, args.processes)
            wall[way].append(time.perf_counter() - t)
            cpu[way].append(children_cpu() - c)
            steady[way].append(steady_work(way, todo, args.processes))
            finals[way] = runs
    print(f"{n_runs} runs ({len(runs)} rows x {args.seeds} seeds), {args.steps} steps, {args.processes} processes of "
          f"one thread, median of {args.repeats} alternated:")
    for way in ways:
        w, c = statistics.median(wall[way]), statistics.median(cpu[way])
        print(f"  {way:9s} {w:7.1f} s wall ({60 * n_runs / w:5.1f} runs/min), {c:7.1f} CPU s ({c / n_runs:.1f} per run)")
    ratio_wall = statistics.median(wall["alone"]) / statistics.median(wall["together"])
    ratio_cpu = statistics.median(cpu["alone"]) / statistics.median(cpu["together"])
    ratio_steady = statistics.median(steady["alone"]) / statistics.median(steady["together"])
    print(f"  together / alone throughput: {ratio_wall:.2f}x by wall time, {ratio_cpu:.2f}x by CPU time, "
          f"{ratio_steady:.2f}x by steady-state step time ({statistics.median(steady['alone']):.2f} vs "
          f"{statistics.median(steady['together']):.2f} s for one step of every run)")
    base_weights = read_checkpoint(base)["state_dict"]
    worst = {label: max(distance(a, b, base_weights) for a, b in zip(finals["together"][label], finals["alone"][label]))
             for label in finals["alone"]}
    print("  |together - alone| / |alone - base|, worst seed per row: "
          + ", ".join(f"{label} {d:.1e}" for label, d in worst.items()))


if __name__ == "__main__":
    main()
