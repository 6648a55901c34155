"""Fine-tuning runs: every row x seed from the base (in parallel processes on a CPU), and WiSE-FT of
their weights."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections import defaultdict
from pathlib import Path

from mosaictool.demo.config import METHODS, PATCH_ALPHA, PATCH_ROW, WISE_ROWS, DemoConfig, digest, file_digest, log, slug


def _expected_texts(method: str, options: dict, steps: int) -> int:
    """Texts a run encodes per image over its steps (the slots of every step): the longest runs go
    to the pool first, so that no core waits alone for one at the end."""
    from mosaictool.methods import create

    m = create(method, options)
    return sum(sum(m.slots(step, steps)) for step in range(steps))


def finetune_all(cfg: DemoConfig, shards: Path, base: Path | None, out: Path,
                 rows: list[tuple[str, str, dict]] | None = None, lock: str | None = None) -> dict[str, list[Path]]:
    """Every row x seed from the base, all with the same steps and images per step (hard images as
    cfg.hard_images says, cfg.row_batch), each at its lr (cfg.lr_for); `lock` "image" or "text"
    freezes that tower (open_clip's lock conventions); with `base` None every run starts from a random
    initialisation (its seed's: pretraining from scratch). A run is reused only when its base and
    settings are the same (its folder is named by their digest), so changing a flag never returns a
    stale run."""
    from mosaictool.methods import get as get_method
    from mosaictool.training import TrainConfig, train

    device, workers = cfg.runtime()
    at_once = cfg.runs_at_once()
    base_sha = file_digest(base) if base is not None else None
    recipe = shards.with_name(shards.name + ".recipe.json")  # what the shards hold: a new recipe, new runs
    data_sha = file_digest(recipe) if recipe.is_file() else None
    runs: dict[str, list[Path]] = defaultdict(list)
    todo: list[TrainConfig] = []
    for seed in range(cfg.seeds):
        for label, method, options in rows or METHODS:
            declared = {o.name for o in get_method(method).options}  # the demo's --max-pos reaches who has it
            options = {**{k: v for k, v in (("max_pos", cfg.max_pos), ("max_neg", cfg.max_neg)) if k in declared}, **options}
            tc = TrainConfig(data=str(shards), out="", method=method, method_options=options, model=cfg.model,
                             pretrained=str(base) if base is not None else None, augment=False, steps=cfg.finetune_steps, lr=cfg.lr_for(label),
                             batch_size=cfg.row_batch(method), warmup=min(50, cfg.finetune_steps // 10),
                             record_hard_images=cfg.row_hard_images(method), seed=seed, quiet=not sys.stderr.isatty(),
                             lock_image=lock == "image", lock_text=lock == "text")
            threads = 1 if at_once > 1 else None
            key = digest({**dataclasses.asdict(tc), "quiet": None, "base": base_sha, "data": data_sha,
                           **({"threads": threads} if threads else {})})
            run = out / "runs" / f"{slug(label)}-seed{seed}-{key}"
            final = run / "final.pt"
            if not final.is_file():
                if run.exists():
                    shutil.rmtree(run)
                log(f"fine-tune: {label}, seed {seed}, {cfg.finetune_steps} steps, lr {cfg.lr_for(label):g}, "
                     f"hard images {'on' if tc.record_hard_images else 'off'}")
                # device, loader workers and where the images wait are runtime: not in the run's digest
                todo.append(dataclasses.replace(tc, out=str(run), device=device, num_workers=workers,
                                                images_on_device=device.startswith("cuda")))
            runs[label].append(final)
    if at_once > 1 and len(todo) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        import open_clip  # noqa: F401  imported once here: each forked run spent ~4 s importing it

        from mosaictool.model.openclip import model_config
        from mosaictool.training.data import ImagePrep, decode_shard_images

        log(f"fine-tuning {len(todo)} runs, {min(at_once, len(todo))} at once (one thread each)")
        # indexed and decoded once here, read by every forked run: a CLIP run 22.3 -> 20.5 s (the
        # same weights), for 4.4 s here
        decode_shard_images(str(shards), ImagePrep.size_of(model_config(cfg.model)))
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

    from mosaictool.training import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return str(train(tc))
    finally:
        torch.set_num_threads(threads)


def _wise(base: Path, finetuned: Path, alphas: list[float], folder: Path, device: str, scope: str = "all") -> list[Path]:
    """WiSE-FT checkpoints of `scope`'s weights (all: FSC-CLIP's; visual: MosaiCLIP_WiSE-FT's), written
    once per (base, fine-tuned run, scope, alpha): the folder is named by the base's digest and the run
    (itself named by its settings), so a second demo reuses them and their kept evaluations."""
    from mosaictool.model.wise_ft import wise_ft

    key = [file_digest(base), str(finetuned.parent.name)] + ([] if scope == "all" else [scope])
    folder = folder.with_name(f"{folder.name}-{digest(key)}")
    paths = [folder / f"wise_ft_alpha_{a:.3f}.pt" for a in alphas]
    if all(p.is_file() for p in paths):
        return paths
    return wise_ft(str(base), str(finetuned), alphas, out=folder, scope=scope, device=device)


def wise_visual(cfg: DemoConfig, base: Path, finals: list[Path], out: Path, alpha: float) -> list[Path]:
    """MosaiCLIP_WiSE-FT (Singh et al. 2023, Sec. 3.6): the image tower of each run interpolated with
    the base's at `alpha`, the text tower fine-tuned."""
    device, _ = cfg.runtime()
    return [_wise(base, final, [alpha], out / "wise" / f"visual-seed{seed}", device, scope="visual")[0]
            for seed, final in enumerate(finals)]


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
        log(f"wise-ft: {row} seed 0, all weights, alpha in {list(cfg.wise_alphas)}")
        paths = dict(zip(inner, _wise(base, runs[row][0], inner, out / "wise" / slug(row), device))) if inner else {}
        curves[row] = [(a, "base" if a == 0 else f"{row}-s0" if a == 1 else f"wise-{slug(row)}-a{a:g}", paths.get(a))
                       for a in cfg.wise_alphas]
    patched: dict[str, Path] = {}
    if PATCH_ROW in runs:
        log(f"wise-ft: {PATCH_ROW} patched, all weights, alpha {PATCH_ALPHA:g}, every seed")
        for seed, final in enumerate(runs[PATCH_ROW]):
            [path] = _wise(base, final, [PATCH_ALPHA], out / "wise" / f"{slug(PATCH_ROW)}-patched-seed{seed}", device)
            patched[f"{patch_label()}-s{seed}"] = path
    return curves, patched


def patch_label() -> str:
    return f"{PATCH_ROW} patched (α={PATCH_ALPHA:g})"
