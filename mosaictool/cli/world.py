"""`mosaictool world`: generate the synthetic compositional world."""

from __future__ import annotations

from typing import Annotated

import typer

from mosaictool.cli.common import QuietOpt, handles_errors
from mosaictool.errors import MosaicError


@handles_errors
def world_cli(
    out: Annotated[str, typer.Option("--out", "-o", help="Folder to create (must not exist, or be empty).")],
    train: Annotated[int, typer.Option(help="Train scenes (records; twins come on top).")] = 20000,
    seed: Annotated[int, typer.Option(help="Everything is a function of the seed: same seed, same bytes.")] = 0,
    twins: Annotated[
        bool, typer.Option("--twins", help="Also render each train scene's counterfactual twin (objects trade places) as its own record, linked by hard_images.")
    ] = False,
    binding_twins: Annotated[
        bool, typer.Option("--binding-twins", help="Also render each train scene's binding twin (the two related objects trade colours), linked the same way.")
    ] = False,
    shape_twins: Annotated[
        bool, typer.Option("--shape-twins", help="Also render each train scene's shape twin (the first related object changes shape), linked the same way.")
    ] = False,
    image_size: Annotated[int, typer.Option(help="Image side in pixels.")] = 64,
    eval_scale: Annotated[float, typer.Option(help="Multiply the val/test split sizes (0.1 for a quick look; groups keep >=1 item).")] = 1.0,
    workers: Annotated[int, typer.Option(help="Worker processes; the files never depend on it.")] = 1,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing world in --out.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Generate the synthetic world: Pillow scenes of 1-4 shapes (shape, colour, size, texture) in
    spatial relations, captions from their true scene graphs, and val/test splits in the real
    benchmarks' formats (ARO, COCO-Order, CREPE, zero-shot folders) for `evaluate --bench world`.

    Writes OUT/manifest.json, OUT/train/captions.jsonl + OUT/train/images/, OUT/val/, OUT/test/.

    Examples:

      mosaictool world --out world/ --train 20000 --seed 0

      mosaictool world --out small/ --train 500 --twins --binding-twins --eval-scale 0.1
    """
    from mosaictool.io import progress
    from mosaictool.world.generate import generate_world, total_items

    if workers < 1:
        raise MosaicError("--workers must be at least 1")
    bar = progress(iter(()), desc="world", unit="img", quiet=quiet, total=total_items(train, eval_scale))
    try:
        info = generate_world(out, train=train, seed=seed, twins=twins, binding_twins=binding_twins, shape_twins=shape_twins, image_size=image_size, eval_scale=eval_scale,
                              workers=workers, overwrite=overwrite, progress=getattr(bar, "update", lambda n: None))
    finally:
        if hasattr(bar, "close"):
            bar.close()
    c = info["counts"]
    typer.echo(f"world: {c['train']['records']} train records ({c['train']['twins']} arrangement twins, {c['train']['binding_twins']} binding, {c['train']['shape_twins']} shape twins), "
               f"val {sum(c['val'].values())} / test {sum(c['test'].values())} benchmark items -> {out}", err=True)


def register(app: typer.Typer) -> None:
    app.command("world")(world_cli)
