"""parse: caption -> text scene graph (MosaiCLIP §3.3), with SceneGraphParser (`sng_parser`).

Reads `text_key` (default `caption`); writes `graph`, in the format of what
`sng_parser.Parser('spacy', model=M).parse(caption)` returns for the same spaCy model M:

    graph.entities[]:  span, lemma_span, head, lemma_head, span_bounds [start, end) in spaCy tokens,
                       modifiers[] {dep: det|nummod|amod, span, lemma_span}, type (scene|unknown)
    graph.relations[]: subject, object (indices into entities), relation, lemma_relation

plus one derived field per entity, `attributes`: the lower-cased text of its `amod` modifiers, in
order. Repairs, on by default (`REPAIRS`; `repairs=False` gives sng's graph exactly), fix what
SceneGraphParser misreads: `spatial` (stages/graph_repair.py) makes a spatial phrase ("to the left
of", "right of", "on top of", "above" after a copula) one relation between the noun phrases around
it, as Visual Genome writes them, makes colour words before the noun attributes and adds noun
phrases spaCy did not chunk (without it, every horizontal relation of the synthetic world was
lost); the repairs of stages/caption_repair.py fix real captions: relative pronouns, quantity and
framing nouns ("a group of people"), compounds, predicative adjectives, relations read from the
dependency tree (a verb with its spatial phrase, passives, a copula after a long subject,
coordination), and misspelt object names ("a grocery story" -> grocery store). docs/parse_quality.md
scores each on hand-annotated gold graphs. Graphs are built by
SceneGraphParser's own code from Docs that spaCy's `nlp.pipe` made in batches (optionally in worker
processes), so they equal one-at-a-time parsing, only faster.
"""

from __future__ import annotations

import functools
import multiprocessing
import sys
from collections import deque
from collections.abc import Collection, Iterable, Iterator
from itertools import islice

from mosaictool.errors import MosaicError, RecordError
from mosaictool.nlp import load_nlp, resolve_model
from mosaictool.stages import caption_repair
from mosaictool.stages.graph_repair import _Graph, repair

MAX_CHARS = 2000
# The repairs `parse` applies to sng's graph, in this order: the spatial phrases and colour words of
# graph_repair (and merge_spatial_compounds), then those of caption_repair for real captions.
REPAIRS = ("spatial", *caption_repair.REPAIRS)


class _GraphBuilder:
    """SceneGraphParser's spaCy backend, fed Docs that were already parsed.

    The backend's `parse(sentence)` starts with `doc = self.nlp(sentence)`; giving it an `nlp`
    that returns our pre-parsed Doc runs its graph rules unchanged on the batched parse.
    """

    def __init__(self) -> None:
        import sng_parser
        import sng_parser.backends  # registers the spaCy backend

        # The backend module's class name is bound to None by its registering decorator; the
        # parser's registry holds the class. __init__ is skipped: it would load a second model.
        backend_cls = sng_parser.Parser._backend_registry["spacy"]
        self._backend = backend_cls.__new__(backend_cls)
        self._doc = None
        self._backend.nlp = lambda _sentence: self._doc

    def graph(self, doc) -> dict:
        self._doc = doc
        raw = self._backend.parse(doc.text)
        self._doc = None
        return to_record(raw)


def to_record(raw: dict) -> dict:
    """A SceneGraphParser graph as a JSON-ready record field (tuples become lists), plus
    each entity's `attributes`."""
    entities = []
    for ent in raw["entities"]:
        ent = dict(ent)
        ent["span_bounds"] = list(ent["span_bounds"])
        ent["modifiers"] = [dict(m) for m in ent["modifiers"]]
        ent["attributes"] = [m["span"].lower() for m in ent["modifiers"] if m["dep"] == "amod"]
        entities.append(ent)
    return {"entities": entities, "relations": [dict(r) for r in raw["relations"]]}


def make_check(text_key: str = "caption", max_chars: int = MAX_CHARS, named=None):
    """The check of a record parse reads: the caption in `text_key` (records.ParseRecord), not blank,
    at most `max_chars` long. Its messages name the arguments as `named` does (default:
    records.flag_name, the command line's flags)."""
    from mosaictool import records

    named = named or records.flag_name
    validate = records.checker(records.with_key(records.ParseRecord, text_key, hint=f"choose the caption field with {named('text_key')}"))

    def check(record: dict) -> None:
        validate(record)
        text = record[text_key]
        if not text.strip():
            raise RecordError(f"{text_key!r} is empty")
        if len(text) > max_chars:
            raise RecordError(
                f"{text_key!r} has {len(text)} characters, more than {named('max_chars')} {max_chars}; "
                "is this really a caption?"
            )

    return check


SPATIAL_HEADS = frozenset({"left", "right", "top", "front", "bottom", "back", "side", "middle"})


def merge_spatial_compounds(graph: dict) -> dict:
    """S -p-> E -of-> O, where E is a bare spatial noun ("the left") in no other relation, becomes
    S -"p E of"-> O ("to the left of"), and E is dropped (indices renumbered, order kept)."""
    entities, relations = graph["entities"], graph["relations"]
    merged: dict[int, dict] = {}  # index of the incoming relation -> its replacement
    dropped_rels: set[int] = set()
    dropped_ents: set[int] = set()
    for k, ent in enumerate(entities):
        if ent["lemma_head"].lower() not in SPATIAL_HEADS:
            continue
        touching = [i for i, r in enumerate(relations) if k in (r["subject"], r["object"])]
        incoming = [i for i in touching if relations[i]["object"] == k]
        outgoing = [i for i in touching if relations[i]["subject"] == k and relations[i]["lemma_relation"].lower() == "of"]
        if len(touching) != 2 or len(incoming) != 1 or len(outgoing) != 1:
            continue
        r_in, r_out = relations[incoming[0]], relations[outgoing[0]]
        if r_in["subject"] == r_out["object"]:
            continue
        merged[incoming[0]] = {"subject": r_in["subject"], "object": r_out["object"],
                               "relation": f"{r_in['relation']} {ent['span']} of",
                               "lemma_relation": f"{r_in['lemma_relation']} {ent['lemma_span']} of"}
        dropped_rels.add(outgoing[0])
        dropped_ents.add(k)
    if not dropped_ents:
        return graph
    renumber = {}
    for k in range(len(entities)):
        if k not in dropped_ents:
            renumber[k] = len(renumber)
    rels = []
    for i, r in enumerate(relations):
        if i in dropped_rels:
            continue
        r = merged.get(i, r)
        rels.append({**r, "subject": renumber[r["subject"]], "object": renumber[r["object"]]})
    return {"entities": [e for k, e in enumerate(entities) if k not in dropped_ents], "relations": rels}


# --- worker processes -------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _pipeline(model: str) -> tuple:
    """spaCy's `model` and a graph builder, loaded once per process: one model kept, a parse with
    another replaces it, with the English words its lemmatizer knows (for the `typos` repair). Forked
    workers inherit the parent's cached pipeline and load nothing."""
    nlp = load_nlp(model)
    return nlp, _GraphBuilder(), caption_repair.english_words(nlp)


def _init_worker(model: str) -> None:
    """Pool initializer: the pipeline is ready before the first batch (spawned workers load it here)."""
    _pipeline(model)


def repaired(graph: dict, doc, repairs: frozenset[str], lexicon: frozenset[str] = frozenset()) -> dict:
    """sng's `graph` of `doc` with the named repairs (`REPAIRS`) applied, in `REPAIRS` order; `lexicon`: the
    English words of the pipeline (`caption_repair.english_words`), without which `typos` corrects no
    unknown word."""
    if "spatial" in repairs:
        graph = merge_spatial_compounds(repair(graph, doc))
    steps = [fn for name, fn in caption_repair.REPAIRS.items() if name in repairs]
    if not steps:
        return graph
    g = _Graph(graph, doc, lexicon)
    for fn in steps:
        fn(g)
    return g.record() if g.changed else graph


def repair_names(repairs: bool | Collection[str]) -> frozenset[str]:
    """The repairs `parse(repairs=...)` applies: all for True, none for False, else those named."""
    if repairs is True:
        return frozenset(REPAIRS)
    if repairs is False:
        return frozenset()
    unknown = sorted(set(repairs) - set(REPAIRS))
    if unknown:
        raise MosaicError(f"unknown parse repair(s) {', '.join(unknown)}; known: {', '.join(REPAIRS)}")
    return frozenset(repairs)


def doc_tokens(doc, model: str) -> dict:
    """The record field `tokens`: what spaCy's `model` made of the caption, enough to rebuild the Doc
    without the model (`negate`'s NegCLIP swaps read its tags, dependencies and noun chunks): words
    and the space after each, fine-grained tags, POS, dependency labels, heads (token indices)."""
    # one pass over the Doc: each spaCy Token is an object made anew on every access
    columns = zip(*((t.text, bool(t.whitespace_), t.tag_, t.pos_, t.dep_, t.head.i) for t in doc)) if len(doc) else [()] * 6
    return {"model": model, **{name: list(values) for name, values in zip(("words", "spaces", "tags", "pos", "deps", "heads"), columns)}}


def _parse_texts(texts: list[str], batch_size: int, model: str, repairs: frozenset[str] = frozenset(REPAIRS),
                 tokens: bool = False) -> list[dict]:
    """The fields parse adds for each text: `graph`, and with `tokens` the Doc's `tokens`."""
    nlp, builder, lexicon = _pipeline(model)
    docs = nlp.pipe(texts, batch_size=batch_size)
    if not tokens:
        return [{"graph": repaired(builder.graph(doc), doc, repairs, lexicon)} for doc in docs]
    return [{"graph": repaired(builder.graph(doc), doc, repairs, lexicon), "tokens": doc_tokens(doc, model)} for doc in docs]


def _batches(records: Iterable[dict], size: int) -> Iterator[list[dict]]:
    it = iter(records)
    while batch := list(islice(it, size)):
        yield batch


def parse(
    records: Iterable[dict],
    *,
    text_key: str = "caption",
    model: str | None = None,
    batch_size: int = 256,
    workers: int = 1,
    repairs: bool | Collection[str] = True,
    spatial_compounds: bool = True,
    memo: int = 100_000,
    tokens: bool = True,
) -> Iterator[dict]:
    """Add `graph` to every record, in input order whatever `workers` and `batch_size` are. A text
    among the last `memo` distinct ones is parsed once (the demo's 38,022 captions are 24,336
    texts); every record gets a graph of its own. `repairs`: True (all of `REPAIRS`), False
    (SceneGraphParser's graph exactly) or the names of those to apply; `spatial_compounds=False`
    is `repairs=False` (its older name). `tokens`: also add the Doc's `tokens` (`doc_tokens`), which
    `negate --text negclip,order` reads instead of running spaCy again."""
    chosen = repair_names(repairs if spatial_compounds else False)
    name = resolve_model(model)
    _init_worker(name)  # load once here: a bad model fails before any work, and forks share it
    known = _Graphs(max(memo, 8 * batch_size * max(1, workers)))
    batches = _batches(records, batch_size)
    if workers <= 1:
        for batch in batches:
            texts = known.new_texts(batch, text_key)
            known.add(texts, _parse_texts(texts, batch_size, name, chosen, tokens))
            yield from known.merge(batch, text_key)
        return

    method = "fork" if sys.platform.startswith("linux") else "spawn"
    ctx = multiprocessing.get_context(method)
    # Bounded window of batches in flight: Pool.imap would read the whole input ahead.
    window = 2 * workers
    with ctx.Pool(workers, initializer=_init_worker, initargs=(name,)) as pool:
        pending: deque = deque()
        for batch in batches:
            texts = known.new_texts(batch, text_key)  # also not those of the batches in flight
            pending.append((batch, texts, pool.apply_async(_parse_texts, (texts, batch_size, name, chosen, tokens))))
            if len(pending) >= window:
                batch, texts, result = pending.popleft()
                known.add(texts, result.get())
                yield from known.merge(batch, text_key)
        while pending:
            batch, texts, result = pending.popleft()
            known.add(texts, result.get())
            yield from known.merge(batch, text_key)


class _Graphs:
    """The graphs (and tokens) of the last `limit` distinct texts (as JSON: each record decodes its own copy),
    and the texts sent to be parsed and not back yet. Batches come back in the order they were
    sent, so a text in flight is known by the time a later batch that has it is merged; `limit`
    leaves room for every batch in flight."""

    def __init__(self, limit: int):
        import collections

        self.limit = limit
        self.graphs: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self.in_flight: set[str] = set()

    def new_texts(self, batch: list[dict], text_key: str) -> list[str]:
        """The batch's distinct texts that are neither known nor in flight (now in flight)."""
        new = []
        for rec in batch:
            text = rec[text_key]
            if text in self.graphs:
                self.graphs.move_to_end(text)  # kept until this batch is merged
            elif text not in self.in_flight:
                self.in_flight.add(text)
                new.append(text)
        return new

    def add(self, texts: list[str], fields: list[dict]) -> None:
        import orjson

        for text, added in zip(texts, fields):
            self.in_flight.discard(text)
            self.graphs[text] = orjson.dumps(added)
            self.graphs.move_to_end(text)
        while len(self.graphs) > self.limit:
            self.graphs.popitem(last=False)

    def merge(self, batch: list[dict], text_key: str) -> Iterator[dict]:
        import orjson

        for rec in batch:
            yield {**rec, **orjson.loads(self.graphs[rec[text_key]])}
