"""`mosaictool tree-score`: how tree-like a text encoder's computation is (Murty et al., 2023)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mosaictool.cli.common import AssignIdsOpt, InputArg, OutputOpt, QuietOpt, SkipBadOpt, handles_errors
from mosaictool.errors import MosaicError, RecordError


@handles_errors
def tree_score_cli(
    input: InputArg = "-",
    output: OutputOpt = "-",
    checkpoint: Annotated[
        Optional[list[str]], typer.Option(help="mosaictool checkpoint; repeat to compare models on the same captions.")
    ] = None,
    model: Annotated[Optional[str], typer.Option(help="open_clip model name (with --pretrained), e.g. ViT-B-32-quickgelu.")] = None,
    pretrained: Annotated[Optional[str], typer.Option(help="open_clip pretrained tag or weights file for --model.")] = None,
    model_config: Annotated[Optional[str], typer.Option(help="Your own open_clip JSON model config (with --pretrained).")] = None,
    text_key: Annotated[str, typer.Option(help="Field holding the caption.")] = "caption",
    layer_threshold: Annotated[
        int, typer.Option("--layer-threshold", "-k", help="Layers 0..k-1 see the full context; 0 = fully context-free.")
    ] = 0,
    positions: Annotated[
        str, typer.Option(help="original: span tokens keep their positions; shifted: the span renumbered as if run alone.")
    ] = "original",
    max_words: Annotated[int, typer.Option(help="Skip captions with more words (counted, null scores).")] = 40,
    limit: Annotated[Optional[int], typer.Option(help="Score only the first N captions.")] = None,
    seed: Annotated[int, typer.Option(help="Seeds the greedy projection's random splits (per caption) and the bootstrap.")] = 0,
    batch_size: Annotated[int, typer.Option(help="Captions per forward batch; results do not depend on it.")] = 32,
    chart: Annotated[bool, typer.Option("--chart", help="Also write each caption's span similarity chart.")] = False,
    gold: Annotated[
        Optional[str], typer.Option(help="Gold trees (records with id and `tree`, unlabeled brackets): adds bracket P/R/F1.")
    ] = None,
    report: Annotated[Optional[str], typer.Option(help="Write a Markdown summary here.")] = None,
    device: Annotated[Optional[str], typer.Option(help="torch device: cpu, cuda or cuda:N (default: the GPU when CUDA is visible, cuda:<LOCAL_RANK> under torchrun; else cpu).")] = None,
    skip_bad: SkipBadOpt = False,
    assign_ids: AssignIdsOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Tree-score of open_clip text encoders (Murty et al., ICLR 2023; MosaiCLIP §4.2).

    For each caption: the span similarity chart c(a, b) = cos(contextual, context-free span vector),
    the binary tree it projects to (greedy, as the authors' code), `tscore` (greedy with one seeded
    random split subtracted per node, as MosaiCLIP ran it) and `tscore_exact` (best tree by CKY minus
    the mean over random-split trees). Higher = more tree-like. Output: one record per caption and
    model (model-major, input order) with id, model, words, n_words, tree, tree_exact, tscore,
    tscore_exact, skipped (null, or too_short / too_long / context / alignment: those have null
    scores), and with --chart `chart` (row a = [c(a,a), c(a,a+1), ...]). Summary on stderr: mean
    per model with a bootstrap 95% CI and, for two or more models, paired differences.

    Examples:

      mosaictool tree-score captions.jsonl --checkpoint runs/m1/final.pt -o trees.jsonl

      mosaictool tree-score captions.jsonl --checkpoint a.pt --checkpoint b.pt --report ts.md -o trees.jsonl

      mosaictool tree-score coco.jsonl --model ViT-B-32-quickgelu --pretrained /weights/openai.pt --limit 1000
    """
    from mosaictool.atomic import write_text
    from mosaictool.io import RecordWriter, Skips, progress, read_records
    from mosaictool.analysis import tree_score as ts
    from mosaictool.training.device import resolve_device
    from mosaictool.model.openclip import load_model

    device = resolve_device(device)
    if batch_size < 1 or max_words < 2 or (limit is not None and limit < 0):
        raise MosaicError("--batch-size must be at least 1, --max-words at least 2, --limit non-negative")
    if positions not in ts.POSITIONS:
        raise MosaicError(f"--positions must be one of {', '.join(ts.POSITIONS)}, not {positions!r}")
    specs = [(c, None, None, c) for c in checkpoint or []]
    if model or pretrained or model_config:
        specs.append((None, model, pretrained, f"{model or Path(model_config or '').stem}:{pretrained or 'random-init'}"))
    if not specs:
        raise MosaicError("give one or more --checkpoint FILE, or --model NAME --pretrained TAG_OR_FILE")
    from mosaictool.paths import Read, Write, check_outputs, read_path
    from mosaictool.paths import checkpoint as checkpoint_read

    reads = [Read("INPUT", input), *read_path("--gold", gold), *checkpoint_read("--pretrained", pretrained),
             *read_path("--model-config", model_config)]
    for c in checkpoint or []:
        reads += checkpoint_read("--checkpoint", c)
    check_outputs([Write("-o", output), Write("--report", report)], reads)
    if report and os.path.dirname(os.path.abspath(report)) and not os.path.isdir(os.path.dirname(os.path.abspath(report))):
        raise MosaicError(f"{report}: directory does not exist")

    def check(rec: dict) -> None:
        if not isinstance(rec.get(text_key), str):
            raise RecordError(f"missing or non-string {text_key!r} (choose the field with --text-key)")

    skips = Skips(enabled=skip_bad)
    records = []
    for rec in read_records(input, skips=skips, check=check, assign_ids=assign_ids):
        if limit is not None and len(records) >= limit:
            break
        records.append(rec)
    gold_trees = _read_gold(gold) if gold else None

    summaries = []
    with RecordWriter(output) as writer:
        for ckpt, name, weights, label in specs:
            bundle = load_model(checkpoint=ckpt, model=name, pretrained=weights, model_config_file=model_config, device=device)
            summary = ts.ModelSummary(label)
            summaries.append(summary)
            scored = ts.score_records(
                records,
                bundle,
                label=label,
                text_key=text_key,
                layer_threshold=layer_threshold,
                positions=positions,
                max_words=max_words,
                seed=seed,
                batch_size=batch_size,
                with_chart=chart,
                gold=gold_trees,
                summary=summary,
            )
            writer.write_all(progress(scored, desc=f"tree-score {Path(label).name}", unit="caption", quiet=quiet, total=len(records)))
            del bundle
    skips.report()
    result = ts.summarize(summaries, seed=seed)
    sys.stderr.write(ts.summary_text(result))
    if report:
        settings = {
            "captions": len(records), "text_key": text_key, "layer_threshold": layer_threshold, "positions": positions,
            "max_words": max_words, "seed": seed,
        }
        write_text(report, ts.summary_text(result, settings, markdown=True), flag="--report")


def _read_gold(path: str) -> dict:
    from mosaictool.io import read_records
    from mosaictool.analysis.tree_score import parse_tree

    trees = {}

    def check(rec: dict) -> None:
        try:
            trees[rec["id"]] = parse_tree(rec.get("tree"))
        except ValueError as e:
            raise RecordError(f"bad gold `tree`: {e}") from e

    for _ in read_records(path, check=check):
        pass
    return trees


def register(app) -> None:
    app.command("tree-score")(tree_score_cli)
