"""Make vocabularies: from the user's own parsed graphs (`vocab build`) or from Visual Genome's
annotation files (`vocab import-vg`, as MosaiCLIP App. B: names with at least 30 instances).

Groups, categories and types come from a base vocabulary (the shipped one by default); names it
does not know get "other" (or are left out with `only_known`). Antonym pairs are kept when both
sides are in the new vocabulary; the base's synonym, hypernym, part and overlap rows for every kept name are kept.

`vocab build` also counts what the captions show together: (object, attribute) pairs and
(subject, relation, object) triples, written as object_attributes.tsv and relation_triples.tsv,
for `negate` to prefer replacements a corpus has seen (MosaiCLIP App. B takes its sets from Visual
Genome, whose statistics carry the same information). The base's category rules (categories.tsv,
groups.tsv, attributes' applies_to, relations' symmetric) carry over.

`vocab build` leaves out what a parser makes of words that are no objects or relations (`debris`):
spatial nouns ("to the right of" read as an entity "right"), colour words as objects ("an orange
cross" read as the compound noun "orange cross", or a bare "purple"), and bare prepositions as
relations ("of", "to").
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from mosaictool.errors import MosaicError
from mosaictool.stages.source_formats import VG_ATTRIBUTES, VG_OBJECT_NAMES, VG_PREDICATES, check_entry
from mosaictool.stages.subgraph import BARE_PREPOSITIONS, COLOUR_WORDS, SPATIAL_NOUNS, graph_nodes, usable_relations
from mosaictool.vocab import UNKNOWN, Vocab
from mosaictool.vocab import load as load_vocab

VG_FILES = ("objects.json", "attributes.json", "relationships.json")
_SPACE = re.compile(r"\s+")


def is_debris(kind: str, name: str, base: Vocab) -> bool:
    """Whether a parsed name is parser debris rather than a word of its kind (module docstring)."""
    words = name.split()
    if kind == "relations":
        return name in BARE_PREPOSITIONS
    if kind == "attributes":
        return name in SPATIAL_NOUNS
    colours = COLOUR_WORDS | {n for n, c in base.attributes.items() if c == "colour"}
    if name in colours or not SPATIAL_NOUNS.isdisjoint(words):
        return True
    # "orange cross": a colour and a noun the parser fused; the noun alone is the object
    return len(words) > 1 and words[0] in colours


def clean_name(name) -> str:
    """Lower-case, single-spaced; tabs and newlines cannot survive in a TSV cell."""
    if not isinstance(name, str):
        return ""
    return _SPACE.sub(" ", name).strip().lower()


def _assemble(
    counts: dict[str, Counter], min_count: int, base: Vocab, top_relations: int | None = None,
    drop_debris: bool = False, only_known: bool = False, pairs: Counter | None = None, triples: Counter | None = None,
) -> Vocab:
    def keep(kind: str, limit: int | None = None) -> dict[str, int]:
        known = getattr(base, kind)
        items = sorted(
            ((n, c) for n, c in counts[kind].items()
             if n and c >= min_count and not (drop_debris and is_debris(kind, n, base)) and not (only_known and n not in known)),
            key=lambda x: (-x[1], x[0]),
        )
        return dict(items[:limit] if limit else items)

    def label(kind: str, name: str) -> str:
        # a name the base lacks takes its synonym head's label ("stripy" -> "striped": pattern), or
        # its lemma's ("sits on" -> "sitting on": pose)
        known = getattr(base, kind)
        return known.get(name) or known.get(base.head(kind, name)) or known.get(base.known(kind, name) or "", UNKNOWN)

    objects = keep("objects")
    attributes = keep("attributes")
    relations = keep("relations", top_relations)
    names = set(objects) | set(attributes) | set(relations)
    kept = {"objects": objects, "attributes": attributes, "relations": relations}
    lemmas = {n: base.known("relations", n) or n for n in relations}
    # co-occurrences of kept names only, each seen at least once (a rare pairing is still a seen one)
    object_attributes = {(o, a): n for (o, a), n in (pairs or {}).items() if o in objects and a in attributes}
    relation_triples = {(s, r, o): n for (s, r, o), n in (triples or {}).items() if s in objects and r in relations and o in objects}
    return Vocab(
        objects={n: label("objects", n) for n in objects},
        attributes={n: label("attributes", n) for n in attributes},
        relations={n: label("relations", n) for n in relations},
        antonym_pairs=[(a, b) for a, b in base.antonym_pairs if a in names and b in names],
        plurals=dict(base.plurals),
        counts={"objects": objects, "attributes": attributes, "relations": relations},
        synonyms={k: {n: h for n, h in t.items() if n in kept[k]} for k, t in base.synonyms.items()},
        hypernyms={k: {n: h for n, h in t.items() if n in kept[k]} for k, t in base.hypernyms.items()},
        parts=tuple((p, w) for p, w in base.parts if p in objects and w in objects),
        overlaps=tuple(row for row in base.overlaps if row[0] in objects and row[1] in objects),
        categories=dict(base.categories),
        applies_to={n: k for n, k in base.applies_to.items() if n in attributes},
        kinds=dict(base.kinds),
        symmetric=frozenset(n for n in relations if base.is_symmetric(n)),
        symmetric_between={n: base.symmetric_between[lemmas[n]] for n in relations if lemmas[n] in base.symmetric_between},
        object_attributes=object_attributes,
        relation_triples=relation_triples,
    )


def check_graph(record: dict) -> None:
    """The check of a record vocab build reads: `graph` (records.GraphRecord)."""
    from mosaictool import records

    records.check(records.GraphRecord, record)


def build_from_graphs(
    records: Iterable[dict], *, min_count: int = 30, base: Vocab | None = None, keep_debris: bool = False, only_known: bool = False,
) -> Vocab:
    """Objects (lemma of each entity's head), attributes and relations (as written) seen at least
    `min_count` times in `parse` output; parser debris left out unless `keep_debris`; with
    `only_known`, only the names `base` knows (a closed vocabulary, such as the world's).

    Without `keep_debris`, names are counted as `decompose` reads the graph (`subgraph.graph_nodes`,
    `usable_relations`): a place-noun entity's adjectives are not counted ("a square right of" read
    as "square right": "square" is no attribute), fused compounds count as their noun and
    attributes ("stripy cross": "cross", "stripy"), pronouns and bare prepositions not at all."""
    base = base or load_vocab()
    counts = {"objects": Counter(), "attributes": Counter(), "relations": Counter()}
    pairs, triples = Counter(), Counter()
    for record in records:
        graph = record["graph"]
        if keep_debris:
            lemmas = [clean_name(entity.get("lemma_head") or entity.get("head")) for entity in graph["entities"]]
            for lemma, entity in zip(lemmas, graph["entities"]):
                counts["objects"][lemma] += 1
                counts["attributes"].update(clean_name(a) for a in entity.get("attributes") or [])
                pairs.update((lemma, clean_name(a)) for a in entity.get("attributes") or [])
            for r in graph.get("relations") or []:
                relation = clean_name(r.get("relation"))
                counts["relations"][relation] += 1
                triples[(lemmas[r["subject"]], relation, lemmas[r["object"]])] += 1  # indices checked by GraphRecord
            continue
        objects, relations = _graph_names(graph, base)
        for lemma, attributes in objects:
            counts["objects"][lemma] += 1
            counts["attributes"].update(attributes)
            pairs.update((lemma, a) for a in attributes)
        for subject, relation, obj in relations:
            counts["relations"][relation] += 1
            triples[(subject, relation, obj)] += 1
    return _assemble(counts, min_count, base, drop_debris=not keep_debris, only_known=only_known, pairs=pairs, triples=triples)


def cooccurrences(records: Iterable[dict], base: Vocab) -> tuple[Counter, Counter]:
    """(object, attribute) and (subject, relation, object) counts of `parse` output, read as `decompose`
    reads a graph (`graph_nodes`, `usable_relations`, as `build_from_graphs` counts them), each name
    as `negate` looks it up in `base`: an object by its lemma, an attribute or relation by the name
    `base` lists for it (`Vocab.known`: "sits on" -> "sitting on"); one `base` does not know is left out,
    as no replacement is ever checked against it."""
    pairs, triples = Counter(), Counter()
    for record in records:
        objects, relations = _graph_names(record["graph"], base)
        for lemma, attributes in objects:
            pairs.update((lemma, a) for a in (base.known("attributes", x) for x in attributes) if a)
        for subject, name, obj in relations:
            relation = base.known("relations", name)
            if relation:
                triples[(subject, relation, obj)] += 1
    return pairs, triples


def _graph_names(graph: dict, base: Vocab) -> tuple[list[tuple[str, list[str]]], list[tuple[str, str, str]]]:
    """A graph's objects as (lemma, attributes) and relations as (subject lemma, relation, object lemma), clean
    names, read as `decompose` reads it (`graph_nodes`, `usable_relations`)."""
    nodes = graph_nodes(graph, base)
    objects = [(clean_name(n["lemma"]), [clean_name(a) for a in n["attributes"]]) for n in nodes if n is not None]
    relations = [(clean_name(nodes[r["subject"]]["lemma"]), clean_name(r.get("relation")), clean_name(nodes[r["object"]]["lemma"]))
                 for r in usable_relations(graph, nodes)]
    return objects, relations


def iter_json_array(path: Path, chunk_chars: int = 1 << 20) -> Iterator:
    """The elements of a (possibly multi-GB) JSON array file, one at a time, in bounded memory."""
    decoder = json.JSONDecoder()
    try:
        yield from _json_array(path, chunk_chars, decoder)
    except UnicodeDecodeError as e:
        raise MosaicError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start} of a read); save the file as UTF-8") from None


def _json_array(path: Path, chunk_chars: int, decoder: json.JSONDecoder) -> Iterator:
    with open(path, encoding="utf-8") as f:
        buf, pos, eof = "", 0, False

        def refill() -> bool:
            nonlocal buf, pos, eof
            more = f.read(chunk_chars)
            eof = not more
            buf, pos = buf[pos:] + more, 0
            return not eof

        def skip(chars: str) -> None:
            nonlocal pos
            while True:
                while pos < len(buf) and buf[pos] in chars:
                    pos += 1
                if pos < len(buf) or not refill():
                    return

        skip(" \t\r\n")
        if pos >= len(buf) or buf[pos] != "[":
            raise MosaicError(f"{path}: expected a JSON array (Visual Genome's file format)")
        pos += 1
        while True:
            skip(" \t\r\n,")
            if pos >= len(buf):
                raise MosaicError(f"{path}: the JSON array is not closed (truncated file?)")
            if buf[pos] == "]":
                return
            try:
                value, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as e:
                if refill():
                    continue
                raise MosaicError(f"{path}: invalid JSON near character {e.pos}: {e.msg}") from None
            pos = end
            yield value


def _entries(path: Path, contract) -> Iterator[dict]:
    """The entries of a VG file, each checked (a string where a list belongs is refused, not read as letters)."""
    for i, entry in enumerate(iter_json_array(path)):
        check_entry(contract, entry, path, f"entry {i}", f"VG {path.name}")
        yield entry


def _names(item: dict) -> list:
    names = item.get("names")
    if names is None:
        names = [item.get("name")]
    return names if isinstance(names, list) else [names]


def import_vg(vg_dir: str | Path, *, min_count: int = 30, top_relations: int | None = 50, base: Vocab | None = None) -> Vocab:
    """Count Visual Genome's object names, attributes and predicates (one count per annotated
    instance) and keep those with at least `min_count` instances; relations: the `top_relations`
    most frequent (the paper's R has 50)."""
    vg_dir = Path(vg_dir)
    missing = [name for name in VG_FILES if not (vg_dir / name).exists()]
    if missing:
        raise MosaicError(
            f"{vg_dir}: missing {', '.join(missing)}; download Visual Genome's objects.json, attributes.json "
            "and relationships.json (v1.2+) into that folder"
        )
    base = base or load_vocab()
    counts = {"objects": Counter(), "attributes": Counter(), "relations": Counter()}
    for image in _entries(vg_dir / "objects.json", VG_OBJECT_NAMES):
        for obj in image.get("objects") or []:
            counts["objects"].update({clean_name(n) for n in _names(obj)})
    for image in _entries(vg_dir / "attributes.json", VG_ATTRIBUTES):
        for obj in image.get("attributes") or []:
            counts["attributes"].update({clean_name(a) for a in obj.get("attributes") or []})
    for image in _entries(vg_dir / "relationships.json", VG_PREDICATES):
        for rel in image.get("relationships") or []:
            counts["relations"][clean_name(rel.get("predicate"))] += 1
    return _assemble(counts, min_count, base, top_relations)


WORDNET_FILES = ("data.noun", "index.noun", "lexnames")
KIND_SENSES = 3  # a hypernym's senses `wordnet_overlaps` reads, most frequent first ("table" is furniture in the 2nd, "seat" in the 3rd)


def wordnet_overlaps(vocab: Vocab, wordnet_dir: str | Path) -> tuple[tuple[str, str, str], ...]:
    """Pairs of `vocab`'s objects that WordNet (Fellbaum, 1998) says may name one thing, as overlaps.tsv rows
    (name, other, relation): "synonym" where `name`'s first sense is one of `other`'s senses ("bun" - "roll"),
    "kind" where one of `other`'s first KIND_SENSES senses is a hypernym of it, at any depth ("desk" - "table",
    "cafe" - "restaurant").

    Only a word's first sense, its most frequent in WordNet's tagged corpus, is read on the `name` side: every
    sense would relate words through rare ones ("calculator" - "computer" share a sense meaning a person who
    computes). Pairs the vocabulary already keeps apart (`Vocab.unsafe`: synonyms, hypernyms, parts) are left out.
    """
    reader = _wordnet_reader(Path(wordnet_dir))
    senses = {name: _noun_senses(reader, name) for name in vocab.object_names}
    by_synset: dict = {}  # synset -> (name, the rank of that sense among the name's)
    for name, synsets in senses.items():
        for rank, synset in enumerate(synsets):
            by_synset.setdefault(synset, []).append((name, rank))
    rows = []
    for name, synsets in senses.items():
        if not synsets:
            continue
        first = synsets[0]
        relation = {first: "synonym"}
        for broader in first.closure(lambda s: s.hypernyms() + s.instance_hypernyms()):
            relation.setdefault(broader, "kind")
        unsafe = vocab.unsafe("objects", name)
        found: dict[str, str] = {}
        for synset, rel in relation.items():
            for other, rank in by_synset.get(synset, ()):
                # a broad rare sense of `other` ("dress": clothing in general) would make every garment its kind
                if other != name and other not in unsafe and found.get(other) != "synonym" and (rel == "synonym" or rank < KIND_SENSES):
                    found[other] = rel
        rows.extend((name, other, rel) for other, rel in sorted(found.items()))
    return tuple(rows)


def _noun_senses(reader, name: str) -> list:
    return [s for s in reader.synsets(name.replace(" ", "_"), pos="n") if s is not None]


def _wordnet_reader(folder: Path):
    """nltk's reader of a WordNet database folder (Princeton's WNdb files: data.noun, index.noun, lexnames...)."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    missing = [f for f in WORDNET_FILES if not (folder / f).is_file()]
    if missing:
        raise MosaicError(f"{folder}: not a WordNet database folder (missing {', '.join(missing)}); give the folder "
                          "holding data.noun, e.g. ~/nltk_data/corpora/wordnet after nltk.download('wordnet')")
    with open(folder / "data.noun", "rb") as f:
        if f.readline().endswith(b"\r\n"):  # the synset offsets count one byte per line end
            raise MosaicError(f"{folder / 'data.noun'}: Windows line ends (CRLF) break WordNet's byte offsets; "
                              "convert the folder's files to LF first (e.g. dos2unix)")

    class Reader(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):  # maps senses to another WordNet for multilingual lookups; none here
            return None

    if str(folder) not in nltk.data.path:  # nltk reads only folders on its data path
        nltk.data.path.append(str(folder))
    try:
        with warnings.catch_warnings():  # nltk warns that a bare WordNet has no multilingual data: none is used
            warnings.simplefilter("ignore", UserWarning)
            return Reader(str(folder), None)
    except (PermissionError, ValueError, OSError) as e:
        raise MosaicError(f"{folder}: nltk cannot read this WordNet: {e}") from None
