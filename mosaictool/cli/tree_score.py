"""`mosaictool tree-score`: how tree-like a text encoder's computation is (Murty et al., 2023)."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import AssignIdsOpt, InputArg, OutputOpt, QuietOpt, SkipBadOpt, handles_errors
from mosaictool.errors import MosaicError


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
    device: Annotated[Optional[str], typer.Option(
        help="torch device: cpu, cuda or cuda:N (default: the GPU when CUDA is visible, cuda:<LOCAL_RANK> under torchrun; "
             "else cpu).")] = None,
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
    from mosaictool.io import RecordWriter
    from mosaictool.paths import Read, Write, check_outputs, read_path
    from mosaictool.paths import checkpoint as checkpoint_read

    scores = api.tree_score(
        input, checkpoints=checkpoint or [], model=model, pretrained=pretrained, model_config=model_config, text_key=text_key,
        layer_threshold=layer_threshold, positions=positions, max_words=max_words, limit=limit, seed=seed,
        batch_size=batch_size, chart=chart, gold=gold, device=device, skip_bad=skip_bad, assign_ids=assign_ids, quiet=quiet,
    )
    reads = [Read("INPUT", input), *read_path("--gold", gold), *checkpoint_read("--pretrained", pretrained),
             *read_path("--model-config", model_config)]
    for c in checkpoint or []:
        reads += checkpoint_read("--checkpoint", c)
    check_outputs([Write("-o", output), Write("--report", report)], reads)
    if report and os.path.dirname(os.path.abspath(report)) and not os.path.isdir(os.path.dirname(os.path.abspath(report))):
        raise MosaicError(f"{report}: directory does not exist")
    with RecordWriter(output) as writer:
        writer.write_all(scores)
    scores.skips.report()
    sys.stderr.write(scores.summary_text())
    if report:
        write_text(report, scores.summary_text(markdown=True), flag="--report")


def register(app) -> None:
    app.command("tree-score")(tree_score_cli)
