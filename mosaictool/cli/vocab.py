"""`mosaictool vocab`: show, build and import the object / attribute / relation vocabularies."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mosaictool.cli.common import InputArg, QuietOpt, SkipBadOpt, handles_errors
from mosaictool.errors import MosaicError
from mosaictool.paths import Read

VocabOpt = Annotated[
    Optional[str], typer.Option("--vocab", help="Vocabulary folder (default: the one shipped with mosaictool).")
]
OutDirOpt = Annotated[
    str, typer.Option("--output", "-o", help="Folder to write the vocabulary TSV files into (not the --base vocabulary).")
]
KINDS = ("objects", "attributes", "relations", "antonyms")


@handles_errors
def show_cli(
    vocab: VocabOpt = None,
    list_kind: Annotated[
        Optional[str], typer.Option("--list", help="Print every entry of one kind: objects, attributes, relations or antonyms.")
    ] = None,
) -> None:
    """Count a vocabulary's objects by group, attributes by category and relations by type.

    Examples:

      mosaictool vocab show

      mosaictool vocab show --vocab vgvocab/ --list relations
    """
    from mosaictool.vocab import load

    if list_kind is not None and list_kind not in KINDS:
        raise MosaicError(f"--list must be one of {', '.join(KINDS)}, got {list_kind!r}")
    v = load(vocab)
    if list_kind == "antonyms":
        for a, b in v.antonym_pairs:
            typer.echo(f"{a}\t{b}")
        return
    if list_kind is not None:
        table = getattr(v, list_kind)
        for name in sorted(table):
            typer.echo(f"{name}\t{table[name]}")
        return
    typer.echo(f"vocabulary: {v.source}")
    for kind, by in v.summary().items():
        typer.echo(f"{kind}: {sum(by.values())}")
        for key, n in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])):
            typer.echo(f"  {key:<16} {n}")
    typer.echo(f"antonym pairs: {len(v.antonym_pairs)}")


@handles_errors
def build_cli(
    input: InputArg,
    output: OutDirOpt,
    min_count: Annotated[int, typer.Option(help="Keep names seen at least this many times.")] = 30,
    base: Annotated[
        Optional[str],
        typer.Option(help="Vocabulary whose groups / categories / types, synonyms and hypernyms label the new names "
                          "(default: shipped; 'world': the synthetic world's own words)."),
    ] = None,
    only_known: Annotated[
        bool, typer.Option("--only-known", help="Keep only names the base vocabulary knows (a closed vocabulary such as the world's).")
    ] = False,
    keep_debris: Annotated[
        bool, typer.Option("--keep-debris",
                           help="Keep parser debris: spatial nouns, colour words as objects, bare prepositions as relations.")
    ] = False,
    skip_bad: SkipBadOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Build a vocabulary from your own parsed captions (the output of `mosaictool parse`).

    Objects are entity head lemmas, attributes the entities' adjectives, relations as written.
    Parser debris is left out (objects "right", "purple", "orange cross"; relations "of", "to")
    unless --keep-debris. The base's synonym, hypernym, part and overlap rows of the kept names are written too
    (synonyms.tsv, hypernyms.tsv, parts.tsv, overlaps.tsv), so that negate never replaces a word by one that means the same
    or more.

    Examples:

      mosaictool parse caps.jsonl | mosaictool vocab build - --min-count 30 -o myvocab/

      mosaictool vocab build world-graphs.jsonl --base world --only-known --min-count 20 -o worldvocab/
    """
    from mosaictool.io import Skips, progress, read_records
    from mosaictool.stages.vocab_tools import build_from_graphs, check_graph
    from mosaictool.vocab import save

    if min_count < 1:
        raise MosaicError("--min-count must be at least 1")
    _output_check(output, [Read("INPUT", input), *_base_reads(base)])
    base_vocab = _base(base)
    skips = Skips(enabled=skip_bad)
    records = progress(read_records(input, skips=skips, check=check_graph), desc="vocab build", unit="caption", quiet=quiet)
    built = build_from_graphs(records, min_count=min_count, base=base_vocab, keep_debris=keep_debris, only_known=only_known)
    skips.report()
    if not (built.objects or built.attributes or built.relations):  # an empty vocabulary breaks negate later
        raise MosaicError(f"{input}: no object, attribute or relation is seen --min-count {min_count} times; "
                          "lower --min-count or give more parsed captions (nothing written)")
    save(built, output)
    _report(built, output)


@handles_errors
def import_vg_cli(
    vg_dir: Annotated[str, typer.Argument(help="Folder with Visual Genome's objects.json, attributes.json, relationships.json.")],
    output: OutDirOpt,
    min_count: Annotated[int, typer.Option(help="Keep names with at least this many annotated instances (paper: 30).")] = 30,
    top_relations: Annotated[int, typer.Option(help="Keep the N most frequent predicates (paper: 50); 0 keeps all.")] = 50,
    base: Annotated[
        Optional[str], typer.Option(help="Vocabulary whose groups / categories / types label the new names (default: shipped).")
    ] = None,
) -> None:
    """Import a vocabulary from Visual Genome annotations, as MosaiCLIP did (App. B).

    The JSON files are streamed, so the multi-GB originals need little memory.

    Example:

      mosaictool vocab import-vg ~/data/visual_genome -o vgvocab/
    """
    from mosaictool.stages.vocab_tools import import_vg
    from mosaictool.vocab import load, save

    if min_count < 1 or top_relations < 0:
        raise MosaicError("--min-count must be at least 1 and --top-relations at least 0")
    _output_check(output, [Read("VG_DIR", vg_dir, ("*.json",), exclusive=False), *_base_reads(base)])
    built = import_vg(vg_dir, min_count=min_count, top_relations=top_relations or None, base=load(base))
    save(built, output)
    _report(built, output)


@handles_errors
def wordnet_cli(
    wordnet_dir: Annotated[str, typer.Argument(help="WordNet database folder (data.noun, index.noun, lexnames, ...).")],
    output: OutDirOpt,
    vocab: VocabOpt = None,
) -> None:
    """Learn from WordNet which of a vocabulary's objects may name one thing, so negate never replaces one by the
    other ("a desk" -> "a table" is no negative: a desk is a kind of table).

    Writes the vocabulary again with overlaps.tsv: each object paired with the words WordNet gives its first sense
    as a synonym or a hypernym, at any depth. Needs WordNet's database files (data.noun, index.noun, ...):
    python -c "import nltk; nltk.download('wordnet')" fetches them (unzip ~/nltk_data/corpora/wordnet.zip if it stays zipped).
    The shipped vocabulary's overlaps.tsv was made this way from WordNet 3.0.

    Example:

      mosaictool vocab build graphs.jsonl --min-count 30 -o myvocab/

      mosaictool vocab wordnet ~/nltk_data/corpora/wordnet --vocab myvocab/ -o myvocab-wn/
    """
    import dataclasses

    from mosaictool.stages.vocab_tools import wordnet_overlaps
    from mosaictool.vocab import load, save

    _output_check(output, [Read("WORDNET_DIR", wordnet_dir, ("**",)), *_base_reads(vocab, "--vocab")])
    base = load(vocab)
    found = wordnet_overlaps(base, wordnet_dir)
    save(dataclasses.replace(base, overlaps=tuple(sorted(set(base.overlaps) | set(found)))), output)
    typer.echo(f"wrote {output}: {len(found)} object pairs from WordNet that may name one thing "
               f"({sum(r == 'synonym' for *_, r in found)} synonyms, {sum(r == 'kind' for *_, r in found)} kinds)", err=True)


def _base_reads(base: str | None, flag: str = "--base") -> list[Read]:
    """The base vocabulary read (named by the flag that gave it): a folder, or the shipped one (never to be written over)."""
    from mosaictool.vocab import DEFAULT_DIR

    if base == "world":
        return []
    return [Read(flag if base else f"{flag} (the shipped vocabulary)", base or DEFAULT_DIR, ("**",))]


def _output_check(output: str, reads: list[Read]) -> None:
    from mosaictool.paths import Write, check_outputs
    from mosaictool.vocab import FILES

    check_outputs([Write("-o", output, FILES)], reads)


def _base(base: str | None):
    if base == "world":
        from mosaictool.world.vocab import base_vocab

        return base_vocab()
    from mosaictool.vocab import load

    return load(base)


def _report(v, output: str) -> None:
    typer.echo(
        f"wrote {output}: {len(v.objects)} objects, {len(v.attributes)} attributes, "
        f"{len(v.relations)} relations, {len(v.antonym_pairs)} antonym pairs",
        err=True,
    )


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="Show, build and import the object / attribute / relation vocabularies.\n\n"
                      "Example:\n\n  mosaictool vocab build graphs.jsonl --min-count 30 -o myvocab/", no_args_is_help=True)
    sub.command("show")(show_cli)
    sub.command("build")(build_cli)
    sub.command("import-vg")(import_vg_cli)
    sub.command("wordnet")(wordnet_cli)
    app.add_typer(sub, name="vocab")
