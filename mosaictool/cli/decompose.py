"""`mosaictool decompose`: scene graphs -> positive sub-graphs."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import InputArg, NumShardsOpt, OutputOpt, QuietOpt, ShardIndexOpt, SkipBadOpt, handles_errors, run_stage
from mosaictool.paths import read_path


@handles_errors
def decompose_cli(
    input: InputArg = "-",
    output: OutputOpt = "-",
    max_subgraphs: Annotated[int, typer.Option(
        "--max", help="Sub-graphs kept per caption (paper: M=3), sampled from (seed, id): relations and objects with "
                      "attributes first, bare objects fill the rest; e.g. --max 5.")] = 3,
    caption: Annotated[
        bool, typer.Option("--caption/--no-caption", help="Keep the whole caption as the first, coarsest positive.")
    ] = True,
    seed: Annotated[int, typer.Option(help="Seed of the per-caption sample.")] = 0,
    text_key: Annotated[str, typer.Option(help="Field holding the caption.")] = "caption",
    vocab: Annotated[
        Optional[str],
        typer.Option("--vocab",
                     help="Vocabulary folder whose synonym groups name the keys (default: shipped); use negate's and template's."),
    ] = None,
    max_keys: Annotated[int, typer.Option(help="Most sub-graph keys per record (those dropping the fewest words are kept).")] = 256,
    skip_bad: SkipBadOpt = False,
    num_shards: NumShardsOpt = 1,
    shard_index: ShardIndexOpt = 0,
    quiet: QuietOpt = False,
) -> None:
    """Split each caption's scene graph into positive sub-graphs (MosaiCLIP §3.3).

    Reads the output of `mosaictool parse`; adds `subgraphs`: every object with its attributes and
    every pair of objects joined by one relation (with attributes), deduplicated, at most --max of
    them, after the whole caption (kind "caption") unless --no-caption. The sample takes relation
    sub-graphs and objects with attributes first (the paper's category weights), since a bare
    object makes no negative. `mosaictool template`
    turns them into sentences. Every sub-graph gets its canonical `key`, and the record
    `subgraph_keys`: the keys of all its sub-graphs (not only the sampled ones) and their weaker
    readings, which decide which batch texts are positives of the image (MosaiCLIP's P(i)).

    Examples:

      mosaictool parse caps.jsonl | mosaictool decompose --max 3 > subgraphs.jsonl

      mosaictool decompose --max 5 --no-caption graphs.jsonl -o subgraphs.parquet

      mosaictool decompose --vocab worldvocab/ graphs.jsonl -o subgraphs.jsonl

      mosaictool decompose graphs/ -o subgraphs/   # parse's per-shard folder, shard by shard
    """
    flags = dict(locals())  # the command line, which a per-shard output records
    def stage(source: str, quiet: bool):
        return api.decompose(source, max_subgraphs=max_subgraphs, caption=caption, seed=seed, text_key=text_key, vocab=vocab,
                             max_keys=max_keys, skip_bad=skip_bad, quiet=quiet)

    run_stage(stage, name="decompose", input=input, output=output, reads=read_path("--vocab", vocab), flags=flags, num_shards=num_shards,
              shard_index=shard_index, quiet=quiet)


def register(app: typer.Typer) -> None:
    app.command("decompose")(decompose_cli)
