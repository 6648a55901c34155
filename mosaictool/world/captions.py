"""Captions from a scene's true graph, and a checker that says whether a description holds in a scene.

Train captions come in two steps. `plan_caption` decides *what* to say (which objects, which of
their attributes, which relations along which axis, counts); `render_caption` decides *how* (word
order, templates, synonyms, converse "passive" forms, sentence joins) with its own random stream.
A counterfactual twin re-renders the same plan with the same stream on the twin scene: the same
words, except that each relation word is recomputed from the twin's geometry.

`render_parts` keeps the caption as segments (noun phrases, relation words, fixed words) whose words
come from the mentions: world.noise edits them into a web-like noisy caption.

Every caption comes with `mentions`: the noun phrases it contains (in order, with the words used)
and the relations between them, i.e. the graph a perfect parser would return. `holds` checks a
description (noun phrases + relations, optionally negated) against a scene, existentially, the way
a caption with indefinite articles is true of a picture; benchmark negatives are built with it.
"""

from __future__ import annotations

import random
from itertools import permutations

from mosaictool.world.scene import relation_between
from mosaictool.world.vocab import (
    CONVERSE,
    GENERIC_NOUNS,
    NUMBERS,
    RELATION_WORDS,
    SHAPE_PLURALS,
    SHAPE_WORDS,
    SIZE_WORDS,
    TEXTURE_WORDS,
)

ATTRIBUTE_ORDER = ("size", "texture", "colour")  # the adjective order SceneGraphParser reads best


# --- checking descriptions ----------------------------------------------------------------------


def matches(desc: dict, obj: dict) -> bool:
    """desc: {attribute: value} over shape/colour/size/texture (absent = not said)."""
    return all(obj[k] == v for k, v in desc.items())


def holds(descs: list[dict], rels: list[tuple], scene: dict) -> bool:
    """Is there an assignment of distinct objects to `descs` under which every relation
    (i, predicate, j[, negated]) is true? The existential reading of "a red circle above a square"."""
    objs = scene["objects"]
    if len(descs) > len(objs):
        return False
    for perm in permutations(range(len(objs)), len(descs)):
        if not all(matches(d, objs[k]) for d, k in zip(descs, perm)):
            continue
        ok = True
        for rel in rels:
            i, pred, j = rel[:3]
            negated = len(rel) > 3 and rel[3]
            true = any(r["subject"] == perm[i] and r["object"] == perm[j] and r["relation"] == pred for r in scene["relations"])
            if true == negated:
                ok = False
                break
        if ok:
            return True
    return False


def count_matching(desc: dict, scene: dict) -> int:
    return sum(matches(desc, o) for o in scene["objects"])


# --- surface forms -------------------------------------------------------------------------------


def article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def noun_phrase(words: list[str], det: str = "a") -> str:
    phrase = " ".join(words)
    if det == "a":
        det = article(phrase)
    return f"{det} {phrase}" if det else phrase


def canonical_np(obj: dict, keys=("colour", "shape"), det: str = "the") -> str:
    """The benchmark splits' wording: canonical words, adjectives in a fixed order."""
    words = [obj[k] for k in ATTRIBUTE_ORDER if k in keys] + [obj["shape"] if "shape" in keys else "shape"]
    return noun_phrase(words, det)


# --- train captions: plan --------------------------------------------------------------------------


def _mention(rng: random.Random, obj: dict) -> dict:
    """Which of an object's attributes a caption names; the noun may be generic ("a red shape")."""
    said = {"colour": rng.random() < 0.85, "size": rng.random() < 0.3, "texture": rng.random() < 0.3}
    generic = rng.random() < 0.08
    if generic:
        said["colour"] = True
    keys = [k for k in ATTRIBUTE_ORDER if said[k]]
    if not generic:
        keys.append("shape")
    return {k: obj[k] for k in keys}


def _distinguish(desc: dict, obj: dict, other: dict) -> dict:
    """Add colour, then shape, until the phrase no longer fits the other object."""
    for key in ("colour", "shape"):
        if not matches(desc, other):
            break
        desc = {**desc, key: obj[key]}
    return desc


def plan_caption(rng: random.Random, scene: dict) -> dict:
    """What the caption says. Clauses:
    ("np", obj, desc) | ("rel", i, j, axis, desc_i, desc_j, converse) | ("list", [objs], [descs], counted)
    | ("count", desc, n)."""
    objs = scene["objects"]
    n = len(objs)
    clauses = []
    if n == 1:
        clauses.append(["np", 0, _mention(rng, objs[0])])
        return {"clauses": clauses}
    u = rng.random()
    order = rng.sample(range(n), n)
    if u < 0.72:  # one or two relations
        n_rel = 2 if (n >= 3 and rng.random() < 0.4) else 1
        pairs = [(order[0], order[1])]
        if n_rel == 2:
            pairs.append((order[rng.randrange(2)], order[2]) if rng.random() < 0.5 else (order[2], order[rng.randrange(2)]))
        for i, j in pairs:
            axes = [ax for ax in ("x", "y") if relation_between(objs, i, j, ax)]
            axis = rng.choice(axes)
            di = _distinguish(_mention(rng, objs[i]), objs[i], objs[j])
            dj = _distinguish(_mention(rng, objs[j]), objs[j], objs[i])
            clauses.append(["rel", i, j, axis, di, dj, rng.random() < 0.3])
        if rng.random() < 0.15:
            clauses.append(_count_clause(rng, scene))
    elif u < 0.87:  # all objects listed, maybe counted
        clauses.append(["list", order, [_mention(rng, objs[k]) for k in order], rng.random() < 0.5])
    elif u < 0.94:
        clauses.append(_count_clause(rng, scene))
    else:  # a partial mention: one object of several
        clauses.append(["np", order[0], _mention(rng, objs[order[0]])])
    return {"clauses": clauses}


def _count_clause(rng: random.Random, scene: dict) -> list:
    """ "two circles" / "two red shapes" / "three shapes": an exact count of a group."""
    objs = scene["objects"]
    options = [{}]
    for key in ("shape", "colour"):
        for o in objs:
            d = {key: o[key]}
            if count_matching(d, scene) >= 2 and d not in options:
                options.append(d)
    desc = options[rng.randrange(len(options))] if rng.random() < 0.7 else {}
    return ["count", desc, count_matching(desc, scene)]


def twin_pair(plan: dict) -> tuple[int, int] | None:
    """The two objects whose places a counterfactual twin trades: the first relation's."""
    for clause in plan["clauses"]:
        if clause[0] == "rel":
            return clause[1], clause[2]
    return None


def _rewrite_descriptions(plan: dict, fix) -> dict:
    """The plan with every object description `desc` of object `obj` replaced by fix(desc, obj)."""
    clauses = []
    for c in plan["clauses"]:
        if c[0] == "np":
            c = [c[0], c[1], fix(c[2], c[1])]
        elif c[0] == "rel":
            c = [c[0], c[1], c[2], c[3], fix(c[4], c[1]), fix(c[5], c[2]), c[6]]
        elif c[0] == "list":
            c = [c[0], c[1], [fix(d, k) for k, d in zip(c[1], c[2])], c[3]]
        clauses.append(c)  # "count" clauses are kept as they are
    return {"clauses": clauses}


def swap_colours(plan: dict, a: int, b: int, scene: dict) -> dict:
    """The plan for a binding twin: the same clauses, with objects a and b's colour words traded."""
    colour = {a: scene["objects"][b]["colour"], b: scene["objects"][a]["colour"]}
    return _rewrite_descriptions(
        plan, lambda desc, obj: {**desc, "colour": colour[obj]} if obj in colour and "colour" in desc else desc
    )


def change_shape(plan: dict, a: int, shape: str) -> dict:
    """The plan for a shape twin: the same clauses, with object a's noun naming its new shape."""
    return _rewrite_descriptions(plan, lambda desc, obj: {**desc, "shape": shape} if obj == a and "shape" in desc else desc)


# --- train captions: render ------------------------------------------------------------------------


class _Writer:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.mentions: list[dict] = []
        self.relations: list[dict] = []

    def np(self, desc: dict, obj: int | None, det: str = "a") -> dict:
        """A noun phrase segment; its words are drawn here and kept in its mention."""
        rng = self.rng
        words = []
        for key in ATTRIBUTE_ORDER:
            choice = rng.randrange(3)  # drawn for every key: the stream stays aligned across twins
            if key in desc:
                table = {"size": SIZE_WORDS, "texture": TEXTURE_WORDS}.get(key)
                words.append(desc[key] if table is None else table[desc[key]][choice % len(table[desc[key]])])
        choice = rng.randrange(3)
        noun = SHAPE_WORDS[desc["shape"]][choice % len(SHAPE_WORDS[desc["shape"]])] if "shape" in desc else GENERIC_NOUNS[choice % 2]
        self.mentions.append({"object": obj, "noun": noun, "attributes": words[:], "count": None})
        return {"t": "np", "m": len(self.mentions) - 1, "det": det}

    def plural(self, desc: dict, count: int) -> dict:
        words = [desc["colour"]] if "colour" in desc else []
        noun = desc.get("shape", "shape")
        self.mentions.append({"object": None, "noun": noun, "attributes": words[:], "count": count})
        return {"t": "count", "m": len(self.mentions) - 1}

    def relation(self, pred: str, subj: int, obj: int) -> dict:
        word = RELATION_WORDS[pred][self.rng.randrange(3)]
        self.relations.append({"subject": subj, "object": obj, "relation": pred, "text": word})
        return {"t": "rel", "r": len(self.relations) - 1}


def lit(text: str, noise: int | None = None) -> dict:
    """A segment of fixed words ("there is ", ", "); `noise`: the index of the noise entry it belongs to."""
    return {"t": "lit", "text": text} if noise is None else {"t": "lit", "text": text, "noise": noise}


def segment_words(seg: dict, mentions: dict) -> list[str]:
    """The words of a segment: a noun phrase's determiner (if any), adjectives and noun; a count
    phrase's number, colour and plural noun; a relation's words; a literal's text as one item."""
    if seg["t"] == "lit":
        return [seg["text"]]
    if seg["t"] == "rel":
        return [mentions["relations"][seg["r"]]["text"]]
    m = mentions["mentions"][seg["m"]]
    if seg["t"] == "count":
        return [NUMBERS[m["count"]], *m["attributes"], SHAPE_PLURALS[m["noun"]]]
    det = seg["det"]
    if det == "a":
        det = article(" ".join([*m["attributes"], m["noun"]]))
    return [det, *m["attributes"], m["noun"]] if det else [*m["attributes"], m["noun"]]


def segment_text(seg: dict, mentions: dict) -> str:
    return seg["text"] if seg["t"] == "lit" else " ".join(segment_words(seg, mentions))


def render_parts(plan: dict, scene: dict, rng: random.Random) -> dict:
    """The caption as segments: {"sentences": [{"clause": kind, "segs": [...]}], "joiner", "mentions"}.
    A segment is a noun phrase ({"t": "np", "m": mention, "det"}), a count phrase ({"t": "count", "m"}),
    a relation word ({"t": "rel", "r": relation}) or fixed words ({"t": "lit", "text"}); its words
    come from the mentions (`segment_text`), so an edit of a mention re-words every phrase of it."""
    w = _Writer(rng)
    objs = scene["objects"]
    sentences = []
    for clause in plan["clauses"]:
        kind = clause[0]
        if kind == "np":
            np = w.np(clause[2], clause[1])
            form = rng.randrange(3)
            segs = [[np], [lit("there is "), np], [{**np, "det": "one"}]][form]
        elif kind == "rel":
            _, i, j, axis, di, dj, converse = clause
            if converse:
                i, j, di, dj = j, i, dj, di
            pred = relation_between(objs, i, j, axis) or relation_between(objs, i, j, "y" if axis == "x" else "x")
            # form 4, "the X is <rel> the Y": the copular sentence of COCO captions, and of ARO's
            # VG-Relation (which a world without it tested on a form its captions never used)
            form = rng.randrange(5)
            det = "the" if form == 4 else "a"
            a = w.np(di, i, det)
            b = w.np(dj, j, det)
            word = w.relation(pred, a["m"], b["m"])
            if form == 3 and axis == "x":  # SceneGraphParser loses "sits to the left of"
                form = 0
            lead, verb = [("", " "), ("there is ", " "), ("", " "), ("", " sits "), ("", " is ")][form]
            segs = ([lit(lead)] if lead else []) + [a, lit(verb), word, lit(" "), b]
        elif kind == "list":
            _, order, descs, counted = clause
            segs = [w.plural({}, len(order)), lit(": ")] if counted else []  # mentions stay in text order
            phrases = [w.np(d, k) for k, d in zip(order, descs)]
            segs += join_list(phrases, ", ", " and ")
        else:  # count
            _, desc, count = clause
            seg = w.plural(desc, count)
            segs = [[seg], [lit("there are "), seg]][rng.randrange(2)]
        sentences.append({"clause": kind, "segs": segs})
    joiner = ". " if rng.random() < 0.7 else "; "
    return {"sentences": sentences, "joiner": joiner, "mentions": {"mentions": w.mentions, "relations": w.relations}}


def join_list(items: list[dict], sep: str, last: str) -> list[dict]:
    """Segments "x, y and z" (sep ", ", last " and ")."""
    out = []
    for k, item in enumerate(items):
        if k:
            out.append(lit(last if k == len(items) - 1 else sep))
        out.append(item)
    return out


def parts_text(parts: dict) -> str:
    return parts["joiner"].join("".join(segment_text(s, parts["mentions"]) for s in sent["segs"]) for sent in parts["sentences"])


def render_caption(plan: dict, scene: dict, rng: random.Random) -> tuple[str, dict]:
    """The caption text and its mentions graph."""
    parts = render_parts(plan, scene, rng)
    return parts_text(parts), parts["mentions"]


def plain_caption(mentions: dict, scene: dict) -> str:
    """The caption's content in one fixed form, with colour and shape words only: its first relation
    as VG-Relation's copular sentence ("the red circle is to the left of the blue square"), else the
    objects it names ("a red circle and a blue square"), else every object of the scene. A first
    curriculum stage trains on these: with the subject always in the same token positions, a tiny
    text tower learns word order (and the image tower arrangement) in ~1,000 steps, where the varied
    captions leave both at chance. The copular form is ARO's: a base taught "a red circle to the
    left of a blue square" preferred the true caption to its swap 71.5% of the time in that form
    but 58.0% in ARO's (2,400 val items, world v3): a 4-layer text tower does not carry relations
    across templates, and the relation column would have measured the template instead."""
    objs = scene["objects"]
    said = mentions["mentions"]

    def np(k: int, det: str = "a") -> str:
        return noun_phrase([objs[k]["colour"], objs[k]["shape"]], det)

    if mentions["relations"]:
        rel = mentions["relations"][0]
        return f"{np(said[rel['subject']]['object'], 'the')} is {rel['relation']} {np(said[rel['object']]['object'], 'the')}"
    named = list(dict.fromkeys(m["object"] for m in said if m["object"] is not None)) or list(range(len(objs)))
    return " and ".join(np(k) for k in named)


def converse(pred: str) -> str:
    return CONVERSE[pred]
