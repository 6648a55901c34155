"""`mosaictool demo`: the whole pipeline on the synthetic world, and the comparison of methods."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import handles_errors


@handles_errors
def demo_cli(
    out: Annotated[str, typer.Option("--out", "-o", help="Folder for every artifact (reused when run again).")] = "demo-out",
    quick: Annotated[bool, typer.Option(
        "--quick", help="A small world and short runs (~3 min): checks the pipeline, not the result.")] = False,
    seeds: Annotated[Optional[int], typer.Option(
        help="Fine-tuning seeds per method (default 10: the paired t test has seeds − 1 df, and 10 bring the MDE near 3 points; "
             "1 with --quick).")] = None,
    finetune_steps: Annotated[Optional[int], typer.Option(help="Fine-tuning steps, equal for every method.")] = None,
    finetune_lr: Annotated[Optional[float], typer.Option(
        help="One fine-tuning learning rate for every row (default 5e-4, calibrated on val by the positive control; "
             "--select-on-val gives each row its own).")] = None,
    hard_images: Annotated[
        Optional[str], typer.Option("--hard-images", metavar="method|all|none",
                                    help="Hard images in the batch (each image's twin, the world's nearest alternative): 'method' "
                                         "(default) for the rows whose paper uses them (NegCLIP, ARO App. C.2), 'all' rows, or "
                                         "'none'. Every row sees the same images per step: a row with hard images takes half as "
                                         "many images, each with its hard image.")
    ] = None,
    select_on_val: Annotated[
        bool, typer.Option("--select-on-val", help="First fine-tune every row (seed 0) at each candidate lr (3e-4, 5e-4, 1e-3), "
                                                   "evaluate on the world's val split, and give each row the lr of its own best val "
                                                   "retrieval (ARO's criterion, Yuksekgonul et al. 2023, App. C.3).")
    ] = False,
    experiment: Annotated[
        Optional[list[str]], typer.Option("--experiment", "-x", metavar="NAME",
                                          help="After the table, also run this experiment (repeat for several): ablate "
                                               "(MosaiCLIP's parts taken away one at a time), ladder (NegCLIP to MosaiCLIP one "
                                               "change per rung, with the text towers' cosines and tree-scores), towers (each "
                                               "fine-tuning one tower only), all three on val; teach (a base that knows no "
                                               "arrangement), scratch (CLIP, NegCLIP, MosaiCLIP from random init), efficiency "
                                               "(MosaiCLIP on a fraction of the images), noisy (NegCLIP and MosaiCLIP on clean and "
                                               "web-like noisy captions), on --split; claims (the paper's claims with a verdict "
                                               "each, claims.md). Each adds a section to report.md.")
    ] = None,
    max_pos: Annotated[Optional[int], typer.Option(
        help="MosaiCLIP's positive texts per image: the caption + sub-graphs (default 3; 1 = the caption only).")] = None,
    pretrain_steps: Annotated[Optional[int], typer.Option(help="Steps of the plain-CLIP base pretraining (cached).")] = None,
    world_train: Annotated[Optional[int], typer.Option(help="Train scenes of the world.")] = None,
    teach_steps: Annotated[Optional[int], typer.Option(
        help="--experiment teach: fine-tuning steps from the base that knows no arrangement (default 1500; --preset gpu 4000; "
             "--quick 15; choose on val).")] = None,
    teach_lr: Annotated[Optional[float], typer.Option(
        help="--experiment teach: the rows' learning rate (default 1e-3; choose on val).")] = None,
    scratch_seeds: Annotated[Optional[int], typer.Option(
        help="--experiment scratch: seeds of each method's pretraining from a random init (default 3).")] = None,
    world_seed: Annotated[Optional[int], typer.Option(
        help="Draw the world from this seed (default 0): check a result on a world nothing was tuned on.")] = None,
    cache_dir: Annotated[Optional[str], typer.Option(
        help="Where the world, texts, shards and pretrained base are cached for the next demo (default ~/.cache/mosaictool, "
             "or $MOSAICTOOL_CACHE; ~0.7 GB a world).")] = None,
    workers: Annotated[Optional[int], typer.Option(
        help="Worker processes for world generation, parse and negate (default: every core).")] = None,
    model: Annotated[Optional[str], typer.Option(help="open_clip model name or shipped config (default mosaic-micro-p16).")] = None,
    split: Annotated[str, typer.Option(
        help="Evaluate on the world's 'val' split (to choose hyperparameters) or 'test' (the table to report).")] = "test",
    preset: Annotated[Optional[str], typer.Option(
        help="gpu: sized for one GPU (20,000-scene world, base 4,000 steps at batch 128, fine-tuning 500 steps at batch 64, "
             "10 seeds; the GPU by default, loader workers and pinned memory).")] = None,
    device: Annotated[Optional[str], typer.Option(help="cpu, cuda or cuda:N (default: the GPU when CUDA is visible, else cpu).")] = None,
    loader_workers: Annotated[Optional[int], typer.Option(
        help="DataLoader processes decoding shards in train and evaluate (default: 0 on CPU, up to 8 on a GPU).")] = None,
    parallel_runs: Annotated[Optional[int], typer.Option(
        help="Processes that fine-tune on a CPU, one torch thread each, each taking its share of the runs' steps together "
             "(default: one per core, at most 8; 1: every run in this process with torch's threads). "
             "A GPU trains every run in this process.")] = None,
) -> None:
    """Run the main job end to end on the synthetic world and print the comparison table.

    world -> parse -> decompose -> negate -> template -> shard -> pretrain a tiny base model
    with the plain CLIP loss (once, cached; on the world's plain captions of one- and two-object
    scenes, each with its arrangement twin in the batch) -> fine-tune it with every registered
    method's rows (CLIP, NegCLIP, MosaiCLIP, FSC-CLIP, Probe-FT) at equal steps,
    images per step (NegCLIP with its hard images, at the same images per step), one learning rate
    calibrated on val, several seeds, on every image with both its captions -> WiSE-FT of all weights
    (curves for MosaiCLIP and FSC-CLIP; Probe-FT patched at alpha 0.2) -> evaluate on the world's
    test split. Prints the table (attribute, relation, order, seen/unseen compounds, productivity,
    recognition; mean ± 95% CI over seeds), the positive control (NegCLIP over CLIP on order and
    relation, p < 0.01, paired by seed and test case) and the minimal detectable effect per column;
    writes OUT/report.md (settings, every comparison with CLIP, WiSE-FT curves, the texts audit),
    OUT/methods.png and OUT/wise_ft.png. Every artifact stays in OUT for inspection.

    Examples:

      mosaictool demo

      mosaictool demo --quick --out /tmp/demo

      mosaictool demo --split val --finetune-steps 120   # choosing settings: never on test

      mosaictool demo --select-on-val   # each row's lr chosen on val, then the test table

      mosaictool demo --world-seed 7   # another world: settings were tuned on seed 0's val

      mosaictool demo --hard-images none   # no row gets hard images

      mosaictool demo --experiment ladder --experiment towers   # why MosaiCLIP and NegCLIP differ (val)

      mosaictool demo --parallel-runs 1   # every fine-tuning run in this process

      mosaictool demo --preset gpu --device cuda:0
    """
    result = api.demo(out=out, quick=quick, preset=preset, device=device, experiments=experiment, loader_workers=loader_workers,
                      parallel_runs=parallel_runs, seeds=seeds, finetune_steps=finetune_steps, finetune_lr=finetune_lr,
                      hard_images=hard_images, select_on_val=select_on_val or None, max_pos=max_pos, pretrain_steps=pretrain_steps,
                      world_train=world_train, world_seed=world_seed, teach_steps=teach_steps, teach_lr=teach_lr,
                      scratch_seeds=scratch_seeds, cache_dir=cache_dir, workers=workers, model=model, split=split)
    typer.echo(result["table"])
    typer.echo()
    typer.echo(result["control"]["verdict"])
    if result["headline"]:
        typer.echo(result["headline"]["verdict"])
    if result["power"]:
        typer.echo(result["power"])


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_cli)
