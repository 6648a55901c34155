"""negate: positive sub-graphs -> hard negatives (MosaiCLIP §3.4, App. B), plus caption-level text
negatives (NegCLIP, replace, bigram shuffle, ARO order; see `text_negatives`).

Reads `subgraphs` (from `decompose`), and for text negatives the caption and `graph`. Writes
`negatives`, a list of

    {subgraph: int|null, kind: "graph"|"text", category: "obj"|"attr"|"rel"|"text",
     transform: str, slot: str|null, from: str|null, to: str|null,
     graph: {objects, relations}|null, text: str|null, key: str|null}

`subgraph` indexes `subgraphs`: the positive that was perturbed (for text negatives, the caption's
entry, or null when decompose dropped it). Graph negatives carry the perturbed sub-graph (rendered
by `template`), text negatives their text. Slots name what changed: `objects[i].attributes[j]`,
`objects[i].noun`, `relations[0]`, `relations[1]` (the edge a join adds), and `attributes` /
`objects` for swaps, whose `from` / `to` read "subject|object" before and after.

Graph transforms (App. B), on every positive sub-graph:
- f_obj (category obj), one object with attributes: each attribute in turn replaced from A;
- f_attr (attr), two objects and a relation: the objects' attribute lists swapped
  ("f_attr:swap"), and each attribute in turn replaced from A ("f_attr:replace");
- f_rel (rel), two objects and a relation: the objects swapped ("f_rel:swap"), subject or object
  replaced from N ("f_rel:replace_object"), the relation replaced from R
  ("f_rel:replace_relation"), and the sub-graph joined through a random relation to a random
  attributed object ("f_rel:join").
Replacements stay within the replaced word's group / category / type when the vocabulary knows it
("minimally perturbed"; a colour for a colour, a spatial relation for a spatial one; a spatial
relation by its opposites on the same axis, "to the left of" -> "to the right of", when the
vocabulary's antonyms name them, since "above" may hold as well), or come from the whole vocabulary
with `type_aware=False` (the paper's uniform sampling). Either way a replacement is never from the
word's synonym group, its hypernyms or its hyponyms (`Vocab.unsafe`: "star" -> "shape", "diamond"
-> "rhombus", "above" -> "over" would not be false). Then categories are
drawn with probabilities `probs` (obj, attr, rel) among those that have candidates left, a
candidate uniformly within the category, until `max_negatives` distinct negatives that equal no
positive are chosen; a candidate whose canonical key is one of the caption's own sub-graph keys
(`subgraph_keys`, recomputed from `graph` with this vocabulary) is entailed by the caption and is
dropped for the next draw. Graph negatives carry their canonical `key` (text negatives: null). Text negatives come on top of those.

Randomness comes from RNGs seeded by (seed, id, purpose) alone, so the output does not depend on
batch size, workers, or which other negatives were asked for.
"""

from __future__ import annotations

import math
import multiprocessing
import sys
from bisect import bisect
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import accumulate, islice

from mosaictool.errors import MosaicError, RecordError
from mosaictool.stages.subgraph import (
    canonical_key,
    graph_identity,
    node_key,
    normalize_text,
    record_rng,
    subgraph_keys,
)
from mosaictool.vocab import UNKNOWN

CATEGORIES = ("obj", "attr", "rel")
DEFAULT_PROBS = (0.15, 0.425, 0.425)  # Singh et al. 2023, App. H.1: p_obj = 0.15, p_attr = p_rel; the same as train --category-probs
DEFAULT_MAX = 6
ORDER_TRIES = 5
TEXT_METHODS = ("negclip", "replace", "shuffle", "order")
SPACY_METHODS = frozenset({"negclip", "order"})
NEGCLIP_CATEGORY = {
    "negclip:np": "obj", "negclip:NN": "obj", "negclip:NNS": "obj",
    "negclip:ADJ": "attr", "negclip:vp": "rel", "negclip:ADV": "text",
}


def parse_probs(text: str) -> tuple[float, float, float]:
    """'obj,attr,rel' probabilities, e.g. '0.15,0.425,0.425', summing to 1 (to within rounding of
    the last digit given, 1e-3; then normalised exactly)."""
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or not all(0 <= v < math.inf for v in values) or sum(values) <= 0:  # NaN and inf too
        raise MosaicError(f"--probs must be three non-negative numbers 'obj,attr,rel' with a positive sum, got {text!r}")
    total = sum(values)
    if not math.isclose(total, 1.0, abs_tol=1e-3):
        raise MosaicError(f"--probs {text!r}: probabilities must sum to 1, these sum to {total:g} "
                          f"(for these proportions: {','.join(f'{v / total:.4g}' for v in values)})")
    return tuple(v / total for v in values)


def parse_text_methods(text: str) -> tuple[str, ...]:
    methods = [m.strip() for m in text.split(",")] if text.strip() else []
    if not all(methods):
        raise MosaicError(f"--text {text!r}: an empty item between commas; choose from {','.join(TEXT_METHODS)}")
    unknown = [m for m in methods if m not in TEXT_METHODS]
    if unknown:
        raise MosaicError(f"--text: unknown method(s) {', '.join(unknown)}; choose from {','.join(TEXT_METHODS)}")
    twice = [m for m in TEXT_METHODS if methods.count(m) > 1]
    if twice:
        raise MosaicError(f"--text {text!r}: {twice[0]} is named twice; give each method once")
    return tuple(m for m in TEXT_METHODS if m in methods)  # fixed order whatever the user wrote


def make_check(text_methods: tuple[str, ...] = (), text_key: str = "caption"):
    """The check of a record negate reads: `subgraphs` and `graph` (records.NegateRecord) and, for
    text negatives, the caption in `text_key`."""
    from mosaictool import records

    schema = records.NegateRecord
    if text_methods:
        schema = records.with_key(schema, text_key, hint="needed by --text; choose it with --text-key")
    validate = records.checker(schema)

    def check(record: dict) -> None:
        validate(record)
        if text_methods and not record[text_key].strip():
            raise RecordError(f"{text_key}: empty, and --text needs the caption")
        if "replace" in text_methods and record.get("graph") is None:
            raise RecordError("missing 'graph', needed by --text replace (run `mosaictool parse` first)")

    return check


# --- sampling from the vocabulary --------------------------------------------------------------


class _Sampler:
    def __init__(self, vocab, rng, type_aware: bool):
        self.vocab, self.rng, self.type_aware = vocab, rng, type_aware
        # The draw behind rng.choice and rng.randrange, without their argument checks.
        self.below = rng._randbelow
        self._axis: dict[str, tuple[str, ...]] = {}

    def _pick(self, kind: str, pool: tuple[str, ...], everything: tuple[str, ...], exclude: set[str]) -> str | None:
        # Exclusions are a handful of names: the first pool entry outside them usually settles it.
        if not self.type_aware or kind == UNKNOWN or exclude.issuperset(pool):
            pool = everything
        if not pool:
            return None
        below, n = self.below, len(pool)
        for _ in range(8):  # rejection first: pools are large and exclusions few
            choice = pool[below(n)]
            if choice not in exclude:
                return choice
        left = [p for p in pool if p not in exclude]
        return left[below(len(left))] if left else None

    def _kind(self, kind: str, name: str) -> str:
        # a name the table lacks takes its synonym head's label ("on the right of": spatial)
        table = getattr(self.vocab, kind)
        return table.get(name) or table.get(self.vocab.head(kind, name), UNKNOWN)

    def attribute(self, current: str, exclude: set[str]) -> str | None:
        v = self.vocab
        kind = self._kind("attributes", current.lower())  # v.category(current)
        unsafe = v.unsafe("attributes", current.lower())  # "little" for "small" could be true too
        return self._pick(kind, v.attributes_by_category.get(kind, ()), v.attribute_names, exclude | unsafe | {current})

    def object(self, lemma: str, exclude: set[str]) -> str | None:
        v = self.vocab
        kind = self._kind("objects", lemma.lower())  # v.group(lemma)
        unsafe = v.unsafe("objects", lemma.lower())  # "rhombus" or "shape" for "diamond" is no negative
        return self._pick(kind, v.objects_by_group.get(kind, ()), v.object_names, exclude | unsafe | {lemma})

    def relation(self, current: str) -> str | None:
        v = self.vocab
        current = current.lower()
        kind = self._kind("relations", current)  # v.relation_type(current)
        exclude = set(v.unsafe("relations", current)) | {current}
        if self.type_aware and kind == "spatial":
            # A spatial relation on the other axis ("above" for "to the left of") may hold as well:
            # replace within the axis, by the opposites the vocabulary knows (and their synonyms).
            pool = self._same_axis(current)
            if pool:
                return self._pick(kind, pool, pool, exclude)
        return self._pick(kind, v.relations_by_type.get(kind, ()), v.relation_names, exclude)

    def _same_axis(self, current: str) -> tuple[str, ...]:
        if current not in self._axis:
            v = self.vocab
            head = v.head("relations", current)
            group = {head, current} | {n for n, h in v.synonyms.get("relations", {}).items() if v.head("relations", n) == head}
            opposites = {a for m in group for a in v.antonyms.get(m, ())}
            opposites |= {n for n in v.relations if v.head("relations", n) in {v.head("relations", a) for a in opposites}}
            self._axis[current] = tuple(sorted(n for n in opposites if n in v.relations))
        return self._axis[current]


def _node(lemma: str, vocab, *, plural: bool = False, count=None, attributes=(), determiner="a") -> dict:
    plural_form = vocab.plural(lemma)
    plural = plural or plural_form == lemma  # "fries", "glasses" only come as plurals
    return {
        "noun": plural_form if plural else lemma,
        "lemma": lemma,
        "plural": plural,
        "count": count,
        "attributes": list(attributes),
        "determiner": determiner,
        "entity": None,
    }


# A candidate is drawn in full (every RNG draw, in the order the transforms are listed) but built
# only once sampling picks it: a draft is (subgraph index, category, transform, slot, from, change),
# where `change` says how the negative's graph differs from the positive's.
_Draft = tuple


def _drafts(index: int, sg: dict, sampler: _Sampler, pools: dict[str, list[_Draft]]) -> None:
    """Append to `pools` the drafts of every negative the three transforms make of one positive."""
    objects, relations = sg["objects"], sg["relations"]
    if len(objects) == 1 and not relations:
        category, transform = "obj", "f_obj"
    elif len(objects) == 2 and len(relations) == 1:
        category, transform = "attr", "f_attr:replace"
        s, o = objects
        if s["attributes"] != o["attributes"]:
            before = f"{' '.join(s['attributes'])}|{' '.join(o['attributes'])}"
            pools["attr"].append((index, "attr", "f_attr:swap", "attributes", before, ("swap_attributes",)))
    else:
        return
    pool = pools[category]
    for i, obj in enumerate(objects):  # f_obj, f_attr:replace: each attribute in turn
        attributes = obj["attributes"]
        for j, attr in enumerate(attributes):
            new = sampler.attribute(attr, set(attributes))
            if new is not None:
                pool.append((index, category, transform, f"objects[{i}].attributes[{j}]", attr, ("attribute", i, j, new)))
    if category == "obj":
        return

    pool = pools["rel"]
    rel = relations[0]
    subj, obj = objects[rel["subject"]]["noun"], objects[rel["object"]]["noun"]
    pool.append((index, "rel", "f_rel:swap", "objects", f"{subj}|{obj}", ("swap_objects",)))
    lemmas = {x["lemma"] for x in objects}
    for i, node in enumerate(objects):
        new = sampler.object(node["lemma"], lemmas)
        if new is not None:
            pool.append((index, "rel", "f_rel:replace_object", f"objects[{i}].noun", node["noun"], ("object", i, new)))
    new = sampler.relation(rel["relation"])
    if new is not None:
        pool.append((index, "rel", "f_rel:replace_relation", "relations[0]", rel["relation"], ("relation", new)))
    # join: a random attributed object, tied to one of the two through a random relation
    rng, vocab = sampler.rng, sampler.vocab
    noun, attribute = rng.choice(vocab.object_names), rng.choice(vocab.attribute_names)
    anchor, edge = sampler.below(2), rng.choice(vocab.relation_names)
    pool.append((index, "rel", "f_rel:join", "relations[1]", None, ("join", noun, attribute, anchor, edge)))


def _build(draft: _Draft, sg: dict, keys: list[tuple], vocab) -> tuple[dict, tuple]:
    """The negative a draft describes, and its graph_key given the positive's node keys. Nodes and
    relations it leaves alone are the positive's own dicts (as decompose shares nodes between
    sub-graphs); changed ones are new."""
    index, category, transform, slot, before, change = draft
    objects, relations, keys = list(sg["objects"]), list(sg["relations"]), list(keys)
    op = change[0]
    if op == "attribute":
        _, i, j, after = change
        attributes = list(objects[i]["attributes"])
        attributes[j] = after
        objects[i] = {**objects[i], "attributes": attributes}
        keys[i] = node_key(objects[i])
    elif op == "swap_attributes":
        s, o = objects
        objects = [{**s, "attributes": list(o["attributes"])}, {**o, "attributes": list(s["attributes"])}]
        keys = [node_key(x) for x in objects]
        after = f"{' '.join(o['attributes'])}|{' '.join(s['attributes'])}"
    elif op == "swap_objects":
        rel = relations[0]
        relations[0] = {**rel, "subject": rel["object"], "object": rel["subject"]}
        after = f"{objects[rel['object']]['noun']}|{objects[rel['subject']]['noun']}"
    elif op == "object":
        _, i, new = change
        node = objects[i]
        objects[i] = _node(
            new, vocab, plural=node["plural"], count=node.get("count"), attributes=node["attributes"],
            determiner=node.get("determiner"),
        )
        keys[i] = node_key(objects[i])
        after = objects[i]["noun"]
    elif op == "relation":
        after = change[1]
        relations[0] = {**relations[0], "relation": after}
    else:  # join
        _, noun, attribute, anchor, edge = change
        extra = _node(noun, vocab, attributes=[attribute])
        objects.append(extra)
        keys.append(node_key(extra))
        relations.append({"subject": anchor, "object": 2, "relation": edge})
        after = f"{edge} {attribute} {extra['noun']}"
    negative = {
        "subgraph": index, "kind": "graph", "category": category, "transform": transform,
        "slot": slot, "from": before, "to": after, "graph": {"objects": objects, "relations": relations}, "text": None,
    }
    return negative, graph_identity(keys, relations)


def graph_candidates(index: int, sg: dict, sampler: _Sampler) -> dict[str, list[dict]]:
    """Every negative the three transforms make of one positive sub-graph, by category."""
    keys = [node_key(o) for o in sg["objects"]]
    pools: dict[str, list[_Draft]] = {c: [] for c in CATEGORIES}
    _drafts(index, sg, sampler, pools)
    return {c: [_build(d, sg, keys, sampler.vocab)[0] for d in drafts] for c, drafts in pools.items()}


def graph_negatives(record: dict, vocab, *, max_negatives: int, probs, seed: int, type_aware: bool) -> list[dict]:
    subgraphs = record["subgraphs"]
    positives = [(i, sg) for i, sg in enumerate(subgraphs) if sg.get("kind") != "caption"]
    if max_negatives <= 0 or not positives:
        return []
    rng = record_rng(seed, record["id"], "graph")
    sampler = _Sampler(vocab, rng, type_aware)
    pools: dict[str, list[_Draft]] = {c: [] for c in CATEGORIES}
    for i, sg in positives:
        _drafts(i, sg, sampler, pools)
    node_keys = {i: [node_key(o) for o in sg["objects"]] for i, sg in positives}
    taken = {graph_identity(node_keys[i], sg["relations"]) for i, sg in positives}
    # What the caption itself says (every sub-graph and weaker reading, synonyms included): a
    # candidate with one of these keys is true of the image, so it is dropped and another drawn.
    entailed = set(record.get("subgraph_keys") or ())
    if isinstance(record.get("graph"), dict) and isinstance(record["graph"].get("entities"), list):
        entailed.update(subgraph_keys(record["graph"], vocab, max_keys=1 << 30))
    chosen = []
    live: list[str] = []  # the categories with drafts left; pools only shrink
    while len(chosen) < max_negatives:
        if not live:
            live = [c for c, p in zip(CATEGORIES, probs) if pools[c] and p > 0]
            if not live:
                break
            cumulative = list(accumulate(p for c, p in zip(CATEGORIES, probs) if c in live))
        # Random.choices(live, weights) with the weights summed once per set of live categories:
        # the same single random() draw and bisection.
        category = live[bisect(cumulative, rng.random() * (cumulative[-1] + 0.0), 0, len(live) - 1)]
        pool = pools[category]
        draft = pool.pop(sampler.below(len(pool)))
        if not pool:
            live = []
        candidate, key = _build(draft, subgraphs[draft[0]], node_keys[draft[0]], vocab)
        if key in taken:
            continue
        taken.add(key)
        candidate["key"] = canonical_key(candidate["graph"], vocab)
        if candidate["key"] not in entailed:
            chosen.append(candidate)
    return chosen


def text_negatives(record: dict, vocab, *, methods, seed: int, text_key: str, doc=None) -> list[dict]:
    """Caption-level negatives in a fixed order: negclip, replace, shuffle, order; each distinct
    from the caption and from each other after `normalize_text`."""
    from mosaictool.perturb import ORDER_FUNCTIONS
    from mosaictool.stages import text_negatives as tn

    caption = record[text_key]
    caption_index = next((i for i, sg in enumerate(record["subgraphs"]) if sg.get("kind") == "caption"), None)
    made: list[tuple] = []  # (transform, category, slot, from, to, text)
    rid = record["id"]
    if "negclip" in methods:
        for transform, a, b, text in tn.negclip_swaps(doc, record_rng(seed, rid, "negclip")):
            made.append((transform, NEGCLIP_CATEGORY[transform], transform.split(":")[1], a, b, text))
    if "replace" in methods:
        for transform, category, a, b, text in tn.replace_negatives(caption, record["graph"], vocab, record_rng(seed, rid, "replace")):
            made.append((transform, category, category, a, b, text))
    if "shuffle" in methods:
        text = tn.shuffle_bigrams(caption, record_rng(seed, rid, "shuffle"))
        if text is not None:
            made.append(("shuffle:bigram", "text", None, None, None, text))
    original = normalize_text(caption)
    if "order" in methods:
        for transform, fn in ORDER_FUNCTIONS.items():
            source = doc if transform in ("order:nouns_adj", "order:allbut_nouns_adj") else caption
            rng = record_rng(seed, rid, transform)
            for _ in range(ORDER_TRIES):  # a draw can give the caption back (two nouns: one time in two)
                text = fn(source, rng)
                if normalize_text(text) != original:
                    made.append((transform, "text", None, None, None, text))
                    break
    seen = {original}
    out = []
    for transform, category, slot, before, after, text in made:
        norm = normalize_text(text)
        if norm in seen or not norm:
            continue
        seen.add(norm)
        out.append({
            "subgraph": caption_index, "kind": "text", "category": category, "transform": transform,
            "slot": slot, "from": before, "to": after, "graph": None, "text": text, "key": None,
        })
    return out


# --- the stage ----------------------------------------------------------------------------------

_STATE: dict = {}


def _setup(options: dict) -> None:
    from mosaictool.vocab import load

    if _STATE.get("options") == options:
        return  # forked workers inherit the parent's state
    _STATE.clear()
    _STATE["options"] = options
    _STATE["vocab"] = load(options["vocab"])
    if SPACY_METHODS & set(options["text_methods"]):
        from mosaictool.nlp import load_nlp

        _STATE["nlp"] = load_nlp(options["model"])


def _negate_batch(records: list[dict]) -> list[dict]:
    options, vocab = _STATE["options"], _STATE["vocab"]
    methods, text_key = options["text_methods"], options["text_key"]
    docs = [None] * len(records)
    if "nlp" in _STATE:
        docs = list(_STATE["nlp"].pipe((r[text_key] for r in records), batch_size=max(1, len(records))))
    out = []
    for record, doc in zip(records, docs):
        negatives = graph_negatives(
            record, vocab, max_negatives=options["max_negatives"], probs=options["probs"],
            seed=options["seed"], type_aware=options["type_aware"],
        )
        if methods:
            negatives += text_negatives(record, vocab, methods=methods, seed=options["seed"], text_key=text_key, doc=doc)
        out.append({**record, "negatives": negatives})
    return out


def negate(
    records: Iterable[dict],
    *,
    vocab: str | None = None,
    max_negatives: int = DEFAULT_MAX,
    probs: tuple[float, float, float] = DEFAULT_PROBS,
    seed: int = 0,
    type_aware: bool = True,
    text_methods: tuple[str, ...] = (),
    text_key: str = "caption",
    model: str | None = None,
    batch_size: int = 256,
    workers: int = 1,
) -> Iterator[dict]:
    """Add `negatives` to every record, in input order; `vocab` is a vocabulary folder (None: shipped)."""
    options = {
        "vocab": vocab, "max_negatives": max_negatives, "probs": tuple(probs), "seed": seed,
        "type_aware": type_aware, "text_methods": tuple(text_methods), "text_key": text_key, "model": model,
    }
    _setup(options)  # a bad vocabulary or model fails before any work
    batches = _batches(records, batch_size)
    if workers <= 1:
        for batch in batches:
            yield from _negate_batch(batch)
        return
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    with ctx.Pool(workers, initializer=_setup, initargs=(options,)) as pool:
        pending: deque = deque()
        for batch in batches:
            pending.append(pool.apply_async(_negate_batch, (batch,)))
            if len(pending) >= 2 * workers:  # bounded read-ahead
                yield from pending.popleft().get()
        while pending:
            yield from pending.popleft().get()


def _batches(records: Iterable[dict], size: int) -> Iterator[list[dict]]:
    it = iter(records)
    while batch := list(islice(it, size)):
        yield batch
