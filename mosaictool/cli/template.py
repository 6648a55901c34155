"""`mosaictool template`: sub-graphs and negatives -> positive and negative texts."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import InputArg, NumShardsOpt, OutputOpt, QuietOpt, ShardIndexOpt, SkipBadOpt, handles_errors, run_stage
from mosaictool.paths import read_path


@handles_errors
def template_cli(
    input: InputArg = "-",
    output: OutputOpt = "-",
    style: Annotated[
        str, typer.Option(help="plain: the paper's '{N1} {R} {N2}'; varied: also frames like 'a photo of ...'.")
    ] = "plain",
    vocab: Annotated[Optional[str], typer.Option(help="Vocabulary folder whose attribute categories set the adjective order.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the frame choice of --style varied.")] = 0,
    skip_bad: SkipBadOpt = False,
    num_shards: NumShardsOpt = 1,
    shard_index: ShardIndexOpt = 0,
    quiet: QuietOpt = False,
) -> None:
    """Turn sub-graphs and negatives into sentences: the `texts` field `train` reads.

    Reads the output of `mosaictool decompose` or `mosaictool negate`; adds
    texts.positives [{text, kind, subgraph}] and texts.negatives [{text, positive, kind, category,
    transform, slot, from, to}], deduplicated, no negative equal to a positive.

    Examples:

      mosaictool parse caps.jsonl | mosaictool decompose | mosaictool negate | mosaictool template > texts.jsonl

      mosaictool template --style varied negatives.jsonl -o texts.parquet

      mosaictool template negatives/ -o texts/   # negate's per-shard folder, shard by shard
    """
    flags = dict(locals())  # the command line, which a per-shard output records
    def stage(source: str, quiet: bool):
        return api.template(source, style=style, vocab=vocab, seed=seed, skip_bad=skip_bad, quiet=quiet)

    run_stage(stage, name="template", input=input, output=output, reads=read_path("--vocab", vocab), flags=flags, num_shards=num_shards,
              shard_index=shard_index, quiet=quiet)


def register(app: typer.Typer) -> None:
    app.command("template")(template_cli)
