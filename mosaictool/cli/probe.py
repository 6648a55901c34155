"""`mosaictool probe build r|c|b`: the Probe paper's benchmarks (Schiappa et al. 2023) from VG / COCO annotation files.

Each writes `<out>/probe_<kind>/probe_<kind>.jsonl` (image paths relative to that folder), the layout
`mosaictool evaluate --bench probe_<kind> --data-root <out>` reads; counts and skips go to stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mosaictool.cli.common import AllowOutsideRootOpt, handles_errors
from mosaictool.errors import MosaicError
from mosaictool.records import check_workers

OutOpt = Annotated[Path, typer.Option("--out", help="Data root to write into (the --data-root of `evaluate`).")]
SeedOpt = Annotated[int, typer.Option(help="Seed of every random draw; same inputs + seed + flags = same output.")]
ImagesOpt = Annotated[
    Path, typer.Option("--images", help="Folder holding the images the annotations name (checked; missing ones are counted).")
]


def _output_check(name: str, out: Path, files: list[tuple[str, Path | None]], folders: list[tuple[str, Path | None]]) -> None:
    """--out must not hold the annotation files or image folders read (Probe-B writes images under probe_b/)."""
    from mosaictool.paths import Read, Write, check_outputs

    written = (f"{name}/",) if name == "probe_b" else (f"{name}/{name}.jsonl",)
    reads = [Read(flag, path) for flag, path in files if path is not None]
    reads += [Read(flag, path, (), exclusive=False) for flag, path in folders if path is not None]
    check_outputs([Write("--out", out, written)], reads)


def _finish(name: str, out: Path, records, counts) -> int:
    from mosaictool.stages.probe_build import write_jsonl

    n = write_jsonl(records, out / name / f"{name}.jsonl")
    for line in counts.lines(name):
        typer.echo(line, err=True)
    if n == 0:
        raise MosaicError(f"{name}: no group could be built from these files (see the skips above); "
                          "check --images and that the annotation files belong together")
    return n


@handles_errors
def build_r(
    vg_relationships: Annotated[Path, typer.Option(help="VG relationships.json.")],
    images: ImagesOpt,
    out: OutOpt,
    vg_objects: Annotated[Optional[Path], typer.Option(help="VG objects.json: more objects per image for the subject-only images.")] = None,
    vg_image_data: Annotated[Optional[Path], typer.Option(
        help="VG image_data.json: file names from its urls (else <images>/[VG_100K[_2]/]<id>.jpg).")] = None,
    relation_aliases: Annotated[Optional[Path], typer.Option(help="VG relationship_alias.txt: more predicate aliases to merge.")] = None,
    max_groups: Annotated[int, typer.Option(help="Groups (anchor images) to build; the paper's 100,000.")] = 100_000,
    subject_images: Annotated[int, typer.Option(help="Subject-only images per group (at most).")] = 10,
    min_count: Annotated[int, typer.Option(help="Swap candidates must occur at least this often in the file (drops typos).")] = 1,
    allow_outside_root: AllowOutsideRootOpt = False,
    seed: SeedOpt = 0,
) -> None:
    """Probe-R from Visual Genome: anchor image, R1 <s,r,o>, predicate swap R2, subject swap R3, O1 <s>, subject-only images.

    Example:

      mosaictool probe build r --vg-relationships vg/relationships.json --vg-image-data vg/image_data.json --images vg --out data
    """
    from mosaictool.stages.probe_build import Counts, build_probe_r

    if max_groups < 1 or subject_images < 0 or min_count < 1:
        raise MosaicError("--max-groups and --min-count must be at least 1, --subject-images at least 0")
    _output_check("probe_r", out, [("--vg-relationships", vg_relationships), ("--vg-objects", vg_objects),
                                   ("--vg-image-data", vg_image_data), ("--relation-aliases", relation_aliases)],
                  [("--images", images)])
    counts = Counts()
    target = out / "probe_r"
    records = build_probe_r(vg_relationships, images, target, objects=vg_objects, image_data=vg_image_data, aliases=relation_aliases,
                            seed=seed, max_groups=max_groups, subject_images=subject_images, min_count=min_count, counts=counts,
                            allow_outside_root=allow_outside_root)
    _finish("probe_r", out, records, counts)


@handles_errors
def build_c(
    coco_captions: Annotated[Path, typer.Option(help="COCO captions_*.json.")],
    images: ImagesOpt,
    out: OutOpt,
    antonyms: Annotated[Optional[Path], typer.Option(
        help="Antonym map TSV (attribute, antonym, category); default: the shipped one.")] = None,
    pairs_per_composition: Annotated[int, typer.Option(help="Image pairs per (attribute, antonym, noun) and per (attribute, noun).")] = 5,
    model: Annotated[Optional[str], typer.Option(help="spaCy model for `parse` (default as in `mosaictool parse`).")] = None,
    workers: Annotated[int, typer.Option(help="Parse worker processes (output never depends on it).")] = 1,
    allow_outside_root: AllowOutsideRootOpt = False,
    seed: SeedOpt = 0,
) -> None:
    """Probe-C from COCO captions (parsed with `parse`): antonym-composition pairs and same-composition/other-object pairs.

    Example:

      mosaictool probe build c --coco-captions coco/annotations/captions_val2017.json --images coco/val2017 --out data
    """
    from mosaictool.stages.probe_build import Counts, build_probe_c

    if pairs_per_composition < 1:
        raise MosaicError("--pairs-per-composition must be at least 1")
    check_workers(workers)
    _output_check("probe_c", out, [("--coco-captions", coco_captions), ("--antonyms", antonyms)], [("--images", images)])
    counts = Counts()
    records = build_probe_c(coco_captions, images, out / "probe_c", antonyms=antonyms, seed=seed,
                            pairs_per_composition=pairs_per_composition, model=model, workers=workers, counts=counts,
                            allow_outside_root=allow_outside_root)
    _finish("probe_c", out, records, counts)


@handles_errors
def build_b(
    coco_instances: Annotated[Path, typer.Option(help="COCO instances_*.json (polygon and RLE masks).")],
    images: ImagesOpt,
    out: OutOpt,
    fillers: Annotated[str, typer.Option(help="Comma-separated: black, gray, noise, scene (scene needs --scenes).")] = "black,gray,noise",
    scenes: Annotated[Optional[Path], typer.Option(help="Folder of scene images without COCO objects (the scene filler).")] = None,
    splits: Annotated[str, typer.Option(help="MR (background removed, all objects kept), R (one object kept), or both.")] = "MR,R",
    max_images: Annotated[Optional[int], typer.Option(help="Stop after this many annotated images.")] = None,
    min_removed: Annotated[float, typer.Option(help="MR: least background fraction an image must lose.")] = 0.2,
    min_object: Annotated[float, typer.Option(help="R: least object area (fraction of the image).")] = 0.05,
    max_object: Annotated[float, typer.Option(help="R: largest object area (fraction of the image).")] = 0.5,
    patch: Annotated[float, typer.Option(help="Side of the filler patch, as a fraction of the shorter image side.")] = 0.2,
    image_format: Annotated[str, typer.Option(help="png or jpg (quality 95, about 5x faster to write) for the written images.")] = "png",
    workers: Annotated[int, typer.Option(help="Worker processes (output never depends on it).")] = 1,
    allow_outside_root: AllowOutsideRootOpt = False,
    seed: SeedOpt = 0,
) -> None:
    """Probe-B from COCO instances: x0, x0 + a non-occluding filler patch, background (and other objects) replaced by a filler.

    Example:

      mosaictool probe build b --coco-instances coco/annotations/instances_val2017.json --images coco/val2017 --out data \
--fillers black,gray,noise,scene --scenes scenes/
    """
    from mosaictool.stages.probe_build import Counts, build_probe_b

    fill = [f.strip() for f in fillers.split(",") if f.strip()]
    split_list = [s.strip() for s in splits.split(",") if s.strip()]
    if not fill or any(s not in ("MR", "R") for s in split_list) or not split_list:
        raise MosaicError("--fillers needs at least one filler; --splits takes MR, R or MR,R")
    if not (0 <= min_object <= max_object <= 1 and 0 < patch < 1 and 0 <= min_removed < 1):
        raise MosaicError("need 0 <= --min-object <= --max-object <= 1, 0 < --patch < 1, 0 <= --min-removed < 1")
    if image_format not in ("png", "jpg"):
        raise MosaicError("--image-format: png or jpg")
    check_workers(workers)
    _output_check("probe_b", out, [("--coco-instances", coco_instances)], [("--images", images), ("--scenes", scenes)])
    counts = Counts()
    target = out / "probe_b"
    records = build_probe_b(coco_instances, images, target, fillers=fill, scenes=scenes, splits=split_list, seed=seed,
                            max_images=max_images, min_removed=min_removed, min_object=min_object, max_object=max_object,
                            patch=patch, image_format=image_format, workers=workers, counts=counts,
                            allow_outside_root=allow_outside_root)
    _finish("probe_b", out, records, counts)


def register(app: typer.Typer) -> None:
    example = ("\n\nExample:\n\n  mosaictool probe build r --vg-relationships vg/relationships.json "
               "--vg-image-data vg/image_data.json --images vg --out data")
    probe = typer.Typer(help="The Probe paper's benchmarks (Schiappa et al. 2023): "
                             "build Probe-R / Probe-C / Probe-B from VG and COCO files." + example, no_args_is_help=True)
    build = typer.Typer(help="Build one benchmark's JSONL (+ images for Probe-B) under --out." + example, no_args_is_help=True)
    build.command("r")(build_r)
    build.command("c")(build_c)
    build.command("b")(build_b)
    probe.add_typer(build, name="build")
    app.add_typer(probe, name="probe")
