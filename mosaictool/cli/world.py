"""`mosaictool world`: generate the synthetic compositional world; `world audit`: check a texts file
of it against the world's truth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import InputArg, QuietOpt, SkipBadOpt, handles_errors
from mosaictool.errors import MosaicError


@handles_errors
def world_cli(
    ctx: typer.Context,
    out: Annotated[Optional[str], typer.Option("--out", "-o", help="Folder to create (must not exist, or be empty).")] = None,
    train: Annotated[int, typer.Option(help="Train scenes (records; twins come on top).")] = 20000,
    seed: Annotated[int, typer.Option(help="Everything is a function of the seed: same seed, same bytes.")] = 0,
    twins: Annotated[
        bool, typer.Option("--twins",
                           help="Also render each train scene's counterfactual twin (objects trade places) as its own record, "
                                "linked by hard_images.")
    ] = False,
    binding_twins: Annotated[
        bool, typer.Option("--binding-twins",
                           help="Also render each train scene's binding twin (the two related objects trade colours), "
                                "linked the same way.")
    ] = False,
    shape_twins: Annotated[
        bool, typer.Option("--shape-twins",
                           help="Also render each train scene's shape twin (the first related object changes shape), "
                                "linked the same way.")
    ] = False,
    caption_noise: Annotated[
        float, typer.Option("--caption-noise",
                            help="Share of train captions made web-like noisy, as alt-text is next to COCO's captions (0 to 1; "
                                 "0 writes the clean world, byte for byte). Each record keeps clean_caption and the truth of "
                                 "its noise. Val/test stay clean.")
    ] = 0.0,
    noise_kinds: Annotated[
        Optional[str], typer.Option("--noise-kinds",
                                    help="Comma-separated kinds a noisy caption draws from: wrong_attribute (an adjective its "
                                         "object lacks), dropped_mention (an object it shows, not said), fragment (truncated, "
                                         "'image may contain: ...', noun lists, keyword tags), unrelated_words (file names, "
                                         "cameras, tags, dates). Default: all four.")
    ] = None,
    image_size: Annotated[int, typer.Option(help="Image side in pixels.")] = 64,
    eval_scale: Annotated[float, typer.Option(
        help="Multiply the val/test split sizes (0.1 for a quick look; groups keep >=1 item).")] = 1.0,
    workers: Annotated[int, typer.Option(help="Worker processes; the files never depend on it.")] = 1,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing world in --out.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Generate the synthetic world: Pillow scenes of 1-4 shapes (shape, colour, size, texture) in
    spatial relations, captions from their true scene graphs, and val/test splits in the real
    benchmarks' formats (ARO, COCO-Order, CREPE, zero-shot folders) for `evaluate --bench world`.

    Writes OUT/manifest.json, OUT/train/captions.jsonl + OUT/train/images/, OUT/val/, OUT/test/.
    `mosaictool world audit` checks a texts file made from it against the scenes' truth.

    Examples:

      mosaictool world --out world/ --train 20000 --seed 0

      mosaictool world --out small/ --train 500 --twins --binding-twins --eval-scale 0.1

      mosaictool world --out noisy/ --train 8000 --twins --caption-noise 0.5 --noise-kinds wrong_attribute,dropped_mention

      mosaictool world audit texts.jsonl --world world/ -o audit.json
    """
    if ctx.invoked_subcommand is not None:
        return
    if out is None:
        raise MosaicError("--out is required: the folder to create (or audit a texts file: `mosaictool world audit TEXTS`)")
    info = api.world(out, train=train, seed=seed, twins=twins, binding_twins=binding_twins, shape_twins=shape_twins,
                     caption_noise=caption_noise, noise_kinds=noise_kinds, image_size=image_size, eval_scale=eval_scale,
                     workers=workers, overwrite=overwrite, quiet=quiet)
    c = info.counts
    typer.echo(f"world: {c['train']['records']} train records ({c['train']['twins']} arrangement twins, "
               f"{c['train']['binding_twins']} binding, {c['train']['shape_twins']} shape twins), "
               f"val {sum(c['val'].values())} / test {sum(c['test'].values())} benchmark items -> {out}", err=True)
    if caption_noise:
        typer.echo(f"caption noise: {c['train']['noisy']} of {c['train']['records']} train captions noisy "
                   f"({', '.join(f'{k} {n}' for k, n in c['train']['noise_kinds'].items())}); val/test clean", err=True)


@handles_errors
def audit_cli(
    texts: InputArg,
    world: Annotated[
        Optional[str], typer.Option("--world", help="The world's folder: its train scenes fill in records that carry no `scene`.")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Images per simulated batch (cross-image truths).")] = 32,
    batches: Annotated[int, typer.Option(help="Simulated batches; 0 skips the cross-image check.")] = 150,
    seed: Annotated[int, typer.Option(help="Seed of the simulated batches: same seed, same figures.")] = 0,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Also write the audit as JSON to this file.")] = None,
    skip_bad: SkipBadOpt = False,
) -> None:
    """Check a texts file of the world (`template` output of its captions) against the truth of
    every record's scene, and print a markdown table per positive kind / negative transform.

    Counts graph negatives true of their own image (and how many of those the caption itself
    says), positives false of it, texts with a word the world has no meaning for (debris), and in
    simulated batches the texts true of another batch image and how many of those the canonical
    keys catch (MosaiCLIP's P(i)). Caption-level text negatives have no graph: counted, not checked.

    Examples:

      mosaictool world audit texts.jsonl -o audit.json

      mosaictool world audit texts.jsonl --world world/ --batch-size 64 --batches 300 --seed 1
    """
    from mosaictool.io import Skips, read_records
    from mosaictool.world.audit import audit, audit_markdown, with_world

    if batch_size < 2 or batches < 0:
        raise MosaicError("--batch-size must be at least 2 and --batches at least 0")
    if output is not None and Path(output).is_dir():
        raise MosaicError(f"{output}: is a directory; give -o a file path such as {Path(output) / 'audit.json'}")
    from mosaictool import records as contracts
    from mosaictool.paths import Read, Write, check_outputs, read_path

    check_outputs([Write("-o", output)], [Read("TEXTS", texts), *read_path("--world", world)])
    skips = Skips(enabled=skip_bad)
    records = read_records(texts, skips=skips, check=contracts.checker(contracts.TrainRecord))  # `texts` as train reads them
    if world is not None:
        records = with_world(records, world)
    records = list(records)
    if not any(isinstance(r.get("texts"), dict) for r in records):
        raise MosaicError(f"{texts}: no record has `texts`; audit the output of `mosaictool template`")
    result = audit(records, batch_size=batch_size, batches=batches, seed=seed)
    skips.report()
    if result["records"] == 0:
        hint = "the --world folder has none of its ids or images" if world else "pass --world DIR, the folder the world was made in"
        raise MosaicError(f"{texts}: no record carries a world `scene` (not a texts file of the world?); {hint}")
    typer.echo(audit_markdown(result))
    if output is not None:
        import json

        from mosaictool.bench.report import write_text

        write_text(output, json.dumps(result, indent=1, sort_keys=True) + "\n", flag="-o")
        typer.echo(f"wrote {output}", err=True)


def register(app: typer.Typer) -> None:
    # `mosaictool world --out W` generates (the group's own options, no subcommand); `world audit` checks
    sub = typer.Typer(invoke_without_command=True, no_args_is_help=False)
    sub.callback()(world_cli)
    sub.command("audit")(audit_cli)
    app.add_typer(sub, name="world")
