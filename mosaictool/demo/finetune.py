"""Fine-tuning runs: every row x seed from the base (in parallel processes on a CPU), and WiSE-FT of
their weights."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from mosaictool.demo.config import METHODS, PATCH_ALPHA, PATCH_ROW, WISE_ROWS, DemoConfig, digest, file_digest, slug
from mosaictool.errors import MosaicError

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # the demo's stages import torch only where they train
    from mosaictool.training.shards import ShardCache


def _expected_texts(method: str, options: dict, steps: int) -> int:
    """Texts a run encodes per image over its steps (the slots of every step): what a run costs, beside
    its images, when the runs are shared out between processes."""
    from mosaictool.methods import create

    m = create(method, options)
    return sum(sum(m.slots(step, steps)) for step in range(steps))


def finetune_all(cfg: DemoConfig, shards: Path, base: Path | None, out: Path,
                 rows: list[tuple[str, str, dict]] | None = None, lock: str | None = None,
                 shard_cache: ShardCache | None = None, miner: Path | None = None) -> dict[str, list[Path]]:
    """Every row x seed from the base, all with the same steps and images per step (hard images as
    cfg.hard_images says, cfg.row_batch), each at its lr (cfg.lr_for); `lock` "image" or "text"
    freezes that tower (open_clip's lock conventions); with `base` None every run starts from a random
    initialisation (its seed's: pretraining from scratch). A run is reused only when its base and
    settings are the same (its folder is named by their digest), so changing a flag never returns a
    stale run. The runs train with training.train_many: those that share their steps' shape take
    them together (the rows with the same images per step, every seed), on a CPU in
    cfg.runs_at_once() forked processes of one thread, each with its share of every row.
    `shard_cache`: the shards' index (and images, decoded here) for every run. `miner`: the model in
    whose image space mined hard images are mined (share_mined; default `base`: the model the runs
    start from, as NegCLIP's paper mined with the CLIP it fine-tuned)."""
    from mosaictool.training import ShardCache

    miner = miner if miner is not None else base
    runs, todo = planned_runs(cfg, shards, base, out, rows, lock, miner)
    if not todo:
        return runs
    import open_clip  # noqa: F401  imported once here: each forked process spent ~4 s importing it

    from mosaictool.model.openclip import model_config
    from mosaictool.training.transform import ImagePrep

    at_once = cfg.runs_at_once()
    shard_cache = shard_cache if shard_cache is not None else ShardCache()
    # indexed and decoded once here, read by every run (and every forked process): a CLIP run
    # 22.3 -> 20.5 s (the same weights), for 4.4 s here; on a GPU, one copy of them on the device
    shard_cache.decode(str(shards), ImagePrep.size_of(model_config(cfg.model)))
    if miner is not None:
        share_mined(todo, miner, out, shard_cache)
    shares = share_out(todo, min(at_once, len(todo)))
    if len(shares) > 1:
        logger.info(f"fine-tuning {len(todo)} runs in {len(shares)} processes (one thread each; "
                   f"{', '.join(str(len(s)) for s in shares)} runs)")
        _train_in_processes(shares, shard_cache)
    elif at_once > 1:
        _train_one_thread(todo, shard_cache)  # the same single thread as in a pool process: the same weights
    else:
        from mosaictool.training import train_many

        train_many(todo, shards=shard_cache)
    return runs


def planned_runs(cfg: DemoConfig, shards: Path, base: Path | None, out: Path,
                 rows: list[tuple[str, str, dict]] | None = None, lock: str | None = None, miner: Path | None = None):
    """{row: every seed's final checkpoint} and the TrainConfigs of those not trained yet (their
    folders, named by their settings' digest, emptied). A run with mined hard images is named by
    the model they are mined with (`miner`, finetune_all's) too."""
    from mosaictool.methods import get as get_method
    from mosaictool.training import TrainConfig

    device, workers = cfg.runtime()
    at_once = cfg.runs_at_once()
    base_sha = file_digest(base) if base is not None else None
    miner_sha = file_digest(miner) if miner is not None else None
    recipe = shards.with_name(shards.name + ".recipe.json")  # what the shards hold: a new recipe, new runs
    data_sha = file_digest(recipe) if recipe.is_file() else None
    runs: dict[str, list[Path]] = defaultdict(list)
    todo: list[TrainConfig] = []
    for seed in range(cfg.seeds):
        for label, method, options in rows or METHODS:
            from_records, mined = cfg.row_hard_image_settings(method)
            declared = {o.name for o in get_method(method).options}  # the demo's --max-pos reaches who has it
            # the options --select-on-val chose for this row come next; a row's own options win
            options = {**{k: v for k, v in (("max_pos", cfg.max_pos), ("max_neg", cfg.max_neg)) if k in declared},
                       **cfg.row_options.get(label, {}), **options}
            tc = TrainConfig(data=str(shards), out="", method=method, method_options=options, model=cfg.model,
                             pretrained=str(base) if base is not None else None, augment=False, steps=cfg.finetune_steps,
                             lr=cfg.lr_for(label),
                             batch_size=cfg.row_batch(method), warmup=min(50, cfg.finetune_steps // 10),
                             record_hard_images=from_records, hard_images=mined, seed=seed, quiet=not sys.stderr.isatty(),
                             lock_image=lock == "image", lock_text=lock == "text")
            threads = 1 if at_once > 1 else None
            # trained by train_many (stacked with the runs that share its steps): alone's weights up to rounding
            key = digest({**dataclasses.asdict(tc), "quiet": None, "base": base_sha, "data": data_sha, "stacked": True,
                          **({"threads": threads} if threads else {}), **({"miner": miner_sha} if mined else {})})
            run = out / "runs" / f"{slug(label)}-seed{seed}-{key}"
            final = run / "final.pt"
            if not final.is_file():
                if run.exists():
                    shutil.rmtree(run)
                hard = f"{mined} mined" if mined else "twins (oracle)" if from_records else "off"
                logger.info(f"fine-tune: {label}, seed {seed}, {cfg.finetune_steps} steps, lr {cfg.lr_for(label):g}, "
                            f"hard images {hard}")
                # device, loader workers and where the images wait are runtime: not in the run's digest
                todo.append(dataclasses.replace(tc, out=str(run), device=device, num_workers=workers,
                                                images_on_device=device.startswith("cuda")))
            runs[label].append(final)
    return dict(runs), todo


def share_mined(todo: list, miner: Path, out: Path, shard_cache: ShardCache) -> None:
    """Mine once the hard images of the runs in `todo` that mine them (TrainConfig.hard_images K: the
    K nearest neighbours in the image space of `miner`, the base, by training's mine_hard_images), and
    put them in each such run's folder as mined_hard_images.json, which the run then reads instead of mining:
    computed once before fine-tuning, as NegCLIP's were (Yuksekgonul et al. 2023, App. C.2: "we
    compute the pairwise similarity between all the images. Then, for each image we collect the 3
    most similar images"), instead of once per run and seed. Kept in OUT/mined/, named by the
    digest of the miner, the data and K, and mined in one thread on a CPU, so that the neighbours do
    not depend on the machine's cores. Beside them, MINED_TWINS: how many are the images' twins."""
    from mosaictool.io import write_json

    for tc in todo:
        if not tc.hard_images:
            continue
        mined = mined_neighbours(tc, miner, out, shard_cache)
        Path(tc.out).mkdir(parents=True, exist_ok=True)
        write_json(Path(tc.out) / "mined_hard_images.json", mined["neighbours"])
        write_json(Path(tc.out) / MINED_TWINS, mined["twins"])


MINED_TWINS = "mined_twins.json"  # in a run folder beside its mined neighbours: twin_share's counts


def mined_file(tc, miner: Path, out: Path) -> Path:
    """Where OUT keeps the neighbours mined for run `tc` with `miner`: named by their digests and K."""
    recipe = Path(tc.data).with_name(Path(tc.data).name + ".recipe.json")
    # the method and the data's settings too: they decide which records the run keeps, whose indices the neighbours are
    read = ("method", "method_options", "model", "model_config", "texts", "image_root", "skip_bad", "hard_images")
    key = {**{name: getattr(tc, name) for name in read}, "miner": file_digest(miner), "data": Path(tc.data).name,
           "recipe": file_digest(recipe) if recipe.is_file() else None, "threads": 1}
    return out / "mined" / f"hard-images-{digest(key)}.json"


def mined_neighbours(tc, miner: Path, out: Path, shard_cache: ShardCache | None = None) -> dict:
    """The mining of run `tc`'s hard images in the image space of `miner` (mined_file's, mined now when
    it is not kept): {"k", "neighbours": per record, the indices of its hard images, "twins":
    twin_share's counts}."""
    from mosaictool.io import read_json, write_json

    path = mined_file(tc, miner, out)
    if path.is_file():
        return read_json(path)
    import torch

    from mosaictool.training.data import mine_for

    logger.info(f"hard images: mining each image's {tc.hard_images} nearest neighbours in {miner.name}'s image space")
    started = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        data, neighbours = mine_for(dataclasses.replace(tc, pretrained=str(miner)), shards=shard_cache)
    finally:
        torch.set_num_threads(threads)
    twins = twin_share(data.records, neighbours)
    logger.info(f"hard images: mined in {time.perf_counter() - started:.1f} s; {twins_sentence(twins)}")
    mined = {"k": tc.hard_images, "neighbours": neighbours, "twins": twins}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, mined)
    return mined


def image_id(record_id: str) -> str:
    """The image a fine-tuning record shows: its `-plain` copy (data.two_captions) shows the same one."""
    return str(record_id).removesuffix("-plain")


def twin_share(records: list[dict], neighbours: list[list[int]]) -> dict:
    """How many of the mined neighbours are the image's twins: the images its record's hard_images
    name (the world's twins of a scene, arrangement, binding or shape, and the scene a twin was made
    from: the hard images --hard-image-source twin-oracle gives). Counted once per image (its
    records share their neighbours): {"images", "neighbours", "twins", "images_with_twin"}."""
    counted: set[str] = set()
    n_images = n_neighbours = n_twins = with_twin = 0
    for rec, near in zip(records, neighbours):
        image = image_id(rec["id"])
        if image in counted:
            continue
        counted.add(image)
        twins = {image_id(h) for h in rec.get("hard_images") or []}
        found = sum(image_id(records[j]["id"]) in twins for j in near)
        n_images += 1
        n_neighbours += len(near)
        n_twins += found
        with_twin += found > 0
    return {"images": n_images, "neighbours": n_neighbours, "twins": n_twins, "images_with_twin": with_twin}


def twins_sentence(twins: dict) -> str:
    share = twins["twins"] / max(1, twins["neighbours"])
    return (f"{twins['twins']:,} of the {twins['neighbours']:,} mined neighbours ({100 * share:.1f}%) are the image's own twins "
            f"(arrangement, binding or shape; the twin oracle's hard images); {twins['images_with_twin']:,} of "
            f"{twins['images']:,} images have one among theirs")


def share_out(todo: list, processes: int) -> list[list]:
    """The runs shared out between `processes`: each row's seeds dealt in turn, the rows costliest first
    and each starting at the process with the least work so far, so that every process gets about
    the same work and each row's runs, which take their steps together, are few processes apart."""
    if processes <= 1:
        return [list(todo)]
    by_row: dict[tuple, list] = defaultdict(list)
    for tc in todo:
        by_row[(tc.method, json.dumps(tc.method_options, sort_keys=True, default=str), tc.batch_size)].append(tc)

    def cost(tc) -> int:  # images and texts encoded over the run
        return tc.steps * tc.batch_size * (2 if tc.record_hard_images or tc.hard_images else 1) + tc.batch_size * _expected_texts(
            tc.method, tc.method_options, tc.steps)

    shares: list[list] = [[] for _ in range(processes)]
    load = [0] * processes
    for row in sorted(by_row.values(), key=lambda r: -cost(r[0])):
        for tc in row:
            k = min(range(processes), key=lambda p: (load[p], p))
            shares[k].append(tc)
            load[k] += cost(tc)
    return [s for s in shares if s]


def _train_in_processes(shares: list[list], shard_cache: ShardCache) -> None:
    """train_many of each share in its own forked process of one torch thread. Forked, the processes
    read `shard_cache` (0.47 GB of decoded images for the default world) from this one's memory
    instead of a copy each; a run's error comes back here as this process's error."""
    import multiprocessing

    fork = sys.platform.startswith("linux")
    context = multiprocessing.get_context("fork" if fork else "spawn")  # fork: the arguments are not copied
    started = []
    for share in shares:
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=_train_share, args=(share, shard_cache, send))
        process.start()
        send.close()
        started.append((process, receive))
    failures = []
    for process, receive in started:
        process.join()
        if process.exitcode:
            failures.append(receive.recv() if receive.poll() else f"a fine-tuning process failed (exit code "
                            f"{process.exitcode}); its error is above")
    if failures:
        raise MosaicError(failures[0])


def _train_share(share: list, shard_cache: ShardCache, errors) -> None:
    try:
        _train_one_thread(share, shard_cache)
    except MosaicError as e:
        errors.send(str(e))
        sys.exit(1)


def _train_one_thread(share: list, shard_cache: ShardCache) -> list:
    """train_many of `share` with one torch thread (a pool process, or this one and then restored)."""
    import torch

    from mosaictool.training import train_many

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return train_many(share, shards=shard_cache)
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
        logger.info(f"wise-ft: {row} seed 0, all weights, alpha in {list(cfg.wise_alphas)}")
        paths = dict(zip(inner, _wise(base, runs[row][0], inner, out / "wise" / slug(row), device))) if inner else {}
        curves[row] = [(a, "base" if a == 0 else f"{row}-s0" if a == 1 else f"wise-{slug(row)}-a{a:g}", paths.get(a))
                       for a in cfg.wise_alphas]
    patched: dict[str, Path] = {}
    if PATCH_ROW in runs:
        logger.info(f"wise-ft: {PATCH_ROW} patched, all weights, alpha {PATCH_ALPHA:g}, every seed")
        for seed, final in enumerate(runs[PATCH_ROW]):
            [path] = _wise(base, final, [PATCH_ALPHA], out / "wise" / f"{slug(PATCH_ROW)}-patched-seed{seed}", device)
            patched[f"{patch_label()}-s{seed}"] = path
    return curves, patched


def patch_label() -> str:
    return f"{PATCH_ROW} patched (α={PATCH_ALPHA:g})"
