"""`mosaictool shard`: template records + images -> WebDataset shards for `train`."""

from __future__ import annotations

from typing import Annotated

import typer

from mosaictool import api
from mosaictool.cli.common import AllowOutsideRootOpt, AssignIdsOpt, InputArg, QuietOpt, SkipBadOpt, handles_errors


@handles_errors
def shard_cli(
    input: InputArg,
    out: Annotated[str, typer.Option("--out", help="Output folder for NNNNNN.tar shards and sizes.json.")],
    image_root: Annotated[str, typer.Option(help="Folder the records' image paths are relative to.")] = ".",
    shard_size: Annotated[int, typer.Option(help="Samples per shard.")] = 1000,
    image_key: Annotated[str, typer.Option(help="Field holding the image path.")] = "image",
    skip_bad: SkipBadOpt = False,
    assign_ids: AssignIdsOpt = False,
    allow_outside_root: AllowOutsideRootOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Pack records and their images into WebDataset tar shards.

    Each sample holds the image file's bytes and a JSON member with the whole record (id, caption,
    texts from `template`, hard_images, ...). Writes OUT/000000.tar, ... and OUT/sizes.json (samples
    per shard). Images are read from inside --image-root (links resolved) unless
    --allow-outside-root. A missing or corrupt image stops the run, or with --skip-bad is counted and skipped.

    Examples:

      \b
      mosaictool shard texts.jsonl --image-root imgs/ --out shards/ --shard-size 1000

      \b
      mosaictool train --data shards/ --method mosaiclip --out runs/m1
    """
    shards = api.shard(input, out=out, image_root=image_root, shard_size=shard_size, image_key=image_key, skip_bad=skip_bad,
                       assign_ids=assign_ids, quiet=quiet, allow_outside_root=allow_outside_root)
    shards.skips.report()
    typer.echo(f"wrote {shards.samples} samples in {len(shards.sizes)} shard(s) to {out}", err=True)


def register(app: typer.Typer) -> None:
    app.command("shard")(shard_cli)
