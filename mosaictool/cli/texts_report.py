"""`mosaictool texts-report`: judge a texts file per transform, and write a sample page for human review."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import InputArg, SkipBadOpt, handles_errors
from mosaictool.errors import MosaicError
from mosaictool.paths import Read, Write, check_outputs, read_path

PAGE_FORMATS = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html"}


@handles_errors
def texts_report_cli(
    texts: InputArg,
    vocab: Annotated[
        Optional[str],
        typer.Option("--vocab", help="Vocabulary folder the texts were made with (default: shipped), e.g. --vocab worldvocab/; "
                                     "its co-occurrence counts and symmetric relations, where it has them, give two columns."),
    ] = None,
    sample: Annotated[int, typer.Option(help="Texts drawn per transform for the review page, e.g. --sample 30 (0: none).")] = 20,
    seed: Annotated[int, typer.Option(help="Seed of the review sample: same file and seed, same sample.")] = 0,
    output: Annotated[
        Optional[str],
        typer.Option("--output", "-o", help="Write the review page here: report.md (Markdown) or report.html (HTML), by extension."),
    ] = None,
    skip_bad: SkipBadOpt = False,
) -> None:
    """Judge a texts file (the output of `mosaictool template`) per transform, for a human to check.

    Prints, per negative transform (and per positive kind), how many texts there are and the share
    with an out-of-vocabulary word, with an unseen combination (an object-attribute pair or a
    subject-relation-object triple the vocabulary's co-occurrence counts never saw; "n/a" for a
    vocabulary without counts), and of object swaps, the share that swap a symmetric relation ("next
    to": still true); then the share of captions with zero graph negatives, split by whether their
    graph had an attribute or relation. With -o it writes a page of a fixed random sample per
    transform (caption, text, what changed, flags) to read. docs/stages.md says how to read it.

    Examples:

      mosaictool texts-report texts.jsonl

      mosaictool texts-report texts.jsonl --sample 30 --seed 1 -o texts-report.html

      mosaictool texts-report texts.jsonl --vocab worldvocab/ -o texts-report.md
    """
    fmt = None
    if output is not None:
        if Path(output).is_dir():
            raise MosaicError(f"{output}: is a directory; give -o a file path such as {Path(output) / 'texts-report.md'}")
        fmt = PAGE_FORMATS.get(Path(output).suffix.lower())
        if fmt is None:
            raise MosaicError(f"-o {output}: the page is Markdown (.md) or HTML (.html); name the file so")
    check_outputs([Write("-o", output)], [Read("TEXTS", texts), *read_path("--vocab", vocab)])
    result = api.texts_report(texts, vocab=vocab, sample=sample, seed=seed, skip_bad=skip_bad)
    result.skips.report()
    typer.echo(result.summary_text(), nl=False)
    if output is not None:
        from mosaictool.bench.report import write_text

        write_text(output, result.page(fmt), flag="-o")
        typer.echo(f"wrote {output} ({len(result.figures['sample'])} sampled texts)", err=True)


def register(app: typer.Typer) -> None:
    app.command("texts-report")(texts_report_cli)
