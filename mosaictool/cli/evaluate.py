"""`mosaictool evaluate`: compositionality benchmarks, scored as their authors score them."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import AllowOutsideRootOpt, OutputOpt, QuietOpt, handles_errors


def list_text() -> str:
    from mosaictool.bench import registry

    blocks = []
    for name, bench in sorted(registry().items()):
        aliases = getattr(bench, "aliases", ()) or ()
        subs = ", ".join(bench.subtasks) if bench.subtasks else "(one per task folder found)"
        head = f"{name}" + (f" (alias: {', '.join(aliases)})" if aliases else "")
        blocks.append(f"{head}\n  subtasks: {subs}\n  layout under --data-root:\n{bench.layout}")
    return "\n\n".join(blocks) + "\n"


@handles_errors
def evaluate_cli(
    bench: Annotated[
        Optional[str], typer.Option("--bench", "-b", help="Benchmarks, comma-separated; NAME:SUB1+SUB2 picks subtasks (see --list).")
    ] = None,
    checkpoint: Annotated[Optional[list[str]], typer.Option(
        "--checkpoint", "-c", help="A mosaictool checkpoint; repeat to compare models.")] = None,
    model: Annotated[Optional[str], typer.Option(help="open_clip model name (with --pretrained), e.g. ViT-B-32-quickgelu.")] = None,
    pretrained: Annotated[Optional[str], typer.Option(help="open_clip pretrained tag or weights file for --model.")] = None,
    model_config: Annotated[Optional[str], typer.Option(
        "--model-config", help="A JSON model config (open_clip schema) instead of --model.")] = None,
    data_root: Annotated[str, typer.Option("--data-root", "-d", help="Folder holding the benchmarks in their layouts (see --list).")] = ".",
    output: OutputOpt = "-",
    report: Annotated[Optional[str], typer.Option(help="Write the Markdown table here instead of stderr.")] = None,
    plot: Annotated[Optional[str], typer.Option(help="Write a PNG bar chart comparing the models.")] = None,
    detail: Annotated[bool, typer.Option("--detail", help="Also show per-group breakdown rows in the Markdown table.")] = False,
    limit: Annotated[Optional[int], typer.Option(help="Score only the first N cases of each subtask (quick runs).")] = None,
    perturb: Annotated[bool, typer.Option(
        "--perturb", help="Retrieval also with ARO's four order perturbations of every caption.")] = False,
    skip_missing: Annotated[bool, typer.Option("--skip-missing", help="Skip (and report) cases whose image files are missing.")] = False,
    allow_outside_root: AllowOutsideRootOpt = False,
    device: Annotated[Optional[str], typer.Option(
        help="torch device: cpu, cuda or cuda:N (default: the GPU when CUDA is visible, cuda:<LOCAL_RANK> under torchrun; "
             "else cpu).")] = None,
    batch_size: Annotated[int, typer.Option(help="Images per forward pass.")] = 64,
    workers: Annotated[int, typer.Option(help="Image decoding processes (DataLoader workers).")] = 0,
    cache_dir: Annotated[Optional[str], typer.Option(help="Cache embeddings here, keyed by model weights and image file.")] = None,
    list_benchmarks: Annotated[bool, typer.Option(
        "--list", help="List benchmarks, subtasks and expected file layouts, then exit.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Score models on compositionality benchmarks, each with its official metric and tie rule.

    Writes one JSONL row per (model, benchmark, subtask, metric): {model, benchmark, subtask,
    metric, value, n, detail}; accuracies are fractions. A Markdown table (percent) goes to stderr or
    --report. Every unique image region and text is encoded once per benchmark, in batches.

    Examples:

      mosaictool evaluate --bench aro,sugarcrepe --checkpoint runs/m1/final.pt --data-root ~/data -o results.jsonl

      mosaictool evaluate --bench sugarcrepe --model ViT-B-32-quickgelu --pretrained /w/openai.pt

      mosaictool evaluate --bench world --data-root world/ -c a.pt -c b.pt --report report.md --plot cmp.png

      mosaictool evaluate --bench aro:VG-Relation+VG-Attribution -c m.pt --limit 200

      mosaictool evaluate --list
    """
    if list_benchmarks:
        typer.echo(list_text(), nl=False)
        return

    result = api.evaluate(
        bench, checkpoints=checkpoint or [], model=model, pretrained=pretrained, model_config=model_config, data_root=data_root,
        output=output, report=report, plot=plot, detail=detail, limit=limit, perturb=perturb, skip_missing=skip_missing,
        device=device, batch_size=batch_size, workers=workers, cache_dir=cache_dir, quiet=quiet, allow_outside_root=allow_outside_root,
    )
    if not report:
        sys.stderr.write(result.markdown(detail=detail))


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate_cli)
