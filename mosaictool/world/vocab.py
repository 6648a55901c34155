"""The synthetic world's vocabulary: what can be drawn, the words for it, and what train never shows.

Every list is a tuple in a fixed order: the generator indexes into them with seeded random numbers,
so their order is part of the output's determinism.
"""

from __future__ import annotations

SHAPES = ("circle", "square", "triangle", "diamond", "star", "cross")
COLOURS = ("red", "green", "blue", "yellow", "purple", "orange", "white")
SIZES = ("small", "big")
TEXTURES = ("solid", "striped", "dotted")

RGB = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (45, 85, 225),
    "yellow": (235, 210, 40),
    "purple": (145, 60, 195),
    "orange": (245, 140, 30),
    "white": (240, 240, 240),
}
BACKGROUND = (110, 110, 110)

# Caption words. The first entry is the canonical word (used by the benchmark splits); the others
# are the synonyms train captions draw from. SceneGraphParser lemmatises plurals itself.
SHAPE_WORDS = {
    "circle": ("circle", "circle", "disc"),
    "square": ("square", "square", "box"),
    "triangle": ("triangle",),
    "diamond": ("diamond", "diamond", "rhombus"),
    "star": ("star",),
    "cross": ("cross",),  # not "plus": spaCy reads it as a conjunction
}
SHAPE_PLURALS = {"circle": "circles", "disc": "discs", "square": "squares", "box": "boxes", "triangle": "triangles",
                 "diamond": "diamonds", "rhombus": "rhombuses", "star": "stars", "cross": "crosses",
                 "shape": "shapes", "object": "objects"}
SIZE_WORDS = {"small": ("small", "small", "little", "tiny"), "big": ("big", "big", "large")}
TEXTURE_WORDS = {"solid": ("solid", "plain"), "striped": ("striped", "striped", "stripy"), "dotted": ("dotted", "dotted", "spotted")}
GENERIC_NOUNS = ("shape", "object")
NUMBERS = ("zero", "one", "two", "three", "four")

# Relations: the world's four spatial predicates, their converses, and their surface forms. The
# canonical form (first) is ARO VG-Relation's wording; none of them is in ARO's excluded list.
# Every synonym list of a predicate has as many entries as its converse's: a counterfactual twin's
# caption picks the same index and so differs only in the direction word.
RELATIONS = ("to the left of", "to the right of", "above", "below")
CONVERSE = {"to the left of": "to the right of", "to the right of": "to the left of", "above": "below", "below": "above"}
RELATION_WORDS = {
    "to the left of": ("to the left of", "on the left of", "left of"),
    "to the right of": ("to the right of", "on the right of", "right of"),
    "above": ("above", "over", "above"),
    "below": ("below", "under", "beneath"),
}
AXIS = {"to the left of": "x", "to the right of": "x", "above": "y", "below": "y"}

# Held out of train (systematicity, CREPE-style): colour-shape compounds no train object has, and
# shape-relation-shape compounds no train scene shows (in either direction: the converse is the same
# fact). Val and test hold them in their "unseen" CSVs.
HELD_OUT_OBJECTS = (("purple", "triangle"), ("green", "star"), ("orange", "circle"), ("blue", "diamond"))
HELD_OUT_RELATIONS = (("triangle", "to the left of", "square"), ("circle", "above", "cross"), ("star", "below", "diamond"))


def held_out_relation_facts() -> frozenset[tuple[str, str, str]]:
    """Every (shape, relation, shape) triple that train never shows: the declared ones and their converses."""
    facts = set()
    for s, r, o in HELD_OUT_RELATIONS:
        facts.add((s, r, o))
        facts.add((o, CONVERSE[r], s))
    return frozenset(facts)


# --- the world's words as a vocabulary (for `vocab build --base world` and the audit) ----------
# A caption word means one thing in the world: a shape, a colour, a size, a texture or a predicate.
# "sits above" is "above" (the captions' fourth relation form).
SITS = "sits "


def word_meanings() -> dict[str, dict[str, str]]:
    """kind -> caption word -> its canonical world word (the first of its synonym list); the generic
    nouns ("shape", "object") mean "shape": any shape."""
    objects = {w: shape for shape, words in SHAPE_WORDS.items() for w in words}
    objects.update({g: "shape" for g in GENERIC_NOUNS})
    attributes = {c: c for c in COLOURS}
    for table in (SIZE_WORDS, TEXTURE_WORDS):
        attributes.update({w: value for value, words in table.items() for w in words})
    relations = {}
    for pred, words in RELATION_WORDS.items():
        for w in words:
            relations[w] = relations[SITS + w] = pred
    return {"objects": objects, "attributes": attributes, "relations": relations}


def attribute_kind(word: str) -> str | None:
    """Which scene attribute a caption adjective names (colour, size, texture), or None."""
    meaning = word_meanings()["attributes"].get(word)
    if meaning is None:
        return None
    return "colour" if meaning in COLOURS else "size" if meaning in SIZES else "texture"


def base_vocab():
    """The world's own vocabulary, with its synonym groups (SHAPE_WORDS, SIZE_WORDS, TEXTURE_WORDS,
    RELATION_WORDS), hypernyms (every shape is a "shape" / "object") and antonyms (left / right,
    above / below: the same axis), as the base of `vocab build --base world`."""
    from mosaictool.vocab import Vocab, load

    meanings = word_meanings()
    categories = {"colour": COLOURS, "size": SIZES, "texture": TEXTURES}
    synonyms = {kind: {w: m for w, m in table.items() if w != m} for kind, table in meanings.items()}
    synonyms["objects"] = {w: m for w, m in meanings["objects"].items() if w != m and w not in GENERIC_NOUNS}
    synonyms["objects"]["object"] = "shape"
    return Vocab(
        objects={w: "shape" for w in meanings["objects"]},
        attributes={w: next(c for c, values in categories.items() if m in values) for w, m in meanings["attributes"].items()},
        relations={w: "spatial" for w in meanings["relations"]},
        antonym_pairs=[(a, CONVERSE[a]) for a in RELATIONS if RELATIONS.index(a) < RELATIONS.index(CONVERSE[a])],
        plurals={**load().plurals, **{w: SHAPE_PLURALS[w] for w in SHAPE_PLURALS}},
        source="world",
        synonyms=synonyms,
        hypernyms={"objects": {shape: ("shape",) for shape in SHAPES}},
    )
