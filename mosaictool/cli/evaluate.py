"""`mosaictool evaluate`: compositionality benchmarks, scored as their authors score them."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from mosaictool.cli.common import OutputOpt, QuietOpt, handles_errors
from mosaictool.errors import MosaicError


def list_text() -> str:
    from mosaictool.bench import registry

    blocks = []
    for name, bench in sorted(registry().items()):
        aliases = getattr(bench, "aliases", ()) or ()
        subs = ", ".join(bench.subtasks) if bench.subtasks else "(one per task folder found)"
        head = f"{name}" + (f" (alias: {', '.join(aliases)})" if aliases else "")
        blocks.append(f"{head}\n  subtasks: {subs}\n  layout under --data-root:\n{bench.layout}")
    return "\n\n".join(blocks) + "\n"


def _model_specs(checkpoint: list[str], model: str | None, pretrained: str | None, model_config: str | None) -> list[dict]:
    specs = [{"checkpoint": c, "label": c} for c in checkpoint]
    if model or model_config:
        label = f"{model or os.path.basename(model_config or '')}:{pretrained or 'random-init'}"
        specs.append({"model": model, "pretrained": pretrained, "model_config_file": model_config, "label": label})
    elif pretrained:
        raise MosaicError("--pretrained needs --model NAME (e.g. --model ViT-B-32-quickgelu --pretrained openai.pt)")
    if not specs:
        raise MosaicError("give --checkpoint FILE (repeatable), or --model NAME --pretrained TAG_OR_FILE")
    for c in checkpoint:
        if not os.path.isfile(c):
            raise MosaicError(f"{c}: checkpoint not found")
    labels = [s["label"] for s in specs]
    for i, s in enumerate(specs):  # two models with one label would merge in the report
        if labels.count(s["label"]) > 1:
            s["label"] = f"{s['label']}#{i + 1}"
    return specs


# What each benchmark reads under --data-root (its layout in `--list`); any other: the folder of its name.
DATA_NAMES = {"aro": ("aro/", "coco/", "flickr30k/"), "retrieval": ("aro/", "coco/", "flickr30k/"),
              "sugarcrepe": ("sugarcrepe/", "coco/"), "valse": ("valse/", "coco/"),
              "world": ("manifest.json", "test/"), "world-val": ("manifest.json", "val/")}


def _output_check(specs: list[dict], benches, data_root: str, outputs: list[tuple[str, str | None]]) -> None:
    """No output may be a checkpoint, weights or config read, nor replace a file of the benchmarks."""
    from mosaictool.paths import Read, Write, check_outputs, checkpoint, read_path

    reads = [Read("--data-root", os.path.expanduser(data_root), DATA_NAMES.get(b.name, (f"{b.name}/",)), exclusive=False)
             for b, _ in benches]
    for spec in specs:
        if spec.get("checkpoint"):
            reads += checkpoint("--checkpoint", spec["checkpoint"])
        reads += checkpoint("--pretrained", spec.get("pretrained")) + read_path("--model-config", spec.get("model_config_file"))
    check_outputs([Write(flag, path) for flag, path in outputs if path], reads)


def _load_models(specs: list[dict], device: str):
    from mosaictool.model.openclip import load_model

    for spec in specs:
        kwargs = {k: v for k, v in spec.items() if k != "label"}
        yield spec["label"], load_model(**kwargs, device=device)


@handles_errors
def evaluate_cli(
    bench: Annotated[
        Optional[str], typer.Option("--bench", "-b", help="Benchmarks, comma-separated; NAME:SUB1+SUB2 picks subtasks (see --list).")
    ] = None,
    checkpoint: Annotated[Optional[list[str]], typer.Option("--checkpoint", "-c", help="A mosaictool checkpoint; repeat to compare models.")] = None,
    model: Annotated[Optional[str], typer.Option(help="open_clip model name (with --pretrained), e.g. ViT-B-32-quickgelu.")] = None,
    pretrained: Annotated[Optional[str], typer.Option(help="open_clip pretrained tag or weights file for --model.")] = None,
    model_config: Annotated[Optional[str], typer.Option("--model-config", help="A JSON model config (open_clip schema) instead of --model.")] = None,
    data_root: Annotated[str, typer.Option("--data-root", "-d", help="Folder holding the benchmarks in their layouts (see --list).")] = ".",
    output: OutputOpt = "-",
    report: Annotated[Optional[str], typer.Option(help="Write the Markdown table here instead of stderr.")] = None,
    plot: Annotated[Optional[str], typer.Option(help="Write a PNG bar chart comparing the models.")] = None,
    detail: Annotated[bool, typer.Option("--detail", help="Also show per-group breakdown rows in the Markdown table.")] = False,
    limit: Annotated[Optional[int], typer.Option(help="Score only the first N cases of each subtask (quick runs).")] = None,
    perturb: Annotated[bool, typer.Option("--perturb", help="Retrieval also with ARO's four order perturbations of every caption.")] = False,
    skip_missing: Annotated[bool, typer.Option("--skip-missing", help="Skip (and report) cases whose image files are missing.")] = False,
    device: Annotated[Optional[str], typer.Option(help="torch device: cpu, cuda or cuda:N (default: the GPU when CUDA is visible, cuda:<LOCAL_RANK> under torchrun; else cpu).")] = None,
    batch_size: Annotated[int, typer.Option(help="Images per forward pass.")] = 64,
    workers: Annotated[int, typer.Option(help="Image decoding processes (DataLoader workers).")] = 0,
    cache_dir: Annotated[Optional[str], typer.Option(help="Cache embeddings here, keyed by model weights and image file.")] = None,
    list_benchmarks: Annotated[bool, typer.Option("--list", help="List benchmarks, subtasks and expected file layouts, then exit.")] = False,
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
    from mosaictool.bench import get
    from mosaictool.bench.engine import EngineOptions, evaluate, parse_bench_spec
    from mosaictool.bench.report import markdown, plot as plot_png, write_text
    from mosaictool.io import RecordWriter

    if not bench:
        raise MosaicError("choose benchmarks with --bench (e.g. --bench aro,sugarcrepe); `--list` shows them")
    if limit is not None and limit < 1 or batch_size < 1 or workers < 0:
        raise MosaicError("--limit and --batch-size must be at least 1, --workers at least 0")
    if not os.path.isdir(os.path.expanduser(data_root)):
        raise MosaicError(f"--data-root {data_root}: no such folder")
    from mosaictool.training.device import resolve_device

    device = resolve_device(device)
    specs = _model_specs(checkpoint or [], model, pretrained, model_config)
    benches = []
    for name, subs in parse_bench_spec(bench):
        b = get(name)
        if perturb and b.name == "retrieval":
            base = subs or _present_retrieval(data_root)
            subs = list(dict.fromkeys([*base, *(f"{s.removesuffix('-perturbed')}-perturbed" for s in base)]))
        benches.append((b, subs))
    if perturb and not any(b.name == "retrieval" for b, _ in benches):
        raise MosaicError("--perturb applies to the retrieval benchmark; add --bench retrieval")
    _output_check(specs, benches, data_root, [("-o", output), ("--report", report), ("--plot", plot)])
    options = EngineOptions(
        batch_size=batch_size, device=device, workers=workers, cache_dir=cache_dir, skip_missing=skip_missing, limit=limit, quiet=quiet
    )
    rows = []
    with RecordWriter(output) as writer:
        for r in evaluate(benches, _load_models(specs, device), data_root, options):
            writer.write(r)
            rows.append(r)
    table = markdown(rows, detail=detail)
    if report:
        write_text(report, table)
    else:
        sys.stderr.write(table)
    if plot:
        plot_png(rows, plot)


def _present_retrieval(data_root: str) -> list[str]:
    from pathlib import Path

    from mosaictool.bench.retrieval import DATASETS

    found = [d for d, (ann, _) in DATASETS.items() if (Path(data_root).expanduser() / ann).is_file()]
    if not found:
        raise MosaicError(f"retrieval: no Karpathy test file under {data_root} (aro/coco_karpathy_test.json or aro/flickr30k_test.json)")
    return found


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate_cli)
