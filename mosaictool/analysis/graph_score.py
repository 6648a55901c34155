"""Scoring parsed scene graphs against hand-annotated gold graphs (SPICE-style tuple matching,
Anderson et al. 2016, Sec. 3; FACTUAL's set-match scores, Li et al. 2023, Sec. 5).

A gold record (tests/data/gold_graphs/*.jsonl, docs/gold_graphs.md) is
`{"caption", "objects": [{"name", "attributes": [...]}], "relations": [{"subject", "predicate", "object"}]}`
(subject/object index `objects`). A predicted record is `mosaictool parse` output: `graph.entities[]`
(`head`, `attributes`, `modifiers`) and `graph.relations[]` (`subject`, `object`, `relation`).
Both are reduced to the same tuples, then counted:

- object: the lemmatised name. Gold: `name`. Predicted: the entity's `head` (its compound nouns kept).
- attribute: (object, attribute), the object lemmatised, the attribute lower-cased. Predicted
  attributes are the entity's `attributes` plus its counts (`nummod` modifiers: "two"), as the gold schema counts them.
- relation: (subject, predicate, object). The predicate is normalised: lower-cased, split on spaces,
  articles ("a", "an", "the") and forms of "be" dropped, the rest lemmatised (below).
  Gold: `predicate`; predicted: `relation`.

Lemmatisation is word by word with spaCy's English rule lemmatiser (the tables of the parse model):
a name's last word as a plural noun ("teddy bears" -> "teddy bear", "men" -> "man"), kept as
written when that gives no known noun lemma but the word is one ("bus", not "bu");
"people"/"persons" -> "person"; an attribute is only lower-cased (`words_lemma`); a predicate's
words as verbs ("sitting" -> "sit", "parked" -> "park") except the words of spatial phrases
(`PREPOSITION_WORDS`: "left" stays "left"). Everything is lower-cased.
The same function reads both sides, so a lemmatiser quirk cannot create or hide a match.

Matching, per caption, then micro-averaged over the set (summed counts, one precision, recall, F1):

- objects and attributes: multiset intersection of the tuples (a caption with two dogs in gold and
  one predicted scores one match).
- relations strict: multiset intersection of (subject, predicate, object) with the normalised
  predicates equal word for word.
- relations lenient: one-to-one matching of triples whose subject and object are equal and whose
  predicates share a key. `predicate_keys` of a normalised predicate: its trailing spatial phrase
  (the longest run of words at its end that are all in `PREPOSITION_WORDS`: "on", "next to",
  "in front of", "on top of") and its verb (the first word when it is not in `PREPOSITION_WORDS`).
  So "sitting on" ~ "on", "standing next to" ~ "next to", "riding" ~ "riding on", "sitting on" ~
  "standing on"; but "on top of" !~ "on", "holding" !~ "with". Strict matches are taken first, then
  lenient ones in order (gold order, then predicted order): deterministic.

Precision, recall and F1 of a kind with nothing predicted (or nothing in gold) are 0.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable

ARTICLES = frozenset({"a", "an", "the"})
BE = frozenset({"be", "is", "are", "was", "were", "been", "being", "am", "'s"})
# Words a spatial or prepositional phrase is made of (after articles are dropped).
PREPOSITION_WORDS = frozenset({
    "on", "in", "at", "of", "to", "by", "with", "from", "into", "onto", "over", "under", "above", "below",
    "beneath", "underneath", "behind", "beside", "besides", "near", "next", "close", "front", "top", "bottom",
    "left", "right", "side", "middle", "inside", "outside", "across", "along", "around", "through", "between",
    "against", "atop", "toward", "towards", "up", "down", "off", "out", "past", "among", "for", "back", "edge",
    "beyond", "via", "within", "without", "upon", "amid", "alongside", "underneath", "like", "during", "near",
})
PERSON = frozenset({"people", "persons"})
KINDS = ("objects", "attributes", "relations_strict", "relations_lenient")


@functools.cache
def _lemmatiser():
    from mosaictool.nlp import load_nlp

    nlp = load_nlp()
    lemmatizer = nlp.get_pipe("lemmatizer")
    nouns = frozenset(lemmatizer.lookups.get_table("lemma_index")["noun"])
    return nlp.vocab, lemmatizer, nouns


@functools.cache
def lemma(word: str, pos: str) -> str:
    """`word` (one word, lower case) lemmatised as `pos` (NOUN, VERB) by spaCy's English rule
    lemmatiser; a noun is kept when the rules give no known noun but the word is one ("bus")."""
    from spacy.tokens import Doc

    if pos == "NOUN" and word in PERSON:
        return "person"
    vocab, lemmatizer, nouns = _lemmatiser()
    doc = Doc(vocab, words=[word], pos=[pos], tags=["NNS" if pos == "NOUN" else "VBG"])
    lemmatizer(doc)
    found = doc[0].lemma_.lower() or word
    if pos == "NOUN" and found not in nouns and word in nouns:
        return word  # a singular the plural rules would cut ("bus" -> "bu")
    return found


def name_lemma(name: str) -> str:
    """An object name: lower case, the last word lemmatised as a noun ("teddy bears" -> "teddy bear")."""
    words = name.lower().split()
    if not words:
        return ""
    return " ".join([*words[:-1], lemma(words[-1], "NOUN")])


def words_lemma(text: str) -> str:
    """An attribute: lower case, words split on spaces and joined by one (not lemmatised: spaCy's
    adjective rules cut "other" to "oth", and a participle such as "parked" is its own attribute)."""
    return " ".join(text.lower().split())


def predicate_lemma(text: str) -> str:
    """A predicate: lower case, articles and forms of "be" dropped, each word but those of spatial
    phrases (`PREPOSITION_WORDS`: "left" stays "left") lemmatised as a verb."""
    return " ".join(w if w in PREPOSITION_WORDS else lemma(w, "VERB")
                    for w in text.lower().split() if w not in ARTICLES and w not in BE)


def predicate_keys(predicate: str) -> frozenset[str]:
    """The keys by which a normalised predicate matches leniently: its trailing spatial phrase and its verb."""
    words = predicate.split()
    start = len(words)
    while start > 0 and words[start - 1] in PREPOSITION_WORDS:
        start -= 1
    keys = set()
    if start < len(words):
        keys.add(" ".join(words[start:]))
    if words and words[0] not in PREPOSITION_WORDS:
        keys.add(words[0])
    return frozenset(keys)


def gold_tuples(record: dict) -> dict[str, list]:
    """A gold record's objects, (object, attribute) pairs and (subject, predicate, object) triples."""
    names = [name_lemma(o["name"]) for o in record["objects"]]
    return {
        "objects": names,
        "attributes": [(n, words_lemma(a)) for n, o in zip(names, record["objects"]) for a in o.get("attributes", [])],
        "relations": [(names[r["subject"]], predicate_lemma(r["predicate"]), names[r["object"]]) for r in record["relations"]],
    }


def predicted_tuples(graph: dict) -> dict[str, list]:
    """A parse `graph`'s objects, attribute pairs (attributes and counts) and relation triples."""
    names = [name_lemma(e["head"]) for e in graph["entities"]]
    attributes = []
    for n, e in zip(names, graph["entities"]):
        counts = [m["span"] for m in e.get("modifiers", []) if m["dep"] == "nummod"]
        attributes += [(n, words_lemma(a)) for a in [*e.get("attributes", []), *counts]]
    return {
        "objects": names,
        "attributes": attributes,
        "relations": [(names[r["subject"]], predicate_lemma(r["relation"]), names[r["object"]]) for r in graph["relations"]],
    }


def _multiset_matches(pred: list, gold: list) -> int:
    return sum((Counter(pred) & Counter(gold)).values())


def lenient_matches(pred: list[tuple], gold: list[tuple]) -> int:
    """One-to-one matches of relation triples: equal ones first, then equal ends with a shared predicate key."""
    pred_left, gold_left = list(pred), []
    matched = 0
    for g in gold:
        if g in pred_left:
            pred_left.remove(g)
            matched += 1
        else:
            gold_left.append(g)
    for s, p, o in gold_left:
        keys = predicate_keys(p)
        hit = next((t for t in pred_left if t[0] == s and t[2] == o and keys & predicate_keys(t[1])), None)
        if hit is not None:
            pred_left.remove(hit)
            matched += 1
    return matched


def caption_counts(pred: dict[str, list], gold: dict[str, list]) -> dict[str, tuple[int, int, int]]:
    """(matched, predicted, gold) per kind for one caption's tuples."""
    rp, rg = pred["relations"], gold["relations"]
    return {
        "objects": (_multiset_matches(pred["objects"], gold["objects"]), len(pred["objects"]), len(gold["objects"])),
        "attributes": (_multiset_matches(pred["attributes"], gold["attributes"]), len(pred["attributes"]), len(gold["attributes"])),
        "relations_strict": (_multiset_matches(rp, rg), len(rp), len(rg)),
        "relations_lenient": (lenient_matches(rp, rg), len(rp), len(rg)),
    }


def prf(matched: int, predicted: int, gold: int) -> dict[str, float]:
    p = matched / predicted if predicted else 0.0
    r = matched / gold if gold else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0,
            "matched": matched, "predicted": predicted, "gold": gold}


def score(graphs: Iterable[dict], gold: Iterable[dict]) -> dict[str, dict[str, float]]:
    """Micro-averaged precision, recall and F1 per kind (`KINDS`) of predicted `graphs` against the
    `gold` records, paired in order."""
    totals = {k: [0, 0, 0] for k in KINDS}
    for graph, record in zip(graphs, gold, strict=True):
        for kind, counts in caption_counts(predicted_tuples(graph), gold_tuples(record)).items():
            totals[kind] = [a + b for a, b in zip(totals[kind], counts)]
    return {kind: prf(*totals[kind]) for kind in KINDS}
