"""Repairs of SceneGraphParser's graph for real captions (COCO-style), after `graph_repair`.

SceneGraphParser (sng; Wu et al. 2019, the parser of MosaiCLIP, Singh et al. 2023 Sec. 3.3) reads a
relation only where a preposition hangs off a noun or a verb it expects, and takes every noun
phrase for an object, so real captions lose much of what they say. On hand-annotated gold graphs
(tests/data/gold_graphs, scored by mosaictool.analysis.graph_score; docs/parse_quality.md, which
gives each repair's F1) the regular misses, and the repair of each:

- `pronouns`: a relative pronoun is an entity of its own ("a woman that is standing next to a cow"
  gives "that" the relation); it stands for the noun its clause modifies, "it"/"them" after a
  preposition for the noun the phrase hangs off, a subject "he"/"she" for the last subject before
  it. Other pronouns ("each other", "one") name no object and go with their relations.
- `framing`: quantity and framing nouns become the object ("a group of people" -> group); the
  object is what they measure or frame (person), which takes over their relations. Place nouns
  ("the corner" of a room) join the relation or go; pictures that frame ("in the picture"),
  activities ("plays tennis") and idioms ("for sale") are no objects.
- `compounds`: compound nouns whose first word spaCy reads as an adjective ("light pole", "hot dog")
  keep it in the noun; material nouns before a head are attributes ("dirt road"); attributes of
  several words stay whole ("snow covered", "nice looking"); a noun of a verb and its particle is one noun
  ("take out boxes", "a red pick up truck"), not a verb's relation.
- `predicates`: an adjective after a copula is an attribute of the subject ("the bus is red"); a
  verb with no object is an attribute of its subject ("a man is sitting", "men skiing").
- `relations`: relations read from the dependency tree where sng drops or splits them: a verb
  with its spatial phrase ("sitting on top of", "standing in front of", "parked next to"), passives
  ("a car is parked in a field"), a copula after a long subject ("a train carrying coal is on the
  tracks"), coordinated subjects and objects ("a cat and a dog on a bed"), objects of verbs in
  relative and participle clauses, possessives. A relation sng has between the same two entities
  is kept unless the one read here extends it ("next to" becomes "parked next to").
- `typos`: an object's head noun that misspells a known object name is read as the name, so that texts
  built on the graph do not repeat the typo ("a grocery story" -> grocery store, "computer keybord" ->
  keyboard, "a women" -> woman); the caption keeps its words.

Each is a function of the `graph_repair._Graph` being repaired, applied in `REPAIRS` order.
"""

from __future__ import annotations

import functools

from mosaictool.stages import graph_repair
from mosaictool.stages.graph_repair import _Graph, _vocab, attribute_words, colour_words, object_words
from mosaictool.stages.subgraph import CONTAINER_NOUNS, indefinite_article

RELATIVE_PRONOUNS = frozenset({"that", "who", "which", "whom", "whose"})
# Pronouns name no object of their own: a caption's objects are its nouns (gold schema).
PRONOUNS = frozenset({"it", "its", "they", "them", "he", "him", "she", "her", "this", "these", "those", "itself",
                      "themselves", "himself", "herself", "other", "another", "one", "each", "something"})
# Nouns of a part of what follows "of" ("a slice of pizza", "logs of tree"): what they measure is the object
# (gold schema), but a text of the whole ("a woman holding a pizza") says more than the caption, so the
# entity keeps the words in `measure` for the text to say them.
PARTITIVE_NOUNS = frozenset({"piece", "slice", "half", "chunk", "wedge", "portion", "log", "strip", "sliver", "scoop",
                             "loaf", "bit", "serving", "slab", "hunk", "morsel", "fragment",
                             "stalk", "clove", "crust", "scrap", "crumb"})
# Nouns of a chain of things joined end to end ("a semi truck pulling a chain of three trailers"): the
# trailers are the object, as for a partitive, and the text keeps "a chain" in `measure` ("a truck pushing
# a chain" alone would name a different thing).
COLLECTIVE_MEASURES = frozenset({"chain"})
# A container or measure noun (`CONTAINER_NOUNS`) as the object of a verb of eating or drinking names its contents: "a child
# eating a plate of food" eats the food, not the plate (blind review r12 read "a child eating a plate"), so it
# is a partitive there: the contents are the object and the text keeps "a plate" in `measure`.
INGESTING_VERBS = frozenset({"eat", "drink", "sip", "devour", "munch", "chew", "nibble", "gulp", "slurp", "taste", "finish"})
# Nouns that count or frame what follows "of" ("a group of people", "a picture of a dog").
FRAMING_NOUNS = frozenset({
    "group", "couple", "bunch", "pile", "pair", "herd", "flock", "lot", "lots", "number", "set", "row", "stack",
    "piece", "slice", "variety", "assortment", "collection", "selection", "array", "bundle", "cluster", "crowd",
    "team", "line", "kind", "type", "sort", "handful", "series", "plenty", "amount", "family", "exterior",
    "interior", "collage", "collaboration", "montage",
    # these count what follows too: "a trio of zebras stand together in the grass", "dozens of people walking
    # around a metro area", "a pack of elephants", "a wedding procession of cars"
    "trio", "dozen", "pack", "procession",
    "picture", "image", "photo", "photograph", "view", "closeup", "close-up", "scene", "shot", "snapshot",
}) | PARTITIVE_NOUNS | COLLECTIVE_MEASURES
PICTURE_NOUNS = frozenset({"picture", "image", "photo", "photograph", "pic", "shot", "snapshot", "frame", "scene",
                           "view", "closeup", "close-up"})
# Prepositional idioms whose noun is no object: "cakes for sale", "a motorcycle on display", "sinks in the
# process of being completed", "some animals in the distance" (says how far, names no thing to relate).
IDIOMS = frozenset({("for", "sale"), ("on", "display"), ("in", "focus"), ("out", "focus"), ("of", "focus"),
                    ("at", "night"), ("in", "process"), ("in", "distance")})
# Bare nouns of an idiom only without an article: "a baseball player is at bat" is batting, no bat is the place he
# is at ("a tennis player at a bat"); "a man looking at a bat" sees one.
BARE_IDIOMS = frozenset({("at", "bat"), ("to", "bat")})
# Nouns of a feeling after "in" say how someone acts, not what is in the picture: "looking at the elephant in
# amazement" (blind review r9's positive "an amazement").
MANNER_NOUNS = frozenset({"amazement", "awe", "surprise", "anticipation", "disbelief", "wonder", "shock", "delight",
                          "excitement", "confusion", "curiosity", "unison", "thought", "concentration"})
# So do bare nouns of how it moves after "in": "a man is in action on a green tennis court" ("a man in an action"),
# "a tennis ball in motion", "planes flying in formation in the sky"; "flying in a v formation" names a shape.
MOTION_NOUNS = frozenset({"action", "motion", "formation"})
# Verb-object idioms whose noun is no object: "a man making his way through the sand".
VERB_IDIOMS = frozenset({("make", "way"), ("find", "way"), ("wind", "way"), ("take", "turn")})
COLOURING_VERBS = frozenset({"paint", "color", "colour", "dye"})
QUOTES = frozenset({'"', "\u201c", "\u201d", "''", "``"})
# Nouns of place inside a spatial phrase: "in front of", "on top of", "on the side of".
POSITION_NOUNS = frozenset({"front", "top", "side", "middle", "edge", "back", "bottom", "left", "right", "center",
                            "centre", "end", "rear", "corner", "foreground", "background", "inside", "outside"})
# Events and activities named by a noun: not depicted objects ("a man plays tennis", "taking a swing").
EVENT_NOUNS = frozenset({"tennis", "basketball", "baseball", "soccer", "golf", "football", "volleyball", "hockey",
                         "polo", "cricket", "rugby", "swing", "fight", "selfie", "look", "kiss", "pitch", "game", "match",
                         "ride", "break", "turn", "nap", "walk", "jump", "trick", "bite", "sip", "color", "colour",
                         "pose", "stroll", "lunch", "dinner", "breakfast"})
# Compound nouns whose first word spaCy tags as an adjective, besides the shipped vocabulary's.
ADJECTIVE_COMPOUNDS = frozenset({"light pole", "light post", "light fixture", "light switch", "hot dog", "double decker",
                                 "flat screen", "living room", "high chair", "stuffed animal", "cell phone",
                                 "french fries", "french fry", "red light", "green light", "top hat", "double decker bus",
                                 "pick up truck", "triple decker sandwich", "double decker sandwich",
                                 "golden retriever"})
# Compound nouns spaCy splits at a second word it reads as a verb's or an adverb: "a place setting, including a
# burger" is a setting, not a place; "gathered at a get together or a party" is at a gathering, not "a get".
SPLIT_COMPOUNDS = frozenset({"place setting", "table setting", "get together"})
# Nouns in "-ing" that name a thing, not what the head does: "hard wood flooring" is flooring, "thousand island
# dressing" a dressing ("giraffe standing" ends before its participle).
ING_NOUNS = frozenset({"flooring", "dressing", "frosting", "icing", "topping", "clothing", "siding", "railing", "ceiling",
                       "awning", "paneling", "bedding", "pudding", "stuffing"})
MATERIAL_NOUNS = frozenset({"grass", "cement", "sand", "snow", "mud", "tile", "ham", "carrot", "cheese", "pepperoni",
                            "chocolate", "broccoli", "vegetable", "fruit", "rock", "ice", "sausage", "mushroom", "onion",
                            "baby", "adult", "plaid", "round"})
SUBJECT_DEPS = ("nsubj", "nsubjpass")
# Words spaCy reads as adjectives that say nothing about the object (gold schema: "other" is no attribute).
NOT_ATTRIBUTES = frozenset({"other", "another", "only", "same", "such", "own", "very", "some"})
# Participles that make one attribute with the adjective before them ("nice looking", "various colored").
# "filled": "a light filled bedroom" is filled with light, not a light bedroom ("a filled light bedroom"); "lit": "a
# large blue lit bridge" is lit blue ("a large lit blue bridge"), "a dimly lit room" is no "lit room".
COMPOUND_PARTICIPLES = frozenset({"looking", "colored", "coloured", "sized", "shaped", "haired", "skinned", "lined",
                                  "filled", "lit", "patterned"})
# Shade words that make one colour with the colour after them ("light blue", "dark green"): swapping or
# replacing half of the pair leaves debris ("light and yellow water").
SHADES = frozenset({"light", "dark", "pale", "bright", "deep", "pastel", "neon", "navy", "hot", "baby", "royal", "sky", "lime"})
INTENSIFIERS = frozenset({"very", "really", "so", "too", "most", "more", "quite", "extremely", "slightly"})
# degree adverbs that change what the adjective says: "a nearly empty bowl" is not an empty bowl ("mostly flat" is flat)
HEDGES = frozenset({"nearly", "almost", "partly", "partially", "barely", "somewhat", "half", "semi"})
# Spatial words that end a with-phrase without an object: "a stop sign with two street signs above".
TRAILING_SPATIAL = frozenset({"above", "below", "underneath", "beneath", "behind", "nearby", "inside", "atop"})
# Prepositions of a path: after a verb's object they say where the object goes or comes from.
PATH_PREPOSITIONS = frozenset({"into", "onto", "from", "towards", "toward"})
# Adverbs of two words, the second a particle: "inside out", "upside down" (neither word alone means them).
FIXED_ADVERBS = frozenset({("inside", "out"), ("upside", "down")})
# Particles and adverbs that belong to an intransitive verb ("kneeling down", "walking around").
PARTICLES = frozenset({"down", "up", "around", "out", "over", "away", "off", "back", "about"})
# Adjectives English puts after the noun ("a bear asleep in a hammock", "a man at bat ready").
POSTPOSITIVE_ADJECTIVES = frozenset({"asleep", "awake", "alone", "alive", "afloat", "ablaze", "aglow", "ajar", "ashore", "aboard",
                                     "adrift", "aloft", "apart", "ready", "available", "visible", "present", "galore", "alike"})
# Misspellings of common participles in captions, which spaCy reads as nouns ("phone siting on it").
MISSPELT_PARTICIPLES = frozenset({"siting", "sittng", "stting", "standng", "standig", "stading", "layng", "laing"})
# Verbs that only say the thing is in the picture: "a plate is shown in between two children" -> in between.
FRAMING_VERBS = frozenset({"shown", "seen", "pictured", "photographed", "depicted", "captured", "displayed", "visible"})


@functools.cache
def material_words() -> frozenset[str]:
    """Nouns of material or food that make an attribute, not a compound noun, before a noun ("dirt
    road": a road, dirt): the shipped vocabulary's material attributes and MATERIAL_NOUNS."""
    from mosaictool.vocab import load

    # the vocabulary's materials and ground covers ("dirt road", "gravel path"; "ground" was part of "material")
    return frozenset(w for w, category in load().attributes.items() if category in ("material", "ground")) | MATERIAL_NOUNS


@functools.cache
def compound_nouns() -> frozenset[str]:
    """Compound nouns kept whole: the shipped vocabulary's multi-word objects and ADJECTIVE_COMPOUNDS."""
    from mosaictool.vocab import load

    return frozenset(w for w in load().objects if " " in w) | ADJECTIVE_COMPOUNDS | SPLIT_COMPOUNDS


def _entity_at(g: _Graph, i: int) -> int | None:
    """The entity whose span holds token i (its head last: the one that ends at i + 1 first)."""
    hits = [k for k in range(len(g.entities)) if g.bounds(k)[0] <= i < g.bounds(k)[1]]
    return next((k for k in hits if g.bounds(k)[1] == i + 1), hits[0] if hits else None)


def _head_token(g: _Graph, k: int):
    return g.doc[g.bounds(k)[1] - 1]


def _is_relative_pronoun(tok) -> bool:
    return tok.lower_ in RELATIVE_PRONOUNS and tok.head.dep_ in ("relcl", "acl") and tok.head.head.i != tok.head.i


def _close_up(tok) -> bool:
    """Whether tok is the "close" of "a close up of a polar bear", which spaCy reads as a noun with "up" as
    its particle or preposition: a framing noun, as "closeup" is."""
    return tok.lower_ == "close" and tok.pos_ in ("NOUN", "PROPN") and any(c.lower_ == "up" for c in tok.children) \
        or _hyphened_close_up(tok)


def _hyphened_close_up(tok) -> bool:
    """Whether tok is the "up" of "A close-up of a table with three boxes of pizza", which spaCy splits at the hyphen
    and heads by "up"."""
    doc = tok.doc
    return (tok.lower_ == "up" and tok.pos_ in ("NOUN", "PROPN") and tok.i > 1 and doc[tok.i - 1].text == "-"
            and doc[tok.i - 2].lower_ == "close")


def _eaten_container(tok) -> bool:
    """Whether tok is a container noun a verb of eating or drinking takes as its object ("eating a plate" of food)."""
    return tok.lemma_.lower() in CONTAINER_NOUNS and tok.dep_ == "dobj" and tok.head.lemma_.lower() in INGESTING_VERBS


def _measured(tok):
    """The noun a framing noun measures ("group" of "a group of people" -> "people"), else None."""
    if (tok.lemma_.lower() not in FRAMING_NOUNS and not _close_up(tok) and not _eaten_container(tok)
            and not (tok.lower_ == "body" and "water" in [t.lower_ for t in tok.subtree])
            and not (tok.lower_ == "head" and not any(c.dep_ in ("det", "poss") for c in tok.children))):  # "head of cattle"
        return None
    # "lots and lots of luggage": the first of a repeated quantity noun measures what the last one does
    nouns = [tok, *(c for c in tok.conjuncts if c.lemma_.lower() == tok.lemma_.lower())]
    # "a close up of a polar bear": "of" may hang off "up"
    holders = nouns + [c for c in tok.children if c.lower_ == "up"] if _close_up(tok) else nouns
    # "A closeup on some chocolate cake has a fork by it": a close-up is "on" what it shows too
    # (not "a close up of a cake on a plate", whose "on" may hang off "up")
    closeup = tok.lower_ in ("closeup", "close-up", "closeups", "close-ups") or _hyphened_close_up(tok)
    for noun in holders:
        for prep in noun.children:
            if prep.dep_ == "prep" and (prep.lower_ == "of" or prep.lower_ == "on" and closeup):
                obj = next((c for c in prep.children if c.dep_ == "pobj"), None)
                if obj is not None:
                    return _measured(obj) or obj
    return None


def _measure(tok) -> str:
    """The words of a partitive noun phrase before "of", as a text says them: "a piece", "the last two
    pieces", "a half eaten slice", "logs"; a possessive reads as "the" ("her slice"), a singular with no
    determiner gets "a"."""
    words = ["the" if t.dep_ == "poss" else t.lower_ for t in tok.doc[tok.left_edge.i:tok.i]]
    words.append(tok.lower_)
    if not any(t.dep_ in ("det", "poss", "nummod") or t.tag_ == "DT" for t in tok.doc[tok.left_edge.i:tok.i]) and tok.tag_ == "NN":
        words.insert(0, indefinite_article(tok.lower_))
    return " ".join(words)


def _redirect(g: _Graph, old: int, new: int) -> None:
    """Relations of entity `old` become `new`'s (self-relations and repeats dropped); `old` goes."""
    moved = [{**r, "subject": new if r["subject"] == old else r["subject"], "object": new if r["object"] == old else r["object"]}
             for r in g.relations]
    g.relations = [r for n, r in enumerate(moved) if r["subject"] != r["object"] and r not in moved[:n]]
    g.drop({old})


def _give_subject(g: _Graph, r: dict, new: int) -> None:
    """Relation `r` becomes `new`'s (its subject replaced), or goes where `new` has that object already."""
    if any((o["subject"], o["object"]) == (new, r["object"]) for o in g.relations):
        g.relations = [o for o in g.relations if o is not r]
    else:
        g.relations = [{**o, "subject": new} if o is r else o for o in g.relations]
    g.changed = True


# --- the repairs ---------------------------------------------------------------------------------


def pronouns(g: _Graph) -> None:
    """A pronoun's entity becomes the noun it stands for (a relative pronoun: the noun its clause
    modifies; "it"/"them" after a preposition: `_object_pronoun_antecedent`; a subject "he"/"she": the
    last subject before it); pronouns that stand for none go, with their relations."""
    k = 0
    while k < len(g.entities):
        tok = _head_token(g, k)
        if tok.pos_ != "PRON" and tok.lower_ not in PRONOUNS | RELATIVE_PRONOUNS:
            k += 1
            continue
        if _is_relative_pronoun(tok):
            antecedent = _entity_at(g, tok.head.head.i)
        elif tok.dep_ in SUBJECT_DEPS and tok.lower_ in SUBJECT_PRONOUNS:
            # "a dog looks interested as he sits in the front seat": the last subject before it
            antecedent = next((n for n in reversed(range(k)) if _head_token(g, n).dep_ in (*SUBJECT_DEPS, "ROOT")
                               and _head_token(g, n).pos_ in ("NOUN", "PROPN")), None)
        else:
            noun = _object_pronoun_antecedent(tok)
            antecedent = _entity_at(g, noun.i) if noun is not None else None
        if antecedent is not None and antecedent != k:
            _redirect(g, k, antecedent)
        elif tok.lower_ in PRONOUNS | RELATIVE_PRONOUNS or tok.pos_ == "PRON" and tok.lower_ not in ("someone", "somebody"):
            _verb_through(g, tok)
            g.drop({k})
        else:
            k += 1
            continue
        k = 0  # indices moved


# Indefinite objects that name nothing: the verb they leave keeps its phrase ("drinking something from a glass").
INDEFINITE_OBJECTS = frozenset({"something", "anything"})
# Prepositions of the one who gets the thing ("shows something to a group of girls"): without the thing the verb says
# nothing ("shows to girls").
RECIPIENT_PREPOSITIONS = frozenset({"to", "for"})


def _verb_through(g: _Graph, tok) -> None:
    """Before an indefinite object ("something") of a verb goes, the verb's prepositional phrase, which the parser
    relates to the verb's subject by its bare preposition ("a cat from a glass" for "a cat is drinking something from a
    glass"), gets the verb back: "a cat drinking from a glass". Not a verb with a particle ("holding something out in
    her hand": "holding in" is another verb), nor one to a recipient (`RECIPIENT_PREPOSITIONS`)."""
    verb = tok.head
    if tok.lower_ not in INDEFINITE_OBJECTS or tok.dep_ != "dobj" or verb.pos_ != "VERB" or any(c.dep_ == "prt" for c in verb.children):
        return
    for r in g.relations:
        head = _head_token(g, r["object"])
        prep = head.head
        if (head.dep_ == "pobj" and prep.dep_ == "prep" and prep.head.i == verb.i and r["relation"].lower() == prep.lower_
                and prep.lower_ not in RECIPIENT_PREPOSITIONS
                and r["subject"] != r["object"]):
            r["relation"], r["lemma_relation"] = f"{verb.text} {prep.text}", f"{verb.lemma_} {prep.lower_}"
            g.changed = True


OBJECT_PRONOUNS = frozenset({"it", "them", "her", "him"})
POSSESSIVE_PRONOUNS = frozenset({"his", "her", "its", "their", "my", "your", "our"})
SUBJECT_PRONOUNS = frozenset({"he", "she", "they", "it"})
# Pronouns of another of a kind ("as another looks on"): a verb right after one is its own, whatever spaCy reads.
OTHER_PRONOUNS = frozenset({"another", "others"})


def _object_pronoun_antecedent(tok):
    """The noun "it"/"them" after a preposition stands for: in "a chair with an umbrella on top of it"
    the noun the with-phrase hangs off (chair); in "a bathroom has a shower in it" the verb's subject."""
    if tok.lower_ not in OBJECT_PRONOUNS or tok.dep_ != "pobj":
        return None
    chain = [a for a in tok.ancestors if a.pos_ != "ADP" and a.lower_ not in POSITION_NOUNS]
    if not chain:
        return None
    governor = chain[0]
    dobj = next((c for c in governor.children if c.dep_ == "dobj" and c.pos_ in ("NOUN", "PROPN")), None)
    prep = next((a for a in (tok, *tok.ancestors) if a.head.i == governor.i), tok)
    if governor.pos_ == "VERB" and dobj is not None and _with_before(prep, dobj) is not None:
        # "a person holding a plate with food on it", "A woman carrying a tray with cups on it": the plate, the tray,
        # which the with-phrase before it follows, not the verb's subject
        return dobj
    if governor.pos_ in ("VERB", "AUX"):
        subjects = _subjects(governor)
        return subjects[0] if subjects else None
    first, items = governor, set()
    while first.dep_ in ("conj", "appos") and first.head.pos_ in ("NOUN", "PROPN"):
        items.add(first.i)
        first = first.head
    # "a table with food and a drink on it": the phrase's noun is a conjunct, and "it" the noun all of them hang off
    # (table), not the first conjunct ("a drink on food"); "A desk with two computer monitors, two mice, a cup and a
    # keyboard on it": spaCy chains the list's items up to the desk, and none of them is "it"
    skip = {first.i, *(c.i for c in first.conjuncts)} if first.i != governor.i and first.dep_ in ("pobj", "dobj") else items
    for a in chain[1:]:
        if a.i in skip:
            continue
        if a.pos_ in ("NOUN", "PROPN"):
            return a
        # "a man riding a horse with a saddle on it": the verb's object the with-phrase follows, not its subject
        objects = [c for c in a.children if c.dep_ == "dobj" and c.i < governor.i and c.pos_ in ("NOUN", "PROPN")]
        if a.pos_ == "VERB" and objects and tok.lower_ == "it" and governor.pos_ in ("NOUN", "PROPN") and governor.head.lower_ == "with":
            return objects[-1]
    return None


def _with_before(prep, dobj):
    """The with-phrase after verb object `dobj` (the verb's or the object's) that ends right before preposition `prep`
    ("a plate with food" before "on it"); None when there is none."""
    return next((c for c in (*prep.head.children, *dobj.children) if c.dep_ == "prep" and c.lower_ == "with" and c.i > dobj.i
                 and c.right_edge.i == prep.i - 1), None)


def framing(g: _Graph) -> None:
    """A framing noun's entity ("a group" of people) gives its relations to the measured noun's and goes;
    place nouns join the relation or go (`_position`); pictures, activities and idioms go (`_not_an_object`)."""
    k = 0
    while k < len(g.entities):
        tok = _head_token(g, k)
        if _position(g, k):
            k = 0
            continue
        picture = tok.lemma_.lower() in PICTURE_NOUNS or _close_up(tok)
        if _not_an_object(tok) and not (picture and (any(r["subject"] == k for r in g.relations) or _hung_picture(tok))):
            _relay_manner(g, k, tok)
            g.drop({k})
            k = 0
            continue
        measured = _measured(tok)
        target = _entity_at(g, measured.i) if measured is not None else None
        if target is None or target == k:
            k += 1
            continue
        if _hung_picture(tok):  # the picture is the thing; what it shows ("two men wearing black hats") is not in the scene
            shown = {t.i for t in measured.subtree}
            g.drop({n for n in range(len(g.entities)) if n != k and _head_token(g, n).i in shown})
            k = 0
            continue
        # the framing noun's "of" to a conjunct of the measured noun would become a relation between the two: "A group
        # of zebras and giraffes" is no "zebras of giraffes"
        # (or of a framing noun between them: "A close-up of a misshapen piece of pizza and a can of soda")
        conjuncts = {t.i for n in (measured, *(a for a in measured.ancestors if tok.i < a.i < measured.i)) for t in n.conjuncts}
        g.relations = [r for r in g.relations if not (r["subject"] == k and r["relation"].lower() == "of"
                                                      and _head_token(g, r["object"]).i in conjuncts)]
        if picture:
            _verb_takes_picture(g, k)
        _phrase_after_list(g, k, tok, measured)
        partitive = tok.lemma_.lower() in PARTITIVE_NOUNS | COLLECTIVE_MEASURES or _eaten_container(tok)
        if partitive and not g.entities[target].get("measure"):
            g.entities[target] = {**g.entities[target], "measure": _measure(tok)}
        _redirect(g, k, target)
        k = 0


def _phrase_after_list(g: _Graph, k: int, tok, measured) -> None:
    """A framing noun's phrase said after the last of a list it frames goes to that last noun, the one it is nearest and
    true of whether the list shares it or not: "Partial picture of a kitchen and a table and chairs under a lamp" puts the
    chairs under the lamp, not the kitchen, the first of the list the framing noun gives way to."""
    items = [t for t in measured.conjuncts if t.i > measured.i and t.pos_ in ("NOUN", "PROPN")]
    last = _entity_at(g, max(items, key=lambda t: t.i).i) if items else None
    if last is None or last == k:
        return
    for r in list(g.relations):
        prep = _head_token(g, r["object"]).head
        if (r["subject"] == k and r["relation"].lower() != "of" and prep.dep_ == "prep" and prep.head.i == tok.i
                and prep.i > max(t.i for t in items) and r["object"] != last):
            _give_subject(g, r, last)


def _verb_takes_picture(g: _Graph, k: int) -> None:
    """A verb whose object is the picture k keeps it when the picture gives way to what it shows: "a woman is
    taking a picture of food" relates her "taking a picture of" the food, not "taking" it (a woman taking food)."""
    tok = _head_token(g, k)
    if tok.dep_ != "dobj":
        return
    span = " ".join(g.entities[k]["span"].lower().split())
    lemma = " ".join(g.entities[k]["lemma_span"].lower().split())
    for n, r in enumerate(g.relations):
        if r["object"] == k and r["relation"].lower() == tok.head.lower_:
            g.relations[n] = {**r, "relation": f"{r['relation']} {span} of", "lemma_relation": f"{r['lemma_relation']} {lemma} of"}
            g.changed = True


def _manner(tok) -> bool:
    """Whether tok says how someone acts or moves after "in" (`MANNER_NOUNS`, a bare `MOTION_NOUNS`)."""
    lemma = tok.lemma_.lower()
    return tok.dep_ == "pobj" and tok.head.lower_ == "in" and (lemma in MANNER_NOUNS or lemma in MOTION_NOUNS and not any(
        c.dep_ in ("det", "poss", "nummod", "amod", "compound") for c in tok.children))


def _relay_manner(g: _Graph, k: int, tok) -> None:
    """A manner noun's relations pass to who acts so: "a man is in action on a green tennis court" says the man is
    on the court, "planes flying in formation in the sky" that the planes fly in the sky. S -"V in"-> k -p-> X
    gives S -"V p"-> X where S and X have no relation yet."""
    if not _manner(tok):
        return
    into = [r for r in g.relations if r["object"] == k and r["subject"] != k and r["relation"].lower().split()[-1:] == ["in"]]
    out = [r for r in g.relations if r["subject"] == k and r["object"] != k]
    for r1 in into:
        verb, lemma = r1["relation"].split()[:-1], r1["lemma_relation"].split()[:-1]
        for r2 in out:
            if any({r["subject"], r["object"]} == {r1["subject"], r2["object"]} for r in g.relations):
                continue
            g.relations.append({**r2, "subject": r1["subject"], "relation": " ".join([*verb, r2["relation"]]),
                                "lemma_relation": " ".join([*lemma, r2["lemma_relation"]])})
            g.changed = True


# Pictures a scene may hold ("a room with a picture of a mummy"), and verbs that make the picture the caption's
# own frame ("a man taking a picture of himself": he is in it).
HUNG_PICTURES = frozenset({"picture", "photo", "photograph", "image", "pic", "snapshot"})
PICTURE_TAKING = frozenset({"take", "snap", "shoot", "capture", "get", "make", "pose"})


def _hung_picture(tok) -> bool:
    """Whether a picture noun names a thing in the scene, not the picture the caption is of: the object of a phrase
    (not "in" or "for", nor "of" but "in front of": "the center of a black and white picture of a street") or of a verb other
    than one of taking it,
    itself or as a list's member ("a room with a desktop computer and a picture of a mummy": no mummy is there;
    "a man looking at a picture of a TV screen")."""
    if tok.lemma_.lower() not in HUNG_PICTURES:
        return False
    while tok.dep_ == "conj":
        tok = tok.head
    if tok.dep_ == "pobj":  # "in a picture", "pose for a picture": the caption's frame; "in front of a photo": a place
        prep = tok.head
        return prep.head.i != prep.i and (prep.lower_ not in ("of", "in", "for") or prep.lower_ == "of" and prep.head.lower_ == "front")
    if _placed_picture(tok):
        return True
    return tok.dep_ == "dobj" and tok.head.tag_ in ("VB", "VBG", "VBP", "VBZ") and tok.head.lemma_.lower() not in PICTURE_TAKING


# Verbs that put a picture somewhere, and the prepositions of where.
PLACING_VERBS = frozenset({"display", "hang", "mount", "post", "tape", "pin", "frame", "place", "put", "prop", "stick"})
PLACE_OF_PICTURE = frozenset({"on", "in", "at", "behind", "above", "over", "under", "against", "beside", "near", "by"})


def _placed_picture(tok) -> bool:
    """Whether picture noun `tok` is the subject of a copula or of a verb of placing ("displayed", "hung") that says where
    it is, or has such a participle: "A picture of an animal is on a pole", "The picture of the couple in bed is displayed
    in the large window", "A picture of a recently married couple displayed behind glass" (the picture is there, not what
    it shows). The phrase follows the verb, and needs a noun: "in black and white" says how it is taken, and "is a bit out of
    focus on the right side" where the blur is."""
    verbs = [c for c in tok.children if c.dep_ == "acl" and c.lemma_.lower() in PLACING_VERBS]
    if tok.dep_ in ("nsubj", "nsubjpass") and (tok.head.lemma_ == "be" or tok.head.lemma_.lower() in PLACING_VERBS):
        verbs.append(tok.head)
    return any(p.dep_ == "prep" and p.lower_ in PLACE_OF_PICTURE and p.i == v.i + 1 > tok.i + 1 and any(
        o.dep_ == "pobj" and o.pos_ in ("NOUN", "PROPN") and o.lower_ not in ("black", "white", "color", "colour") for o in p.children)
        for v in verbs for p in v.children)


def _quoted(tok) -> bool:
    """Whether tok stands inside quotation marks: the text a sign or shirt shows ("a sign that says
    "Princess Parking Only""), which names no object of the scene."""
    return sum(t.text in QUOTES for t in tok.doc[:tok.i]) % 2 == 1


def _purpose(tok) -> bool:
    """A bare singular noun after "for" names a purpose, not a thing in the picture ("a turboprop airplane in
    the hangar for repair", as "for sale"); with a determiner or a number it may be one ("a bowl for the dog")."""
    return (tok.dep_ == "pobj" and tok.head.lower_ == "for" and tok.tag_ == "NN"
            and not any(c.dep_ in ("det", "poss", "nummod", "amod", "compound") for c in tok.children))


def _not_an_object(tok) -> bool:
    """A picture that frames ("pose for a picture", "the scene is shadowy"; kept by `framing` as the
    subject of a relation: "a picture on the wall"), an event or activity as an object ("plays
    tennis", "taking a swing"), the noun of an idiom ("for sale", "making his way"), a purpose ("for
    repair"), quoted text, or a participle spaCy read as a noun after a copula ("two teddy bears that are
    large sitting": the entity "a large sitting" would be an adjective made a subject)."""
    lemma = tok.lemma_.lower()
    return (lemma in PICTURE_NOUNS or _close_up(tok) or _cross_country(tok) or _adjective_half(tok)
            or _manner(tok)
            or tok.dep_ == "attr" and tok.tag_ == "NN" and tok.lower_.endswith("ing") and tok.lower_ not in object_words()
            or lemma in EVENT_NOUNS and tok.dep_ in ("dobj", "pobj")
            or tok.dep_ == "pobj" and (tok.head.lower_, lemma) in IDIOMS
            or tok.dep_ == "pobj" and (tok.head.lower_, lemma) in BARE_IDIOMS and not [
                c for c in tok.children if not (c.i > tok.i and c.pos_ == "ADJ")]  # "A man is at bat ready"
            or tok.dep_ == "dobj" and (tok.head.lemma_.lower(), lemma) in VERB_IDIOMS
            or _purpose(tok) or _quoted(tok) or _infinitive(tok) or _board_sport(tok))


def _board_sport(tok) -> bool:
    """Whether tok is the first word of a board sport written in two ("a girl in all black surf boarding in a red
    surfboard"), which spaCy reads as a noun "surf" the girl is in: "boarding" after it makes a known object with tok
    once the "-ing" goes ("surf board", "skateboard")."""
    after = tok.doc[tok.i + 1] if tok.i + 1 < len(tok.doc) else None
    if after is None or not after.lower_.endswith("boarding") or not tok.whitespace_:
        return False  # only a board: "a city street lighting a cigarette" is no "streetlight"
    stem = after.lower_[:-3]
    return f"{tok.lower_}{stem}" in object_words() or f"{tok.lower_} {stem}" in object_words()


def _infinitive(tok) -> bool:
    """A bare verb of purpose that spaCy read as a noun ("a jet airplane coming in to land"): after "to" that
    follows the verb's particle or object (not "listens to music"), a singular with no word of its own that
    names no object the vocabulary knows."""
    verb = tok.head.head
    return (tok.dep_ == "pobj" and tok.head.lower_ == "to" and verb.pos_ == "VERB" and tok.tag_ == "NN"
            and any(c.dep_ in ("prt", "dobj") and c.i < tok.head.i for c in verb.children)
            and not list(tok.children) and tok.lower_ not in object_words())


def _adjective_half(tok) -> bool:
    """Whether tok is the noun half of a compound adjective that spaCy read as a verb's object: a bare noun right
    before an "-ed" adjective that is not its own modifier ("a man sitting cross legged" gave "a man sitting a
    cross"; "School boys sit cross legged")."""
    after = tok.doc[tok.i + 1] if tok.i + 1 < len(tok.doc) else None
    return (tok.dep_ == "dobj" and tok.tag_ == "NN" and not list(tok.children) and after is not None
            and after.tag_ == "JJ" and after.lower_.endswith("ed") and after.head.i != tok.i)


def _cross_country(tok) -> bool:
    """Whether tok is a word of "cross country" read as a noun phrase: the sport's name ("people skiing cross
    country") or, in "a person cross country skis through the snow", the verb "skis" spaCy reads as the
    object of "cross" (blind review r9's positive "country skis"); neither is a thing in the picture."""
    if tok.lower_ == "country":
        return any(c.lower_ == "cross" and c.dep_ == "compound" for c in tok.children)
    return (tok.lower_ in ("skis", "ski") and tok.dep_ == "dobj" and tok.head.lower_ == "cross"
            and any(c.lower_ == "country" and c.dep_ == "compound" for c in tok.children))


def _position(g: _Graph, k: int) -> bool:
    """Entity k, a place noun ("the corner" of a room, "the middle"), is no object: S -p-> corner -of-> X
    becomes S -"p the corner of"-> X, corner -of-> X alone gives its relations to X, and a place noun
    with no "of" goes. Returns whether the graph changed."""
    tok = _head_token(g, k)
    if tok.lemma_.lower() not in POSITION_NOUNS or g.entities[k]["head"].lower() != tok.lower_:
        return False
    of = [n for n, r in enumerate(g.relations) if r["subject"] == k and r["relation"].lower() == "of"]
    into = [n for n, r in enumerate(g.relations) if r["object"] == k]
    if not of:
        g.drop({k})
        return True
    whole = g.relations[of[0]]["object"]
    if len(into) == 1 and len(of) == 1:
        r = g.relations[into[0]]
        det = [c.lower_ for c in tok.children if c.dep_ == "det"]
        text = " ".join([r["relation"], *det, tok.lower_, "of"])
        g.relations[into[0]] = {**r, "object": whole, "relation": text, "lemma_relation": text}
        del g.relations[of[0]]
    _redirect(g, k, whole)
    return True


def _join_split_compounds(g: _Graph) -> None:
    """A known compound noun (or a possessive one, `_possessive_compound`) whose second word spaCy read as a
    verb or as a noun phrase of its own ("three teddy" + bears, "a brown teddy" + "bear", "a traffic stop" +
    "sign with", "a janitors" + "closet with") is one noun: the
    word joins the entity before it, a relation that began with it loses it, and an entity of that word
    alone gives its relations to the whole."""
    for k in range(len(g.entities)):
        end = g.bounds(k)[1]
        if end >= len(g.doc):
            continue
        head, word = g.doc[end - 1], g.doc[end]
        if ({f"{head.lower_} {word.lower_}", f"{head.lower_} {word.lemma_.lower()}"}.isdisjoint(compound_nouns())
                and not _possessive_compound(head, word) and not _noun_read_as_verb(head, word)):
            continue
        other = g.starting_at(end)
        if other is not None and g.bounds(other)[1] != end + 1 or end in g.in_phrases:
            continue
        if other is not None:
            _redirect(g, other, k)
        ent = g.entities[k]
        g.entities[k] = {**ent, "span": f"{ent['span']} {word.text}", "lemma_span": f"{ent['lemma_span']} {word.lemma_}",
                         "head": f"{ent['head']} {word.text}", "lemma_head": f"{ent['lemma_head']} {word.lemma_}",
                         "span_bounds": [g.bounds(k)[0], end + 1]}
        lead = word.lower_ + " "
        g.relations = [{**r, "relation": r["relation"][len(lead):], "lemma_relation": r["lemma_relation"].split(" ", 1)[-1]}
                       if r["relation"].lower().startswith(lead) else r
                       for r in g.relations if r["relation"].lower() != word.lower_]
        g.changed = True
        return _join_split_compounds(g)


def _noun_read_as_verb(head, word) -> bool:
    """A noun after a noun that spaCy tagged a verb: "can" with no verb after it ("a flower in a watering can on the
    sill"; "can" a modal would need one), or a plural that ends the caption after a verb's or a preposition's object,
    where no clause begins ("women holding video game console controllers": "controllers" is no verb)."""
    if head.pos_ not in ("NOUN", "PROPN"):
        return False
    after = next((t for t in word.doc[word.i + 1:] if not t.is_punct), None)
    if word.tag_ == "MD" and word.lower_ == "can":
        return after is None or after.pos_ not in ("VERB", "AUX") and not (after.pos_ == "ADV" and after.dep_ == "neg")
    return word.tag_ == "VBZ" and after is None and head.dep_ in ("dobj", "pobj") and word.lower_.endswith("s")


def _possessive_compound(head, word) -> bool:
    """"a janitors closet": a plural possessive written without its apostrophe, whose noun spaCy reads as a
    participle hung off the plural ("closet with buckets"); a known object noun that is no "-ed" form."""
    return (head.tag_ == "NNS" and word.dep_ == "acl" and word.head.i == head.i and word.tag_ in ("VBN", "VBD")
            and not word.lower_.endswith("ed") and word.lower_ in object_words())


def _noun_participle_attributes(g: _Graph) -> None:
    """"a tree filled forest": spaCy ends a noun phrase at "tree" and hangs "filled" off it, so the tree
    becomes an object of the relation. A noun followed by a participle and the noun phrase's head is one
    attribute of that head ("tree filled", as "snow covered"); the first noun's relations go to the head."""
    k = 0
    while k < len(g.entities):
        head = _head_token(g, k)
        if (head.i + 2 < len(g.doc) and head.tag_ == "NN" and g.doc[head.i + 2].tag_.startswith("NN")
                and (_participle_tag(g.doc[head.i + 1]) or _misread_clause(head, g.doc[head.i + 1], g.doc[head.i + 2]))):
            target = _entity_at(g, head.i + 2)
            if target is not None and target != k and g.bounds(target)[0] == head.i + 2:
                words = g.doc[head.i:head.i + 2]
                ent = g.entities[target]
                mods = [*ent["modifiers"], {"dep": "amod", "span": words.text, "lemma_span": words.text.lower()}]
                start = g.bounds(k)[0]
                g.entities[target] = {**ent, "modifiers": mods, "attributes": [*ent["attributes"], words.text.lower()],
                                      "span_bounds": [start, g.bounds(target)[1]], "span": g.doc[start:g.bounds(target)[1]].text}
                _redirect(g, k, target)
                g.changed = True
                k = 0
                continue
        k += 1


def _misread_clause(noun, verb, obj) -> bool:
    """"A chocolate frosted donut on a plate": spaCy reads a clause, "chocolate" the subject of "frosted" and
    "donut" its object, so the positive said "chocolate frosted a donut". A noun, an "-ed" verb whose subject it
    is and a bare object noun right after it that names a known object make one noun phrase."""
    return (verb.tag_ in ("VBD", "VBN") and verb.lower_.endswith("ed") and noun.dep_ == "nsubj" and noun.head.i == verb.i
            and obj.dep_ == "dobj" and obj.head.i == verb.i and obj.lower_ in object_words()
            and not any(c.dep_ in ("det", "poss", "nummod") for c in obj.children))


def _participle_tag(tok) -> bool:
    """Whether tok is a past participle: tagged so, or a past tense with no subject, which spaCy gives a
    participle after a noun ("displayed in glass stacked casings": "stacked" a VBD)."""
    return tok.tag_ == "VBN" or tok.tag_ == "VBD" and not any(c.dep_ in SUBJECT_DEPS for c in tok.children)


def _misspelt_participle(g: _Graph, k: int) -> bool:
    """Entity k's head is a misspelt participle spaCy read as a noun ("a calculator and phone siting on it"):
    the entity ends at the noun before it, or goes when there is none. Returns whether the graph changed."""
    head = _head_token(g, k)
    if head.lower_ not in MISSPELT_PARTICIPLES:
        return False
    start = g.bounds(k)[0]
    noun = next((t for t in reversed(g.doc[start:head.i]) if t.pos_ in ("NOUN", "PROPN")), None)
    if noun is None:
        g.drop({k})
    else:  # the last noun alone: "a calculator and phone" is no compound
        g.reread(k, noun.i, noun.i + 1)
    return True


# "-ing" words of posture or motion that spaCy tags a noun after a noun: no compound noun ends in them.
POSTURE_PARTICIPLES = frozenset({"standing", "sitting", "laying", "lying", "kneeling", "walking", "running", "riding", "playing",
                                 "grazing", "skating", "flying", "resting", "ascending", "descending"})


WORN_OR_RIDDEN = frozenset({"in", "on", "with", "wearing"})


def _participle_head(g: _Graph, k: int) -> bool:
    """"A man on a skateboard riding by food vendors": spaCy reads "skateboard riding" as a noun phrase, the
    object noun tagged an adjective before an "-ing" head that names no object. The entity ends at the
    object noun, and its relations become those of who it is related to, with the verb ("a man riding by
    food vendors"). Returns whether the graph changed."""
    head = _head_token(g, k)
    start = g.bounds(k)[0]
    if not (head.tag_ == "NN" and head.lower_.endswith("ing") and head.lower_ not in object_words() and head.i > start):
        return False
    noun = g.doc[head.i - 1]
    # a noun spaCy made a compound of it only before a participle of posture or motion: "A young man in a helmet
    # standing by a bicycle" (a "cream topping", "wood flooring", "tree trimming" are nouns)
    if not (noun.dep_ == "amod" or noun.dep_ == "compound" and head.lower_ in POSTURE_PARTICIPLES) or noun.head.i != head.i:
        return False
    into = [r["subject"] for r in g.relations if r["object"] == k and r["subject"] != k]
    # "Two giraffes in a sanctuary standing close to the wall": a noun no vocabulary names, but no adjective either,
    # before an "-ing" word that goes on with a phrase of place is a place its subject is in and stands in
    if noun.lower_ not in object_words() and not (
            into and noun.tag_ == "JJ" and noun.lower_ not in attribute_words() and head.i + 1 < len(g.doc)
            and g.doc[head.i + 1].pos_ in ("ADP", "ADV") and g.doc[head.i + 1].head.i == head.i):
        return False
    g.reread(k, start, noun.i + 1)
    if noun.dep_ == "compound" and not any(r["object"] == k and r["relation"].lower() in WORN_OR_RIDDEN for r in g.relations):
        # what is not worn or ridden does the verb itself: "A zebra standing next to a zebra laying on the ground"
        into = [k]
    if into:
        g.relations = [{**r, "subject": into[0], "relation": f"{head.text} {r['relation']}",
                        "lemma_relation": f"{head.lemma_} {r['lemma_relation']}"} if r["subject"] == k else r
                       for r in g.relations]
    return True


def _modifiers_inside(g: _Graph, k: int) -> None:
    """Entity k keeps only the modifiers its span says: reading a phrase cut from a longer one takes the head's
    adjectives before the cut too (`graph_repair._modifier_tokens`)."""
    a, b = g.bounds(k)
    words = {t.text for t in g.doc[a:b]} | {w.text for w in graph_repair._words(g.doc, a, b)}  # "park-like" too
    ent = g.entities[k]
    mods = [m for m in ent["modifiers"] if m["span"] in words]
    g.entities[k] = {**ent, "modifiers": mods, "attributes": [m["span"].lower() for m in mods if m["dep"] == "amod"]}


def _noun_before_verb(g: _Graph, k: int) -> bool:
    """"A skateboarder doing tricks on the rim of a pit", "Dog wearing blue vest catching red flying disc": spaCy tags
    the noun an adjective and the verb after it another, of the object's noun ("doing skateboarder tricks", "a blue
    catching red vest flying disc"). A known object noun that is no attribute word, before an "-ing" word of the same
    head that names no object, ends its own entity; the verb relates it (or, a garment, who wears it) to the rest.
    Returns whether the graph changed."""
    a, b = g.bounds(k)
    head = _head_token(g, k)
    noun = next((t for t in g.doc[a:max(a, head.i - 1)] if t.dep_ == "amod" and t.head.i == head.i
                 and t.lower_ in object_words() and t.lower_ not in attribute_words()
                 and g.doc[t.i + 1].tag_ == "VBG" and g.doc[t.i + 1].dep_ in ("amod", "compound")
                 and g.doc[t.i + 1].head.i == head.i and g.doc[t.i + 1].lower_ not in object_words()
                 and g.doc[t.i + 1].lower_ != "looking"), None)
    if noun is None or head.pos_ not in ("NOUN", "PROPN"):
        return False
    verb = g.doc[noun.i + 1]
    outgoing = [n for n, r in enumerate(g.relations) if r["subject"] == k]
    g.reread(k, a, noun.i + 1)
    rest = g.add(verb.i + 1, b)
    _modifiers_inside(g, rest)
    for n in outgoing:  # what the head's phrases say is of the head ("tricks on the rim")
        g.relations[n] = {**g.relations[n], "subject": rest}
    wearer = next((r["subject"] for r in g.relations if r["object"] == k and _worn(noun.lower_)
                   and r["lemma_relation"].split()[0] in ("wear", "in", "with")), k)
    g.relations.append({"subject": wearer, "object": rest, "relation": verb.text, "lemma_relation": verb.lemma_})
    return True


def _reduplicated_adverb(g: _Graph, k: int) -> bool:
    """"three sheep grassing in a pasture side by side": a noun repeated after "by" or "to" ("side by side", "back to
    back", "face to face") is an adverb of how they stand, not the head of the noun phrase before it ("a pasture
    side"); the entity ends before it. Returns whether the graph changed."""
    a, _ = g.bounds(k)
    head = _head_token(g, k)
    if head.i > a and _reduplicated(head):
        g.reread(k, a, head.i)
        return True
    return False


def _reduplicated(tok) -> bool:
    """Whether tok opens a repeated noun after a noun ("a pasture side by side"); the noun before it is the head."""
    doc = tok.doc
    return (0 < tok.i and tok.i + 2 < len(doc) and doc[tok.i + 1].lower_ in ("by", "to") and doc[tok.i + 2].lower_ == tok.lower_
            and doc[tok.i - 1].pos_ in ("NOUN", "PROPN"))


def _misread_heads(g: _Graph) -> None:
    """Heads spaCy misread: a misspelt participle (`_misspelt_participle`), a noun after its modifier
    tagged an adjective (`_postnominal_noun`), an object noun before an "-ing" head (`_participle_head`) or an "-ing"
    verb of the head (`_noun_before_verb`), a noun repeated as an adverb ("side by side": `_reduplicated_adverb`),
    "skies" for "skis" (`_skis`), a subject's verb read as a compound of its object (`_verb_as_compound`)."""
    k = 0
    while k < len(g.entities):
        k = 0 if (_misspelt_participle(g, k) or _postnominal_noun(g, k) or _participle_head(g, k)
                  or _noun_before_verb(g, k) or _reduplicated_adverb(g, k) or _bare_participle(g, k)) else k + 1
    for k in range(len(g.entities)):
        _skis(g, k)
    for k in range(len(g.entities)):
        _verb_as_compound(g, k)


def _bare_participle(g: _Graph, k: int) -> bool:
    """"A man wearing a white shirt and tie standing in a room" gave "a man tie a standing", "their mouths open
    growling at each other" "two bears open a growling": a bare "-ing" word that spaCy tagged a noun right after a
    noun or adjective says what the one before does, and names no object (no vocabulary object: "clothing"). Its
    entity goes, with its relations. Returns whether the graph changed."""
    start, end = g.bounds(k)
    tok = g.doc[start]
    if end - start != 1 or start == 0 or tok.tag_ != "NN" or not tok.lower_.endswith("ing") or tok.lower_ in object_words():
        return False
    before = g.doc[start - 1]
    if before.pos_ not in ("NOUN", "PROPN", "ADJ") and before.lower_ not in object_words():
        return False
    g.drop({k})
    return True


def _verb_as_compound(g: _Graph, k: int) -> None:
    """"A cat drinking water from a bathroom faucet": spaCy reads "drinking water" as one noun set beside "a cat"
    (apposition), so the cat drinks nothing. An "-ing" compound that opens a noun phrase right after the noun it stands
    beside, with no article between, is that noun's verb: the entity is its object ("water") and the verb relates them
    ("a cat drinking water"). Also when spaCy makes the verb an adjective of its object ("A zebra eating grass in a grassy
    yard": the positive lost its zebra, "eating grass in a grassy yard"), but not "looking", which makes a look of the noun
    before it ("An old time looking clock")."""
    a, b = g.bounds(k)
    head, first = _head_token(g, k), g.doc[a]
    if (b - a < 2 or first.tag_ != "VBG" or first.dep_ not in ("compound", "amod") or head.dep_ != "appos"
            or head.head.i != a - 1 or head.head.pos_ != "NOUN" or first.lower_ == "looking"):
        return
    subject = _entity_at(g, a - 1)
    if subject is None or subject == k or g.bounds(subject)[1] != a:
        return
    g.reread(k, a + 1, b)
    if first.dep_ == "amod":  # the reading takes the head's adjectives outside it too: no "grass eating"
        _modifiers_inside(g, k)
    g.relations.append({"subject": subject, "object": k, "relation": first.text, "lemma_relation": first.lemma_})


def _skis(g: _Graph, k: int) -> None:
    """"A man is walking in skies in the snow", "on skies skiing downhill": a bare "skies" (no determiner,
    no modifier) after "in" or "on" is the skis one stands on, misspelt; the sky is "the sky", "blue skies",
    and one is never on it (blind review r9's "skies outside the snow")."""
    head = _head_token(g, k)
    if head.lower_ != "skies" or head.dep_ != "pobj" or head.head.lower_ not in ("in", "on") or any(
            c.dep_ in ("det", "amod", "compound", "nummod", "poss") for c in head.children):
        return
    ent = g.entities[k]
    fix = {"skies": "skis", "Skies": "Skis", "sky": "ski"}
    g.entities[k] = {**ent, **{key: " ".join(fix.get(w, w) for w in ent[key].split())
                               for key in ("span", "lemma_span", "head", "lemma_head")}}
    g.changed = True


def _postnominal_noun(g: _Graph, k: int) -> bool:
    """"A wall urinal in a stall": spaCy tags "urinal" an adjective after its noun, where English puts no
    one-word adjective; it is the head, the noun before it a modifier. Returns whether the graph changed."""
    head = _head_token(g, k)
    if head.i + 1 >= len(g.doc) or head.pos_ != "NOUN" or g.doc[head.i + 1].i in g.stops():
        return False
    after = g.doc[head.i + 1]
    if (after.dep_ != "amod" or after.tag_ != "JJ" or after.head.i != head.i or list(after.children)
            or after.lower_ in POSTPOSITIVE_ADJECTIVES or after.lower_ in attribute_words()):
        return False
    g.reread(k, g.bounds(k)[0], after.i + 1)
    return True


def _three_noun_head(g: _Graph, k: int, head, words: list[str], lemmas: list[str]) -> tuple[list[str], list[str]] | None:
    """The head's words and lemmas with the noun before them when the head is a compound of three nouns
    ("Air Force jet", "life size replica", "country-style kitchen"), of which the backend keeps two; None
    otherwise."""
    first = head.i - len(words) + 1
    if len(words) < 2 or first < 0 or [t.text for t in g.doc[first:head.i + 1]] != words:
        return None  # the head's words are not the tokens before it ("stripy" of "stripy orange cross")
    hyphen = first > 1 and g.doc[first - 1].text == "-" and not g.doc[first - 2].whitespace_ and not g.doc[first - 1].whitespace_
    lead = g.doc[first - 2] if hyphen else g.doc[first - 1] if first > 0 else None
    if (lead is None or lead.i < g.bounds(k)[0] or lead.dep_ != "compound" or lead.pos_ not in ("NOUN", "PROPN")
            or not first <= lead.head.i <= head.i):
        return None
    if hyphen:
        return [f"{lead.text}-{words[0]}", *words[1:]], [f"{lead.lemma_}-{lemmas[0]}", *lemmas[1:]]
    return [lead.text, *words], [lead.lemma_, *lemmas]


def _caption_order(g: _Graph) -> None:
    """A compound head keeps the caption's word order: the backend may list a head's compound modifiers out of
    order ("blueberry coffee cake" gave "coffee blueberry cake", "video game controllers" "game video
    controllers": blind review r12), and the order of noun modifiers is the meaning (Quirk et al. 1985, 17.108:
    each modifies what follows it). Only a head whose words are the compound tokens right before its noun."""
    for k in range(len(g.entities)):
        ent = g.entities[k]
        head = _head_token(g, k)
        words, lemmas = ent["head"].split(), ent["lemma_head"].split()
        first = head.i - len(words) + 1
        if len(words) < 2 or len(words) != len(lemmas) or first < g.bounds(k)[0]:
            continue
        window = g.doc[first:head.i + 1]
        said = [t.text for t in window]
        if said == words or sorted(said) != sorted(words) or words[-1] != head.text:
            continue
        if any(t.dep_ != "compound" or t.tag_ == "VBG" or t.head.i not in range(first, head.i + 1) for t in window[:-1]):
            continue
        lemma_of = dict(zip(words, lemmas))
        g.entities[k] = {**ent, "head": " ".join(said), "lemma_head": " ".join(lemma_of[w] for w in said)}
        g.changed = True


def _compound_lead(g: _Graph, head, ent: dict, mods: list[dict]):
    """The words before the head phrase, an adjective read as the head's attribute and its particle, if any, that make a
    known compound noun with it: "light" of "light pole", "double" before "decker bus" ("a double decker bus" is no
    double bus), "pick up" before "truck" ("the pick up truck" is no "pick truck")."""
    first = head.i - len(ent["head"].split()) + 1
    for n in (1, 2):
        if first - n < 0:
            return None
        lead = g.doc[first - n:first]
        if (f"{lead.text.lower()} {ent['lemma_head'].lower()}" in compound_nouns()
                and any(m["span"] == lead[0].text and m["dep"] == "amod" for m in mods)):
            return lead
    return None


def _hyphened_heads(g: _Graph) -> None:
    """A head that starts with the participle of a hyphenated adjective (`_hyphened_lead`) loses it to the adjective."""
    for k, ent in enumerate(g.entities):
        words, lemmas = ent["head"].split(), ent["lemma_head"].split()
        if len(words) < 2 or len(words) != len(lemmas):
            continue
        lead = _hyphened_lead(g, _head_token(g, k), words)
        if lead is None:
            continue
        mods = [m for m in ent["modifiers"] if not (m["span"] == lead[0].text and m["dep"] in ("amod", "compound", "nmod"))]
        mods.append({"dep": "amod", "span": lead.text, "lemma_span": lead.text.lower()})
        g.entities[k] = {**ent, "head": " ".join(words[1:]), "lemma_head": " ".join(lemmas[1:]), "modifiers": mods,
                         "attributes": [m["span"].lower() for m in mods if m["dep"] == "amod"]}
        g.changed = True


def _hyphened_lead(g: _Graph, head, words: list[str]):
    """The hyphenated adjective whose participle spaCy put in the head ("pointy-toed" of "her pink pointy-toed heels",
    read as the heels "toed heels" with "pointy" an attribute of its own); None when the head starts otherwise."""
    first = head.i - len(words) + 1
    if first < 2 or g.doc[first].text != words[0] or not words[0].lower().endswith("ed"):
        return None
    hyphen, before = g.doc[first - 1], g.doc[first - 2]
    if hyphen.text != "-" or hyphen.whitespace_ or before.whitespace_ or not before.is_alpha:
        return None
    return g.doc[first - 2:first + 1]


def compounds(g: _Graph) -> None:
    """An adjective that makes a known compound noun with the head ("light pole") joins the head; a
    noun right before an attribute ("snow" covered) joins the attribute; material and kind nouns before
    a head are attributes ("dirt road": road, dirt; "baby elephant"); a head that ends in a participle
    spaCy took for a noun ("giraffe standing") ends before it; a compound split in two is joined
    (`_join_split_compounds`); a noun and a participle before a head are its attribute
    (`_noun_participle_attributes`)."""
    _split_coordinated_nouns(g)
    _caption_order(g)
    _join_split_compounds(g)
    _noun_participle_attributes(g)
    _misread_heads(g)
    for k in range(len(g.entities)):
        ent = g.entities[k]
        head = _head_token(g, k)
        mods = list(ent["modifiers"])
        changed = False
        prev = _compound_lead(g, head, ent, mods)
        if prev is not None:
            mods = [m for m in mods if not (m["span"] == prev[0].text and m["dep"] == "amod")]
            ent = {**ent, "head": f"{prev.text} {ent['head']}", "lemma_head": f"{prev.lemma_} {ent['lemma_head']}"}
            changed = True
        words, lemmas = ent["head"].split(), ent["lemma_head"].split()
        longer = None if changed or len(words) != len(lemmas) else _three_noun_head(g, k, head, words, lemmas)
        if longer is not None:
            words, lemmas = longer
            ent = {**ent, "head": " ".join(words), "lemma_head": " ".join(lemmas)}
            changed = True
        if (len(words) > 1 and len(words) == len(lemmas) and words[-1].lower().endswith("ing") and not changed
                and words[-1].lower() not in object_words() | ING_NOUNS  # "brick building" is a building
                and ent["head"].lower() not in compound_nouns()):  # its words: "umbrella standing" is no "umbrella stand"
            words, lemmas = words[:-1], lemmas[:-1]
            ent = {**ent, "head": " ".join(words), "lemma_head": " ".join(lemmas)}
            changed = True
        if len(words) > 1 and len(words) == len(lemmas) and ent["lemma_head"].lower() not in compound_nouns():
            lead = 0
            while lead < len(words) - 1 and lemmas[lead].lower() in material_words():
                lead += 1
            if lead:
                mods += [{"dep": "amod", "span": w, "lemma_span": w_l} for w, w_l in zip(words[:lead], lemmas[:lead])]
                ent = {**ent, "head": " ".join(words[lead:]), "lemma_head": " ".join(lemmas[lead:])}
                changed = True
        joined, inside = [], set()
        for m in mods:
            tok = _modifier_token(g, k, m)
            start = _attribute_start(tok) if m["dep"] == "amod" and tok is not None else None
            end = _attribute_end(tok) if m["dep"] == "amod" and tok is not None else None
            if start is not None or end is not None:
                start = tok.i if start is None else start
                span = g.doc[start:(end or tok.i + 1)]
                m = {**m, "span": span.text, "lemma_span": span.lemma_}
                inside |= set(range(start, tok.i))
                changed = True
            elif m["dep"] == "amod" and m["span"].lower() in NOT_ATTRIBUTES:
                changed = True
                continue
            joined.append((tok, m))
        joined = [m for tok, m in joined if tok is None or tok.i not in inside]
        if changed:
            g.entities[k] = {**ent, "modifiers": joined,
                             "attributes": [m["span"].lower() for m in joined if m["dep"] == "amod"]}
            g.changed = True
    _hyphened_heads(g)
    _phrasal_compounds(g)
    _head_words_in_attributes(g)
    _coordinated_materials(g)
    _coordinated_combination(g)


# Nouns that make one thing of two coordinated modifiers: "a toilet and sink combination".
COMBINING_NOUNS = frozenset({"combination", "combo"})


def _coordinated_combination(g: _Graph) -> None:
    """"A tan toilet and sink combination in a small room": spaCy coordinates "toilet" with "sink combination", but
    the combination is the toilet and the sink as one thing (the positive said "a sink combination in a small room").
    The combination's entity goes and the first noun, which names the thing, takes its relations."""
    for k in range(len(g.entities)):
        tok = _head_token(g, k)
        start = g.bounds(k)[0]
        if (tok is None or tok.lemma_.lower() not in COMBINING_NOUNS or tok.dep_ != "conj" or start < 2
                or g.doc[start - 1].dep_ != "cc" or g.doc[start].dep_ not in ("compound", "amod")
                or g.doc[start].head.i != tok.i):
            continue
        first = _entity_of(g, tok.head)
        if first is None or first == k or g.bounds(first)[1] != start - 1:
            continue
        _redirect(g, k, first)
        return _coordinated_combination(g)


def _coordinated_noun(g: _Graph, k: int) -> int | None:
    """The "and" inside entity k's span after a noun that spaCy hung off the head with an adjective coordinated with it,
    else None: "a white tub and white cabinets" (read as one phrase, "tub cabinets"), "a couch and large television".
    Not a material or colour noun ("a metal and wooden bench" is a bench), nor a noun coordinated with a noun ("pineapple
    and ham pizza")."""
    start, end = g.bounds(k)
    for i in range(start + 1, end - 2):
        sep, noun, adjective = g.doc[i], g.doc[i - 1], g.doc[i + 1]
        if (sep.lower_ == "and" and noun.pos_ == "NOUN" and noun.dep_ == "nmod" and start <= noun.head.i < end
                and adjective.dep_ == "conj" and adjective.head.i == noun.i and adjective.pos_ == "ADJ"
                and noun.lemma_.lower() not in material_words() | colour_words() | attribute_words()):
            return i
    return None


def _split_coordinated_nouns(g: _Graph) -> None:
    """"A bathroom with a white tub and white cabinets has a black pattern on the floor" gave "a bathroom with a white
    tub cabinets": a noun coordinated inside one phrase is an entity of its own, with the phrase's relations."""
    k = 0
    while k < len(g.entities):
        sep = _coordinated_noun(g, k)
        if sep is None:
            k += 1
            continue
        start, end = g.bounds(k)
        g.reread(k, sep + 1, end)
        new = g.add(start, sep)
        old = k + 1 if new <= k else k
        g.relations += [{**r, "subject": new if r["subject"] == old else r["subject"],
                         "object": new if r["object"] == old else r["object"]}
                        for r in list(g.relations) if old in (r["subject"], r["object"])]
        k = 0


def _coordinated_materials(g: _Graph) -> None:
    """"A pile of clay and gold vases sitting in a yard": spaCy coordinates the bare material "clay" with "gold vases",
    but both materials say what the vases are made of, so "clay" is an attribute of the vases, which take its relations
    (the positive said "clay sitting in a yard"). Only a bare material noun (no determiner or modifier) whose conjunct's
    first word, right after the "and", is a material (or a metal's colour) modifying it."""
    for k in range(len(g.entities)):
        tok = _head_token(g, k)
        if (tok is None or g.bounds(k) != (tok.i, tok.i + 1) or tok.lemma_.lower() not in material_words()
                or any(c.dep_ not in ("cc", "conj") for c in tok.children) or tok.i + 3 >= len(g.doc)):
            continue
        cc, mod = g.doc[tok.i + 1], g.doc[tok.i + 2]
        other = _entity_of(g, mod.head) if mod.head.dep_ == "conj" and mod.head.head.i == tok.i else None
        # a noun read as a compound may be a metal the vocabulary lists as a colour ("gold"); an adjective must be a material
        materials = material_words() | colour_words() if mod.dep_ == "compound" else material_words()
        if (cc.dep_ != "cc" or cc.lower_ not in ("and", "or") or mod.dep_ not in ("compound", "amod")
                or mod.lemma_.lower() not in materials or other is None or other == k
                or mod.lower_ not in g.entities[other]["attributes"]):
            continue
        ent, end = g.entities[other], g.bounds(other)[1]
        # the span takes the material in, so that a verb of "a pile" of it finds the vases
        g.entities[other] = {**ent, "span": g.doc[tok.i:end].text, "lemma_span": g.doc[tok.i:end].lemma_,
                             "span_bounds": [tok.i, end], "attributes": [tok.lower_, *ent["attributes"]],
                             "modifiers": [{"dep": "amod", "span": tok.text, "lemma_span": tok.lemma_}, *ent["modifiers"]]}
        _redirect(g, k, other)
        g.changed = True
        return _coordinated_materials(g)


# Pattern words: "star dotted" of "a small solid yellow star dotted circle" names a pattern, not a noun and its participle.
PATTERN_WORDS = frozenset({"dotted", "spotted", "striped", "stripy", "solid", "plain"})


def _made_attribute(attribute: str) -> bool:
    """A shade and its colour ("neon purple") or a noun and a participle ("horse drawn", "grass covered")."""
    words = attribute.split()
    return len(words) == 2 and (words[0] in SHADES and words[1] in colour_words()
                                or words[1].endswith(("ed", "wn", "en")) and words[1] not in PATTERN_WORDS)


def _head_words_in_attributes(g: _Graph) -> None:
    """A word of a two-word attribute (`_made_attribute`) is not also a word of the head: "a small, horse drawn buggy" is a buggy
    (not a "horse drawn horse buggy"), "a green grass covered field" a field, "the neon purple toilet" a toilet. Only
    a word the entity says once goes."""
    for k, ent in enumerate(g.entities):
        words, lemmas = ent["head"].split(), ent["lemma_head"].split()
        if len(words) < 2 or len(words) != len(lemmas):
            continue
        start, end = g.bounds(k)
        said = [t.lower_ for t in g.doc[start:end]]
        in_attributes = {w for a in ent.get("attributes", []) if _made_attribute(a) for w in a.split()}
        keep = [i for i, w in enumerate(words[:-1]) if not (w.lower() in in_attributes and said.count(w.lower()) == 1)]
        if len(keep) == len(words) - 1:
            continue
        keep.append(len(words) - 1)
        g.entities[k] = {**ent, "head": " ".join(words[i] for i in keep), "lemma_head": " ".join(lemmas[i] for i in keep)}
        g.changed = True


# Nouns made of a verb and its particle, said before the noun they name ("take out boxes", "a red pick up truck", "the
# check out counter", "a drive through window"), which spaCy reads as the verb and sng as its relation.
PHRASAL_COMPOUNDS = frozenset({("pick", "up"), ("take", "out"), ("check", "out"), ("drive", "through"), ("drive", "thru")})
# Tags of the word before such a verb when it starts a noun phrase: a determiner, an adjective, a number, a possessive or
# a preposition ("in take out boxes"), not a subject or "to" ("people pick up trash", "going to take out the trash").
NOUN_PHRASE_OPENERS = frozenset({"DT", "JJ", "JJR", "JJS", "CD", "PRP$", "IN"})


def _phrasal_compounds(g: _Graph) -> None:
    """A noun made of a verb and its particle before a noun (`PHRASAL_COMPOUNDS`) is one noun with it: "several women
    posing with pizzas in take out boxes" has take out boxes, and no women who take out boxes; "a red pick up truck"
    is a truck, not a red pick. The verb opens a noun phrase (after `NOUN_PHRASE_OPENERS`, or inside an entity sng
    cut there), and a noun follows the particle. The entities on either side become one whose head is the whole
    compound and whose attributes are those before it; the relation read from the verb goes."""
    doc = g.doc
    for i in range(len(doc) - 2):
        j = i + 2 if doc[i + 1].text == "-" else i + 1
        if j + 1 >= len(doc) or (doc[i].lower_, doc[j].lower_) not in PHRASAL_COMPOUNDS or doc[j + 1].tag_ not in ("NN", "NNS"):
            continue
        first = _entity_at(g, i)
        if first is not None and g.bounds(first)[1] != i + 1 or first is None and (i == 0 or doc[i - 1].tag_ not in NOUN_PHRASE_OPENERS
                                                                                   or doc[i - 1].lower_ == "to"):
            continue
        last = g.starting_at(j + 1)
        if last is not None and g.bounds(last)[0] > j + 1:
            continue
        end = g.bounds(last)[1] if last is not None else j + 2
        start = g.bounds(first)[0] if first is not None else i
        if any(k not in (first, last) and g.bounds(k)[0] < end and start < g.bounds(k)[1] for k in range(len(g.entities))):
            continue
        verb = f"{doc[i].lower_} {doc[j].lower_}"
        g.relations = [r for r in g.relations if " ".join(r["relation"].lower().split()) != verb
                       and not r["relation"].lower().startswith(verb + " ")]
        if first is not None and last is not None:
            _redirect(g, first, last)
            last = g.starting_at(j + 1)
        k = last if last is not None else first
        if k is None:
            k = g.add(start, end)
        entity = g.read(start, end)
        head = [doc[i].text, doc[j].text, *entity["head"].split()[-(end - j - 1):]]
        lemma = [doc[i].lower_, doc[j].lower_, *entity["lemma_head"].split()[-(end - j - 1):]]
        before = _modifiers_before(doc, start, i, g.in_phrases)
        g.entities[k] = {**entity, "head": " ".join(head), "lemma_head": " ".join(lemma), "modifiers": before,
                         "attributes": [m["span"].lower() for m in before if m["dep"] == "amod"]}
        g.changed = True


def _modifiers_before(doc, start: int, end: int, skip: set[int]) -> list[dict]:
    """sng's modifiers of the tokens [start, end) before a compound noun (det, nummod, amod; `graph_repair._role`)."""
    from mosaictool.stages.graph_repair import _role

    return [{"dep": role, "span": t.text, "lemma_span": t.lemma_} for t in doc[start:end]
            if t.i not in skip and (role := _role(t)) in ("det", "nummod", "amod")]


def _attribute_start(tok) -> int | None:
    """Where an attribute that is more than its word starts: a noun before it ("snow covered", "brand
    new"), or an adjective or adverb before a participle ("nice looking", "different colored",
    "tree-lined"); None when it is one word."""
    if tok.i == 0:
        return None
    before = tok.doc[tok.i - 1]
    if before.lower_ in HEDGES and before.head.i == tok.i and before.dep_ in ("advmod", "npadvmod"):
        return before.i  # "a nearly empty bowl": the adjective alone would say more than the caption
    if before.lower_ in SHADES and tok.lower_ in colour_words():
        return before.i  # "light blue water": one colour, both words modifiers of the noun in spaCy's parse
    if (before.tag_ == "CD" and before.dep_ == "nummod" and before.head.i == tok.head.i and tok.head.tag_ == "NN"
            and before.lower_ not in ("one", "1")):
        return before.i  # "large four sided clock": a number before a singular noun measures the modifier, not the noun
    if (tok.lower_ in COMPOUND_PARTICIPLES and before.head.i == tok.head.i and tok.dep_ == "amod"
            and (before.pos_ == "ADJ" and before.dep_ == "amod"
                 or before.pos_ == "NOUN" and before.dep_ in ("nmod", "compound"))):
        return before.i  # "a nice looking cake", "neon colored motorcycles": spaCy hangs both words off the noun
    lefts = [c for c in tok.lefts if c.dep_ in ("npadvmod", "compound", "nmod", "advmod", "amod", "punct")]
    if not lefts:
        return None
    if before.pos_ in ("NOUN", "PROPN") and before.head.i == tok.i and before.dep_ in ("npadvmod", "compound", "nmod"):
        return before.i
    if tok.tag_ in ("VBN", "VBG") and before.head.i == tok.i and before.lower_ not in INTENSIFIERS and (
            before.pos_ in ("ADJ", "ADV", "NOUN") and tok.lower_ in COMPOUND_PARTICIPLES or before.text == "-"):
        start = min(c.left_edge.i for c in lefts if c.i >= before.i - 1)
        return start if start < tok.i else None
    return None


def _attribute_end(tok) -> int | None:
    """Where a hyphenated attribute that starts with the word ends ("light-up" of "light-up parts", which
    spaCy splits into "light", "-" and a particle); None when the word stands alone."""
    doc = tok.doc
    if tok.i + 2 < len(doc) and doc[tok.i + 1].text == "-" and not doc[tok.i].whitespace_ and doc[tok.i + 2].head.i == tok.i:
        return tok.i + 3
    return None


def _modifier_token(g: _Graph, k: int, m: dict):
    start, end = g.bounds(k)
    head = g.doc[end - 1]
    candidates = [t for t in g.doc[start:end] if t.text == m["span"]] + [t for t in head.children if t.text == m["span"]]
    return candidates[0] if candidates else None


def predicates(g: _Graph) -> None:
    """Adjectives after a copula ("the bus is red", "is not visible"), verbs with no object ("a man is
    sitting", "kneeling down") and verbs whose object is an activity ("plays tennis") are attributes
    of their subject."""
    for tok in g.doc:
        words: list[str] = []
        if tok.lemma_ == "be" and tok.dep_ == "ROOT":
            # not a word of a spatial phrase: "the cross is right of the circle"
            neg = "not " if any(c.dep_ == "neg" for c in tok.children) else ""
            words = [neg + a.lower_ for c in tok.children if c.dep_ == "acomp" and c.pos_ == "ADJ" and not _aspect(c)
                     for a in (c, *(x for x in c.children if x.dep_ == "conj" and x.pos_ == "ADJ")) if a.i not in g.in_phrases]
        elif tok.pos_ == "VERB" and tok.dep_ != "amod" and tok.lower_ not in FRAMING_VERBS:
            words = _verb_attribute(tok)
        if not words:
            continue
        for subj in _subjects(tok):
            k = _entity_of(g, subj)
            if k is None or g.bounds(k)[0] <= tok.i < g.bounds(k)[1]:  # a word of its own noun phrase ("tree filled forest")
                continue
            have = g.entities[k]["attributes"]
            new = [w for w in words if w not in have]
            if new:
                ent = g.entities[k]
                mods = ent["modifiers"] + [{"dep": "amod", "span": w, "lemma_span": w} for w in new]
                g.entities[k] = {**ent, "modifiers": mods, "attributes": have + new}
                g.changed = True


def _aspect(adjective) -> bool:
    """Whether a copula's complement is a closed-class word before a to-infinitive ("a man is about to serve a
    tennis ball"): it says when the verb happens (prospective aspect, Quirk et al. 1985, 4.47), not what the subject
    is, and "an about man" is debris (blind review r12)."""
    return adjective.is_stop and any(c.dep_ == "xcomp" and _to_infinitive(c) for c in adjective.children)


def _to_infinitive(verb) -> bool:
    # a bare verb after "to": "to go catch a wave", "trying to move"
    return verb.tag_ == "VB" and any(c.dep_ == "aux" and c.lower_ == "to" for c in verb.children)


def _verb_attribute(verb) -> list[str]:
    """The attribute a verb gives its subject: the verb (with its particle) when it has no object,
    complement or prepositional phrase; the verb and its object when that is an activity. A bare to-infinitive
    gives none: it says what the subject means to do, not what it is doing, and reads as debris before its noun ("a
    surfer paddling on a board to go catch a wave": no "go surfer", blind review r12)."""
    if verb.i > 0 and _noun_read_as_verb(verb.doc[verb.i - 1], verb):
        return []  # "women holding video game console controllers": no "controllering" women
    if _to_infinitive(verb):  # also with an activity's object: no "a catch a ride man", "two play a game men"
        return []
    kids = list(verb.children)
    # a verb of painting with a colour says its subject's colour: "The freight train is painted orange and yellow",
    # "A truck painted green with designs" (not "a painted train"); only when no noun comes between its subject and
    # it (in "A living room with walls painted beige" spaCy makes the room the subject, but the walls are beige) and
    # it has no phrase of its own ("the metro train painted white with blue lettering" keeps its relation)
    subject = verb.head if verb.dep_ == "acl" else next((c for c in kids if c.dep_ in ("nsubj", "nsubjpass")), None)
    if verb.lemma_.lower() in COLOURING_VERBS and subject is not None and subject.i < verb.i and not any(
            t.pos_ in ("NOUN", "PROPN") for t in verb.doc[subject.i + 1:verb.i]) and not any(
            c.dep_ in ("prep", "agent", "dobj") for c in kids):
        colours = [a.lower_ for c in kids if c.dep_ in ("oprd", "acomp", "advmod") and c.pos_ == "ADJ"
                   and c.lower_ in colour_words() for a in (c, *c.conjuncts) if a.lower_ in colour_words()]
        if colours:
            return colours
    objects = [c for c in kids if c.dep_ == "dobj" and c.pos_ != "PRON"]
    if any(c.dep_ == "dobj" and c.lower_ in RELATIVE_PRONOUNS for c in kids):
        return []  # "containers that the truck is pulling": the truck pulls them (r9's "the pulling truck")
    if len(objects) == 1 and objects[0].lemma_.lower() in EVENT_NOUNS and verb.tag_ != "VBN":
        return [" ".join([_participle(verb), *(t.lower_ for t in verb.doc[verb.i + 1:objects[0].i + 1])])]
    # a particle with an object is a preposition ("reflecting off one"): the verb is not intransitive
    if objects or any(c.dep_ in ("prep", "agent", "dative", "xcomp", "ccomp", "attr", "acomp")
                      or c.dep_ == "prt" and _has_object(c) for c in kids):
        return []
    # "another man looks on": "on" with no object is the verb's particle (r9's "a looking man")
    # ("murals painted on" is the murals', not the truck's: no participle)
    particles = [c for c in kids if (c.dep_ in ("prt", "advmod") and c.lower_ in PARTICLES
                                     or c.dep_ == "prt" and c.lower_ == "on" and verb.tag_ != "VBN") and c.i == verb.i + 1]
    if any(c.dep_ == "advmod" and c not in particles and c.lower_ not in ("together",) for c in kids if c.dep_ == "advmod"):
        return []
    # a past tense in "-ed" with no object is its past participle, often passive: "suitcases grouped together", "his
    # arms crossed" are no "grouping" suitcases, "crossing" arms. The vocabulary's attribute words keep their reading
    # (the synthetic world's "diamond, striped, green" reads "striping", which its graphs are built on).
    past = verb.tag_ == "VBD" and verb.lower_.endswith("ed") and verb.lower_ not in attribute_words()
    said = verb.lower_ if past else _participle(verb)
    return [" ".join([said, *(c.lower_ for c in particles)])]


def _participle(verb) -> str:
    """A finite verb as the participle an attribute reads as after its noun ("a man plays tennis" ->
    "a man playing tennis", not "a plays tennis man"); other forms as written."""
    if verb.tag_ not in ("VBZ", "VBP", "VBD"):
        return verb.lower_
    base = verb.lemma_.lower()
    if base.endswith("ie"):
        return base[:-2] + "ying"
    if base.endswith("e") and not base.endswith(("ee", "ye", "oe")) and len(base) > 2:
        return base[:-1] + "ing"
    if len(base) == 3 and base[0] not in "aeiou" and base[1] in "aeiou" and base[2] not in "aeiouwxy":
        return base + base[-1] + "ing"  # "sit" -> "sitting", "run" -> "running"
    return base + "ing"


def _subjects(verb) -> list:
    """The subject tokens of a verb or copula: its nsubj (and their conjuncts), the noun a participle
    or relative clause modifies, or the subject of the verb it is coordinated with."""
    subjects = [c for c in verb.children if c.dep_ in SUBJECT_DEPS]
    if verb.i > 0 and verb.doc[verb.i - 1].lower_ in OTHER_PRONOUNS and verb.doc[verb.i - 1] not in subjects:
        # "a man throwing a frisbee as another looks on": spaCy may take "man" for the subject, but the one
        # who looks is another, of a kind the caption leaves open (blind review r12 read "a man looking on")
        return []
    if subjects:  # the nearest before the verb: spaCy may give a clause before a semicolon's subject too
        c = max((c for c in subjects if c.i < verb.i), key=lambda c: c.i, default=subjects[0])
        return [c, *_conjuncts(c)]
    if (verb.dep_ in ("acl", "relcl") or verb.dep_ == "xcomp" and verb.head.pos_ in ("NOUN", "PROPN")) and verb.head.i != verb.i:
        noun = verb.head
        if _worn_phrase(noun) is not None:  # "a man in black shirt and blue shorts playing tennis": the man plays
            noun = noun.head
        if _together_elsewhere(verb, noun):
            return _subjects(noun.head.head)  # "three stuffed animals lay in a bed cuddled together": the animals are
        if verb.dep_ == "acl" and noun.dep_ == "pobj" and noun.head.lower_ == "with" and noun.head.head.pos_ in ("NOUN", "PROPN"):
            noun = _with_owner(noun)
        elif verb.dep_ == "acl" and verb.tag_ == "VBG" and noun.dep_ == "pobj" and noun.head.dep_ == "prep":
            # "a woman sits on a park bench wearing a hat": the woman wears it, not the bench
            governor = noun.head.head
            if governor.pos_ in ("VERB", "AUX") and governor.i != verb.i:
                return _subjects(governor)
            if governor.pos_ in ("NOUN", "PROPN"):
                noun = governor
        return [noun, *(t for t in _conjuncts(noun) if t.i < noun.i)]
    if verb.dep_ in ("conj", "advcl", "xcomp") and verb.head.pos_ in ("VERB", "AUX") and verb.head.i != verb.i:
        return _clause_subject_token(verb)  # "a dog sitting in a car looking out the window": the dog looks
    if verb.dep_ == "ROOT":  # a phrase with no determiner: spaCy hangs "giraffe" off "standing" as a compound
        return [c for c in verb.lefts if c.dep_ in ("compound", "npadvmod", "nmod") and c.pos_ in ("NOUN", "PROPN")][:1]
    return []


def _with_owner(noun):
    """Who does what a participle after a with-phrase's object `noun` says: the noun the phrase is of ("a vase with a
    flower sitting on a table": the vase sits), but the object when only it acts of itself ("a tall building with four
    double decker buses driving along a parking lot": the buses drive)."""
    owner = noun.head.head
    return noun if _agent(noun) and not _agent(owner) else owner


AGENT_KINDS = frozenset({"person", "animal", "bird", "vehicle"})


def _agent(tok) -> bool:
    """Whether noun `tok` names something that moves or acts of itself (a person, an animal, a vehicle), by the
    shipped vocabulary's hypernyms, the whole compound first ("double decker bus")."""
    table = _vocab().hypernyms.get("objects", {})
    lemmas = [t.lemma_.lower() for t in tok.lefts if t.dep_ == "compound" or t.dep_ == "amod" and t.i >= tok.i - 2]
    names = [" ".join([*lemmas[i:], tok.lemma_.lower()]) for i in range(len(lemmas) + 1)]
    return any(AGENT_KINDS & set(table.get(n, ())) for n in names)


def _clause_subject_token(verb) -> list:
    """The subject of a verb coordinated with or under another: the other verb's ("a dog sitting in a car looking out
    the window": the dog looks), but a finite clause under it has a subject of its own, one spaCy missed: "A man sits on
    his bed ... as a ray of sunlight streams through the window" (the ray streams, not the man), read as the object of
    "as"."""
    if verb.dep_ == "advcl" and verb.tag_ in ("VBZ", "VBP"):
        return [next(p.children) for p in _clause_preposition(verb)][:1]
    return _subjects(verb.head)


def _clause_preposition(verb) -> list:
    """The "as" (or "while", "when") spaCy read as a preposition whose object is the subject of finite clause `verb`
    right after it ("as a ray of sunlight streams through the window"); [] when there is none."""
    return [p for p in verb.head.children if p.dep_ == "prep" and p.lower_ in ("as", "while", "when")
            and [c.dep_ for c in p.children] == ["pobj"] and p.right_edge.i == verb.i - 1]


def _together_elsewhere(verb, noun) -> bool:
    """Whether a participle said "together" hangs off one thing, a single noun (no conjunct, no group) that a verb's
    phrase names: only several are "cuddled together", so the participle is the verb's subject's ("a bed cuddled
    together" in "Three stuffed animals lay in a bed cuddled together.")."""
    return (verb.dep_ == "acl" and any(c.lower_ == "together" for c in verb.children) and noun.tag_ == "NN"
            and not _conjuncts(noun) and noun.lemma_.lower() not in FRAMING_NOUNS and noun.dep_ == "pobj"
            and noun.head.dep_ == "prep" and noun.head.head.pos_ in ("VERB", "AUX") and noun.head.head.i != verb.i)


def _entity_of(g: _Graph, tok) -> int | None:
    """The entity a token names: its own, or for a relative pronoun or a framing noun without one,
    the noun it stands for."""
    seen = set()
    while tok.i not in seen:
        seen.add(tok.i)
        k = _entity_at(g, tok.i)
        if k is not None:
            return k
        if _is_relative_pronoun(tok):
            tok = tok.head.head
        elif (noun := _object_pronoun_antecedent(tok)) is not None:
            tok = noun
        elif (measured := _measured(tok)) is not None:
            tok = measured
        elif _reduplicated(tok):  # "in a pasture side by side": the pasture
            tok = tok.doc[tok.i - 1]
    return None


def _new_entity(g: _Graph, tok) -> None:
    """A new entity of a subject noun that has none, with the words before it that modify it (spaCy
    chunks no noun phrase in "giraffe standing on green grass")."""
    if tok.pos_ not in ("NOUN", "PROPN"):
        return
    start = min([tok.i, *(c.i for c in tok.lefts if c.dep_ in ("det", "amod", "compound", "nummod"))])
    if all(_entity_at(g, i) is None for i in range(start, tok.i + 1)):
        g.add(start, tok.i + 1)


def _objects(tok) -> list:
    return [tok, *_conjuncts(tok)]


@functools.cache
def _worn(lemma: str) -> bool:
    from mosaictool.vocab import load

    return load().group(lemma) in ("clothing", "accessory")


def _worn_phrase(tok):
    """The preposition of "a man in a jacket and hat" when `tok` (hat) is a garment spaCy coordinated with the
    man, past a garment of the man's "in"/"with" phrase: English coordinates it with the nearer garment, so
    the man wears it and it does nothing the man does ("a hat looks at the camera", blind review r8's
    "blue shorts playing tennis"). None otherwise."""
    if tok.dep_ != "conj" or not (_worn(tok.lemma_.lower()) or _worn(tok.lower_)) or tok.head.pos_ not in ("NOUN", "PROPN"):
        return None
    for prep in tok.head.children:
        if prep.dep_ == "prep" and prep.lower_ in ("in", "with") and prep.i < tok.i and any(
                c.dep_ == "pobj" and c.i < tok.i and (_worn(c.lemma_.lower()) or _worn(c.lower_)) for c in prep.children):
            return prep
    return None


def _worn_conjuncts(g: _Graph) -> None:
    """A garment coordinated with its wearer (`_worn_phrase`) loses the wearer's relations and is worn."""
    for k in range(len(g.entities)):
        prep = _worn_phrase(_head_token(g, k))
        wearer = _entity_at(g, prep.head.i) if prep is not None else None
        if wearer is None or wearer == k:
            continue
        g.relations = [r for r in g.relations if r["subject"] != k]
        if not any(r["subject"] == wearer and r["object"] == k for r in g.relations):
            g.relations.append({"subject": wearer, "object": k, "relation": prep.text, "lemma_relation": prep.lemma_})
        g.changed = True


def _conjuncts(tok) -> list:
    """The nouns coordinated with `tok` by "and"/"or" ("a cat and a dog"); none where spaCy joins two
    clauses without one ("a cross left of a box; the star is ..."). The middle of a list that spaCy
    reads as an apposition counts ("with mixing equipment, a keyboard and a computer monitor": the
    keyboard an appos of the equipment, the monitor its conjunct)."""
    chain = [tok, *(t for t in tok.conjuncts if _worn_phrase(t) is None)]
    chain += [x for t in list(chain) for a in t.children if a.dep_ == "appos" and a.pos_ in ("NOUN", "PROPN")
              and any(c.dep_ == "cc" for c in a.children) for x in (a, *a.conjuncts)]
    if not any(c.dep_ == "cc" for t in chain for c in t.children):
        return []
    return [t for t in dict.fromkeys(chain) if t.i != tok.i]


def _prepositional(prep) -> tuple[list[str], object] | None:
    """The words of a spatial phrase that starts with preposition `prep` and its object token:
    "on" + "top" + "of" + O -> (["on", "top", "of"], O); "next" + "to" + O; else ([prep], pobj)."""
    obj = next((c for c in prep.children if c.dep_ == "pobj"), None)
    if obj is None:
        return None
    if obj.lower_ in POSITION_NOUNS:
        of = next((c for c in obj.children if c.dep_ == "prep" and c.lower_ == "of"), None)
        inner = next((c for c in of.children if c.dep_ == "pobj"), None) if of is not None else None
        if inner is not None:
            det = [c.lower_ for c in obj.children if c.dep_ == "det" and c.lower_ in ("the", "a", "an")]
            return [prep.lower_, *det, obj.lower_, "of"], inner
    return [prep.lower_], obj


def _read_relations(g: _Graph) -> list[tuple[int, str, int]]:
    """(subject entity, relation, object entity) for every verb object and every preposition under a
    verb or copula, as the caption words them (the verb, then its spatial phrase)."""
    found = []
    for tok in g.doc:
        if tok.pos_ == "VERB" and tok.dep_ != "amod":
            found += _verb_objects(tok)
        # a particle with an object is a preposition the tagger misread ("a cow walking down a sidewalk": "down"
        # a particle of "walking", "sidewalk" its object); read as a particle, the relation lost its verb
        if tok.pos_ == "ADP" and (tok.dep_ in ("prep", "agent") or tok.dep_ == "prt" and _has_object(tok)):
            found += _preposition_relations(tok)
    return _between_entities(g, found) + _possessives(g) + _trailing_spatial_words(g)


def _phrasal(verb) -> list[str]:
    """The verb with the particle that follows it ("letting off", "picking up", "reaching up"): without it
    a text reads "an airplane letting green smoke" (blind review r7). A particle with an object of its own
    is a preposition ("reflecting off one") and stays out."""
    particles = [c.lower_ for c in verb.children if c.dep_ == "prt" and c.i == verb.i + 1 and c.lower_ in PARTICLES
                 and not _has_object(c)]
    return [verb.lower_, *(particles or _before_phrase(verb))]


def _fixed_lead(tok) -> list[str]:
    """The first word of a fixed adverb that ends in `tok` ("inside" of "inside out", "upside" of "upside down"),
    as a list; [] when there is none. Without it the relation says another thing: "an umbrella pointed out over a
    table" for "pointed inside out over" (blind review r12), "a car turned on a street" for "turned upside down on"."""
    lead = tok.doc[tok.i - 1] if tok.i else None
    if lead is not None and lead.text == "-" and tok.i > 1:
        lead = tok.doc[tok.i - 2]  # "mounted upside-down on it's post": spaCy splits off the hyphen
    return [lead.lower_] if lead is not None and (lead.lower_, tok.lower_) in FIXED_ADVERBS else []


def _before_phrase(verb) -> list[str]:
    """The word between a verb and its phrase of place that the verb needs: any particle ("coming in on a
    wave", not "coming on") or an adjective complement ("falling asleep next to a man", not "falling next
    to"; blind review r11); nothing when the next word is no such bare word of the verb's."""
    doc = verb.doc
    if verb.i + 2 >= len(doc):
        return []
    word, after = doc[verb.i + 1], doc[verb.i + 2]
    if (word.lower_, after.lower_) in FIXED_ADVERBS and after.head.i == verb.i and verb.i + 3 < len(doc) \
            and doc[verb.i + 3].dep_ == "prep" and doc[verb.i + 3].head.i == verb.i:
        return [word.lower_, after.lower_]  # "turned upside down on a street"
    if word.head.i != verb.i or list(word.children) or after.head.i != verb.i or after.dep_ not in ("prep", "advmod"):
        return []
    if word.dep_ == "prt" or (word.dep_ in ("oprd", "acomp") and word.pos_ == "ADJ"):
        return [word.lower_]
    return []


def _has_object(particle) -> bool:
    """Whether a particle has an object of its own, and so is a preposition ("reflecting off one")."""
    return any(c.dep_ == "pobj" for c in particle.children)


def _verb_objects(verb) -> list[tuple[object, list[str], object]]:
    """(subject token, [verb (and particle)], object token) for each direct object of `verb`: "a man rides a horse"."""
    found = []
    for c in verb.children:
        if c.dep_ == "dobj" and not _away_before(verb, c) and not _listed_after_colon(verb, c):
            found += [(s, _phrasal(verb), o) for s in _subjects(verb) for o in _objects(c)]
    return found


def _listed_after_colon(verb, obj) -> bool:
    """Whether a colon stands between a framing verb and the noun spaCy took for its object: "Several vehicles ... are
    shown in the photo: streetcar, tourbus, classic car and family cars" lists what is shown, which the vehicles do
    not show (the positive said "several vehicles shown family cars")."""
    return verb.lower_ in FRAMING_VERBS and any(t.text == ":" for t in verb.doc[verb.i + 1:obj.i])


# Ground a thing may be listed with as the scene's, not the verb's: "a baseball player is swinging a bat and some grass".
GROUND_NOUNS = frozenset({"grass"})


def _ground_listed(g: _Graph, r: dict) -> bool:
    """Whether the relation is a verb's to ground or a place (the vocabulary's) that spaCy coordinated after the verb's
    object, a thing: the caption lists what else is seen, and the verb is not done to it ("swinging a bat and some
    grass": no "swinging grass")."""
    tok = first = _head_token(g, r["object"])
    while first.dep_ == "conj" and first.head.i != first.i:
        first = first.head
    kind, lemma = _vocab().object_kind, tok.lemma_.lower()
    return (first.i != tok.i and first.dep_ == "dobj" and _last_word(r["relation"]) == first.head.lower_
            and kind(first.lemma_.lower()) == "thing" and (lemma in GROUND_NOUNS or kind(lemma) == "place"))


def _away_before(verb, obj) -> bool:
    """Whether an adverb "away" stands between the verb and the noun spaCy took for its object: "a chair that
    faces away fro a television" (a misspelt "from") says where it faces from, and the chair does not face
    the television (blind review r9). A particle with an object ("throwing away the trash") is kept."""
    return any(c.lower_ == "away" and c.dep_ == "advmod" and verb.i < c.i < obj.i for c in verb.children)


def _preposition_relations(prep) -> list[tuple[object, list[str], object]]:
    """(subject token, words, object token) for preposition `prep` under a verb or copula; none when it
    hangs off anything else (a noun's: "a man with a hat")."""
    read = _prepositional(prep)
    if read is None:
        return []
    words, obj = read
    gov = prep.head
    if any(c.dep_ == "advcl" and c.tag_ in ("VBZ", "VBP") and prep in _clause_preposition(c) for c in gov.children):
        return []  # no "a man sits as a ray" for "sits ... as a ray of sunlight streams through the window"
    particle = False  # the phrase hangs off a particle of the verb ("returning a ball back to his opponent")
    if gov.lower_ in ("next", "close", *PARTICLES) and gov.dep_ in ("advmod", "prt") and gov.head.i != gov.i:
        particle = gov.lower_ in PARTICLES
        words, gov = [*_fixed_lead(gov), gov.lower_, *words], gov.head  # "next to", "up on", "inside out over"
    if gov.pos_ == "VERB" and gov.dep_ != "amod":
        # the verb is part of the relation unless it has an object of its own ("a man plays tennis
        # in front of an audience": man "in front of" audience) or only frames ("is shown in")
        if gov.lower_ not in FRAMING_VERBS and not any(c.dep_ == "dobj" and not _names_nothing(c, prep) for c in gov.children):
            verb = _phrasal(gov)
            words = [*verb, *words] if words[0] not in verb[1:] else [gov.lower_, *words]
    elif not (gov.pos_ == "AUX" and gov.lemma_ == "be"):
        return []
    subjects = _subjects(gov)
    dobjs = [d for c in gov.children if c.dep_ == "dobj" for d in _objects(c)]
    if _object_pronoun_antecedent(obj) is not None and gov.pos_ == "VERB" and dobjs:
        return _in_pronoun(prep, words, obj, dobjs)
    if gov.lemma_ == "have" and gov.tag_ in ("VBZ", "VBP", "VBD") and dobjs and dobjs[0].i < prep.i:
        # what the subject has is where the phrase puts it: "this bathroom has pink tiles in the shower" (no "the
        # bathroom in the shower"); not "having fun in the zoo", an activity where the subject is
        return [(d, words, o) for d in dobjs[:1] for o in _objects(obj)]
    if gov.pos_ == "VERB" and dobjs and dobjs[0].i < prep.i and (prep.lower_ in PATH_PREPOSITIONS or particle):
        # a path after a verb's object is the object's: "a hand spraying water into a toilet bowl", "A Tenn player that is
        # returning a tennis ball back to his opponent" (no "a player back to his opponent")
        return [(dobjs[0], words, o) for o in _objects(obj)]
    if gov.pos_ == "VERB" and dobjs and dobjs[0].i < prep.i and prep.lower_ == "in" and obj.lemma_.lower() in CONTAINER_NOUNS:
        # a container after a verb's object holds the object: "a boy is holding a pizza in a box" (not "a boy in a
        # box"), "a little girl puts her hand in a pasta dish"
        return [(dobjs[0], words, o) for o in _objects(obj)]
    if obj.lower_ == "other" and any(c.lower_ == "each" for c in obj.children):  # "next to each other"
        return [(s, words, o) for s in subjects for o in subjects if o.i != s.i]
    return [(s, words, o) for s in subjects for o in _objects(obj)]


def _in_pronoun(prep, words: list[str], obj, dobjs: list) -> list[tuple[object, list[str], object]]:
    """What a verb's phrase to a pronoun after its objects relates: "a bathroom has a shower and a toilet in it": shower
    in bathroom, toilet in bathroom; after a with-phrase, its noun ("a person holding a plate with food on it": the food
    is on the plate, `_object_pronoun_antecedent`)."""
    with_phrase = _with_before(prep, dobjs[0])
    if with_phrase is not None:
        return [(w, words, dobjs[0]) for c in with_phrase.children if c.dep_ == "pobj" for w in _objects(c)]
    return [(d, words, _object_pronoun_antecedent(obj)) for d in dobjs]


def _names_nothing(dobj, prep) -> bool:
    """Whether a verb's object is an indefinite one the verb's phrase `prep` passes over, as `_verb_through` reads it:
    "frying something on the stove" is frying on it; not with a particle ("holding something out in her hand") nor to a
    recipient ("shows something ... to a group of girls") nor after a verb that says nothing without it ("doing
    something with balls": no "doing with")."""
    return (dobj.lower_ in INDEFINITE_OBJECTS and prep.lower_ not in RECIPIENT_PREPOSITIONS
            and dobj.head.lemma_.lower() not in ("do", "make", "have", "get", "take")
            and not any(c.dep_ == "prt" for c in dobj.head.children))


def _between_entities(g: _Graph, found: list[tuple[object, list[str], object]]) -> list[tuple[int, str, int]]:
    """The token triples as (entity, words, entity), adding an entity for each subject noun not yet
    one; pronouns without an entity and a relation of an entity with itself are dropped."""
    for s, _, _ in found:  # first every new entity (adding one renumbers those after it), then the indices
        if s.pos_ != "PRON" and _entity_of(g, s) is None:
            _new_entity(g, s)
    out = []
    for s, words, o in found:
        ks, ko = _entity_of(g, s), _entity_of(g, o)
        if ks is not None and ko is not None and ks != ko:
            out.append((ks, " ".join(words), ko))
    return out


def _trailing_spatial_words(g: _Graph) -> list[tuple[int, str, int]]:
    """(Y, word, X) for "X with Y above" / "X with a Y underneath": a spatial word with no object after
    the noun of a with-phrase places that noun against the noun the phrase hangs off."""
    out = []
    if TRAILING_SPATIAL.isdisjoint(g.doc.text.lower().split()):  # the usual case, without a pass over the tokens
        return out
    for tok in g.doc:
        if tok.lower_ not in TRAILING_SPATIAL or any(c.dep_ == "pobj" for c in tok.children):
            continue
        noun = tok.head
        if noun.pos_ not in ("NOUN", "PROPN") or noun.dep_ != "pobj" or noun.head.lower_ != "with":
            continue
        ky, kx = _entity_of(g, noun), _entity_of(g, noun.head.head)
        if ky is not None and kx is not None and ky != kx:
            out.append((ky, tok.lower_, kx))
    return out


def _possessives(g: _Graph) -> list[tuple[int, str, int]]:
    """(thing, "of", owner) for "a man's hat" and for "his"/"her"/"their" + noun, the owner of such a
    pronoun being the subject of the clause it is in ("a man holding his phone": phone of man), the
    owner of "its" the nearest noun before it."""
    out = []
    text = g.doc.text.lower()
    if "'" not in text and POSSESSIVE_PRONOUNS.isdisjoint(text.split()):
        return out
    for tok in g.doc:
        if tok.dep_ != "poss":
            continue
        owner = tok
        if tok.lower_ == "its":  # a thing's: the nearest noun before it ("a red pot and its handle")
            owner = next((t for t in reversed(g.doc[:tok.i]) if t.pos_ in ("NOUN", "PROPN") and _entity_of(g, t) is not None), None)
            if owner is None:
                continue
        elif tok.pos_ == "PRON":
            verb = next((a for a in tok.ancestors if a.pos_ in ("VERB", "AUX")), None)
            subjects = _subjects(verb) if verb is not None else []
            if not subjects:
                continue
            owner = subjects[0]
        kt, ko = _entity_of(g, tok.head), _entity_of(g, owner)
        if kt is not None and ko is not None and kt != ko:
            out.append((kt, "of", ko))
    return out


def _noun_listed_as_verb(tok) -> bool:
    """Whether a base-form verb coordinated with an -ing verb is a noun listed after that verb's object: a name of the
    vocabulary's right after "and" and the object, with no subject of its own ("A woman holding a knife and fork over a
    giant pizza", "the toilet bowl and sink with beige tiles": spaCy's verbs "fork" and "sink")."""
    doc = tok.doc
    return (tok.pos_ == "VERB" and tok.dep_ == "conj" and tok.tag_ in ("VB", "VBP") and tok.i > 1 and tok.head.tag_ == "VBG"
            and doc[tok.i - 1].lower_ == "and" and doc[tok.i - 2].dep_ == "dobj" and doc[tok.i - 2].head.i == tok.head.i
            and tok.lower_ in object_words() and not any(c.dep_ in SUBJECT_DEPS for c in tok.children))


def _nouns_read_as_verbs(g: _Graph) -> set[str]:
    """A noun spaCy read as a verb (`_noun_listed_as_verb`) becomes an entity the first verb relates its subject to, as
    it does the object before it ("a woman holding fork"), and its own relations go ("a woman fork over a giant
    pizza"); returns the words of those nouns, whose relations read from the tree go too."""
    nouns = [t for t in g.doc if _noun_listed_as_verb(t)]
    for tok in nouns:
        k = _entity_at(g, tok.i)
        if k is None:
            k = g.add(tok.i, tok.i + 1)
        g.relations = [r for r in g.relations if r["relation"].split(" ", 1)[0].lower() != tok.lower_]
        verb = " ".join(_phrasal(tok.head))
        for s in (_entity_of(g, t) for t in _subjects(tok.head)):
            if s is not None and s != k and not any((r["subject"], r["object"]) == (s, k) for r in g.relations):
                g.relations.append({"subject": s, "object": k, "relation": verb, "lemma_relation": _lemma(g, verb)})
        g.changed = True
    return {t.lower_ for t in nouns}


def _front_without_of(g: _Graph) -> None:
    """A verb's relation to its object across "in front" with no "of" ("a teddy bear is sitting in front a group of
    boxes", "standing in a front some grass": a dropped "of", spaCy then reads the object as the verb's) is the
    verb "in front of" it, as the caption means."""
    if not any(t.lower_ == "front" for t in g.doc):  # runs on every caption: most have no "front"
        return
    for n, r in enumerate(g.relations):
        verb = next((t for t in g.doc if t.pos_ == "VERB" and t.text == r["relation"]), None)
        if verb is None:
            continue
        front = next((c for p in verb.children if p.dep_ == "prep" and p.lower_ == "in" for c in p.children
                      if c.dep_ == "pobj" and c.lower_ == "front" and not any(x.lower_ == "of" for x in c.children)), None)
        start = g.bounds(r["object"])[0]
        obj = next((c for c in verb.children if c.dep_ == "dobj" and front is not None and c.i > front.i), None)
        if front is None or obj is None or not (obj.left_edge.i == front.i + 1 or start == front.i + 1):
            continue
        g.relations[n] = {**r, "relation": f"{verb.text} in front of", "lemma_relation": f"{verb.lemma_} in front of"}
        g.changed = True


def relations(g: _Graph) -> None:
    """Relations read from the dependency tree (`_read_relations`) join sng's: one that extends sng's
    relation between the same two entities ("parked next to" for "next to") replaces it, one between
    two entities sng does not relate is added; coordinated subjects share a relation on a noun
    ("a cat and a dog on a bed")."""
    _worn_conjuncts(g)
    _front_without_of(g)
    listed = _nouns_read_as_verbs(g)
    # the verb of a compound noun is no relation ("in take out boxes": `_phrasal_compounds`)
    read = [(s, rel, o) for s, rel, o in _read_relations(g) if not g.entities[o]["head"].lower().startswith(rel.lower() + " ")
            and rel.split(" ", 1)[0].lower() not in listed]
    # sng's relation of a verb to a noun past its "away" ("faces away fro a television": `_away_before`)
    away = {(verb.lower_, _entity_of(g, c)) for verb in g.doc for c in verb.children
            if verb.pos_ == "VERB" and c.dep_ == "dobj" and _away_before(verb, c)}
    if away:
        kept = [r for r in g.relations if (r["relation"].lower(), r["object"]) not in away]
        g.relations, g.changed = kept, g.changed or len(kept) != len(g.relations)
    # "refrigerators are lined up by a wall": after a particle, "by" is a place, no agent that sng's reversed relation
    # makes the doer of ("a wall lined several refrigerators")
    placed = {(o, rel.split()[0].lower(), s) for s, rel, o in read
              if len(rel.split()) > 2 and rel.split()[-1].lower() == "by" and rel.split()[-2].lower() in PARTICLES}
    if any((r["subject"], r["relation"].lower(), r["object"]) in placed for r in g.relations):
        g.relations, g.changed = [r for r in g.relations if (r["subject"], r["relation"].lower(), r["object"]) not in placed], True
    # sng's relations without words, or of a copula alone ("a sign ... is a blender"): no relation
    if any(not _says_something(r["relation"]) for r in g.relations):
        g.relations, g.changed = [r for r in g.relations if _says_something(r["relation"])], True
    # a preposition has one governor: sng's relation through the same preposition to the same
    # object from another subject ("a man plays tennis in front of": tennis "in front of") goes
    governed = {(o, rel.split()[-1]): s for s, rel, o in read}
    # a verb is one governor with or without its particle ("picking up" the pizza is sng's "picking")
    governed |= {(o, rel.split()[-2]): s for s, rel, o in read if len(rel.split()) > 1 and rel.split()[-1] in PARTICLES}
    kept = [r for r in g.relations if governed.get((r["object"], _last_word(r["relation"])), r["subject"]) == r["subject"]]
    if len(kept) != len(g.relations):
        g.relations, g.changed = kept, True
    read += _coordinated(g)
    for s, rel, o in read:
        between = [n for n, r in enumerate(g.relations) if (r["subject"], r["object"]) == (s, o)]
        if not between:
            g.relations.append({"subject": s, "object": o, "relation": rel, "lemma_relation": _lemma(g, rel)})
            g.changed = True
            continue
        for n in between:
            r = g.relations[n]
            old = r["relation"].lower()
            # an extension: "parked next to" of "next to", or a verb's particle: "letting off" of "letting"
            if r["subject"] == s and rel != old and (rel.endswith(" " + old) or _with_particle(rel, old)):
                g.relations[n] = {**r, "relation": rel, "lemma_relation": _lemma(g, rel)}
                g.changed = True
    # the last word of a joined compound read as the verb of a relation ("a traffic stop sign" + "sign with")
    for n, r in enumerate(g.relations):
        head, (first, _, rest) = g.entities[r["subject"]]["head"].lower().split(), r["relation"].partition(" ")
        if len(head) > 1 and rest and first.lower() == head[-1]:
            g.relations[n] = {**r, "relation": rest, "lemma_relation": _lemma(g, rest)}
            g.changed = True
    # a verb whose only word in the caption is inside its object's noun phrase is an attribute of it, not a
    # relation: "skiers with a huge snow covered mountain" (spaCy's verb "covered"; "skiers covered a huge snow
    # covered mountain"), "a white car and a white bus parked parallel"
    kept = [r for r in g.relations if not _verb_in_object(g, r) and not _unasserted_infinitive(g, r)
            and not _phrase_before_conjunct(g, r) and not _across_list_item(g, r)
            and not _clause_subject(g, r) and not _with_past_pronoun_verb(g, r) and not _ground_listed(g, r)
            and not _grip(g, r)]
    if len(kept) != len(g.relations):
        g.relations, g.changed = kept, True
    _depicted_with(g)
    _held_place(g)
    _with_place(g)
    _device_in_use(g)


# Things held in the hand: a place said after one that a person holds or swings is where the person stands ("A
# young lady swinging a tennis racquet on top of a tennis court", "a baseball player with a bat on the field": the
# player is on the field, the bat in his hands, resting on nothing). Only a place: "on her shoulder" is the umbrella's.
HAND_HELD = frozenset({"racket", "racquet", "bat", "umbrella"})
HOLDING_VERBS = frozenset({"hold", "swing", "carry", "grip", "wield", "raise", "lift"})
PLACE_PREPOSITIONS = frozenset({"on top of", "atop"})
# Prepositions of where a thing is, which a place phrase said after a held or with-phrase thing may be its holder's.
AT_PLACE_PREPOSITIONS = frozenset({"on", "in", "at"})


def _ground_place(g: _Graph, k: int) -> bool:
    """Whether entity k is a place of the vocabulary's that one stands at, not a sky, where flying things are."""
    lemma = g.entities[k]["lemma_head"].lower()
    return _vocab().object_kind(lemma) == "place" and _vocab().group(lemma) != "sky"


def _held_in_place(g: _Graph, r: dict) -> bool:
    """Whether relation `r` puts a hand-held thing at a place: "on top of" anything, or "on"/"in"/"at" a place of the
    vocabulary's, not a sky ("a bat on the field")."""
    relation = r["relation"].lower()
    return relation in PLACE_PREPOSITIONS or relation in AT_PLACE_PREPOSITIONS and _ground_place(g, r["object"])


def _held_place(g: _Graph) -> None:
    """sng's place of a hand-held thing the place phrase hangs off (`_held_in_place`) goes to its holder ("A man
    holding a tennis racquet on top of a tennis court": the man is on it), or goes where the holder has one to the place
    already."""
    for r in list(g.relations):
        tok = _head_token(g, r["subject"])
        prep = g.doc[g.bounds(r["object"])[0]].head
        while prep.dep_ == "pobj" or prep.head.dep_ == "pobj" and prep.head.head.dep_ == "prep" and prep.lower_ == "of":
            prep = prep.head.head if prep.dep_ != "pobj" else prep.head
        if (tok.lemma_.lower() not in HAND_HELD or prep.dep_ != "prep" or prep.head.i != tok.i or not _held_in_place(g, r)):
            continue
        if tok.dep_ == "pobj" and tok.head.lower_ == "with" and tok.head.head.pos_ in ("NOUN", "PROPN"):
            holders = [tok.head.head]
        elif tok.dep_ == "pobj" and tok.head.lower_ == "with" and tok.head.head.pos_ == "VERB":
            holders = _subjects(tok.head.head)[:1]  # "a man standing with a racket on top of a court"
        elif tok.dep_ == "dobj" and tok.head.lemma_.lower() in HOLDING_VERBS:
            holders = _subjects(tok.head)[:1]
        else:
            continue
        holder = _entity_of(g, holders[0]) if holders else None
        if holder is None or holder in (r["subject"], r["object"]):
            continue
        _give_subject(g, r, holder)


def _with_place(g: _Graph) -> None:
    """A place said after a with-phrase that follows a verb's object is where the verb's subject is, which spaCy hangs
    off the with-phrase's noun: "A man flying a kite with two strings on a beach" (the strings are the kite's, up in the
    air; the man is on the beach). Not a sky, where flying things are. A with-phrase of the subject is no verb's object's (a
    hand-held thing's place is its holder's: `_held_place`)."""
    for r in list(g.relations):
        tok, obj = _head_token(g, r["subject"]), _head_token(g, r["object"])
        prep, verb = obj.head, tok.head.head
        if (r["relation"].lower() not in AT_PLACE_PREPOSITIONS or tok.dep_ != "pobj" or tok.head.lower_ != "with"
                or obj.dep_ != "pobj" or prep.dep_ != "prep" or prep.head.i != tok.i or verb.pos_ != "VERB"
                or not any(c.dep_ == "dobj" and c.i < tok.i for c in verb.children) or not _ground_place(g, r["object"])):
            continue
        subjects = _subjects(verb)
        owner = _entity_of(g, subjects[0]) if subjects else None
        if owner is not None and owner not in (r["subject"], r["object"]):
            _give_subject(g, r, owner)


# Devices one is "on" by using them ("on phones", "on a laptop"): after the object of a person's verb phrase, the
# person's, whom spaCy's attachment to the nearer noun leaves out.
USED_DEVICES = frozenset({"phone", "cellphone", "cell phone", "smartphone", "computer", "laptop", "tablet"})


def _device_in_use(g: _Graph) -> None:
    """sng's "on" of a thing to a device goes to the person whose verb's phrase that thing is the object of: "People
    are sitting in chairs on phones and computers" puts the people on them (using them), not the chairs; a thing
    resting on one ("A knit item sitting on a laptop") keeps its own verb's relation."""
    for r in list(g.relations):
        tok = _head_token(g, r["subject"])
        verb = tok.head.head
        if (r["relation"].lower() != "on" or g.entities[r["object"]]["lemma_head"].lower() not in USED_DEVICES
                or tok.dep_ != "pobj" or tok.head.dep_ != "prep" or verb.pos_ != "VERB" or _agent(tok)):
            continue
        subjects = _subjects(verb)
        person = _entity_of(g, subjects[0]) if subjects and _vocab().object_kind(subjects[0].lemma_.lower()) == "person" else None
        if person is not None and person not in (r["subject"], r["object"]):
            _give_subject(g, r, person)


# Nouns of a work that depicts what follows its "of": a "with" after the depicted noun says what the depicted thing
# has, not the work ("A painting of a table with fruit on top of it": the table has the fruit).
ARTWORK_NOUNS = frozenset({"painting", "drawing", "sketch", "portrait", "poster", "mural", "illustration", "cartoon"})


def _depicted_with(g: _Graph) -> None:
    """sng's "with" of an artwork noun said after its "of" object goes to the depicted noun nearest before it ("A
    drawing of a young woman with many facial piercings": the woman has them), or goes where that noun has it already."""
    for r in list(g.relations):
        subject = g.entities[r["subject"]]
        if r["relation"].lower() != "with" or subject["lemma_head"].lower() not in ARTWORK_NOUNS:
            continue
        prep = _head_token(g, r["object"]).head
        depicted = [t for o in g.relations if o["subject"] == r["subject"] and o["relation"].lower() == "of"
                    for c in (_head_token(g, o["object"]),) for t in (c, *c.conjuncts) if t.i < prep.i]
        target = _entity_of(g, max(depicted, key=lambda t: t.i)) if depicted and prep.lower_ == "with" else None
        if target is None or target == r["subject"]:
            continue
        _give_subject(g, r, target)


def _phrase_before_conjunct(g: _Graph, r: dict) -> bool:
    """Whether sng gave a later conjunct the phrase of the noun it is coordinated with, a phrase said before the
    conjunct: "A kitchen with wooden furniture and a vase filled with red flowers" says nothing of "a vase with wooden
    furniture", nor "A woman in a white dress and a man in gray" of "a man in a white dress" (a phrase after both, "a
    cat and a dog on a bed", is shared). Not across a semicolon: the synthetic world's captions join their clauses so,
    and their graphs stay as sng reads them."""
    subject, obj = _head_token(g, r["subject"]), _head_token(g, r["object"])
    if subject.dep_ == "pobj" and subject.head.lower_ == "of" and subject.head.head.dep_ == "conj" \
            and _entity_at(g, subject.head.head.i) is None:
        # the conjunct is a framing noun that gave way to what it measures: "a bathroom with a toilet and a lot of ski
        # boots" says no "ski boots with a toilet"
        subject = subject.head.head
    if subject.dep_ != "conj" or subject.head.pos_ not in ("NOUN", "PROPN"):
        return False
    # the object as written: a pronoun's entity is its antecedent by now ("a building behind it and an intersection
    # in front of it" says no "an intersection behind" the lot)
    written = [c for p in subject.head.children if p.dep_ == "prep" and p.i < subject.i for c in p.children
               if c.dep_ == "pobj" and (c.i == obj.i or c.lower_ in OBJECT_PRONOUNS)]
    return any(r["relation"].lower() == c.head.lower_ and not any(t.text == ";" for t in g.doc[c.head.i:subject.i]) for c in written)


def _own_phrase(tok) -> list:
    """The phrases after noun `tok` that are its own: a participle or relative clause, and a preposition but "of"."""
    return [c for c in tok.children if c.i > tok.i and (c.dep_ in ("acl", "relcl") or c.dep_ == "prep" and c.lower_ != "of")]


def _new_list_item(tok) -> bool:
    """Whether noun `tok`, coordinated with the object of a preposition, opens an item of its own: it has a
    preposition of its own ("Half an eclair on a plate and a coffee mug on wooden table"), or, a person or animal
    after a thing, a participle or clause ("Two signs with arrows and a man standing on the sidewalk"). Not a phrase
    back to a pronoun ("A bed with two dogs and a cat lying on it"), nor a preposition after "with" ("a kitchen with a
    stove and a sink under a window"), "of" ("A dish of vegetables and noodles with sauce") or "between", nor a
    participle of a thing, which spaCy often hangs off the last noun ("A person with a cane and a roller bag sitting on
    a bench", "A man in white shirt and black shorts playing tennis")."""
    if tok.dep_ != "conj" or tok.head.dep_ != "pobj" or tok.head.head.dep_ != "prep":
        return False
    kind = _vocab().object_kind
    animate = kind(tok.lemma_.lower()) in ("person", "animal") and kind(tok.head.lemma_.lower()) not in ("person", "animal")
    for c in _own_phrase(tok):
        if any(t.pos_ == "PRON" and t.dep_ == "pobj" for t in c.subtree):
            continue
        if c.dep_ == "prep" and tok.head.head.lower_ not in ("with", "of", "between", "among") or c.dep_ != "prep" and animate:
            return True
    return False


def _nearer_conjunct(tok) -> bool:
    """Whether spaCy coordinated noun `tok` with a noun before the phrase said right before it: "cooking at the kitchen
    counter near a baby and a dog" coordinates the dog with the baby, not the counter (no "an adult cooking at a dog").
    A list after "with" is the with-noun's all the same ("a kitchen with two pineapples on the counter and a wok pot")."""
    if tok.dep_ != "conj" or tok.head.pos_ not in ("NOUN", "PROPN") or tok.head.dep_ != "pobj":
        return False
    return any(c.dep_ == "prep" and c.lower_ not in ("of", "with") and tok.head.i < c.i < tok.i
               and any(o.dep_ == "pobj" and o.pos_ in ("NOUN", "PROPN") for o in c.children) for c in tok.head.children)


def _across_list_item(g: _Graph, r: dict) -> bool:
    """Whether a relation crosses into or out of a list item with a phrase of its own (`_new_list_item`), an item
    that spaCy coordinated with the object of the preposition before it: "Two signs with arrows and a man standing on
    the sidewalk" says no "two signs with a man" nor "arrows standing on the sidewalk", "Half an eclair on a plate and a
    coffee mug on wooden table" no "an eclair on a coffee mug" nor "a plate on wooden table"."""
    subject, obj = _head_token(g, r["subject"]), _head_token(g, r["object"])
    prep = obj.head.head
    if _new_list_item(obj) and prep.i < obj.i and _last_word(r["relation"]) == prep.lower_ and subject.i < prep.i:
        return True  # into the item: the preposition's relation of the noun it follows
    if _nearer_conjunct(obj) and subject.i < obj.head.i and _last_word(r["relation"]) not in ("of", "with"):
        return True
    return any(_new_list_item(y) and y.head.i == subject.i and obj.i > y.i
               and any(c.left_edge.i <= obj.i <= c.right_edge.i for c in _own_phrase(y)) for y in subject.conjuncts)


# What a thing is held by ("holding a kite by the string"), not where the holder is ("holding a surfboard by the ocean").
GRIP_NOUNS = frozenset({"string", "handle", "strap", "leash", "rope", "cord", "tail", "ear", "neck", "collar", "hand", "arm",
                        "leg", "foot", "horn", "rein", "hair", "stem", "end", "edge", "corner", "tip", "scruff"})


def _grip(g: _Graph, r: dict) -> bool:
    """Whether the relation is a by-phrase of a grip (`GRIP_NOUNS`) after the object of a verb of holding, which says
    where the thing is held, not where the holder is: "A man holding a piece of food by a string" (no "a man by a
    string")."""
    obj = _head_token(g, r["object"])
    prep, verb = obj.head, obj.head.head
    return (_last_word(r["relation"]) == "by" and obj.dep_ == "pobj" and prep.lower_ == "by" and verb.pos_ == "VERB"
            and obj.lemma_.lower() in GRIP_NOUNS
            and verb.lemma_.lower() in HOLDING_VERBS and any(c.dep_ == "dobj" and c.i < prep.i for c in verb.children))


def _with_past_pronoun_verb(g: _Graph, r: dict) -> bool:
    """Whether sng's with-phrase follows the object of a verb (or of its phrase) whose subject is a pronoun that names
    no entity: "Some are standing outside a building with suitcases" may give the suitcases to those who stand, as it
    would "people" (decompose's attachment guard reads that from the verb's relation, which a pronoun has none of)."""
    tok = _head_token(g, r["subject"])
    verb = tok.head.head if tok.dep_ == "pobj" and tok.head.dep_ == "prep" else tok.head if tok.dep_ == "dobj" else None
    if r["relation"].lower() != "with" or verb is None or verb.pos_ != "VERB" or _head_token(g, r["object"]).i < tok.i:
        return False
    subjects = [c for c in verb.children if c.dep_ in SUBJECT_DEPS]
    return bool(subjects) and all(c.pos_ == "PRON" and _entity_of(g, c) is None for c in subjects)


def _clause_subject(g: _Graph, r: dict) -> bool:
    """Whether sng's relation ends in the subject of a clause that spaCy read as the object of "as": "A man sits on his
    bed ... as a ray of sunlight streams through the window" says no "a man as a ray" (`_clause_preposition`)."""
    prep = _head_token(g, r["object"]).head
    return _last_word(r["relation"]) == prep.lower_ and any(
        c.dep_ == "advcl" and c.tag_ in ("VBZ", "VBP") and prep in _clause_preposition(c) for c in prep.head.children)


def _unasserted_infinitive(g: _Graph, r: dict) -> bool:
    """Whether the relation's verb is a to-infinitive the caption does not say happens: one after a wh-word ("Four
    people learning how to surf on the beach": they do not surf, no "four people surf on the beach") or one with a
    subject of its own that another verb lets do it ("A bus stopped at a curb to allow people to board the bus":
    no "people board the bus")."""
    first = r["relation"].split()[0].lower() if r["relation"].split() else ""
    said = [t for t in g.doc if t.lower_ == first]
    return bool(said) and all(
        t.pos_ == "VERB" and _to_infinitive(t) and (
            any(c.tag_ in ("WRB", "WP") and c.i < t.i for c in t.children)
            or any(c.dep_ in SUBJECT_DEPS for c in t.children) and t.dep_ in ("ccomp", "xcomp") and t.head.pos_ == "VERB")
        for t in said)


def _verb_in_object(g: _Graph, r: dict) -> bool:
    first = r["relation"].split()[0].lower() if r["relation"].split() else ""
    said = [t for t in g.doc if t.lower_ == first]
    start, end = g.bounds(r["object"])
    return bool(said) and all(t.pos_ == "VERB" and start <= t.i < end for t in said)


def _with_particle(relation: str, old: str) -> bool:
    """Whether `relation` is `old` with a particle after its verb ("letting off" for "letting", "reaching
    up to" for "reaching to")."""
    words, old_words = relation.split(), old.split()
    return (len(words) == len(old_words) + 1 and words[0] == old_words[0] and words[1] in PARTICLES
            and words[2:] == old_words[1:])


def _says_something(relation: str) -> bool:
    return any(w not in ("is", "are", "was", "were", "be", "'s") for w in relation.lower().split())


def _last_word(relation: str) -> str:
    words = relation.lower().split()
    return words[-1] if words else ""


def _coordinated(g: _Graph) -> list[tuple[int, str, int]]:
    """Relations that coordination shares: a relation of a noun coordinated with an earlier one ("a cat
    and a dog on a bed": the dog's "on" is the cat's too) when the preposition hangs off the noun, and
    a relation into a noun is one into every noun coordinated with it ("a bathroom with a sink, tub
    and toilet": sng stops after the second)."""
    out = []
    for r in g.relations:
        head = _head_token(g, r["subject"])
        obj_head = _head_token(g, r["object"])
        # not "of": "a tube of toothpaste and two toothbrushes" says nothing of toothbrushes of toothpaste
        # nor when the earlier noun has a phrase of its own: "Searchlights in front view and a plane on a wide runway"
        if r["relation"].lower() != "of" and head.dep_ == "conj" and head.head.pos_ in ("NOUN", "PROPN") and _conjuncts(head) and any(
                p.head.i == head.i for p in obj_head.ancestors if p.dep_ == "prep") \
                and not any(c.dep_ == "prep" and c.lower_ != "of" and c.i < head.i for c in head.head.children):
            first = _entity_at(g, head.head.i)
            if first is not None and first not in (r["subject"], r["object"]) and not _one_spot(r["relation"]):
                out.append((first, r["relation"], r["object"]))
        # not into the subject's own list: "two mice, a cup and a keyboard on it" puts no keyboard on the mice
        items = {head.i, *(t.i for t in head.ancestors if t.dep_ in ("conj", "appos"))}
        for tok in _conjuncts(obj_head):
            k = _entity_at(g, tok.i)
            if k is not None and k not in (r["subject"], r["object"]) and tok.pos_ in ("NOUN", "PROPN") and tok.i not in items:
                out.append((r["subject"], r["relation"], k))
    return out


def _one_spot(relation: str) -> bool:
    """Whether a relation puts its subject at one spot of its object ("in the middle of", "at the end of"), which the
    last noun of a list may hold alone: "two plates of food and a beer in the middle of the table"."""
    words = relation.lower().split()
    return len(words) > 2 and words[-1] == "of" and words[-2] in ("middle", "center", "centre", "end", "corner", "edge")


def _lemma(g: _Graph, rel: str) -> str:
    lemmas = {t.lower_: t.lemma_ for t in g.doc}
    return " ".join(lemmas.get(w, w) for w in rel.split())


# --- typos -------------------------------------------------------------------------------------

# A known object name is "frequent" where the shipped co-occurrence counts (vocab/object_attributes.tsv and
# vocab/relation_triples.tsv, which negate draws its replacements from) show it at least this often: 372
# one-word names of the 1,422 in vocab/objects.tsv ("keyboard" 26, "toilet" 176). Rarer names are as likely to
# be misspellings of a common word as it of them (the counts' own "womn" 2, "brocolli" 1, "skiis" 2), and
# "game" (6), an activity, is no name of vocab/objects.tsv, so "gamer" stays.
TYPO_MIN_COUNT = 5
ARTICLES = frozenset({"a", "an"})


def english_words(nlp) -> frozenset[str]:
    """The words `nlp`'s rule lemmatizer knows: its `lemma_index` (WordNet's nouns, verbs, adjectives and
    adverbs; Miller 1995) and the irregular forms of `lemma_exc` ("women", "geese"). Empty for a pipeline
    without such tables, which leaves unknown words as they are (`typos` cannot tell a word from a typo)."""
    if "lemmatizer" not in nlp.pipe_names:
        return frozenset()
    lookups = getattr(nlp.get_pipe("lemmatizer"), "lookups", None)
    words: set[str] = set()
    for name in ("lemma_index", "lemma_exc"):
        if lookups is not None and lookups.has_table(name):
            for entries in lookups.get_table(name).values():
                words.update(entries)
    return frozenset(words)


@functools.cache
def _object_counts() -> dict[str, int]:
    """How often the shipped co-occurrence counts show each object name, as subject, object or bearer of
    an attribute."""
    vocab = _vocab()
    counts: dict[str, int] = {}
    for (obj, _), n in vocab.object_attributes.items():
        counts[obj] = counts.get(obj, 0) + n
    for (subj, _, obj), n in vocab.relation_triples.items():
        counts[subj] = counts.get(subj, 0) + n
        counts[obj] = counts.get(obj, 0) + n
    return counts


@functools.cache
def _known_objects() -> frozenset[str]:
    """Every object name the shipped vocabulary knows: listed, a synonym, or in its counts ("grocery store")."""
    vocab = _vocab()
    return frozenset(vocab.objects) | frozenset(vocab.synonyms.get("objects", {})) | frozenset(_object_counts())


@functools.cache
def _frequent_objects() -> frozenset[str]:
    """The one-word names of vocab/objects.tsv the counts show at least TYPO_MIN_COUNT times."""
    counts = _object_counts()
    return frozenset(n for n in _vocab().objects if " " not in n and counts.get(n, 0) >= TYPO_MIN_COUNT)


@functools.cache
def _irregular_singulars() -> dict[str, str]:
    """Irregular plural -> singular ("women" -> "woman", "teeth" -> "tooth"), not those that are their own
    singular ("sheep") or add to it ("tomatoes")."""
    return {p: s for s, p in _vocab().plurals.items() if not p.startswith(s)}


def _edits1(word: str) -> set[str]:
    """Every string one edit from `word`: a letter deleted, inserted or replaced, or two adjacent letters
    transposed (Damerau 1964; the candidate set of Norvig 2007, "How to Write a Spelling Corrector")."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    return ({a + b[1:] for a, b in splits if b} | {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
            | {a + c + b[1:] for a, b in splits if b for c in letters} | {a + c + b for a, b in splits for c in letters}) - {word}


def _is_word(word: str, lexicon: frozenset[str]) -> bool:
    """Whether `word` (lower-case) is an object name or an English word, as written or as a regular plural
    ("doughnuts", "boxes", "puppies")."""
    forms = {word}
    if word.endswith("s"):
        forms |= {word[:-1], word[:-2]} | ({word[:-3] + "y"} if word.endswith("ies") else set())
    return not forms.isdisjoint(_known_objects()) or not forms.isdisjoint(lexicon)


def _typo_correction(g: _Graph, tok, start: int) -> str | None:
    """The object name head noun `tok` (of the noun phrase that starts at token `start`) misspells, as its
    lemma; None where it is no typo. Three cases:
    - "a women": an article right before an irregular plural means one: the singular ("a man and a women").
    - a word neither the vocabulary nor the lexicon knows, one edit from exactly one frequent object name
      ("keybord" -> keyboard, "toliet" -> toilet); none where two are ("cot": cat, coat, cow, ...).
    - a word that is no common object name (`_common_object`), one edit from a frequent one that makes a known
      compound with the noun before it, where that noun and the word make none: "a grocery story" -> grocery
      store, "road sigh" -> road sign; "a bedtime story" and "let out a sigh" stay."""
    word, lemma = tok.lower_, tok.lemma_.lower()
    prev = g.doc[tok.i - 1] if tok.i > 0 else None
    if prev is not None and prev.lower_ in ARTICLES and word in _irregular_singulars():
        return _irregular_singulars()[word]
    if not lemma.isalpha():
        return None
    if not (_is_word(word, g.lexicon) or _is_word(lemma, g.lexicon)):
        if not g.lexicon:  # a word the vocabulary lacks may still be English ("coach", "gamer")
            return None
        found = _edits1(lemma) & _frequent_objects()
        return found.pop() if len(found) == 1 else None
    if prev is None or prev.i < start or prev.pos_ not in ("NOUN", "PROPN", "ADJ") or _common_object(lemma):
        return None
    known = _known_objects()
    if f"{prev.lower_} {lemma}" in known or f"{prev.lower_} {word}" in known:
        return None
    found = {c for c in _edits1(lemma) & _frequent_objects() if f"{prev.lower_} {c}" in known}
    return found.pop() if len(found) == 1 else None


def _common_object(name: str) -> bool:
    """Whether `name` is listed in vocab/objects.tsv or counted TYPO_MIN_COUNT times: such a head means what
    it says after any noun ("ski rack", "plastic bat", "luggage tags", "a park beach"), though another known
    compound is one edit away ("ski track", "plastic bag", "luggage bags", "park bench")."""
    return name in _vocab().objects or _object_counts().get(name, 0) >= TYPO_MIN_COUNT


def _as_written(word: str, like: str) -> str:
    """`word` in the case of `like` ("WOMAN" for "WOMEN", "Sign" for "Sigh")."""
    return word.upper() if like.isupper() and len(like) > 1 else word.capitalize() if like[:1].isupper() else word


def typos(g: _Graph) -> None:
    """An object's head noun that misspells an object name is read as that name (`_typo_correction`), in the
    entity's head, lemma and span: negatives and positives built on the graph then do not repeat the typo
    ("people outside a grocery story", blind review r13). A word before a head is left alone ("a two story
    building"), and so is a proper noun; the caption and its `tokens` keep what it says."""
    import sng_parser.database

    vocab = _vocab()
    for k, ent in enumerate(g.entities):
        start, end = g.bounds(k)
        tok = g.doc[end - 1]
        if tok.pos_ != "NOUN" or tok.dep_ == "compound":
            continue
        lemma = _typo_correction(g, tok, start)
        if lemma is None:
            continue
        plural = tok.lower_ != tok.lemma_.lower() and tok.lower_ not in _irregular_singulars()
        written = _as_written(vocab.plural(lemma) if plural else lemma, tok.text)
        texts = [written if t.i == tok.i else t.text for t in g.doc[start:end]]
        lemmas = [lemma if t.i == tok.i else t.lemma_ for t in g.doc[start:end]]
        spaces = [t.whitespace_ for t in g.doc[start:end]]
        lemma_head = " ".join([*ent["lemma_head"].split()[:-1], lemma])
        g.entities[k] = {**ent, "head": " ".join([*ent["head"].split()[:-1], written]), "lemma_head": lemma_head,
                         "span": "".join(w + s for w, s in zip(texts, spaces)).strip(),
                         "lemma_span": "".join(w + s for w, s in zip(lemmas, spaces)).strip(),
                         "type": "scene" if sng_parser.database.is_scene_noun(lemma_head) else "unknown"}
        g.changed = True


REPAIRS = {"pronouns": pronouns, "framing": framing, "compounds": compounds, "predicates": predicates,
           "relations": relations, "typos": typos}
