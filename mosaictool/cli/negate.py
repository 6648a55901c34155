"""`mosaictool negate`: positive sub-graphs -> hard negatives (graph and caption-level)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import InputArg, NumShardsOpt, OutputOpt, QuietOpt, ShardIndexOpt, SkipBadOpt, handles_errors, run_stage
from mosaictool.paths import read_path


@handles_errors
def negate_cli(
    input: InputArg = "-",
    output: OutputOpt = "-",
    max_negatives: Annotated[int, typer.Option("--max", help="Graph negatives per caption (paper: 6); 0 for none.")] = 6,
    probs: Annotated[
        str, typer.Option(help="Probabilities of the obj,attr,rel categories, summing to 1 (paper, App. H.1: p_obj = 0.15 chosen from "
                          "{0,.08,.15}, p_attr = p_rel; the same defaults as train --category-probs).")
    ] = "0.15,0.425,0.425",
    text: Annotated[
        str, typer.Option(help="Caption-level negatives too, comma-separated: negclip,replace,shuffle,order.")
    ] = "",
    uniform: Annotated[
        bool, typer.Option("--uniform",
                           help="Sample replacements from the whole vocabulary (the paper) instead of the same group/category/type.")
    ] = False,
    unseen_rate: Annotated[
        float, typer.Option(help="With co-occurrence counts (the shipped vocabulary's, or a `vocab build`'s): the share of "
                            "replacements the corpus never showed with that object or relation, 0 to 1. E.g. --unseen-rate 0 "
                            "turns 'a brown dog' only into colours seen on dogs ('a black dog', never 'a burgundy dog'); "
                            "with the shipped counts (sparse), one seen neither with the object nor with its group is made only where a "
                            "caption has no other negative, whatever the rate.")
    ] = 0.1,
    vocab: Annotated[Optional[str], typer.Option(help="Vocabulary folder (default: the shipped one).")] = None,
    seed: Annotated[int, typer.Option(help="Seed; every caption's draws depend only on (seed, id).")] = 0,
    text_key: Annotated[str, typer.Option(help="Field holding the caption (for --text).")] = "caption",
    model: Annotated[Optional[str], typer.Option(help="spaCy model for --text negclip/order (default as parse).")] = None,
    batch_size: Annotated[int, typer.Option(help="Captions per batch (spaCy nlp.pipe).")] = 256,
    workers: Annotated[int, typer.Option(help="Worker processes; the output never depends on it.")] = 1,
    skip_bad: SkipBadOpt = False,
    num_shards: NumShardsOpt = 1,
    shard_index: ShardIndexOpt = 0,
    quiet: QuietOpt = False,
) -> None:
    """Make hard negatives for each caption's positive sub-graphs (MosaiCLIP §3.4, App. B).

    Reads the output of `mosaictool decompose`; adds `negatives`. Graph negatives: f_obj
    (replace an object's attributes), f_attr (swap / replace attributes of two related objects),
    f_rel (swap the objects, replace an object or the relation, join an object), drawn by
    category with --probs, at most --max per caption. A replacement contradicts what it replaces
    (an antonym, or a mutually exclusive member of its category that fits the object); unknown
    words are left alone; symmetric relations are never swapped; replacements the corpus has seen
    are preferred (--unseen-rate; the shipped vocabulary has counts of 10,631 benchmark captions),
    and with a `vocab build` vocabulary joins too. A one-line summary
    goes to stderr at the end. Caption negatives with --text: NegCLIP
    swaps, replace (antonym / co-hyponym), bigram shuffle, ARO's four order perturbations.
    Each negative records its transform, category, slot, from and to.

    Examples:

      mosaictool negate --max 6 --seed 0 subgraphs.jsonl > negatives.jsonl

      mosaictool negate --text negclip,replace --vocab myvocab/ subgraphs.jsonl -o negs.parquet

      mosaictool negate subgraphs/ -o negatives/   # decompose's per-shard folder, shard by shard
    """
    flags = dict(locals())  # the command line, which a per-shard output records
    from mosaictool.stages.negate import NegateStats

    stats = NegateStats()

    def stage(source: str, quiet: bool):
        return api.negate(source, max_negatives=max_negatives, probs=probs, text=text, uniform=uniform, vocab=vocab, seed=seed,
                          text_key=text_key, model=model, batch_size=batch_size, workers=workers, skip_bad=skip_bad,
                          quiet=quiet, unseen_rate=unseen_rate, stats=stats)

    run_stage(stage, name="negate", input=input, output=output, reads=[*read_path("--vocab", vocab), *read_path("--model", model)],
              flags=flags, num_shards=num_shards, shard_index=shard_index, quiet=quiet)
    if not quiet:
        typer.echo(f"negate: {stats.line()}", err=True)


def register(app: typer.Typer) -> None:
    app.command("negate")(negate_cli)
