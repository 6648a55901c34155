"""`mosaictool import`: public datasets' annotation files -> caption records the stages read."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mosaictool.cli.common import OutputOpt, handles_errors
from mosaictool.io import RecordWriter, Skips
from mosaictool.paths import Read, Write, check_outputs


@handles_errors
def coco_cli(
    captions: Annotated[list[str], typer.Argument(
        help="COCO captions file(s) (annotations/captions_train2017.json; 2014's train and val together), or Karpathy's "
             "dataset_coco.json itself.", metavar="CAPTIONS_JSON", show_default=False)],
    output: OutputOpt = "-",
    karpathy: Annotated[Optional[str], typer.Option(
        help="Karpathy's dataset_coco.json: keep the captions of the images of --split (by cocoid, COCO's image id). "
             "Example: --karpathy dataset_coco.json --split train")] = None,
    split: Annotated[Optional[str], typer.Option(
        help="Karpathy split(s), comma-separated: train, val, test, restval (default with a Karpathy file: train). "
             "Example: --split train,restval")] = None,
    image_root: Annotated[Optional[str], typer.Option(
        help="The folder the image paths are relative to (the one `shard --image-root` gets): every image must be a file "
             "there. Example: --image-root coco/train2017")] = None,
    skip_bad: Annotated[bool, typer.Option(
        "--skip-bad", help="With --image-root: leave out (and count) the captions of images that are not there.")] = False,
) -> None:
    """COCO captions -> caption records {id, caption, image, image_id}, one per caption.

    `id` is "<image_id>-<annotation id>" (Karpathy's file: "<cocoid>-<sentid>"), `image` the image's
    path as the file gives it (COCO: file_name; Karpathy: filepath/filename), relative to the image
    folder. A file that does not follow its format is refused with one line naming the file and the
    entry. Prints how many captions and images were written (and the Karpathy split's images that no
    captions file holds) on stderr.

    Examples:

      \b
      mosaictool import coco annotations/captions_train2017.json --image-root train2017/ -o coco-captions.jsonl

      \b
      mosaictool import coco annotations/captions_train2014.json annotations/captions_val2014.json \\
        --karpathy dataset_coco.json --split train,restval -o negclip-train.jsonl

      \b
      mosaictool import coco dataset_coco.json --split train -o coco-train.jsonl
    """
    from mosaictool.stages.coco_captions import CocoImport, coco_captions, parse_splits

    splits = None if split is None else parse_splits(split)
    check_outputs([Write("-o", output)], [*(Read("CAPTIONS", c) for c in captions), *([Read("--karpathy", karpathy)] if karpathy else []),
                                          *([Read("--image-root", image_root, ())] if image_root else [])])
    skips, stats = Skips(enabled=skip_bad), CocoImport()
    records = coco_captions(captions, karpathy=karpathy, splits=splits, image_root=image_root, skips=skips, stats=stats)
    with RecordWriter(output) as writer:
        writer.write_all(records)
    skips.report()
    note = ""
    if stats.not_found:
        note = (f"; {stats.not_found} of the {stats.split_images} images of Karpathy's split are in none of the captions "
                "files (give the other year's or split's file too)")
    typer.echo(f"wrote {stats.captions} caption(s) of {stats.images} image(s){note}", err=True)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="Turn public datasets' annotation files into caption records (JSONL or Parquet).\n\n"
                           "Example:\n\n  mosaictool import coco captions_train2017.json -o coco-captions.jsonl",
                      no_args_is_help=True)
    sub.command("coco")(coco_cli)
    app.add_typer(sub, name="import")
