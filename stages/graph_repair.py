"""Repairs of SceneGraphParser's graph where its rules misread spatial phrases and colour words.

SceneGraphParser (sng) reads relations off spaCy's dependency tree, noun phrase by noun phrase. Short
captions such as "an orange diamond right of a yellow diamond" defeat it in a few regular ways:

- a spatial phrase without "to the" ("right of", "left of") hangs off the noun before it, so sng
  makes the relation "of" and reads "right" as an attribute of the subject, or as part of its noun
  ("a disc right"); "X is on the left of Y" makes an entity "the left"; after a copula ("X is above
  Y", "X is left of Y") sng finds no relation at all (its rules want a VERB; spaCy tags "is" AUX);
- spaCy tags some colour words as nouns ("a small orange cross": "orange" PROPN), so the colour
  becomes part of the noun ("orange cross"), or a noun phrase of its own ("a purple" + "cross");
- an adjective that modifies another adjective ("a big dotted cross": "big" hangs off "dotted") is
  not one of the noun's modifiers, so sng drops it;
- spaCy leaves some noun phrases out of its noun chunks ("a little square" with "square" tagged ADJ,
  the second clause of "a cross under a star; a red triangle left of a box"), so sng never sees them.

`repair(graph, doc)` takes sng's graph (as `parse.to_record` writes it) and the spaCy Doc it was read
from and fixes exactly these. Every spatial phrase of `spatial_phrases` between two noun phrases is one
relation from the noun phrase before it (directly, or as the subject of a copula) to the one after it,
written as the caption says it ("right of", "on the left of", "above"), as sng writes "in front of".
A noun phrase is re-read from its own tokens (`read_entity`) when that reading finds other attributes
than sng's (adjectives, and colour words whatever their tag, before the head noun), is cut before a
spatial phrase it swallowed, joins a colour-word noun phrase right before it, and noun phrases spaCy
did not chunk (from a determiner or number to a noun) are added. Whatever sng got right is left as is.
"""

from __future__ import annotations

import functools

SIDES = ("left", "right", "top", "front", "bottom", "back", "side", "middle")
# single-word spatial prepositions: sng reads them between two noun phrases, but not after a copula
SPATIAL_WORDS = ("above", "below", "under", "beneath", "underneath", "over", "behind", "beside", "near", "atop",
                 "on", "in", "inside")
NOUN_PHRASE_POS = ("DET", "NUM", "NOUN", "PROPN", "ADJ")


@functools.cache
def _vocab():
    from mosaictool.vocab import load

    return load()


@functools.cache
def colour_words() -> frozenset[str]:
    """The colour attributes of the shipped vocabulary (vocab/attributes.tsv, category colour)."""
    return frozenset(w for w, category in _vocab().attributes.items() if category == "colour")


@functools.cache
def attribute_words() -> frozenset[str]:
    """Every attribute of the shipped vocabulary: such a word before a head noun is an attribute even
    when spaCy tags it ADV or VERB ("a plain orange cross", "one striped cross")."""
    return frozenset(_vocab().attributes)


@functools.cache
def object_words() -> frozenset[str]:
    """The objects of the shipped vocabulary: a noun phrase may end in one that spaCy tags ADJ ("square")."""
    return frozenset(_vocab().objects)


def spatial_phrases(doc) -> list[tuple[int, int]]:
    """Token spans [a, b) of the spatial phrases in `doc`, the longest at each position, not
    overlapping: "(to|on|at|in) (the) SIDE of", "left/right of", "next/close to", SPATIAL_WORDS."""
    words = [t.lower_ for t in doc]
    found, i = [], 0
    while i < len(words):
        end = _phrase_end(words, i)
        if end:
            found.append((i, end))
            i = end
        else:
            i += 1
    return found


def _phrase_end(words: list[str], i: int) -> int | None:
    def at(k: int) -> str:
        return words[k] if k < len(words) else ""

    if at(i) in ("to", "on", "at", "in"):
        k = i + 2 if at(i + 1) == "the" else i + 1
        if at(k) in SIDES and at(k + 1) == "of":
            return k + 2
    if at(i) in ("left", "right") and at(i + 1) == "of":
        return i + 2
    if at(i) in ("next", "close") and at(i + 1) == "to":
        return i + 2
    # after an article the word is a noun: "sprays the inside of a toilet" (no "the" + "inside of")
    if at(i) in SPATIAL_WORDS and not (i > 0 and words[i - 1] in ("the", "a", "an")):
        return i + 1
    return None


# --- noun phrases --------------------------------------------------------------------------------


def is_attribute(token) -> bool:
    word = token.lower_
    return (token.pos_ == "ADJ" or token.dep_ == "amod" or word in colour_words()
            or (token.pos_ in ("ADV", "VERB") and word in attribute_words()))


def is_noun_head(token) -> bool:
    return token.pos_ in ("NOUN", "PROPN") or token.lower_ in object_words()


def _in_noun_phrase(token) -> bool:
    return token.pos_ in NOUN_PHRASE_POS or is_attribute(token) or token.lower_ in object_words()


def _role(token) -> str | None:
    """What a token before the head noun is to its noun phrase: det, nummod, amod (an attribute),
    compound (part of the noun: "tennis court") or None (an adverb such as "very", a conjunction)."""
    if token.dep_ in ("det", "predet") or token.pos_ == "DET":
        return "det"
    if token.pos_ == "NUM":
        return "nummod"
    if is_attribute(token):  # before the dependency: spaCy may call "little" a nummod
        return "amod"
    if token.dep_ == "nummod":
        return "nummod"
    if token.pos_ in ("NOUN", "PROPN") or token.dep_ == "compound":
        return "compound"
    return None


def _words(doc, start: int, end: int) -> list:
    """The tokens [start, end) as the caption's words: a hyphenated word ("cross-country", "park-like", "t-shirt";
    no space at its hyphens) is one span, which spaCy cuts at each hyphen."""
    words, i = [], start
    while i < end:
        j = i
        while (j + 2 < end and doc[j + 1].text == "-" and not doc[j].whitespace_ and not doc[j + 1].whitespace_
               and doc[j].is_alpha and doc[j + 2].is_alpha):  # not a date ("2004-07-25")
            j += 2
        words.append(doc[i:j + 1])
        i = j + 1
    return words


def _word_role(word) -> str | None:
    """`_role` of a word. A hyphenated one is an attribute when it starts with an adjective or a number or ends in a
    participle ("double-decker", "two-story", "pointy-toed": spaCy calls "toed" a noun); else it takes its last
    part's role ("chute-type": compound, "park-like": amod), or its first's when the last has none ("light-up")."""
    if len(word) > 1 and (word[0].pos_ in ("ADJ", "NUM") or word[-1].lower_.endswith("ed")):
        return "amod"
    return _role(word[-1]) or _role(word[0])


def _inside_compound(doc, words: list, roles: list, n: int) -> bool:
    """Whether the attribute word n sits inside a compound noun, after a noun that modifies a word at or after it:
    it makes a known compound noun with the next word ("a little boy french fries" has no "french boy"), or it is a
    word of a name ("a black Reel Big Fish tie" has no "big tie"). The word stays in the head, where the caption
    says it."""
    word = words[n][0]
    if len(words[n]) > 1 or word.i + 1 >= len(doc) or word.i == 0:
        return False
    after, before = doc[word.i + 1], doc[word.i - 1]
    if not (f"{word.lower_} {after.lower_}" in _compound_nouns() or word.is_title and after.is_title and before.is_title):
        return False
    for m in range(n - 1, -1, -1):
        if roles[m] not in ("compound", "amod"):
            return False
        noun = words[m][0]
        if roles[m] == "compound" and len(words[m]) == 1 and noun.dep_ in ("compound", "nmod") and noun.head.i >= word.i:
            return True
    return False


def _compound_nouns() -> frozenset[str]:
    from mosaictool.stages.caption_repair import compound_nouns  # caption_repair reads this module

    return compound_nouns()


def _modifier_tokens(doc, start: int, end: int, skip: set[int]) -> list[tuple[object, str]]:
    """(word, role) of the noun phrase [start, end), the last word its head, in token order (a word: a span of
    `_words`): the roles of the words before the head (an attribute inside a compound noun, `_inside_compound`,
    is a compound), and the adjectives outside the phrase that sng reads as the head's ("a table full of"), unless
    they are part of a spatial phrase (`skip`: "a triangle right of")."""
    root = doc[end - 1]
    words = _words(doc, start, end)[:-1]
    roles = [_word_role(w) for w in words]
    roles = ["compound" if r == "amod" and _inside_compound(doc, words, roles, n) else r for n, r in enumerate(roles)]
    inside = list(zip(words, roles))
    outside = [(doc[y.i:y.i + 1], "amod") for x in root.children if x.dep_ == "amod" and not start <= x.i < end
               for y in (x, *(c for c in x.children if c.dep_ == "conj")) if y.i not in skip]
    return sorted(((w, role) for w, role in inside + outside if role is not None), key=lambda wr: wr[0].start)


def attributes_of(doc, start: int, end: int, skip: set[int]) -> list[str]:
    """The attributes `read_entity` finds in the noun phrase [start, end)."""
    return [w.text.lower() for w, role in _modifier_tokens(doc, start, end, skip) if role == "amod"]


def read_entity(doc, start: int, end: int, skip: set[int]) -> dict:
    """An entity in sng's format read from the noun phrase [start, end) (`_modifier_tokens`): det,
    nummod and amod modifiers in token order, the nouns before the head part of it; a hyphenated head
    ("an Army t-shirt") is one word."""
    import sng_parser.database

    root = _words(doc, start, end)[-1]
    words = _modifier_tokens(doc, start, end, skip)
    compounds = [w for w, role in words if role == "compound"]
    modifiers = [{"dep": role, "span": w.text, "lemma_span": _lemma(w)} for w, role in words if role != "compound"]
    head = " ".join(_text(w) for w in (*compounds, root))
    lemma_head = " ".join(_lemma(w) for w in (*compounds, root))
    span = doc[start:end]
    return {
        "span": span.text, "lemma_span": span.lemma_, "head": head, "lemma_head": lemma_head,
        "span_bounds": [start, end], "modifiers": modifiers,
        "type": "scene" if sng_parser.database.is_scene_noun(lemma_head) else "unknown",
        "attributes": [m["span"].lower() for m in modifiers if m["dep"] == "amod"],
    }


def _spaced(word) -> bool:
    """Whether a hyphenated word is an object the vocabulary writes with a space ("a dump-truck" is a "dump truck"),
    which the word then is."""
    hyphened = "".join(t.lemma_ for t in word).lower()
    return len(word) > 1 and hyphened not in object_words() and " ".join(t.lemma_ for t in word if t.text != "-").lower() in object_words()


def _text(word) -> str:
    return " ".join(t.text for t in word if t.text != "-") if _spaced(word) else word.text


def _lemma(word) -> str:
    """A word's lemma; a hyphenated word's is its parts' joined by its hyphens ("t-shirts" -> "t-shirt")."""
    if len(word) == 1:
        return word[0].lemma_
    return " ".join(t.lemma_ for t in word if t.text != "-") if _spaced(word) else "".join(t.lemma_ for t in word)


def noun_phrase_end(doc, start: int, stops: set[int]) -> int | None:
    """The end of a noun phrase that starts at `start` (a determiner or a number) and runs over
    noun-phrase tokens, not into `stops`, to a head noun; None when there is none."""
    if start >= len(doc) or doc[start].pos_ not in ("DET", "NUM"):
        return None
    end = start
    while end < len(doc) and end not in stops and _in_noun_phrase(doc[end]):
        end += 1
    while end > start and not is_noun_head(doc[end - 1]):
        end -= 1
    return end if end > start + 1 else None


def noun_phrase_start(doc, end: int, stops: set[int]) -> int | None:
    """The start (a determiner or a number) of a noun phrase that ends at `end` in a head noun, read
    backwards over noun-phrase tokens, not into `stops`; None when there is none."""
    if end == 0 or end - 1 in stops or not is_noun_head(doc[end - 1]):
        return None
    start = end - 1
    while start > 0 and start - 1 not in stops and _in_noun_phrase(doc[start - 1]):
        start -= 1
    while start < end - 1 and doc[start].pos_ not in ("DET", "NUM"):
        start += 1
    return start if doc[start].pos_ in ("DET", "NUM") else None


class _Graph:
    """sng's graph being repaired: entities by token span, relations by entity index."""

    def __init__(self, graph: dict, doc, lexicon: frozenset[str] = frozenset()):
        self.doc = doc
        self.lexicon = lexicon  # the English words the parsing pipeline knows (caption_repair.english_words)
        self.entities = [dict(e) for e in graph["entities"]]
        self.relations = [dict(r) for r in graph["relations"]]
        self.phrases = spatial_phrases(doc)
        self.in_phrases = {i for a, b in self.phrases for i in range(a, b)}
        self.changed = False

    def bounds(self, k: int) -> tuple[int, int]:
        return tuple(self.entities[k]["span_bounds"])

    def starting_at(self, i: int) -> int | None:
        return next((k for k in range(len(self.entities)) if self.bounds(k)[0] == i), None)

    def stops(self) -> set[int]:
        """Tokens a new noun phrase cannot take: those of spatial phrases and of other entities."""
        return self.in_phrases | {i for k in range(len(self.entities)) for i in range(*self.bounds(k))}

    def read(self, start: int, end: int) -> dict:
        return read_entity(self.doc, start, end, self.in_phrases)

    def add(self, start: int, end: int) -> int:
        """A new entity read from [start, end), in span order; returns its index."""
        k = next((n for n in range(len(self.entities)) if self.bounds(n)[0] > start), len(self.entities))
        shift = lambda i: i + 1 if i >= k else i  # noqa: E731
        self.relations = [{**r, "subject": shift(r["subject"]), "object": shift(r["object"])} for r in self.relations]
        self.entities.insert(k, self.read(start, end))
        self.changed = True
        return k

    def reread(self, k: int, start: int, end: int) -> None:
        self.entities[k] = self.read(start, end)
        self.changed = True

    def drop(self, gone: set[int]) -> None:
        """Remove entities `gone` and every relation that touches one; renumber the rest."""
        if not gone:
            return
        keep = [k for k in range(len(self.entities)) if k not in gone]
        new = {k: n for n, k in enumerate(keep)}
        self.entities = [self.entities[k] for k in keep]
        self.relations = [{**r, "subject": new[r["subject"]], "object": new[r["object"]]} for r in self.relations
                          if r["subject"] in new and r["object"] in new]
        self.changed = True

    def join(self, k: int) -> None:
        """Entity k joins entity k + 1 (which it ends right before) into one."""
        start, end = self.bounds(k)[0], self.bounds(k + 1)[1]
        moved = [{**r, "subject": k + 1 if r["subject"] == k else r["subject"],
                  "object": k + 1 if r["object"] == k else r["object"]} for r in self.relations]
        self.relations = [r for n, r in enumerate(moved) if r["subject"] != r["object"] and r not in moved[:n]]
        self.entities[k + 1] = self.read(start, end)
        self.drop({k})

    def record(self) -> dict:
        return {"entities": self.entities, "relations": self.relations}


# --- the repairs ---------------------------------------------------------------------------------


def cut_before_phrases(g: _Graph) -> None:
    """A noun phrase whose head is the first word of a spatial phrase ("a disc right" of "a disc right
    of a star") ends before it."""
    for a, _ in g.phrases:
        for k in range(len(g.entities)):
            start, end = g.bounds(k)
            if start < a == end - 1:
                g.reread(k, start, a)


def join_colour_words(g: _Graph) -> None:
    """A noun phrase that ends in a colour word takes the noun after it: spaCy's "a purple" + "cross",
    as an entity of its own ("a plain orange" + "cross") or not chunked at all."""
    k = 0
    while k < len(g.entities):
        start, end = g.bounds(k)
        if g.doc[end - 1].lower_ in colour_words():
            nxt = g.starting_at(end)
            if nxt is not None and is_noun_head(g.doc[g.bounds(nxt)[1] - 1]):
                g.join(k)
                continue
            longer = end
            while longer < len(g.doc) and longer not in g.stops() and _in_noun_phrase(g.doc[longer]):
                longer += 1
            while longer > end and not is_noun_head(g.doc[longer - 1]):
                longer -= 1
            if longer > end:
                g.reread(k, start, longer)
        k += 1


def add_unchunked(g: _Graph) -> None:
    """Noun phrases spaCy did not chunk: an entity takes the determiner or number and attributes
    before it ("one striped" + "red cross"), and other runs from a determiner or number to a noun
    become entities ("three shapes", "and a purple cross")."""
    for k in range(len(g.entities)):
        start, end = g.bounds(k)
        earlier = noun_phrase_start(g.doc, end, g.stops() - (set(range(start, end)) - g.in_phrases))
        if earlier is not None and earlier < start:
            g.reread(k, earlier, end)
    i = 0
    while i < len(g.doc):
        end = noun_phrase_end(g.doc, i, g.stops()) if i not in g.stops() else None
        if end:
            g.add(i, end)
            i = end
        else:
            i += 1


def reread_attributes(g: _Graph) -> None:
    """Every entity whose own tokens give other attributes than sng's modifiers is re-read, and every one with a
    hyphenated word, which sng cuts at the hyphen ("A double-decker bus": sng's head "decker bus")."""
    for k in range(len(g.entities)):
        start, end = g.bounds(k)
        if (attributes_of(g.doc, start, end, g.in_phrases) != g.entities[k]["attributes"]
                or any(len(w) > 1 for w in _words(g.doc, start, end))):
            g.reread(k, start, end)


def spatial_relations(g: _Graph) -> None:
    """Each spatial phrase [a, b) between a subject noun phrase (ending at a, or the subject of a
    copula that ends at a) and an object noun phrase (starting at b) becomes that one relation,
    unless sng has it already; sng's relations into the object through the phrase's trailing words
    ("of") and the entities inside the phrase ("the left") go."""
    for a, b in g.phrases:
        obj, text = g.starting_at(b), g.doc[a:b].text
        if obj is None or any(r["object"] == obj and _says(r["relation"], text) for r in g.relations):
            continue
        inside = {k for k in range(len(g.entities)) if a <= g.bounds(k)[0] and g.bounds(k)[1] <= b}
        tails = {" ".join(t.lower_ for t in g.doc[i:b]) for i in range(a + 1, b)}
        replaced = [r for r in g.relations if r["object"] in inside or (r["object"] == obj and r["relation"].lower() in tails)]
        # sng's own attachment first (X -to-> "the left", X -of-> Y), then the noun phrase before the phrase
        subj = next((r["subject"] for r in replaced if r["subject"] not in inside), _subject_before(g, a))
        if subj is None:
            continue
        g.relations = [r for r in g.relations if r not in replaced]
        subj_span = g.bounds(subj)
        g.drop(inside)
        obj, subj = g.starting_at(b), next(k for k in range(len(g.entities)) if g.bounds(k) == subj_span)
        lemma = " ".join(t.lemma_ for t in g.doc[a:b])
        at = next((n for n, r in enumerate(g.relations) if r["object"] > obj), len(g.relations))
        g.relations.insert(at, {"subject": subj, "object": obj, "relation": text, "lemma_relation": lemma})
        g.changed = True


def _says(relation: str, phrase: str) -> bool:
    """Whether sng's relation is the phrase, maybe after its verb ("sits above" says "above")."""
    relation, phrase = relation.lower(), phrase.lower()
    return relation == phrase or relation.endswith(" " + phrase)


def _subject_before(g: _Graph, a: int) -> int | None:
    """The entity that ends at token a, or the subject (nsubj, nsubjpass) of a copula ("is") that ends at a."""
    i = a
    while i > 0 and g.doc[i - 1].lemma_ == "be":
        i -= 1
    for k in range(len(g.entities)):
        end = g.bounds(k)[1]
        if end == a or (end == i < a and g.doc[end - 1].dep_ in ("nsubj", "nsubjpass")):
            return k
    return None


def repair(graph: dict, doc) -> dict:
    """`graph` (sng's, as parse.to_record writes it) with spatial phrases, colour words and unchunked
    noun phrases repaired; `graph` itself when nothing needed it."""
    g = _Graph(graph, doc)
    cut_before_phrases(g)
    join_colour_words(g)
    add_unchunked(g)
    reread_attributes(g)
    spatial_relations(g)
    return g.record() if g.changed else graph
