"""template: sub-graphs and negatives -> sentences (MosaiCLIP §3.3), the `texts` field train reads.

Reads `subgraphs` (decompose) and `negatives` (negate; absent or null means none). Writes

    texts: {
      positives: [{text, kind: "caption"|"object"|"relation", subgraph: int|null, key: str|null}],
      negatives: [{text, positive: int|null, kind: "graph"|"text", category, transform,
                   slot, from, to, key: str|null}]
    }

- `key`: the canonical key of the text's (sub-)graph (`subgraph.canonical_key`): the one decompose
  or negate wrote, else computed with this vocabulary; the caption's is its whole graph's; null for
  caption-level text negatives and for a caption without a graph. A text is a positive of an image
  when its key is in the image's `subgraph_keys`.
- The caption positive is the caption as written (subgraph null); sub-graph positives say which
  `subgraphs` entry they render; a negative's `positive` indexes `texts.positives`.
- Noun phrases: attributes in a fixed order (ATTRIBUTE_ORDER over the vocabulary's categories;
  unknown adjectives rank with "state"; adjacent colours joined by "and": "a black and white
  shirt"), then the noun, then participial phrases ("a girl playing a video game", not "a playing
  a video game girl"); "a"/"an" before a singular noun, the count word ("two") or nothing before
  a plural, "the" where the caption had a definite or possessive determiner; a noun the caption
  used bare gets "a"/"an" too ("a man in a blue shirt" for "man in blue shirt": headline style
  drops articles, a phrase without one reads as broken); a mass noun ("water", vocab/mass_nouns.txt) never
  gets "a"/"an".
- Shapes: one object -> "{np}"; two objects and a relation -> "{np1} {relation} {np2}" (the
  paper's "{N1} {R} {N2}"); more relations (f_rel's joins) continue with "and the {noun}
  {relation} {np3}"; objects outside any relation are joined with "and".
- style "plain" (default) is exactly that; "varied" wraps each positive in one of a curated set
  of frames ("a photo of ...", "there is ...") picked from (seed, id, positive), and renders its
  graph negatives in the same frame, so that a negative differs from its positive only where the
  graph does.
- Texts are deduplicated (compared lower-cased without . and ,); a negative equal to any positive
  is dropped, and one equal to an earlier negative of its own kind (graph or text).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from importlib import resources

from mosaictool.stages.subgraph import canonical_key, caption_key, indefinite_article, normalize_text, record_rng

# English adjective order (opinion, size, age, shape, colour, material), the vocabulary's categories placed in it
ATTRIBUTE_ORDER = (
    "position", "quality", "taste", "emotion", "size", "age", "newness", "temperature", "state", "cooking",
    "posture", "activity", "weather", "shape", "form", "texture", "colour", "pattern", "finish", "topping", "material", "ground",
)
ATTRIBUTE_RANK = {c: i for i, c in enumerate(ATTRIBUTE_ORDER)}
STYLES = ("plain", "varied")
@functools.cache
def mass_nouns() -> frozenset[str]:
    """Nouns COCO captions use without an article because they are uncountable (vocab/mass_nouns.txt):
    left bare ("on grass", "water", "cowboy gear")."""
    text = resources.files("mosaictool.vocab").joinpath("mass_nouns.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


# Frames for "varied"; {be} agrees with the first noun phrase.
FRAMES = ("{}", "a photo of {}", "a picture of {}", "there {be} {}", "an image of {}", "a close-up photo of {}")


def ordered_attributes(attributes: list[str], vocab) -> list[tuple[str, str]]:
    """(attribute, category) pairs in ATTRIBUTE_ORDER, caption order within a category; in the
    caption's own order when one is outside the vocabulary (a fluent writer's "faded wooden outdoor
    chair" read better than any rank we could give "outdoor")."""
    pairs = [(a, vocab.attributes.get(a, "")) for a in attributes]
    if len(pairs) > 1 and all(category in ATTRIBUTE_RANK for _, category in pairs):
        pairs.sort(key=lambda p: ATTRIBUTE_RANK[p[1]])  # stable
    return pairs


def participial(attribute: str) -> bool:
    """A verb phrase the parser kept as an attribute ("playing a video game"): it follows the noun."""
    first, _, rest = attribute.partition(" ")
    return bool(rest) and first.endswith("ing")


def noun_phrase(node: dict, vocab, definite: bool = False) -> str:
    measure = node.get("measure")
    if measure:
        # the part the caption names: "a woman holding onto a piece of pizza", not "... onto a pizza" (a text
        # of the whole says more than the caption); the whole keeps the caption's determiner or none
        whole = {**node, "measure": None, "count": None}
        if not node["plural"] and node.get("determiner") != "the":
            whole["determiner"], whole["plural"] = None, True  # bare, as "of pizza" is
        body = noun_phrase(whole, vocab)
        return f"{measure} of {body}" if not definite else f"the {measure.split()[-1]} of {body}"
    if definite:
        return f"the {node['noun']}"
    after = [a for a in node["attributes"] if participial(a)]
    # a word of the noun read as its modifier too ("a red and grey fire hydrant" gave "hydrant"): said once
    noun_words = set(node["noun"].lower().split())
    attributes = [a for a in node["attributes"] if not participial(a) and a.lower() not in noun_words]
    if not attributes:
        body = node["noun"]
    elif len(attributes) == 1:
        body = f"{attributes[0]} {node['noun']}"
    else:
        # adjacent colours are one list: "red and blue", "red, white and blue" (r7: "red and orange and blue")
        runs: list[list[str]] = []
        previous = None
        for attr, category in ordered_attributes(attributes, vocab):
            if category == "colour" and previous == "colour":
                runs[-1].append(attr)
            else:
                runs.append([attr])
            previous = category
        words = [run[0] if len(run) == 1 else f"{', '.join(run[:-1])} and {run[-1]}" for run in runs]
        body = " ".join([*words, node["noun"]])
    if after:
        body = " ".join([body, *after])
    if node.get("count"):
        return f"{node['count']} {body}"
    if node.get("determiner") == "the":
        return f"the {body}"
    noun = node["noun"].lower()
    # "the" was handled above: "some water" -> "water"; a compound takes its last word's count ("cowboy gear")
    if node["plural"] or noun in mass_nouns() or noun.rsplit(" ", 1)[-1] in mass_nouns():
        return body
    return f"{indefinite_article(body)} {body}"


class _Phrases:
    """noun_phrase, remembered: a record's negatives repeat most of its positives' noun phrases,
    and captions repeat common ones ("a man", "the table"). Pure, so the output is the same
    whatever was rendered before; bounded, so a long stream does not grow it without end."""

    LIMIT = 100_000

    def __init__(self, vocab):
        self.vocab = vocab
        self.known: dict[tuple, str] = {}

    def __call__(self, node: dict) -> str:
        count = node.get("count")
        if count is not None and count.__class__ is not str:  # 2 and 2.0 would share a key
            return noun_phrase(node, self.vocab)
        key = (node["noun"], tuple(node["attributes"]), count, node.get("determiner"), node["plural"], node.get("measure"))
        phrase = self.known.get(key)
        if phrase is None:
            if len(self.known) >= self.LIMIT:
                self.known.clear()
            phrase = self.known[key] = noun_phrase(node, self.vocab)
        return phrase


# A finite verb agrees with its subject: a swap gives "has" a plural subject ("pink tiles have the bathroom").
SINGULAR_TO_PLURAL = {"has": "have", "is": "are", "was": "were", "does": "do"}
PLURAL_TO_SINGULAR = {p: s for s, p in SINGULAR_TO_PLURAL.items()}


def _verb_bases(relations: Iterable[str]) -> frozenset[str]:
    """The bare forms of the verbs whose participles begin the vocabulary's relations ("standing in" ->
    "stand", "sitting on" -> "sit", "riding" -> "ride"; each candidate spelling, none of which is a preposition)."""
    bases = set()
    for name in relations:
        first = name.split(" ", 1)[0]
        if not first.endswith("ing") or len(first) < 5:
            continue
        stem = first[:-3]
        bases.update((stem, stem + "e"))
        if len(stem) > 2 and stem[-1] == stem[-2]:
            bases.add(stem[:-1])  # "sitting" -> "sit"
    return frozenset(bases)


def third_person(verb: str) -> str:
    """'stand' -> 'stands', 'punch' -> 'punches', 'fly' -> 'flies', 'go' -> 'goes'."""
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(verb) > 1 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def agreeing(relation: str, plural: bool, verbs: frozenset[str] = frozenset()) -> str:
    """`relation` with its first word in the subject's number, when that word is a finite "has", "is", "was"
    or "does" (or their plurals), or, after a singular subject, a bare verb of `verbs`: a relation copied
    from a plural or compound subject ("a horse and a dog stand in a meadow") read "a dog stand in a meadow"
    (r7); any other relation as it is."""
    first, sep, rest = relation.partition(" ")
    form = (SINGULAR_TO_PLURAL if plural else PLURAL_TO_SINGULAR).get(first.lower())
    if not form and not plural and first.lower() in verbs:
        form = third_person(first)
    return f"{form}{sep}{rest}" if form else relation


@functools.lru_cache(maxsize=8)
def verb_bases(vocab) -> frozenset[str]:
    """_verb_bases of `vocab`'s relations (a Vocab hashes by identity), computed once per vocabulary."""
    return _verb_bases(vocab.relations)


def render_graph(graph: dict, vocab, phrases: _Phrases | None = None) -> str:
    """One sentence for a sub-graph of any shape."""
    objects, relations = graph["objects"], graph["relations"]
    phrase = phrases or (lambda node: noun_phrase(node, vocab))
    if not relations and len(objects) == 1:
        return phrase(objects[0])
    mentioned: set[int] = set()
    verbs = verb_bases(vocab)
    parts = []
    for rel in relations:
        s, o = rel["subject"], rel["object"]
        subject = f"the {objects[s]['noun']}" if s in mentioned else phrase(objects[s])
        mentioned.add(s)
        obj = f"the {objects[o]['noun']}" if o in mentioned else phrase(objects[o])
        mentioned.add(o)
        parts.append(f"{subject} {agreeing(rel['relation'], bool(objects[s]['plural']), verbs)} {obj}")
    parts.extend(phrase(objects[i]) for i in range(len(objects)) if i not in mentioned)
    return " and ".join(parts)


def frame_text(frame: str, body: str, first_plural: bool) -> str:
    return frame.replace("{be}", "are" if first_plural else "is").replace("{}", body)


def _first_plural(graph: dict) -> bool:
    objects, relations = graph["objects"], graph["relations"]
    first = relations[0]["subject"] if relations else 0
    return bool(objects) and bool(objects[first]["plural"])


def make_check():
    """The check of a record template reads: `subgraphs`, `negatives` and `graph` (records.TemplateRecord)."""
    from mosaictool import records

    return records.checker(records.TemplateRecord)


def template_record(record: dict, vocab, *, style: str = "plain", seed: int = 0, phrases: _Phrases | None = None) -> dict:
    phrases = phrases or _Phrases(vocab)
    positives, norms = [], {}
    position_of: dict[int, int] = {}  # subgraph index -> index in positives
    frames: dict[int, str] = {}
    varied = style == "varied"
    for i, sg in enumerate(record["subgraphs"]):
        if sg.get("kind") == "caption":
            text = sg["text"].strip()
        elif varied:
            frame = frames[i] = record_rng(seed, record["id"], f"template:{i}").choice(FRAMES)
            text = frame_text(frame, render_graph(sg, vocab, phrases), _first_plural(sg))
        else:
            text = render_graph(sg, vocab, phrases)
        norm = normalize_text(text)
        if norm in norms:  # a sub-graph that reads like an earlier positive: point at that one
            position_of[i] = norms[norm]
            continue
        norms[norm] = position_of[i] = len(positives)
        kind = sg.get("kind") if sg.get("kind") in ("caption", "object", "relation") else "object"
        if "key" in sg:
            key = sg["key"]
        elif kind == "caption":
            graph = record.get("graph")
            key = caption_key(graph, vocab) if isinstance(graph, dict) and isinstance(graph.get("entities"), list) else None
        else:
            key = canonical_key(sg, vocab)
        positives.append({"text": text, "kind": kind, "subgraph": None if kind == "caption" else i, "key": key})

    # Deduplicated within a kind (graph / text), not across: each method draws from one kind, and a
    # text negative dropped for reading like a graph one took NegCLIP's noun-phrase swaps (VG-Relation's
    # very perturbation) away whenever the graph route wrote the same words (41% of them in the demo).
    negatives, seen = [], {kind: set(norms) for kind in ("graph", "text")}
    for neg in record.get("negatives") or []:
        index = neg.get("subgraph")
        if neg["kind"] == "graph":
            graph = neg["graph"]
            text = render_graph(graph, vocab, phrases)
            if index in frames:  # "varied": the positive's frame
                text = frame_text(frames[index], text, _first_plural(graph))
        else:
            text = neg["text"]
        norm = normalize_text(text)
        seen_here = seen.setdefault(neg.get("kind"), set(norms))
        if not norm or norm in seen_here:
            continue
        seen_here.add(norm)
        negatives.append({
            "text": text,
            "positive": position_of.get(index) if index is not None else None,
            "kind": neg.get("kind"),
            "category": neg.get("category"),
            "transform": neg.get("transform"),
            "slot": neg.get("slot"),
            "from": neg.get("from"),
            "to": neg.get("to"),
            "key": (neg.get("key") or canonical_key(neg["graph"], vocab)) if neg["kind"] == "graph" else None,
        })
    return {**record, "texts": {"positives": positives, "negatives": negatives}}


def template(records: Iterable[dict], *, vocab=None, style: str = "plain", seed: int = 0) -> Iterator[dict]:
    """Add `texts` to every record; `vocab` is a loaded Vocab (None: the shipped one)."""
    from mosaictool.vocab import load

    vocab = vocab or load()
    phrases = _Phrases(vocab)
    for record in records:
        yield template_record(record, vocab, style=style, seed=seed, phrases=phrases)
