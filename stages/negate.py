"""negate: positive sub-graphs -> hard negatives (MosaiCLIP §3.4, App. B), plus caption-level text
negatives (NegCLIP, replace, bigram shuffle, ARO order; see `text_negatives`).

Reads `subgraphs` (from `decompose`), and for text negatives the caption and `graph`. Writes
`negatives`, a list of

    {subgraph: int|null, kind: "graph"|"text", category: "obj"|"attr"|"rel"|"text",
     transform: str, slot: str|null, from: str|null, to: str|null,
     graph: {objects, relations}|null, text: str|null}

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
("minimally perturbed"; a colour for a colour, a spatial relation for a spatial one), or come from
the whole vocabulary with `type_aware=False` (the paper's uniform sampling). Then categories are
drawn with probabilities `probs` (obj, attr, rel) among those that have candidates left, a
candidate uniformly within the category, until `max_negatives` distinct negatives that equal no
positive are chosen. Text negatives come on top of those.

Randomness comes from RNGs seeded by (seed, id, purpose) alone, so the output does not depend on
batch size, workers, or which other negatives were asked for.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import islice

from mosaictool.errors import MosaicError, RecordError
from mosaictool.stages.subgraph import check_subgraphs, graph_key, normalize_text, record_rng
from mosaictool.vocab import UNKNOWN

CATEGORIES = ("obj", "attr", "rel")
DEFAULT_PROBS = (0.08, 0.46, 0.46)  # paper: p_obj in {0, .08, .15}, p_attr = p_rel
DEFAULT_MAX = 6
ORDER_TRIES = 5
TEXT_METHODS = ("negclip", "replace", "shuffle", "order")
SPACY_METHODS = frozenset({"negclip", "order"})
NEGCLIP_CATEGORY = {
    "negclip:np": "obj", "negclip:NN": "obj", "negclip:NNS": "obj",
    "negclip:ADJ": "attr", "negclip:vp": "rel", "negclip:ADV": "text",
}


def parse_probs(text: str) -> tuple[float, float, float]:
    """'obj,attr,rel' probabilities, e.g. '0.08,0.46,0.46'; normalised to sum 1."""
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or any(v < 0 for v in values) or sum(values) <= 0:
        raise MosaicError(f"--probs must be three non-negative numbers 'obj,attr,rel' with a positive sum, got {text!r}")
    total = sum(values)
    return tuple(v / total for v in values)


def parse_text_methods(text: str) -> tuple[str, ...]:
    methods = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in methods if m not in TEXT_METHODS]
    if unknown:
        raise MosaicError(f"--text: unknown method(s) {', '.join(unknown)}; choose from {','.join(TEXT_METHODS)}")
    return tuple(m for m in TEXT_METHODS if m in methods)  # fixed order whatever the user wrote


def make_check(text_methods: tuple[str, ...] = (), text_key: str = "caption"):
    def check(record: dict) -> None:
        check_subgraphs(record)
        if text_methods:
            if not isinstance(record.get(text_key), str) or not record[text_key].strip():
                raise RecordError(f"missing caption {text_key!r}, needed by --text (choose it with --text-key)")
            if "replace" in text_methods and not isinstance((record.get("graph") or {}).get("entities"), list):
                raise RecordError("--text replace needs the 'graph' from `mosaictool parse`")

    return check


# --- sampling from the vocabulary --------------------------------------------------------------


class _Sampler:
    def __init__(self, vocab, rng, type_aware: bool):
        self.vocab, self.rng, self.type_aware = vocab, rng, type_aware

    def _pick(self, kind: str, pool: tuple[str, ...], everything: tuple[str, ...], exclude: set[str]) -> str | None:
        if not self.type_aware or kind == UNKNOWN or not set(pool) - exclude:
            pool = everything
        for _ in range(8):  # rejection first: pools are large and exclusions few
            choice = self.rng.choice(pool)
            if choice not in exclude:
                return choice
        left = [p for p in pool if p not in exclude]
        return self.rng.choice(left) if left else None

    def attribute(self, current: str, exclude: set[str]) -> str | None:
        v = self.vocab
        kind = v.category(current)
        return self._pick(kind, v.attributes_by_category.get(kind, ()), v.attribute_names, exclude | {current})

    def object(self, lemma: str, exclude: set[str]) -> str | None:
        v = self.vocab
        kind = v.group(lemma)
        return self._pick(kind, v.objects_by_group.get(kind, ()), v.object_names, exclude | {lemma})

    def relation(self, current: str) -> str | None:
        v = self.vocab
        kind = v.relation_type(current)
        return self._pick(kind, v.relations_by_type.get(kind, ()), v.relation_names, {current})


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


def _copy(sg: dict) -> dict:
    return {
        "objects": [{**o, "attributes": list(o["attributes"])} for o in sg["objects"]],
        "relations": [dict(r) for r in sg["relations"]],
    }


def _candidate(index, category, transform, slot, before, after, graph) -> dict:
    return {
        "subgraph": index, "kind": "graph", "category": category, "transform": transform,
        "slot": slot, "from": before, "to": after, "graph": graph, "text": None,
    }


def graph_candidates(index: int, sg: dict, sampler: _Sampler) -> dict[str, list[dict]]:
    """Every negative the three transforms make of one positive sub-graph, by category."""
    pools: dict[str, list[dict]] = {c: [] for c in CATEGORIES}
    objects, relations = sg["objects"], sg["relations"]

    def replace_attributes(category: str, transform: str) -> None:
        for i, obj in enumerate(objects):
            for j, attr in enumerate(obj["attributes"]):
                new = sampler.attribute(attr, set(obj["attributes"]))
                if new is None:
                    continue
                g = _copy(sg)
                g["objects"][i]["attributes"][j] = new
                pools[category].append(_candidate(index, category, transform, f"objects[{i}].attributes[{j}]", attr, new, g))

    if len(objects) == 1 and not relations:
        replace_attributes("obj", "f_obj")
    if len(objects) == 2 and len(relations) == 1:
        s, o = objects
        if s["attributes"] != o["attributes"]:
            g = _copy(sg)
            g["objects"][0]["attributes"], g["objects"][1]["attributes"] = list(o["attributes"]), list(s["attributes"])
            before = f"{' '.join(s['attributes'])}|{' '.join(o['attributes'])}"
            after = f"{' '.join(o['attributes'])}|{' '.join(s['attributes'])}"
            pools["attr"].append(_candidate(index, "attr", "f_attr:swap", "attributes", before, after, g))
        replace_attributes("attr", "f_attr:replace")

        rel = relations[0]
        g = _copy(sg)
        g["relations"][0]["subject"], g["relations"][0]["object"] = rel["object"], rel["subject"]
        subj, obj = objects[rel["subject"]]["noun"], objects[rel["object"]]["noun"]
        pools["rel"].append(_candidate(index, "rel", "f_rel:swap", "objects", f"{subj}|{obj}", f"{obj}|{subj}", g))
        lemmas = {x["lemma"] for x in objects}
        for i, node in enumerate(objects):
            new = sampler.object(node["lemma"], lemmas)
            if new is None:
                continue
            g = _copy(sg)
            replaced = _node(
                new, sampler.vocab, plural=node["plural"], count=node["count"], attributes=node["attributes"],
                determiner=node["determiner"],
            )
            g["objects"][i] = replaced
            pools["rel"].append(_candidate(index, "rel", "f_rel:replace_object", f"objects[{i}].noun", node["noun"], replaced["noun"], g))
        new = sampler.relation(rel["relation"])
        if new is not None:
            g = _copy(sg)
            g["relations"][0]["relation"] = new
            pools["rel"].append(_candidate(index, "rel", "f_rel:replace_relation", "relations[0]", rel["relation"], new, g))
        # join: a random attributed object, tied to one of the two through a random relation
        rng, vocab = sampler.rng, sampler.vocab
        extra = _node(rng.choice(vocab.object_names), vocab, attributes=[rng.choice(vocab.attribute_names)])
        anchor, edge = rng.randrange(2), rng.choice(vocab.relation_names)
        g = _copy(sg)
        g["objects"].append(extra)
        g["relations"].append({"subject": anchor, "object": 2, "relation": edge})
        added = f"{edge} {extra['attributes'][0]} {extra['noun']}"
        pools["rel"].append(_candidate(index, "rel", "f_rel:join", "relations[1]", None, added, g))
    return pools


def graph_negatives(record: dict, vocab, *, max_negatives: int, probs, seed: int, type_aware: bool) -> list[dict]:
    subgraphs = record["subgraphs"]
    positives = [(i, sg) for i, sg in enumerate(subgraphs) if sg.get("kind") != "caption"]
    if max_negatives <= 0 or not positives:
        return []
    rng = record_rng(seed, record["id"], "graph")
    sampler = _Sampler(vocab, rng, type_aware)
    pools: dict[str, list[dict]] = {c: [] for c in CATEGORIES}
    for i, sg in positives:
        for category, candidates in graph_candidates(i, sg, sampler).items():
            pools[category].extend(candidates)
    taken = {graph_key(sg) for _, sg in positives}
    chosen = []
    weights = dict(zip(CATEGORIES, probs))
    while len(chosen) < max_negatives:
        live = [c for c in CATEGORIES if pools[c] and weights[c] > 0]
        if not live:
            break
        category = rng.choices(live, weights=[weights[c] for c in live])[0]
        pool = pools[category]
        candidate = pool.pop(rng.randrange(len(pool)))
        key = graph_key(candidate["graph"])
        if key not in taken:
            taken.add(key)
            chosen.append(candidate)
    return chosen


def text_negatives(record: dict, vocab, *, methods, seed: int, text_key: str, doc=None) -> list[dict]:
    """Caption-level negatives in a fixed order: negclip, replace, shuffle, order; each distinct
    from the caption and from each other after `normalize_text`."""
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
        for transform, fn in tn.ORDER_FUNCTIONS.items():
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
            "slot": slot, "from": before, "to": after, "graph": None, "text": text,
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
        from mosaictool.stages.parse import load_nlp

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
