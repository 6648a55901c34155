"""decompose: caption scene graph -> positive sub-graphs (MosaiCLIP §3.3, App. B).

Reads `graph` (from `parse`) and the caption; writes `subgraphs` (schema in
`mosaictool.stages.subgraph`):

- every sub-graph with one object and its attributes (pronouns such as "it" left out), and every sub-graph with two objects joined
  by one relation (with their attributes), in graph order, duplicates removed; the parser's debris
  is left out or repaired: place nouns as objects ("right"), bare prepositions as relations ("of"
  for a lost "left of"), colour words fused into a noun ("orange cross" -> "cross", "orange");
- when there are more than `max_subgraphs`, a sample of that many chosen from (seed, id) alone,
  kept in graph order (`sample_subgraphs`): sub-graphs that carry a relation or an attribute come
  before bare objects, as MosaiCLIP samples positive-negative pairs by category and a bare object
  makes no pair (Singh et al. 2023, App. B);
- first, unless `keep_caption` is False, the whole caption as the coarsest positive
  (kind "caption"); it does not count towards `max_subgraphs`.

Each sub-graph gets its canonical `key` (the caption: the whole graph's), and the record gets
`subgraph_keys`: the keys of EVERY sub-graph the decomposition can produce, sampled or not, and of
their weaker readings (attribute subsets, hypernym nouns, count dropped), the whole caption's key
first, at most `max_keys` (`subgraph.subgraph_keys`). A text is a positive of an image exactly
when its key is in the image's `subgraph_keys` (MosaiCLIP's P(i)). Keys use `vocab`'s synonym
groups: give decompose, negate and template the same vocabulary.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from mosaictool.stages.caption_repair import PICTURE_NOUNS, POSSESSIVE_PRONOUNS
from mosaictool.stages.negate import DEFAULT_PROBS
from mosaictool.stages.subgraph import (
    MAX_KEYS,
    SPATIAL_NOUNS,
    canonical_key,
    caption_key,
    graph_nodes,
    node_key,
    record_rng,
    subgraph_keys,
    usable_relations,
)
from mosaictool.stages.subgraph import PREPOSITIONS as ENGLISH_PREPOSITIONS

DEFAULT_MAX = 3  # the paper's M
# The weights of the two kinds of sub-graph that make negatives: one object with attributes (f_obj,
# p_obj) and two objects with a relation (f_attr and f_rel, p_attr + p_rel); Singh et al. 2023, App. B
# and H.1 (p_obj = 0.15, p_attr = p_rel), negate's default --probs.
SAMPLE_WEIGHTS = {"attributed": DEFAULT_PROBS[0], "relation": DEFAULT_PROBS[1] + DEFAULT_PROBS[2]}


def make_check(text_key: str = "caption", keep_caption: bool = True, named=None):
    """The check of a record decompose reads: `graph` (records.DecomposeRecord) and, unless
    keep_caption is False, the caption in `text_key`. Its hints name the arguments as `named` does
    (default: records.flag_name, the command line's flags)."""
    from mosaictool import records

    named = named or records.flag_name
    schema = records.DecomposeRecord
    if keep_caption:
        schema = records.with_key(schema, text_key,
                                  hint=f"choose it with {named('text_key')}, or drop it with {named('caption', off=True)}")
    return records.checker(schema)


# Words a relation that is only a prepositional phrase starts with ("with", "next to", "on top of").
PREPOSITIONS = frozenset({
    "on", "in", "at", "with", "next", "near", "by", "under", "above", "below", "behind", "beside", "over", "inside",
    "outside", "underneath", "beneath", "atop", "around", "against", "along", "among", "between", "across", "beyond",
    "through", "into", "onto", "toward", "towards", "from", "for", "of", "upon", "within", "off", "to", "left", "right",
    "far", "close", "opposite", "alongside", "near", "without", "like",
})


# Relations of nearness, and of resting on or in a thing: what rests on a thing near Z is near Z too.
PROXIMITY = frozenset({"near", "next to", "by", "beside", "close to", "alongside", "nearby"})
SUPPORT = frozenset({"on", "in", "at", "inside", "atop", "on top of", "upon", "onto", "into"})
# Verbs whose subject is where their object is (hands on it, at arm's length, riding it), and the places
# that share: "a person holding a piece of food in front of a sign" is in front of the sign too.
CONTACT_VERBS = frozenset({"hold", "carry", "eat", "cook", "fry", "use", "cut", "prepare", "grab", "ride", "push", "pull",
                           "wear", "drink", "read", "bake", "play", "brush", "wash", "pet", "hug", "feed", "lead", "walk",
                           "have", "touch", "throw", "catch", "kick", "swing", "hit", "make", "serve"})
CO_LOCATED = PROXIMITY | {"in", "at", "inside", "in front of", "behind", "in the middle of", "in middle of"}
# Verbs whose subject goes along with its object, and where it goes: "a person riding skis on a snowy slope"
# is on the slope, "a woman walking her dogs through the snow" goes through it (the gold set's convention,
# docs/gold_graphs.md); not "over" ("riding a horse as it jumps over a bar": the horse jumps).
CARRYING_VERBS = frozenset({"ride", "drive", "walk", "lead", "push", "pull", "carry", "paddle", "steer", "row"})
PATH = CO_LOCATED | {"on", "down", "up", "along", "across", "through", "around", "into", "onto", "toward", "towards"}

# Participles of posture and placement, which things do as well as people and animals ("a bicycle leaning
# against a wall", "a bag sitting on a chair"): the noun nearest before one may be its subject.
STATIVE_PARTICIPLES = frozenset({"leaning", "resting", "sitting", "lying", "laying", "hanging", "standing", "parked",
                                 "propped", "perched", "stacked", "piled", "placed", "mounted", "attached", "covered",
                                 "filled", "surrounded", "lined", "stuck", "floating", "positioned", "located", "set",
                                 "leaned", "tied", "chained", "docked", "displayed"})
# Phrases of place that may say where a verb's subject is rather than its object ("crossing a street between buses").
PLACES_OF_AGENT = PROXIMITY | frozenset({"between", "among", "amongst", "in front of", "behind"})


def candidate_subgraphs(graph: dict, vocab=None, words: list[str] | None = None, tags: list[str] | None = None) -> list[dict]:
    """All one-object and two-object-one-relation sub-graphs of a parsed graph, deduplicated,
    without the parser's debris (`subgraph.graph_nodes`, `subgraph.usable_relations`, `shown_nodes`) or a relation
    the caption may attach elsewhere (`attachment_ambiguous`, which reads the caption's `words`, parse's
    `tokens`, where given; `tags`, their part-of-speech tags, find the debris)."""
    return _candidates_of_said(with_said_verbs(graph, words), vocab, words, tags)


def _candidates_of_said(graph: dict, vocab, words: list[str] | None, tags: list[str] | None) -> list[dict]:
    """`candidate_subgraphs` of a graph `with_said_verbs` has already given its verbs (`decompose_record` keeps that
    graph for its keys: the verbs are looked up once a record)."""
    nodes = graph_nodes(graph, vocab)
    nodes, cut = _drop_cut(shown_nodes(graph, nodes, words, tags, vocab))
    nodes = [node if node is None else _one_said(node, graph["entities"][i], words) for i, node in enumerate(nodes)]
    either, either_entities = disjuncts(graph, words)
    # "teams in white or blue uniforms": neither colour is said, the uniforms are (a weaker reading, among the keys)
    nodes = [node if node is None else {**node, "attributes": [a for a in node["attributes"]
                                                               if not _said_either(a, either) and not _looking(a)]}
             for node in nodes]
    agents = frozenset() if vocab is None else frozenset(
        i for i, node in enumerate(nodes)
        if node is not None and (vocab.object_kind(str(node.get("lemma") or node["noun"])) in ("person", "animal")
                                 or str(node["noun"]).lower() in AGENT_PRONOUNS))
    stray = _stray_words(graph, words, tags, {} if vocab is None else vocab.objects)
    nodes = [node if node is None or not stray.get(i) else {**node, "attributes": [a for a in node["attributes"] if a not in stray[i]]}
             for i, node in enumerate(nodes)]
    whose = _who_of_thing(graph, words, agents, vocab.objects) if vocab is not None else frozenset()
    written = _written_words(graph, agents) if vocab is not None else frozenset()
    # "a snowboard who is performing a trick": the clause is the person's, not the thing's (its words stay the person's)
    nodes = [node if i not in whose or node is None else {**node, "attributes": _own_attributes(node, graph["entities"][i], words)}
             for i, node in enumerate(nodes)]
    keys = [None if node is None else node_key(node) for node in nodes]
    out, seen = [], set()
    # The graph_key of each sub-graph, from the node keys computed once.
    # "a man without a shirt": the relation is true of the image, the shirt on its own is not
    lacking = {r["object"] for r in graph["relations"] if " ".join(str(r["relation"]).lower().split()) == "without"}
    lacking |= _phrase_only(nodes) | _no_thing_in_view(graph, nodes, words, tags)
    photos = _the_photo(graph, nodes, words)
    lacking |= photos
    alone = _alone(graph, nodes, words, tags, {} if vocab is None else vocab.objects)
    for i, (node, key) in enumerate(zip(alone, [k if a is n else a and node_key(a) for a, n, k in zip(alone, nodes, keys)])):
        if node is None or i in lacking or i in either_entities or i in written:  # "it", "that": nothing to show on its own
            continue
        identity = ((key,), ())
        if identity not in seen:
            seen.add(identity)
            out.append({"kind": "object", "text": None, "objects": [node], "relations": []})
    people = frozenset() if vocab is None else frozenset(
        i for i, node in enumerate(nodes) if node is not None and vocab.object_kind(str(node.get("lemma") or node["noun"])) == "person")
    for rel in usable_relations(graph, nodes, vocab):  # no self-loops, pronouns, places or bare "of" (but a container's)
        s, o = rel["subject"], rel["object"]
        if attachment_ambiguous(graph, rel, words, agents) or not said_as_given(rel, graph, words) or _cut_complement(graph, rel, words):
            continue
        if _modal(graph, rel, words):
            continue
        if {s, o} & (either_entities | written) or _said_either(rel["relation"], either) or _cut_phrase(graph, rel, cut, words) \
                or _noun_relation(graph, rel, words, tags, vocab) or s in whose \
                or _misread(graph, rel, words, tags, people, agents, vocab) or _thing_acting(rel, nodes, agents, vocab):
            continue
        if _scenery(graph, rel, words) or _own_part(graph, rel, words, agents, vocab) or _stray_relation(rel, stray):
            continue
        if s in photos or o in photos and rel["relation"].lower().split()[-1] not in ("for", "in"):
            continue  # "kids posing for a picture", "umbrellas in a black and white picture" stay
        if _one_between(rel, nodes[o]):
            continue
        relation = " ".join([*_state_said(graph, rel, words), *rel["relation"].lower().split()])
        identity = (tuple(sorted((keys[s], keys[o]))), ((keys[s], relation, keys[o]),))
        if identity not in seen:
            seen.add(identity)
            out.append({
                "kind": "relation",
                "text": None,
                "objects": [nodes[s], nodes[o]],
                "relations": [{"subject": 0, "object": 1, "relation": relation}],
            })
    return out


# Words in a picture noun's phrase that make it the photograph the caption is of ("in a black and white picture").
PHOTO_WORDS = frozenset({"black", "exposure", "blurry", "blurred", "sepia", "vintage"})


def _the_photo(graph: dict, nodes: list[dict | None], words: list[str] | None) -> set[int]:
    """The picture nouns that name the photograph itself, not a picture in the scene: the object of "for" ("kids posing
    for a picture on a tennis court" gave "a picture on a tennis court") or one whose phrase speaks of the photograph
    ("umbrellas in a black and white picture near the water" gave "a black and white picture near the water", "a man
    on a long exposure picture"). No thing in view: no object positive, no relation of which it is the subject, nor
    one to it but "for" and "in"."""
    if not words:
        return set()
    lower = [w.lower() for w in words]
    out = set()
    for n, e in enumerate(graph.get("entities") or []):
        bounds = e.get("span_bounds") if isinstance(e, dict) else None
        if n >= len(nodes) or nodes[n] is None or not isinstance(bounds, list) or len(bounds) != 2 \
                or not 0 < bounds[0] < bounds[1] <= len(lower):
            continue
        if lower[bounds[1] - 1] not in PICTURE_NOUNS:
            continue
        if lower[bounds[0] - 1] == "for" or PHOTO_WORDS & set(lower[bounds[0]:bounds[1]]):
            out.add(n)
    return out


# Modal verbs: what follows is possible or to come, not said to be so.
MODALS = frozenset({"could", "may", "might", "would", "should", "will", "'ll"})


def _modal(graph: dict, rel: dict, words: list[str] | None) -> bool:
    """Whether a modal stands between the relation's subject and its object ("A very clean and cozy looking kitchen that
    could be in a home magazine" gave "a cozy clean kitchen in a home magazine"; "Those zebras may have lost their
    parents"): the caption does not say it is so. Not "can" ("several people can be seen at the crest"), nor an alt
    text's "may contain:"."""
    try:
        s_end, o_start = graph["entities"][rel["subject"]]["span_bounds"][1], graph["entities"][rel["object"]]["span_bounds"][0]
    except (IndexError, KeyError, TypeError):
        return False
    # an alt text's "photo may contain: a red triangle" lists what it does contain
    return bool(words) and any(w.lower() in MODALS and words[i + 1:i + 2] != ["contain"]
                               for i, w in enumerate(words[:o_start]) if i >= s_end)


def _one_between(rel: dict, obj: dict) -> bool:
    """"A baby sitting between a lady and a man": "between" relates to two things at once, so one of them alone
    ("a baby sitting between a man") is no sub-graph; a plural object ("between two dogs", "between two slices of
    bread") is both."""
    return (str(rel["relation"]).lower().split()[-1:] in (["between"], ["among"], ["amongst"])
            and not obj.get("plural") and not obj.get("measure") and obj.get("determiner") is not None)


# Verbs by which a sign, a shirt or a screen gives words ("a street sign that reads Sparta", "a sign stating tree
# trimming"): their object is text, no thing in the scene.
WRITING_VERBS = frozenset({"say", "says", "saying", "read", "reads", "reading", "state", "states", "stating", "spell", "spells",
                           "spelling"})


def _written_words(graph: dict, agents: frozenset[int]) -> frozenset[int]:
    """The entities that are what a thing's writing says: the object of a verb of `WRITING_VERBS` whose subject is no
    person or animal (a woman reading a book reads a thing; "a stop sign that reads "Eating Animals" below it": the
    words are below it, no animals)."""
    return frozenset(r["object"] for r in graph.get("relations") or []
                     if str(r["relation"]).lower().split()[:1] and str(r["relation"]).lower().split()[0] in WRITING_VERBS
                     and r["subject"] not in agents)


# Participles of place and aspect things take as well ("trees lining the shore", "a house facing the sea").
THINGS_ALSO = frozenset({"lining", "surrounding", "growing", "blocking", "facing", "pointing", "reflecting", "bordering",
                         "leading", "crossing", "going", "coming", "running", "flowing", "shining", "burning", "flying"})


def _thing_acting(rel: dict, nodes: list[dict | None], agents: frozenset[int], vocab) -> bool:
    """Whether a thing the vocabulary knows is made the doer of an act only people and animals do, while the caption
    has such a doer before it: the participle is the doer's ("a woman wearing a pink hair towel working in a factory"
    gave "a pink hair towel working in a factory", blind review r22). What things do as well (`THINGS_DO`: "a
    bicycle leaning against a wall", "a sign showing") stays."""
    verb = str(rel["relation"]).lower().split()[:1]
    s = rel["subject"]
    if vocab is None or not verb or not verb[0].endswith("ing") or verb[0] in THINGS_DO | THINGS_ALSO or s in agents or nodes[s] is None:
        return False
    lemma = str(nodes[s].get("lemma") or nodes[s]["noun"])
    known = vocab.known("objects", lemma) or vocab.known("objects", lemma.split()[-1])
    return known is not None and vocab.object_kind(known) not in ("person", "animal") and any(a < s for a in agents)


def _who_of_thing(graph: dict, words: list[str] | None, agents: frozenset[int], things) -> frozenset[int]:
    """The entities the vocabulary knows as things (`things`, neither person nor animal) that "who" follows ("a person on
    a snowboard who is performing a trick"): "who" is a person's, so what its clause says is not the thing's (a noun the
    vocabulary does not know may be people: "a set of twins who are taking a bath")."""
    if not words:
        return frozenset()
    lower = [w.lower() for w in words]
    out = set()
    for n, e in enumerate(graph.get("entities") or []):
        end = (e.get("span_bounds") or [0, 0])[1] if isinstance(e, dict) else 0
        after = lower[end:end + 2]
        if n not in agents and str(e.get("lemma_head") or "").lower() in things and (after[:1] == ["who"] or after == [",", "who"]):
            out.add(n)
    return frozenset(out)


def _own_attributes(node: dict, entity: dict, words: list[str] | None) -> list[str]:
    """The node's attributes said inside its own noun phrase (none of a clause after it)."""
    start, end = entity.get("span_bounds") or [0, 0]
    inside = {w.lower() for w in (words or [])[start:end]}
    return [a for a in node["attributes"] if set(a.lower().split()) <= inside]


# Adjectives that take a "to" clause after a copula ("is ready to hit the ball", "about to", "able to"): before the noun,
# "a ready baseball player" says less than, and not what, the caption does.
# Only these, said before a noun, mean something else or nothing ("a happy skier" from "is happy to have won" stays).
CONTROL_ADJECTIVES = frozenset({"ready", "about", "able", "unable", "likely", "unlikely", "sure", "afraid", "glad", "due", "apt", "poised"})


def _stray_words(graph: dict, words: list[str] | None, tags: list[str] | None, things) -> dict[int, set[str]]:
    """Each entity's attributes the parser took from a word after its noun phrase that is no property of it: an adjective
    with a "to" clause ("a baseball player ... is ready to hit the ball": not "a ready baseball player"); a noun the tagger
    read as a verb, the vocabulary's object, after "and" ("wearing a suit and tie": a tie worn, not "two tie men"); an
    adjective after a "with" phrase, which is that phrase's ("a sheep with its mouth open": the mouth is open). An
    attribute said inside the entity's own phrase stays. Needs the caption's words and tags."""
    if not words or not tags or len(tags) != len(words):
        return {}
    lower = [w.lower() for w in words]
    entities = graph.get("entities") or []
    with_ends = {e["span_bounds"][1]: n for n, e in enumerate(entities) if isinstance(e, dict) and e.get("span_bounds")
                 and any(lower[i] == "with" for i in range(max(e["span_bounds"][0] - 2, 0), e["span_bounds"][0]))}

    def stray(i: int, n: int) -> bool:
        after = lower[i + 1] if i + 1 < len(lower) else ""
        return lower[i] in CONTROL_ADJECTIVES and after == "to" \
            or tags[i].startswith("VB") and lower[i] in things and i > 0 and lower[i - 1] in ("and", "&", "or") \
            or tags[i] == "JJ" and with_ends.get(i, n) != n

    out: dict[int, set[str]] = {}
    for n, e in enumerate(entities):
        bounds = e.get("span_bounds") if isinstance(e, dict) else None
        if not isinstance(bounds, list) or len(bounds) != 2:
            continue
        inside = set(lower[bounds[0]:bounds[1]])
        for a in e.get("attributes") or []:
            said = str(a).lower().split()
            if len(said) != 1:
                continue
            at = [i for i, w in enumerate(lower) if w == said[0]]
            if at and (all(_unsaid(lower, tags, i, said[0] in inside) for i in at)
                       or said[0] not in inside and all(stray(i, n) for i in at)):
                out.setdefault(n, set()).add(a)
    return out


# Adverbs that say a property is not (yet) had ("a nearly empty bowl" is no empty bowl).
HEDGES = frozenset({"nearly", "almost", "barely", "hardly", "not"})


def _unsaid(lower: list[str], tags: list[str], i: int, inside: bool) -> bool:
    """Whether the caption's word at `i` says no property its noun has: after a hedge ("a nearly empty bowl", "an almost
    empty bowl"), after "to be" ("the seven sheep are preparing to be sheered": not yet sheared), or a participle of a
    phrasal verb said after the noun phrase, without its particle ("a child is bent over": no "bent child"; inside it, "a
    lit up street sign" is a lit one)."""
    return i > 0 and lower[i - 1] in HEDGES or i > 1 and lower[i - 2:i] == ["to", "be"] \
        or not inside and i + 1 < len(lower) and tags[i + 1] == "RP" and tags[i] in ("JJ", "VBN")


def _stray_relation(rel: dict, stray: dict[int, set[str]]) -> bool:
    """Whether the relation starts with a word `_stray_words` took from its subject ("a sheep with its mouth open in a
    pen": not "a sheep open in a pen")."""
    first = str(rel["relation"]).lower().split()[:1]
    return bool(first) and first[0] in {str(a).lower() for a in stray.get(rel["subject"], ())}


# Adverbs after a copula that say a thing's state ("the lid is up", "the door is open"), not where it is.
STATE_PARTICLES = frozenset({"up", "down", "out", "off", "open", "away", "over", "closed", "shut"})


def _state_said(graph: dict, rel: dict, words: list[str] | None) -> list[str]:
    """The state adverb a copula puts before the relation's phrase ("the lid is up on the toilet bowl": "the lid up on
    the toilet bowl", not "the lid on the toilet bowl", which the caption does not say), else nothing."""
    if not words:
        return []
    try:
        start, end = graph["entities"][rel["subject"]]["span_bounds"][1], graph["entities"][rel["object"]]["span_bounds"][0]
    except (IndexError, KeyError, TypeError):
        return []
    relation = str(rel["relation"]).lower().split()
    between = [w.lower() for w in words[start:end]]
    said = len(between) == len(relation) + 2 and between[0] in COPULAS and between[2:] == relation and between[1] in STATE_PARTICLES
    return [between[1]] if said else []


# What a scene has far off is not its part: "a brick structure with a clock tower in the background" (the tower is
# behind it), "with the skyline in the distance".
# Not "in the back": "a truck with a dog in the back" has the dog in the truck's back.
FAR_OFF = (["in", "the", "background"], ["in", "the", "distance"], ["in", "background"], ["in", "distance"])


def _scenery(graph: dict, rel: dict, words: list[str] | None) -> bool:
    """Whether the relation is a "with" whose object the caption puts in the background or the distance."""
    if not words or str(rel["relation"]).lower().split()[-1:] != ["with"]:
        return False
    try:
        end = graph["entities"][rel["object"]]["span_bounds"][1]
    except (IndexError, KeyError, TypeError):
        return False
    lower = [w.lower() for w in words]
    return any(lower[end:end + len(far)] == far for far in FAR_OFF)


# Words before a body part that make it the subject's own ("holding a microphone in one hand", "in his hand").
OWN_PART_WORDS = POSSESSIVE_PRONOUNS | {"one", "each", "both", "either", "other", "it"}


def _own_part(graph: dict, rel: dict, words: list[str] | None, agents: frozenset[int], vocab) -> bool:
    """Whether the relation places a person or an animal in or on its own body part ("a man holding a microphone in one
    hand": the microphone is in the hand, not "a man in the hand"; "a dog ... in its mouth"): a bare preposition to a body
    part with a possessive or a count before it, after the held thing. Needs the caption's words and the vocabulary."""
    relation = " ".join(str(rel["relation"]).lower().split())
    if not words or vocab is None or rel["subject"] not in agents or relation not in SUPPORT:
        return False
    try:
        entity = graph["entities"][rel["object"]]
        start = entity["span_bounds"][0]
    except (IndexError, KeyError, TypeError):
        return False
    # the held thing's phrase lies between ("holding a microphone in one hand"); "a man with a goat on his shoulders" keeps it
    s_end = (graph["entities"][rel["subject"]].get("span_bounds") or [0, 0])[1]
    held = any(s_end <= (e.get("span_bounds") or [-1])[0] < start for e in graph["entities"] if isinstance(e, dict))
    return held and vocab.object_kind(str(entity.get("lemma_head") or "").lower()) == "body" and words[start].lower() in OWN_PART_WORDS


# Object pronouns that point back to a noun said before them.
BACK_POINTING = frozenset({"her", "him", "them", "it", "me", "us"})


def _misread(graph: dict, rel: dict, words: list[str] | None, tags: list[str] | None, people: frozenset[int], agents: frozenset[int],
             vocab) -> bool:
    """Whether the relation is a misreading of its caption, whose text would not be entailed (Singh et al. 2023, Sec. 3.3):
    "in it's mouth" is the possessive "its" ("a purple frisbee in a dog" read "it" as the dog); "with a man standing
    behind her" is an absolute clause about the scene, no "with" of the noun or verb before it ("the hair dried with a
    man"); "full of matching, ridged donuts" lists adjectives, not a noun "matching" and a verb "ridged"; "another sheep
    looks at his face" says a person's face ("his" is a person's, and the clause's subject is no person), and "behind her"
    a person or an animal (`agents`)."""
    if not words or not tags or len(tags) != len(words):
        return False
    lower = [w.lower() for w in words]
    entities = graph.get("entities") or []
    try:
        s_start = entities[rel["subject"]]["span_bounds"][0]
        o_start, o_end = entities[rel["object"]]["span_bounds"]
    except (IndexError, KeyError, TypeError, ValueError):
        return False
    relation = str(rel["relation"]).lower().split()
    n = len(relation)
    its = any(lower[i] == "it" and lower[i + 1] == "'s" and tags[i + 2][:2] in ("NN", "JJ") and lower[max(i - n, 0):i] == relation
              and not o_start <= i < o_end for i in range(n, len(lower) - 2))
    # "behind her", "next to him" name a person or an animal: a relation read through them to a thing ("a man behind the
    # hair") is not the caption's
    person = any(lower[i] in ("her", "him") and tags[i] == "PRP" and lower[i - n:i] == relation and not o_start <= i < o_end
                 for i in range(n, len(lower))) and vocab is not None and rel["object"] not in agents
    # the part "it's" owns is no place's ("in it's mouth on a green field": the dog is on the field, not its mouth)
    its = its or s_start >= 2 and lower[s_start - 2:s_start] == ["it", "'s"]
    # the clause's participle points back to the noun before ("a man standing behind her"): it places the "with" noun in
    # the scene, so the verb before "with" is not done with it ("a person sitting with their dog watching tv" keeps it)
    absolute = (len(relation) > 1 and relation[-1] == "with" and 0 < o_start and lower[o_start - 1] == "with" and o_end < len(tags)
                and tags[o_end] == "VBG" and not BACK_POINTING.isdisjoint(lower[o_end + 1:o_end + 4]))
    owners = {r.get("subject"): r.get("object") for r in graph.get("relations") or [] if r.get("relation") == "of"}
    owner = (lower[o_start] in ("his", "her") and tags[o_start] == "PRP$" and owners.get(rel["object"]) == rel["subject"]
             and rel["subject"] not in people and bool(people))
    return its or person or absolute or owner or _listed_adjectives(graph, rel, lower, tags, {} if vocab is None else vocab.objects)


def _listed_adjectives(graph: dict, rel: dict, lower: list[str], tags: list[str], things) -> bool:
    """Whether the relation is one of two a list of adjectives split ("a box full of matching, ridged donuts": "full of"
    a noun "matching", and a verb "ridged" to the donuts): an entity of the subject's ends before a comma, the word after
    it is the verb of another relation of the subject, and that relation's object follows it. The first is kept where its
    noun is a thing the vocabulary knows ("a room with a blue toilet, multicolored tile floor": the toilet is one)."""
    entities = graph.get("entities") or []
    mine = [r for r in graph.get("relations") or [] if r.get("subject") == rel["subject"]]

    def same(other: dict) -> bool:
        return other.get("object") == rel["object"] and other.get("relation") == rel["relation"]

    for first in mine:
        try:
            end = entities[first["object"]]["span_bounds"][1]
        except (IndexError, KeyError, TypeError):
            continue
        if end + 2 >= len(lower) or lower[end] != "," or tags[end + 1] not in ("VBD", "VBN", "JJ"):
            continue
        for second in mine:
            try:
                start = entities[second["object"]]["span_bounds"][0]
            except (IndexError, KeyError, TypeError):
                continue
            if start == end + 2 and str(second["relation"]).lower().split() == [lower[end + 1]]:
                known = str(entities[first["object"]].get("lemma_head") or "").lower() in things
                if same(second) or same(first) and not known:
                    return True
    return False


def _looking(attribute: str) -> bool:
    """Whether the attribute is the participle of a compound adjective ("an old time looking clock", "nice-looking"):
    cut from its first words, "a looking clock" says nothing the caption does."""
    last = str(attribute).lower().split()[-1:] or [""]
    return last[0] == "looking" or last[0].endswith("-looking")


def _noun_relation(graph: dict, rel: dict, words: list[str] | None, tags: list[str] | None, vocab) -> bool:
    """Whether the relation's verb is a noun of a list the caption ran together without a comma ("walks past some big
    rocks boulders in an open field": "boulders", read a verb, follows the noun "rocks" of another entity, and "an
    elephant boulders in an open field" has no verb). Needs the words and the vocabulary."""
    if not words or not tags or len(tags) != len(words) or vocab is None:
        return False
    verb = str(rel["relation"]).lower().split()[:1]
    lemma = str(rel.get("lemma_relation") or "").lower().split()[:1]
    if not verb or not lemma or lemma[0] not in vocab.objects:
        return False
    lower = [w.lower() for w in words]
    try:
        start, stop = graph["entities"][rel["subject"]]["span_bounds"][1], graph["entities"][rel["object"]]["span_bounds"][0]
    except (IndexError, KeyError, TypeError):
        return False
    ends = {e["span_bounds"][1] for n, e in enumerate(graph["entities"]) if n != rel["subject"] and e.get("span_bounds")}
    # a plural noun before it (a list run together); not a participle ("airplane with propellers flying"), a verb
    return not verb[0].endswith("ing") and any(lower[i] == verb[0] and i in ends and tags[i - 1] == "NNS"
                                               for i in range(max(start, 1), min(stop, len(lower))))


# Prepositions before a place's proper name that say where the scene is, not what it shows ("the boys school of Standard
# South Carolina", "in Las Vegas"; not a landmark in view, "by Big Ben", nor a product, "playing Nintendo Wii").
PLACE_NAME_WORDS = frozenset({"of", "from", "in"})
# Words a purpose clause starts with ("a ring for attaching bicycles"): what it names need not be in the image.
PURPOSE_WORDS = frozenset({"for", "to"})


def shown_nodes(graph: dict, nodes: list[dict | None], words: list[str] | None, tags: list[str] | None, vocab=None) -> list[dict | None]:
    """`nodes` as the caption shows them (a positive is entailed by its caption, Singh et al. 2023, Sec. 3.3). None for a
    noun only in a purpose clause ("a ring for attaching bicycles") and for a proper name after "of", "from" or "in"
    ("the boys school of Standard South Carolina"; not a capitalised noun the vocabulary knows, "Frisbee"), which names
    where the scene is, not a thing in view. A noun phrase the tagger ran over a verb keeps the noun before it ("a field
    flying kites": the people fly them; the node is "a field"), one it ran over a list of nouns its last member, when
    the node kept words of both ("streetcar, tourbus, classic car and family cars"; "a dress and pale makeup", read "a
    pale dress makeup", is "pale makeup"; not "a pineapple and ham pizza", a pizza). Needs the caption's words and tags
    (parse's `tokens`); without them, `nodes` as they are."""
    if not words or not tags or len(tags) != len(words):
        return nodes
    lower = [w.lower() for w in words]
    letters = [w for w in words if any(c.isalpha() for c in w)]
    capitals = len(letters) > 1 and all(w.isupper() for w in letters)  # the tagger reads such a caption badly
    colours = {} if vocab is None else vocab.attributes
    things = {} if vocab is None else vocab.objects
    out = list(nodes)
    related = {w for r in graph.get("relations") or [] for w in str(r.get("relation", "")).lower().split()}
    for n, e in enumerate(graph.get("entities") or []):
        node = nodes[n] if n < len(nodes) else None
        bounds = e.get("span_bounds") if isinstance(e, dict) else None
        if node is None or not isinstance(bounds, list) or len(bounds) != 2 or not 0 <= bounds[0] < bounds[1] <= len(words):
            continue
        start, end = bounds
        said = {*node["noun"].split(), *" ".join(node["attributes"]).split()}
        verb = next((i for i in range(start + 1, end - 1) if tags[i] == "VBG" and tags[i - 1] == "NN" and tags[i + 1].startswith("NN")),
                    None)
        # an object noun the tagger read as an adjective ends a member too ("a moped and utility truck", "a donut and
        # napkin sculpture" gave "a moped utility truck")
        joint = [i for i in range(start + 1, end - 1) if lower[i] in (",", "and", "&")
                 and (tags[i - 1].startswith("NN") or tags[i - 1] == "JJ" and lower[i] != "," and lower[i - 1] in things)
                 and lower[i - 1] not in colours and lower[i - 1] in said]
        if _relation_word(node, lower, end, related) or _no_thing(lower, tags, end) or _part_cut(node, lower, end) \
                or _manner(lower, start, end) or _no_head(node, lower, tags, start, end, things):
            out[n] = None
        elif _compound_cut(lower, tags, end, things, related) or end < len(words) and tags[end] == "IN" and lower[end - 1] in FINITE_VERBS:
            out[n] = _at_end(graph, n, node, lower, tags, bounds, things)
        elif (start >= 1 and lower[start - 1] in PURPOSE_WORDS and tags[start] == "VBG"
                or start >= 2 and lower[start - 2] in PURPOSE_WORDS and tags[start - 1] == "VBG" or _meant_for(lower, tags, start, end)
                or _likeness(lower, tags, end)):
            out[n] = None
        elif (not capitals and all(tags[i] == "NNP" and words[i][:1].isupper() for i in range(start, end)) and lower[end - 1] not in things
              and start > 0 and lower[start - 1] in PLACE_NAME_WORDS):
            out[n] = None
        elif verb is not None:
            out[n] = _part_of(node, lower, start, verb, tags)
            if out[n] is not None:
                out[n]["cut"] = lower[verb]
        elif joint:
            out[n] = _part_of(node, lower, joint[-1] + 1, end, tags)
        if out[n] is not None:
            out[n] = _as_named(out[n], lower, start, end, colours, tags)
    return _members_named(graph, out, lower, tags)


# Nouns a pair of coordinated nouns before them can name the members of ("a bride and groom couple").
MEMBER_GROUPS = frozenset({"couple", "pair", "duo", "trio", "team", "family"})


def _members_named(graph: dict, nodes: list[dict | None], lower: list[str], tags: list[str]) -> list[dict | None]:
    """"a bride and groom couple cuts the wedding cake": spaCy reads "a bride" and "groom couple" as two noun phrases,
    which gave "a groom couple cuts the wedding cake"; the two nouns name the couple's members, so the couple's node is
    "bride and groom couple" and the bride's goes (her relations are the couple's)."""
    ends = {tuple(e["span_bounds"])[1]: k for k, e in enumerate(graph.get("entities") or [])
            if isinstance(e, dict) and isinstance(e.get("span_bounds"), list) and len(e["span_bounds"]) == 2}
    out = list(nodes)
    for n, e in enumerate(graph.get("entities") or []):
        node = out[n] if n < len(out) else None
        words = [] if node is None else node["noun"].lower().split()
        if len(words) != 2 or words[1] not in MEMBER_GROUPS or not isinstance(e.get("span_bounds"), list):
            continue
        start = e["span_bounds"][0]
        member = ends.get(start - 1)
        if start < 2 or lower[start - 1] != "and" or lower[start] != words[0] or member is None or out[member] is None \
                or tags[start - 2] != "NN" or out[member]["noun"].lower() != lower[start - 2]:
            continue
        noun, lemma = f"{lower[start - 2]} and {node['noun']}", f"{lower[start - 2]} and {node['lemma']}"
        out[n] = {**node, "noun": noun, "lemma": lemma, "determiner": out[member].get("determiner", node.get("determiner"))}
        out[member] = None
    return out


def _meant_for(lower: list[str], tags: list[str], start: int, end: int) -> bool:
    """Whether the noun phrase at [start, end) is whom or what a thing is for, which the caption does not show: after a
    noun's "for" ("a display for bananas", "a vending machine for microwaved food", "books for young children", the first
    word of a caption however tagged) or before "to" and a verb ("displayed for people to enjoy")."""
    if start < 2 or lower[start - 1] != "for":
        return False
    return tags[start - 2].startswith("NN") or start == 2 or end + 1 < len(lower) and lower[end] == "to" and tags[end + 1] == "VB"


def _likeness(lower: list[str], tags: list[str], end: int) -> bool:
    """Whether the noun phrase ending at `end` says what a later noun is like ("a rock like table with a notebook and pen
    on it" gave "a notebook on a rock", "Small train like structure"): "like" and a bare noun follow; the thing is the
    table. Not "a cake shaped like a heart" (a verb's "like", a determiner after it)."""
    return end + 1 < len(lower) and lower[end] == "like" and tags[end] == "IN" and tags[end + 1].startswith("NN")


def _as_named(node: dict, lower: list[str], start: int, end: int, colours, tags: list[str] | None = None) -> dict:
    """The node with the words its span says of it: a "one way" sign keeps "one" (the sign's name, no count), a number
    that counts the first word of a compound keeps it (`_compound_number`), all the colours of a list its span was cut
    from (`_listed_before`), and no colour that may be a share (`_colour_share`)."""
    if node["noun"].lower().split()[0] == "way" and "one way" in " ".join(lower[start:end]):
        node = {**node, "noun": f"one {node['noun']}", "lemma": f"one {node['lemma']}", "count": None}
    number = _compound_number(node, lower, start, end, tags)
    if number and node.get("plural"):  # "the three teddy bears": the number counts the bears, spaCy hung it on "teddy"
        node = {**node, "count": number}
    elif number:
        node = {**node, "noun": f"{number} {node['noun']}", "lemma": f"{number} {node['lemma']}"}
    listed = _listed_before(lower, start, colours)
    if listed and any(colours.get(a) == "colour" for a in node["attributes"]):
        node = {**node, "attributes": list(dict.fromkeys([*listed, *node["attributes"]]))}
    if _colour_share(node, lower, start, end, colours):
        node = {**node, "attributes": [a for a in node["attributes"] if colours.get(a) != "colour"]}
    return node


def _compound_number(node: dict, lower: list[str], start: int, end: int, tags: list[str] | None) -> str | None:
    """The number before a compound noun that counts its first word, not the thing ("a four layer wedding cake", "an
    eighteen wheeler truck", "a four way intersection"): cut from the noun it leaves "a layer wedding cake", which the
    caption does not say (of a plural noun, "the three teddy bears", it is the count). None when the number is the
    node's count ("a two layer cake") or the noun is one word."""
    words = node["noun"].lower().split()
    if len(words) < 2 or node.get("count") is not None or not tags:
        return None
    at = next((i for i in range(start + 1, end - len(words) + 1) if lower[i:i + len(words)] == words), None)
    # the counted word is singular as a modifier is ("four layer"); "four shapes explore" counts the shapes, a misread
    return lower[at - 1] if at is not None and tags[at - 1] == "CD" and tags[at] in ("NN", "NNP") and lower[at - 1] != "one" else None


# Nouns that alone read as a quantity ("a lot" is "many"; "cars parked in a lot" is a parking lot), or as a place by a
# thing only with its "of" phrase ("the shade of a tree"): in a relation, not on their own.
PHRASE_NOUNS = frozenset({"lot", "lots", "shade", "shadow"})


def _phrase_only(nodes: list[dict | None]) -> set[int]:
    """The nodes that name a thing only in their relation (`PHRASE_NOUNS`, bare): "cars parked in a lot" but no "a lot",
    "giraffes standing in the shade" but no "the shade"."""
    return {i for i, node in enumerate(nodes) if node is not None and node["noun"].lower() in PHRASE_NOUNS and not node["attributes"]}


# Nouns of no thing in view: a medium, a time, a manner, an activity or a property ("jumps in the air", "on a sunny day",
# "blown up the wrong way", "decorated for the holiday", "work on a project", "a bit out of focus", "Jack-O-Laturns of
# various shapes"). Their relation may stay ("a skater in the air"); alone they name nothing the image shows.
NO_THING_NOUNS = frozenset({
    "air", "way", "holiday", "project", "bit", "day", "night", "daytime", "evening", "twilight", "dark", "time", "moment",
    "occasion", "trip", "feel", "stance", "balance", "serve", "call", "race", "run", "service", "focus",
    "music", "eye contact",
})
# Plural nouns of a property that name no thing when only said to vary ("of various shapes", "looking in different
# directions"); with a word of their own they may be things ("toy wooden shapes").
PROPERTY_NOUNS = frozenset({"shapes", "sizes", "colors", "colours", "kinds", "types", "styles", "directions", "positions",
                            "varieties", "origin", "quality"})
VARYING = frozenset({"different", "differing", "various", "varying", "all", "both", "many", "several", "multiple", "assorted"})
# Prepositions before "the sun" that make it sunlight ("playing in the sun", "shadows ... because of the sun"), not the
# sun in view ("as the sun rises in the background").
SUNLIGHT_WORDS = frozenset({"in", "under", "of"})


def _no_thing_in_view(graph: dict, nodes: list[dict | None], words: list[str] | None, tags: list[str] | None = None) -> set[int]:
    """The nodes that name no thing in view (`NO_THING_NOUNS`, `PROPERTY_NOUNS` said to vary, "the sun" after
    `SUNLIGHT_WORDS`, what a thing is likened to, `_compared`, a compound part noun before its whole): in their
    relation only, never an object positive on their own."""
    out = set()
    for i, node in enumerate(nodes):
        if node is None:
            continue
        noun = node["noun"].lower()
        start, end = (graph["entities"][i].get("span_bounds") or [0, 0])[:2]
        if words and tags and len(tags) == len(words) and _compared([w.lower() for w in words], tags, start, end):
            out.add(i)
        # a compound part noun before its whole ("sitting in the passenger side of a car"): a place in its relation only
        if " " in noun and noun.split()[-1] in PART_NOUNS and words and end < len(words) and words[end].lower() == "of":
            out.add(i)
        said = [w for a in [*node["attributes"], node.get("count") or ""] for w in str(a).lower().split()]
        varying = noun in PROPERTY_NOUNS and bool(said) and all(w in VARYING for w in said)  # not "two shapes": things
        if noun in NO_THING_NOUNS or varying \
                or noun == "sun" and words and 0 < start <= len(words) and words[start - 1].lower() in SUNLIGHT_WORDS:
            out.add(i)
    return out


def _compared(lower: list[str], tags: list[str], start: int, end: int) -> bool:
    """Whether the noun phrase at [start, end) is what a thing is likened to, not a thing in view: after a verb's "like"
    ("decorations some of which look like fish", "a sign shaped like an elephant") or a participle's "as" ("A fire
    hydrant painted exactly as the patriotic flag"; not "as" of a clause, whose verb follows the phrase, "walk by as a
    homeless man begs")."""
    if start < 2 or not start < end <= len(lower):
        return False
    if lower[start - 1] == "like":
        return tags[start - 2].startswith("VB")
    participle = tags[start - 2] in ("VBN", "VBD") or start >= 3 and tags[start - 2] == "RB" and tags[start - 3] in ("VBN", "VBD")
    return lower[start - 1] == "as" and participle and not (end < len(tags) and tags[end].startswith(("VB", "MD")))


def _no_head(node: dict, lower: list[str], tags: list[str], start: int, end: int, things) -> bool:
    """Whether the node's noun is no noun the tagger should have made one: an adjective or participle heading it ("the
    shirtless men": "the shirtless"; "a sliced of pizza": "a sliced"), or a gerund run on from the noun before it ("a man
    at home posing": "posing", no place). Not a noun the vocabulary knows ("a bed", "a building")."""
    noun = node["noun"].lower()
    if noun in things or " " in noun:
        return False
    if len(noun) > 4 and (noun.endswith("less") or noun.endswith("ed") and not noun.endswith("eed")) and lower[end - 1] == noun:
        return True
    return end - start == 1 and noun.endswith("ing") and start > 0 and tags[start - 1].startswith("NN") and tags[start] == "NN"


# Nouns whose plural is their singular: without an article, the caption may mean several.
SAME_PLURAL = frozenset({"sheep", "deer", "fish", "bison", "moose", "elk", "buffalo"})


def _colour_share(node: dict, lower: list[str], start: int, end: int, colours) -> bool:
    """Whether the node's colours may be a share of its kind's that its text would not keep: "X and Y" colours on a
    noun whose plural is its singular, said without an article ("black and white sheep" may be black ones and white
    ones; its text would say "a black and white sheep"). A plural that shows its number keeps them: "two brown and
    white dogs" says what the caption says, whichever way it is read; "a black and white cat" is one cat of both."""
    shared = not node["plural"] and lower[end - 1] in SAME_PLURAL and lower[start] not in ("a", "an", "one", "this", "that")
    return shared and any(lower[i] in ("and", "&") and colours.get(lower[i - 1]) == "colour" and colours.get(lower[i + 1]) == "colour"
                          for i in range(start + 1, end - 1))


def _listed_before(lower: list[str], start: int, colours) -> list[str]:
    """The colours of a list the node's span was cut from, before it ("a red yellow and blue airplane" -> red, yellow):
    a thing of several colours is no thing of one of them, so the node takes them all."""
    if start < 2 or lower[start - 1] not in ("and", ",", "&"):
        return []
    out, k = [], start - 2
    while k >= 0 and (colours.get(lower[k]) == "colour" or lower[k] == "," and out):
        if lower[k] != ",":
            out.insert(0, lower[k])
        k -= 1
    return out


# Words that count or order a noun the caption said before ("two men ... and a third is on a scooter", "one holding a
# cake, the other ..."): as a node's noun they stand for that noun, and "a third on a scooter" names nothing.
COUNTING_WORDS = frozenset({"one", "another", "other", "others", "first", "second", "third", "fourth", "fifth", "last", "rest"})
# Finite verbs of posture the tagger reads as a plural noun ending a noun phrase ("dressed with avocado lies on a
# cutting board"): the phrase that completes them is the next one.
FINITE_VERBS = frozenset({"lies", "sits", "stands", "rests", "hangs", "leans", "sleeps", "waits", "lays", "floats", "perches",
                          "walks", "runs", "grazes", "looks"})
# Words after a noun that make it the first word of a compound the tagger split ("fire extinguisher", read RB).
COMPOUND_DEPS = frozenset({"amod", "compound"})


def _no_thing(lower: list[str], tags: list[str], end: int) -> bool:
    """Whether the node's words [.., end) name no thing of their own: a counting word ("a third"), or the first words of
    a compound adjective ("an old time looking clock": "old time")."""
    looking = end + 1 < len(lower) and _looking(lower[end]) and tags[end + 1][:2] in ("NN", "JJ")
    return lower[end - 1] in COUNTING_WORDS or looking


# Nouns of "cut in half", "broken in two", "torn into pieces": how a thing is cut, no thing of their own.
MANNER_NOUNS = frozenset({"half", "halves", "two", "pieces", "quarters", "thirds"})


def _manner(lower: list[str], start: int, end: int) -> bool:
    """Whether the node's words are a manner phrase's after "in" or "into" ("a sandwich cut in half": not "a sandwich cuts
    in a half")."""
    return start > 0 and lower[start - 1] in ("in", "into") and lower[end - 1] in MANNER_NOUNS \
        and all(w in MANNER_NOUNS or w.isdigit() or w in ("two", "three", "four", "many", "small") for w in lower[start:end])


# Participles like their verb that the tagger reads as nouns ("a hot dog cut in half").
BARE_PARTICIPLES = frozenset({"cut", "set", "put", "shut", "spread", "split", "hit", "laid", "made"})
# Tags that may follow a compound noun's last word: a phrase, a list, a finite verb or the caption's end goes on ("fire
# extinguisher at", "the word pub sits").
AFTER_NOUN = frozenset({"IN", "CC", "TO", ".", ",", "VBZ", "VBP", "VBD", "MD"})


def _at_end(graph: dict, n: int, node: dict, lower: list[str], tags: list[str], bounds: list, things) -> dict | None:
    """The node whose span stops before a word that belongs to it. A compound noun's last word (`_compound_cut`): the
    whole compound when a phrase, a list, a finite verb or the caption's end follows it ("with fire extinguisher at far end": "a fire
    extinguisher"), else None ("a horse stand together": no compound). A finite verb the span ran over ("a zebra grazes
    in a field"): the noun before it; when the node is another relation's object ("dressed with avocado lies on a
    board"), marked cut, for the verb and its phrase are that relation's subject's (`_cut_phrase` drops them)."""
    start, end = bounds
    if lower[end - 1] not in FINITE_VERBS or not tags[end] == "IN":
        if end + 1 < len(lower) and tags[end + 1] not in AFTER_NOUN:
            return None
        return {**node, "noun": f"{node['noun']} {lower[end]}", "lemma": f"{node['lemma']} {lower[end]}", "plural": False, "count": None}
    part = _part_of(node, lower, start, end - 1, tags) if end - start > 1 else None
    if part is not None and any(r.get("object") == n for r in graph.get("relations") or []):
        part["cut"] = lower[end - 1]
    return part


# Determiners of one thing: a plural noun ending their phrase after a singular one is a verb the tagger read as a noun.
ONE_DETERMINERS = frozenset({"a", "an", "his", "her", "its"})


def _verb_last(node: dict, lower: list[str], tags: list[str], start: int, end: int, things) -> bool:
    """Whether the node's phrase ends with a verb the tagger read as a plural noun after one thing's determiner ("A
    computer user types one handed", "a ball approaches", "his teammate waits"): the word before it a singular noun,
    no list in the phrase ("a fireplace and glass slider doors"), the plural no object the vocabulary knows ("his tip
    toes")."""
    if end - start < 3 or lower[start] not in ONE_DETERMINERS or tags[end - 1] != "NNS" or tags[end - 2] != "NN":
        return False
    # a verb's "-s" ending, a word of letters ("a striped blue cross lumix" is no verb)
    if not (lower[end - 1].isalpha() and lower[end - 1].endswith("s")) or lower[end - 2].endswith(("ing", "ed")) \
            or any(w in (",", "and", "&", "or") for w in lower[start:end]):
        return False
    lemmas = node["lemma"].lower().split()
    return len(lemmas) > 1 and lemmas[-1] not in things and lower[end - 1] not in things


def _alone(graph: dict, nodes: list[dict | None], words: list[str] | None, tags: list[str] | None, things) -> list[dict | None]:
    """The nodes as object positives show them alone: the words before a verb `_verb_last` found ("A computer user types
    one handed on a keyboard" -> "a computer user"); its relations keep the node as it is ("a giraffe stares into the
    camera" reads well)."""
    if not words or not tags or len(tags) != len(words):
        return nodes
    lower = [w.lower() for w in words]
    out = list(nodes)
    for n, e in enumerate(graph.get("entities") or []):
        bounds = e.get("span_bounds") if isinstance(e, dict) else None
        if n >= len(nodes) or nodes[n] is None or not isinstance(bounds, list) or len(bounds) != 2:
            continue
        if 0 <= bounds[0] < bounds[1] <= len(words) and _verb_last(nodes[n], lower, tags, bounds[0], bounds[1], things):
            out[n] = _part_of(nodes[n], lower, bounds[0], bounds[1] - 1, tags)
    return out


def _compound_cut(lower: list[str], tags: list[str], end: int, things, related: set[str]) -> bool:
    """Whether the node's last word is the first of a compound noun its span stops before: the next word is a singular
    noun (tagged so: a plural there is mostly a verb read as one, "a female skier stops"; or a known object with it,
    "fire hydrant"), or an adverb the tagger made of one ("fire extinguisher",
    "extinguisher" read RB). "a small kitchen with a fire" is not what the caption says. Not a word of the graph's
    relations ("a disc right of an orange star": "right" starts the relation)."""
    if end >= len(lower) or not lower[end].isalpha() or lower[end] in BARE_PARTICIPLES or lower[end] in related:
        return False
    if end + 2 < len(lower) and lower[end + 2] == lower[end]:  # "condiments side by side", "back to back": an adverb
        return False
    if f"{lower[end - 1]} {lower[end]}" in things:
        return True
    # "a zebra standing on top of a rock": a participle the tagger read as a noun starts the verb phrase
    return tags[end] == "NN" and not lower[end].endswith("ing") or (tags[end] == "RB" and lower[end].endswith("er")
                                                                                            and not lower[end].endswith("ther"))


def _relation_word(node: dict, lower: list[str], end: int, related: set[str]) -> bool:
    """Whether the node is the place noun of a relation the graph already has (`related`: the words of its relations;
    "top" of "a young man on top of a snowboard wearing maroon jacket": the parser left it an entity, "a top wearing a
    maroon jacket", blind review r18)."""
    noun = node["noun"].lower()
    return noun in SPATIAL_NOUNS and not node["attributes"] and end < len(lower) and lower[end] == "of" and noun in related


# Nouns that name a part of a thing said after them ("the end of a computer keyboard", "the rest of the pizza").
PART_NOUNS = SPATIAL_NOUNS | frozenset({"end", "rest", "part", "half", "tip", "base", "remainder"})


def _part_cut(node: dict, lower: list[str], end: int) -> bool:
    """Whether the node is a part noun cut from its "of" phrase ("the end of a computer keyboard ... sit on a table"):
    without the whole, "the end sits on a table" names no thing the caption shows."""
    return node["noun"].lower() in PART_NOUNS and end < len(lower) and lower[end] == "of"


def _part_of(node: dict, lower: list[str], start: int, end: int, tags: list[str]) -> dict | None:
    """The node of the caption's words [start, end) alone: its noun the last of them, its attributes those said there
    ("a dress and pale makeup" -> "pale makeup"); None when the last is no noun or the node's noun lacks it."""
    last, nouns = lower[end - 1], node["noun"].split()
    if tags[end - 1] not in ("NN", "NNS") or (last not in nouns and tags[end - 1] != "NN"):
        return None
    first = end - 1  # a compound's first nouns too ("and parking meter")
    while first > start and tags[first - 1] == "NN" and lower[first - 1] in nouns and last in nouns:
        first -= 1
    noun = " ".join(lower[first:end])
    plural = tags[end - 1] == "NNS"
    lemmas = node["lemma"].split()
    lemma = " ".join([*lower[first:end - 1], lemmas[-1] if last == nouns[-1] and len(lemmas) == len(nouns) else last])
    inside = set(lower[start:first])
    attributes = list(dict.fromkeys(a for a in node["attributes"] if set(a.split()) <= inside))  # "a white tub and white cabinets"
    determiner = {"the": "the", "a": "a", "an": "a"}.get(lower[start])
    # a count said inside the words stays ("two cats and three dogs" -> "three dogs"), the first member's does not
    count = node.get("count") if node.get("count") and set(str(node["count"]).split()) <= inside and plural else None
    return {**node, "noun": noun, "lemma": lemma, "plural": plural, "count": count, "attributes": attributes, "determiner": determiner}


def _drop_cut(nodes: list[dict | None]) -> tuple[list[dict | None], dict[int, str]]:
    """The nodes without `shown_nodes`' mark, and the marked ones with their verb: a noun cut before a verb the tagger
    ran it over, whose phrases may be the verb's object's ("a man holding matches and a cigarette in his mouth": not "a
    man in his mouth")."""
    cut = {i: node["cut"] for i, node in enumerate(nodes) if node is not None and node.get("cut")}
    return [node if i not in cut else {k: v for k, v in node.items() if k != "cut"} for i, node in enumerate(nodes)], cut


def _cut_phrase(graph: dict, rel: dict, cut: dict[int, str], words: list[str] | None) -> bool:
    """Whether the relation's subject is a noun cut before its verb (`_drop_cut`) and the phrase may be the verb's
    object's: unless the verb holds or carries that object, which then is where its holder is (`_transfers`: "a white
    pitcher holding flowers in a window sill" is in the sill), and the phrase's noun is no one's own ("in his mouth")."""
    if rel["subject"] not in cut:
        return False
    verb = {"relation": cut[rel["subject"]]}
    last = _last_phrase(" ".join(rel["relation"].lower().split()))
    start = (graph["entities"][rel["object"]].get("span_bounds") or [0])[0]
    owned = bool(words) and start < len(words) and words[start].lower() in POSSESSIVE_PRONOUNS
    return owned or not (_contact_verb(verb, CONTACT_VERBS) and last in CO_LOCATED or _contact_verb(verb, CARRYING_VERBS) and last in PATH)


SINGULAR_COPULAS = frozenset({"is", "was", "'s"})


def _one_said(node: dict, entity: dict, words: list[str] | None) -> dict:
    """`node` without the attributes the caption gives only after a singular copula when the node is plural ("two
    people playing video game while standing one in purple is smiling": one smiles, not both)."""
    if not words or not node.get("plural") or not node["attributes"]:
        return node
    lower = [w.lower() for w in words]
    end = (entity.get("span_bounds") or [0, 0])[1]
    span = set(lower[(entity.get("span_bounds") or [0, 0])[0]:end])

    def one_said(a: str) -> bool:
        first = a.lower().split()[0]
        at = [i for i in range(end, len(lower)) if lower[i] == first]
        return bool(at) and first not in span and all(i > 0 and lower[i - 1] in SINGULAR_COPULAS for i in at)
    kept = [a for a in node["attributes"] if not one_said(a)]
    return node if len(kept) == len(node["attributes"]) else {**node, "attributes": kept}


# Particles and prepositions that complete "has X ...": "a cat has its front paws on a toilet seat", "has his chin up".
HAVE_COMPLEMENTS = frozenset({"up", "down", "out", "off", "over", "on", "in", "around", "across", "under", "against", "behind",
                              "above", "into", "onto", "through", "inside", "outside", "between", "near", "by", "at", "atop"})


def _cut_complement(graph: dict, rel: dict, words: list[str] | None) -> bool:
    """Whether the relation is "has"/"have" cut before the complement that follows its object ("a cat has its front paws
    on a toilet seat" is not "a cat has its front paws": the paws are where the caption puts them). Needs the words."""
    if not words or rel["relation"].lower().split() not in (["has"], ["have"], ["had"]):
        return False
    try:
        end = graph["entities"][rel["object"]]["span_bounds"][1]
    except (IndexError, KeyError, TypeError):
        return False
    lower = [w.lower() for w in words[end:end + 3]]
    # "has a closet in it": the complement is said back to the subject, which the text keeps. Else the phrase may
    # complete "has" ("has its front paws on a seat", "his chin up", "headphones on") or place what is had ("a kitchen
    # has a fridge in the corner"): either way the cut text is doubtful, and precision comes first
    return bool(lower) and lower[0] in HAVE_COMPLEMENTS and not {"it", "them"} & set(lower[1:])


# Verbs whose place complement is required: "a girl puts a flower" says nothing the caption does
# ("puts a flower on the lapel").
PLACING_VERBS = frozenset({"put", "place", "set", "lay", "hang", "lean"})
# Compound prepositions by their first word and the preposition they end with ("next to", "in front of", "away from").
COMPOUND_PREPOSITIONS = {"next": "to", "close": "to", "front": "of", "top": "of", "out": "of", "ahead": "of", "away": "from",
                         "because": "of", "due": "to"}
COPULAS = frozenset({"is", "are", "was", "were", "be", "being", "'s"})


def disjuncts(graph: dict, words: list[str] | None) -> tuple[set[str], set[int]]:
    """The caption's words and entities on either side of an "or" ("fighting or playing", "a hat or a cap"):
    neither is said of the image, so neither is a positive (MosaiCLIP's positives are entailed by the caption,
    Singh et al. 2023 Sec. 3.3): an entity next to one makes no sub-graph, an attribute is left out of its
    object's, a relation makes none. Without the caption's words, none."""
    if not words:
        return set(), set()
    lower = [w.lower() for w in words]
    at = [i for i, w in enumerate(lower) if w in ("or", "nor")]
    said = {lower[j] for i in at for j in (i - 1, i + 1) if 0 <= j < len(lower)}
    entities = set()
    for n, e in enumerate(graph.get("entities") or []):
        bounds = e.get("span_bounds")
        if bounds and any(bounds[1] == i or bounds[0] == i + 1 for i in at):
            entities.add(n)
    return said, entities


def _said_either(text: str, either: set[str]) -> bool:
    """Whether a word of an attribute or relation stands next to an "or" ("red or blue", "fighting or playing")."""
    return any(w in either for w in str(text).lower().split())


def said_as_given(rel: dict, graph: dict, words: list[str] | None) -> bool:
    """Whether the relation says what the caption does: not a verb whose place complement is required said
    without it ("a girl puts a flower"), nor, with the caption's words, a phrase that lost the first word of a
    compound preposition ("standing to" from "standing next to"): every run of its preposition between its
    subject and its object follows such a word the relation lacks; nor one `_said_otherwise`; nor one whose verb of
    intent or looking is another clause's (`_said_verb`), a phrase after "make their way" (`_way_left_out`), or one to a
    noun a singular "it" was wrongly read as (`_it_elsewhere`). Without the words, only the verb is checked."""
    relation = rel["relation"].lower().split()
    lemma = str(rel.get("lemma_relation") or "").lower().split()
    if len(relation) == 1 and lemma and lemma[0] in PLACING_VERBS:
        return False
    if not words:
        return True
    try:
        bounds = [e["span_bounds"] for e in graph["entities"]]
        start, end = bounds[rel["subject"]][1], bounds[rel["object"]][0]
    except (IndexError, KeyError, TypeError):
        return True
    lower = [w.lower() for w in words]
    if _said_otherwise(rel, graph["entities"][rel["object"]], bounds, words, lower):
        return False
    if _said_verb(rel, bounds, lower)[0] or _way_left_out(rel, bounds, lower) or _it_elsewhere(rel, graph["relations"], bounds, lower):
        return False
    phrase = _last_phrase(" ".join(relation)).split()
    if not phrase:
        return True
    between = lower[min(start, end):max(start, end)]
    n = len(phrase)
    runs = [i for i in range(len(between) - n + 1) if between[i:i + n] == phrase]
    return not runs or any(i == 0 or COMPOUND_PREPOSITIONS.get(between[i - 1]) != phrase[0] or between[i - 1] in relation for i in runs)


def _said_otherwise(rel: dict, obj: dict, bounds: list, words: list[str], lower: list[str]) -> bool:
    """Whether the caption's words say something else than the relation: its phrase comes before its subject,
    which is coordinated with its object ("a herd of sheep on the road and a car": not "a car on the road"); a
    noun is named as a word ("a sign with the word pub sits on a wall"); it is said "as if" ("lettuce held as if
    they form a V"); its object stands for a pronoun of the other number ("a desk with five computers in a row on
    it": the desk is); or, in a caption in capitals, which the tagger reads badly, a verb right between two nouns
    ("MOTOR CROSS BIKE AND RIDER": "a motor crosses a rider")."""
    s, o = rel["subject"], rel["object"]
    first = rel["relation"].lower().split()[0]
    letters = [w for w in words if any(c.isalpha() for c in w)]
    verb_at = bounds[s][1]
    if (len(letters) > 1 and all(w.isupper() for w in letters) and first not in PREPOSITIONS and verb_at < len(lower)
            and lower[verb_at] == first and any(b[0] == verb_at + 1 for b in bounds)):
        return True  # a noun right between two nouns read as a verb
    before = bounds[o][1] <= bounds[s][0]
    if first in PREPOSITIONS and before and first not in lower[bounds[s][1]:] and _joined((bounds[o][1], bounds[s][0]), bounds, words):
        return True
    if any(bounds[n][0] > 0 and lower[bounds[n][0] - 1] in ("word", "words") for n in (s, o)):
        return True
    gap = " " + " ".join(lower[min(bounds[s][1], bounds[o][0]):max(bounds[s][1], bounds[o][0])]) + " "
    if " as if " in gap or " as though " in gap:
        return True
    pronoun = next((w for w in lower[bounds[s][1]:] if w in ("it", "them")), None) if before else None
    plural = str(obj.get("head", "")).lower().split()[-1:] != str(obj.get("lemma_head", "")).lower().split()[-1:]
    return pronoun is not None and (pronoun == "it") == plural


# Words after which a verb reached through "to" is meant, tried or about to be done, not done ("is learning to use
# Wii Fit", "reaching up to grab a Frisbee", "about to hit the ball"): the caption entails the intent, not the act.
INTENT_WORDS = frozenset({
    "learn", "learns", "learning", "learned", "learnt", "try", "tries", "tried", "trying", "reach", "reaches", "reaching",
    "reached", "go", "goes", "going", "about", "wait", "waits", "waiting", "waited", "prepare", "prepares", "preparing",
    "prepared", "ready", "want", "wants", "wanting", "wanted", "attempt", "attempts", "attempting", "attempted", "look",
    "looks", "looking", "hope", "hopes", "hoping", "plan", "plans", "planning", "pretend", "pretends", "pretending",
    "pretended",
    # a motion toward what is still to be done ("a yellow dog runs to grab a yellow frisbee": blind review r18)
    "run", "runs", "running", "ran", "jump", "jumps", "jumping", "jumped", "lean", "leans", "leaning", "leaned", "bend",
    "bends", "bending", "bent", "dive", "dives", "diving", "dove", "lunge", "lunges", "lunging", "lunged", "stretch",
    "stretches", "stretching", "stretched", "race", "races", "racing", "raced", "rush", "rushes", "rushing", "rushed",
    "hurry", "hurries", "hurrying", "hurried", "climb", "climbs", "climbing", "climbed",
})
# Particles between such a word and its "to" ("reaching up to grab", "leaning over to").
TO_PARTICLES = frozenset({"up", "out", "down", "over", "forward", "back", "in", "across", "around"})
# Verbs of looking and heading whose place phrase is their complement ("a dog is looking outside of the car window":
# the dog looks out, it need not be outside), and the verbs of "make their way" ("a car makes its way through town",
# `_way_left_out`).
LOOKING_VERBS = frozenset({
    "look", "looks", "looking", "looked", "stare", "stares", "staring", "stared", "gaze", "gazes", "gazing", "gazed",
    "peer", "peers", "peering", "peered", "peek", "peeks", "peeking", "peeked", "glance", "glances", "glancing", "glanced",
    "heads", "heading", "headed",
})
WAY_VERBS = frozenset({"make", "makes", "making", "made", "find", "finds", "finding", "found", "wind", "winds", "winding",
                       "wound", "weave", "weaves", "weaving", "push", "pushes", "pushing"})


def with_said_verbs(graph: dict, words: list[str] | None = None) -> dict:
    """`graph` with each relation given back the verb the caption says it with (`with_path_verbs`, `_said_verb`): a
    positive must be entailed by its caption (Singh et al. 2023, Sec. 3.3), and "the woman uses Wii Fit" is not by "the
    woman is learning to use Wii Fit", nor "a dog outside of the car window" by "a dog is looking outside of the car
    window"; "learning to use" and "looking outside of" are. A verb of another clause ("as he looks at a clock") is not
    given: `said_as_given` refuses that relation."""
    graph = with_path_verbs(graph, words)
    try:
        bounds = [e["span_bounds"] for e in graph["entities"]]
    except (KeyError, TypeError):
        return graph
    if not words:
        return graph
    lower = [w.lower() for w in words]
    out, changed = [], False
    for rel in graph.get("relations") or []:
        lead, own = _said_verb(rel, bounds, lower) if max(rel["subject"], rel["object"]) < len(bounds) else ("", False)
        if lead and own:
            lemma = rel.get("lemma_relation") or rel["relation"]
            rel = {**rel, "relation": f"{lead} {rel['relation']}", "lemma_relation": f"{lead} {lemma}"}
            changed = True
        out.append(rel)
    return {**graph, "relations": out} if changed else graph


# Words that open another clause between a relation's subject and a verb, whose subject the verb may be ("a man stands
# with his arms crossed as he looks at a clock": he looks, not the arms).
CLAUSE_WORDS = frozenset({"he", "she", "they", "it", "as", "while", "when", "because", "where"})


def _said_verb(rel: dict, bounds: list, lower: list[str]) -> tuple[str, bool]:
    """The caption's words the relation lacks that make what it says: the words of intent before its verb, reached
    through "to" after one of `INTENT_WORDS` ("learning to" of "the woman is learning to use Wii Fit", "reaching up to"
    of "a dog is reaching up to grab a Frisbee", "getting ready to"), or the verb of looking or heading (`LOOKING_VERBS`,
    with its particles) whose complement a bare phrase of place is ("looking" of "a brown dog is looking outside of the car
    window"); "" when none. And whether that verb is the subject's own: no word of another clause (`CLAUSE_WORDS`) comes
    between them. Words inside a noun phrase are none ("two birds with red heads on the sidewalk")."""
    start = bounds[rel["subject"]][1]
    inside = {i for b in bounds for i in range(b[0], b[1])}
    words = rel["relation"].lower().split()
    at = _at_between(words[0], bounds, rel["subject"], rel["object"], lower)
    if at is None:
        return "", False
    if words[0] in PREPOSITIONS:
        k = at - 1
        while k > start and lower[k] in TO_PARTICLES:
            k -= 1
        if k < start or k in inside or lower[k] not in LOOKING_VERBS:
            return "", False
    else:
        if at < 2 or lower[at - 1] != "to":
            return "", False
        k = at - 2
        while k > start and lower[k] in TO_PARTICLES:
            k -= 1
        if k < start or k in inside or lower[k] not in INTENT_WORDS:
            return "", False
        if lower[k] == "ready" and k - 1 >= start and lower[k - 1] in ("getting", "gets", "get"):
            k -= 1
    return " ".join(lower[k:at]), not CLAUSE_WORDS & set(lower[start:k])


def _at_between(word: str, bounds: list, s: int, o: int, lower: list[str]) -> int | None:
    """The position of `word` nearest before object o and after subject s in the caption, or None (o before s)."""
    start, end = bounds[s][1], min(bounds[o][0], len(lower))
    return next((i for i in reversed(range(start, end)) if lower[i] == word), None)


def _way_left_out(rel: dict, bounds: list, lower: list[str]) -> bool:
    """Whether the relation is a bare phrase of place said after "make their way" ("a tram and a car make their way
    through town"): "a car through a town" lost its verb, and the phrase's subject may be the pair."""
    words = rel["relation"].lower().split()
    if words[0] not in PREPOSITIONS:
        return False
    at = _at_between(words[0], bounds, rel["subject"], rel["object"], lower)
    if at is None or at - 1 < bounds[rel["subject"]][1] or lower[at - 1] != "way":
        return False
    return any(lower[j] in WAY_VERBS for j in range(max(at - 3, bounds[rel["subject"]][1]), at - 1))


def _it_elsewhere(rel: dict, relations: list[dict], bounds: list, lower: list[str]) -> bool:
    """Whether the relation's object is one of several nouns a singular "it" after its subject was read as, and not
    the nearest noun the subject's with-phrase hangs on: in "a bed and dresser with a small monitor on top of it" the
    with-phrase, and so "it", is the dresser's (English attaches the phrase to the nearest noun), and "a small monitor on
    top of a bed" is not said. Of several such nouns none holding the subject with "with", each is doubtful."""
    s, o = rel["subject"], rel["object"]
    if bounds[o][1] > bounds[s][0] or "it" not in lower[bounds[s][1]:]:
        return False
    relation = " ".join(rel["relation"].lower().split())
    read = [r["object"] for r in relations if r["subject"] == s and " ".join(r["relation"].lower().split()) == relation
            and r["object"] < len(bounds) and bounds[r["object"]][1] <= bounds[s][0]]
    if len(set(read)) < 2:
        return False
    holders = [n for n in set(read) if any(r["subject"] == n and r["object"] == s and r["relation"].lower() == "with" for r in relations)]
    return not holders or o != max(holders, key=lambda n: bounds[n][1])


def attachment_ambiguous(graph: dict, rel: dict, words: list[str] | None = None, agents: frozenset[int] = frozenset()) -> bool:
    """Whether the caption may attach the relation's phrase to another noun, or give its verb another
    subject. Such a relation is no positive: a sub-graph positive the caption does not entail teaches
    the model a false text (MosaiCLIP's positives are entailed by the caption, Singh et al. 2023 Sec.
    3.3), and precision matters more than recall here. Its key stays among `subgraph_keys`, so no
    negative equals it, and as no sub-graph of it is drawn it makes no negative either. Doubtful are:

    - a prepositional phrase with, between the subject and the object, a noun the subject's own
      prepositional phrase or verb names ("a table with bananas next to a coin": the coin may be next
      to the bananas; "people in a boat in a lake"; "the man is flying his kite in the sky": the kite
      is in the sky; "a stoplight flashing green lights at cars"), unless coordination gives the
      relation to both ("a table with plates and a bottle");
    - a verb read again for a second phrase past its first object ("a cat sleeps on a bed with a plaid
      bedspread": the bedspread is the bed's, not "sleeps with");
    - a participle whose subject is the object of an earlier noun's prepositional phrase ("a man on a
      skateboard riding by food vendors": the rider is the man, and the phrase may modify either; "a bus
      drives ... on a freeway surrounded by several other cars": the bus is surrounded);
    - a participle of posture or placement, which things do as well as people, read for a subject past
      the nearer object of its own verb's phrase ("a cat walking behind a bicycle leaning against a wall":
      in English the nearest noun, the bicycle, leans), or for a place past its own phrase ("a bedroom with a
      large bed sitting next to a dresser"), the participle right after that noun (parse's `tokens`; not "a
      kite while standing"); not past a thing's phrase ("a man in a blue shirt laying next to a surfboard");
    - a phrase of place after a verb's object, which may place the verb's subject instead ("pedestrians
      crossing a street between buses": the pedestrians are between them), unless the subject holds or
      carries the object, and so is where it is;
    - a phrase of place after the object of a copula's phrase, which may say where the copula's subject is ("a man
      is at a kitchen counter by a dog": the man is by the dog; the counter may not be);
    - a with-phrase on the object of an earlier phrase whose own noun has a place phrase of its own ("a bench
      resting on a sidewalk with cars on a street in the background": the cars are the scene's, on the
      street, not the sidewalk's);
    - a participle whose subject is coordinated after such a phrase's object ("a man in a black hat, white shirt
      and black pants jumping a skateboard": the man jumps, not the shirt), or an action verb with one of
      `agents` (entities that are people or animals) between its subject and itself, the nearer doer ("the front
      of a restaurant with someone holding up food": someone holds it);
    - a bare preposition of a path whose verb the caption says (`_verb_dropped`: "a man riding a snowboard down
      a slope" gives no "a man down a slope");
    - "on top of" after the object of an "in" phrase, which may place the one inside ("a cat laying in an open
      suitcase on top of some clothes": the cat may lie on the clothes);
    - a participle after a with-phrase whose noun the parse lost, the participle's own subject ("two giraffes
      with the backs turned to the camera": the backs are turned)."""
    entities = graph.get("entities") or []
    relations = graph.get("relations") or []
    s, o = rel["subject"], rel["object"]
    try:
        bounds = [e["span_bounds"] for e in entities]
        s_end, o_start = bounds[s][1], bounds[o][0]
    except (IndexError, KeyError, TypeError):
        return False
    relation = rel["relation"].lower()
    first = relation.split(" ", 1)[0]

    def between(n: int) -> bool:
        return n < len(bounds) and s_end <= bounds[n][0] and bounds[n][1] <= o_start

    same = [r for r in relations if r["relation"].lower() == relation]
    sharing = {r["subject"] for r in same if r["object"] == o} | {r["object"] for r in same if r["subject"] == s}
    sharing = _listed(sharing, relation, entities[o], bounds, words, s_end, o_start)
    if first in PREPOSITIONS:
        # a noun the subject's own phrase or verb names: the later phrase may hang off either
        own = {r["object"] for r in relations if r["subject"] == s}
    else:
        # the same verb with another phrase: "sleeps on a bed" then "sleeps with a bedspread"
        own = {r["object"] for r in relations if r["subject"] == s and r["relation"].lower().split(" ", 1)[0] == first}
        if _another_doer(relations, s, o, bounds, first, words, agents):
            return True
        place = entities[s].get("type") == "scene"
        if first in STATIVE_PARTICIPLES and any(
                r["subject"] == s and r["object"] not in (s, o) and between(r["object"]) and _right_after(words, bounds[r["object"]], first)
                and (_verb_phrase(r["relation"].lower(), first) or place and _last_phrase(r["relation"].lower()) not in ("", "of"))
                for r in relations):
            return True
    # a path's adverbial preposition ("riding down", `with_path_verbs`) ends the phrase as well
    last = _last_phrase(relation) or (relation.split()[-1] if relation.split()[-1] in DIRECTIONAL else "")
    if _verb_dropped(relations, s, o, relation, bounds, words) or _nested(relations, s, o, bounds, last, entities, words) or (
            first not in PREPOSITIONS and _nearer_subject(relations, s, o, bounds, first, words)) or (
            first in PREPOSITIONS and _another_phrase(relations, s, o, relation, bounds, words)) or _room_on(
            relations, entities, s, o, relation, bounds, words) or _inside_on_top(relations, s, relation) or (
            first not in PREPOSITIONS and _lost_with(words, s_end, o_start, first, bounds)) or (
            relation == "with" and (_with_of_later_conjunct(s, bounds, words, o_start) or _with_of_with(s, bounds, words))):
        return True
    if _last_phrase(relation) in PLACES_OF_AGENT and _verb_object(relations, s, bounds):
        return True
    if first in PREPOSITIONS and _last_phrase(relation) in PLACES_OF_AGENT and _predicate_object(relations, s, bounds, words):
        return True
    if relation == "with" and _placed_elsewhere(relations, s, o, bounds) and any(
            r["object"] == s and r["subject"] != s and r["subject"] < len(bounds) and bounds[r["subject"]][1] <= bounds[s][0]
            and r["relation"].lower() != "of" for r in relations):  # "a painting of a vase with a sunflower on a table": the vase's
        return True
    possessed = any(r["subject"] == o and r["object"] == s and r["relation"].lower() == "of" for r in relations)
    if relation in ("in", "inside", "into", "up to", "to") and possessed:
        return True  # "a person holding a device in their hand", "puts a bottle up to his mouth": the device is in it
    # "an image of a clock on a building": the clock is on the building, not the image
    picture = bool(set(str(entities[s].get("lemma_head") or entities[s].get("head", "")).lower().split()) & PICTURE_NOUNS)

    if possessed:  # "a man carrying a sheep on his shoulders": the sheep is on them, the man is not
        return any(between(n) for n in own - sharing - {s, o})
    return any(between(n) and not _transfers(relations, s, n, last, picture) for n in own - sharing - {s, o})


def _listed(sharing: set[int], relation: str, obj: dict, bounds: list, words: list[str] | None, s_end: int,
            o_start: int) -> set[int]:
    """Of the nouns a verb's "on" relates as it does the object, those not stacked between the two: a verb's "on" again
    past its first object is that object's place, not a list's ("a woman is typing on a laptop on a wooden table": the
    laptop is on the table), unless the two objects are coordinated; in a place one is where what one is on is ("riding
    on a surf board on an ocean wave")."""
    # one leans on a thing beside one, not under: "A woman leaning on ski spikes on a snowy mountain" does not lean on it
    leaning = relation.split(" ", 1)[0] in ("leaning", "leans", "leaned", "lean")
    if not words or relation.split(" ", 1)[0] in PREPOSITIONS or not relation.endswith(" on") or obj.get("type") == "scene" and not leaning:
        return sharing
    return {n for n in sharing if n >= len(bounds) or not (s_end <= bounds[n][0] and bounds[n][1] <= o_start)
            or _joined((bounds[n][1], o_start), bounds, words)}


def _with_of_later_conjunct(s: int, bounds: list, words: list[str] | None, o_start: int) -> bool:
    """Whether the with-phrase comes right after a later noun of a list s begins or is in, whose phrase English reads it
    as: in "a cup and a plate with food on it" the plate has the food, not the cup. Needs the caption's words."""
    last, seen = _later_conjunct(s, bounds, words), {s}
    while last is not None and last not in seen:
        seen.add(last)
        after = _later_conjunct(last, bounds, words)
        if after is None:
            break
        last = after
    if last is None or bounds[last][1] >= min(o_start, len(words or ())):
        return False
    return words[bounds[last][1]].lower() == "with"


def _with_of_with(s: int, bounds: list, words: list[str] | None) -> bool:
    """Whether the subject of a with-relation is itself the noun of a with-phrase, whose "with" may be the first noun's
    as well: in "A street lined with cones with people up and down the sidewalk" the people are the street's, not the
    cones'."""
    start = bounds[s][0]
    return bool(words) and 0 < start <= len(words) and words[start - 1].lower() == "with"


def _inside_on_top(relations: list[dict], s: int, relation: str) -> bool:
    """Whether "on top of" follows the subject as the object of an "in" phrase, and so may place the one inside ("a cat
    laying in an open suitcase on top of some clothes")."""
    return _last_phrase(relation) in ("on top of", "atop") and any(
        r["object"] == s and r["subject"] != s and _last_phrase(r["relation"].lower()) in ("in", "inside") for r in relations)


def _lost_with(words: list[str] | None, s_end: int, o_start: int, verb: str, bounds: list) -> bool:
    """Whether a with-phrase no entity holds stands right before the subject's past participle ("two giraffes with the
    backs turned to the camera": "turned" may be the backs'; not "a woman with a tattoo is sitting", nor "a train with a
    yellow front running": a participle of doing is the doer's)."""
    if not words or s_end >= len(words) or words[s_end].lower() != "with" or not (verb.endswith("ed") or verb in BARE_PARTICIPLES):
        return False
    at = next((i for i in range(s_end + 1, min(o_start, len(words))) if words[i].lower() == verb), None)
    return at is not None and words[at - 1].lower() not in ("is", "are", "was", "were", "be") and not any(s_end < b[0] < at for b in bounds)


def _another_phrase(relations: list[dict], s: int, o: int, relation: str, bounds: list, words: list[str] | None) -> bool:
    """Whether the caption gives the phrase to another noun than s, s and that noun each having a phrase of the same
    preposition: a noun t before o has it to o, and s to another noun not listed with o ("a kitchen with two pineapples
    on the counter and a wok pot on the burner": the pineapples are on the counter, the pot on the burner); or s has
    it to a nearer noun n too, and it comes again right after n, whose phrase it then is ("two plates with different
    desserts and another plate with a cup": the cup is the other plate's), or right after o, which then makes a list
    member of its own ("... and another plate with a cup": not one of the first plates' things), as it does when s is
    itself listed after an earlier noun and o starts a phrase of its own."""
    if o >= len(bounds):
        return False
    backward = bounds[o][1] <= bounds[s][0]
    same = [r for r in relations if r["relation"].lower() == relation and max(r["subject"], r["object"]) < len(bounds)]
    own = [r["object"] for r in same if r["subject"] == s and r["object"] not in (s, o)]  # s's own phrases ("on a slope on a board")

    def listed(m: int, n: int) -> bool:
        lo, hi = sorted((m, n), key=lambda k: bounds[k][0])
        return bool(words) and bounds[lo][1] < bounds[hi][0] and _joined((bounds[lo][1], bounds[hi][0]), bounds, words)
    if any(not listed(n, o) for n in own) and any(
            r["object"] == o and r["subject"] not in (s, o, *own) and bounds[r["subject"]][1] <= bounds[o][0]
            and (backward or bounds[r["subject"]][0] >= bounds[s][1]) for r in same):
        return True
    if not words or backward:
        return False
    # s a member of an earlier noun's list, and o, listed after s's nearer object, starting a phrase of its own: o is
    # the list's next member ("a bright kitchen with tulips on the table and plants by the window": not on the table)
    after = words[bounds[o][1]].lower() if bounds[o][1] < len(words) else ""
    if after in PREPOSITIONS and any(b[0] == bounds[o][1] + 1 for b in bounds) and any(
            listed(n, o) and bounds[n][1] <= bounds[o][0] for n in own) and any(
            r["object"] == s and r["subject"] < len(bounds) and bounds[r["subject"]][1] <= bounds[s][0] for r in relations):
        return True
    if _last_phrase(relation) in SUPPORT | CO_LOCATED:
        return False  # "a cake on a plate on a table": what rests on a thing rests where it does (`_transfers`)
    lower, phrase = [w.lower() for w in words], relation.split()
    nearer = [n for n in own if bounds[s][1] <= bounds[n][0] and bounds[n][1] <= bounds[o][0]]
    start, end = bounds[o][0] - len(phrase), bounds[o][1]
    if any(bounds[n][1] == start for n in nearer) and lower[start:bounds[o][0]] == phrase:
        return True
    return bool(nearer) and lower[end:end + len(phrase)] == phrase and any(b[0] == end + len(phrase) for b in bounds)


# Phrases of being inside a room or building, and of resting on a surface: "bikes in the store on the floor".
INSIDE = frozenset({"in", "inside", "within", "at"})
RESTING = frozenset({"on", "atop", "on top of", "upon"})


# Places one is inside of, which are by nothing that is in them ("a person sits in a chair in a living room next to some
# windows": the room has them).
INDOOR_PLACES = frozenset({"kitchen", "lobby", "bathroom", "bedroom", "office", "hallway", "hall", "restaurant", "bar", "store",
                           "shop", "cafe", "diner", "kitchenette", "garage", "doors"})


def _indoors(entity: dict) -> bool:
    last = str(entity.get("lemma_head") or entity.get("head") or "").lower().split()[-1:]
    return bool(last) and (last[0] in INDOOR_PLACES or last[0].endswith("room"))


def _room_on(relations: list[dict], entities: list[dict], s: int, o: int, relation: str, bounds: list,
             words: list[str] | None = None) -> bool:
    """Whether s is a room or place something earlier is in, and the relation's phrase rests it on a later noun or puts
    it by a thing, or a room by anything ("bikes are lined up in the store on the floor": the bikes are on the floor,
    the store is not; "a fire hydrant in a grassy field next to a bush": the hydrant may be next to it; "a person sits in
    a chair in a living room next to some windows": the room has them)."""
    phrase = _last_phrase(relation)
    if entities[s].get("type") != "scene" or phrase not in RESTING | PROXIMITY or bounds[o][0] < bounds[s][1]:
        return False
    # by a thing, an open place may be, or what is in it ("cows grazing in a field near trees"); by a scene, an open
    # place is ("a man holding a frisbee in a parking lot near water")
    if phrase in PROXIMITY and not _indoors(entities[s]) and entities[o].get("type") == "scene":
        return False
    # the thing in it: a relation, or a noun right before "in" ("a fire hydrant in a grassy field" the parse left unlinked)
    before = bounds[s][0] - 1
    return any(r["object"] == s and r["subject"] not in (s, o) and r["subject"] < len(bounds) and bounds[r["subject"]][1] <= bounds[s][0]
               and _last_phrase(r["relation"].lower()) in INSIDE for r in relations) or (
        bool(words) and before > 0 and words[before].lower() in INSIDE and any(b[1] == before for b in bounds))


def _nested(relations: list[dict], s: int, o: int, bounds: list, last: str, entities: list[dict], words: list[str] | None) -> bool:
    """Whether subject s is the object of an earlier noun p's phrase or verb and the relation's phrase follows it, so
    that it may hang off p instead ("a pizza with lots of cheese on a flat brown surface": the pizza may be on the
    surface; "a woman carrying cake near a man holding a baby": the man holds it; "a sheet cake sitting on top of
    a table with lit candles"). Not when it holds of s either way: p a container of s ("a vase of flowers", "a room
    full of people"), `_transfers`, both phrases ones of place ("a cat on a car near a house": the car is near it
    too; "a police officer on a horse in the middle of the street"), the phrase one of place and its noun a scene
    ("a player with a bat on the field"); nor for an of-phrase, s's own ("a horse pulling a cart full of hay"); nor
    when s is the last
    of a list, the phrase's nearest noun ("a table with cups and some oranges on a plate"), or p is a place ("a
    bathroom with a big mirror above the sink"), or a relative clause follows s ("an elephant that is inside a
    truck"). Of a list, a member before the last stays doubtful ("a kitchen with a sink, dishwasher and boxes on
    the counter": the boxes are on it)."""
    if o >= len(bounds) or bounds[o][0] < bounds[s][1] or last in CONTAINERS:
        return False
    if words and bounds[s][1] < len(words) and words[bounds[s][1]].lower() in ("that", "which", "who"):
        return False
    inside = _later_conjunct(s, bounds, words)
    for r in relations:
        p = r["subject"]
        if r["object"] != s or p in (s, o) or p >= len(bounds) or bounds[p][1] > bounds[s][0]:
            continue
        inner = r["relation"].lower()
        if inner in CONTAINERS:
            continue
        picture = bool(set(str(entities[p].get("lemma_head") or entities[p].get("head", "")).lower().split()) & PICTURE_NOUNS)
        if _transfers(relations, p, s, last, picture) or {_last_phrase(inner), last} <= SUPPORT | CO_LOCATED:
            continue
        if last in SUPPORT | CO_LOCATED and entities[o].get("type") == "scene":
            continue  # what p has is in the place p is in
        if inside is None and (_later_conjunct(s, bounds, words, before=False) is not None or entities[p].get("type") == "scene"):
            continue
        return True
    return False


# Relations of a container or measure to its content, whose phrases hold of the content too ("a room full of people
# seated at tables").
CONTAINERS = frozenset({"of", "full of", "filled with", "made of"})


def _later_conjunct(s: int, bounds: list, words: list[str] | None, before: bool = True) -> int | None:
    """The noun coordinated with s after it (before=True) or before it (before=False): only commas, "and" and other
    nouns between them ("a sink, dishwasher and boxes"). None without the caption's words."""
    if not words:
        return None
    for n, b in enumerate(bounds):
        if n == s:
            continue
        gap = (bounds[s][1], b[0]) if before else (b[1], bounds[s][0])
        if gap[0] < gap[1] and _joined(gap, bounds, words):
            return n
    return None


def _joined(gap: tuple[int, int], bounds: list, words: list[str]) -> bool:
    """Whether the caption's words in `gap` are only commas, "and", and words of nouns (a list's members), with one
    "and" or comma at least."""
    inside = {i for b in bounds for i in range(b[0], b[1])}
    rest = [words[i].lower() for i in range(*gap) if i not in inside]
    return bool(rest) and set(rest) <= {",", "and", "&"}


# What things do as well as people and animals, besides posture and placement (`STATIVE_PARTICIPLES`): "a man on a
# piece of equipment resembling a bicycle". A past participle ("topped", "lined up") is a state any noun may be in.
THINGS_DO = STATIVE_PARTICIPLES | frozenset({"resembling", "containing", "showing", "featuring", "displaying", "depicting",
                                             "overlooking", "covering", "laid", "made", "built", "hung",
                                             # what a hydrant or a hose does: "A man opening a fire hydrant spewing out
                                             # rusty water" (the hydrant spews)
                                             "spewing", "spouting", "gushing", "spraying", "leaking", "dripping"})


def _nearer_subject(relations: list[dict], s: int, o: int, bounds: list, first: str, words: list[str] | None) -> bool:
    """Whether the relation's verb, a past participle or one of `THINGS_DO`, comes right after a noun n other than its
    subject s, and between s and its object, which English reads as the verb's subject ("a plate with a big waffle
    topped with fruit": the waffle is topped; "a man on a piece of equipment resembling a bicycle"), unless n is
    coordinated with s ("crackers, dip and veggies sitting on a counter"), is what s wears ("a man in a red shirt
    sitting on a bench") or what s is of ("a plate of food sitting on a table"). Needs the caption's words. An
    action verb keeps its first noun ("a person with an umbrella looking at the ocean")."""
    if not words or first in ENGLISH_PREPOSITIONS or not (first.endswith("ed") or first in THINGS_DO):
        return False
    start, end = bounds[s][1], bounds[o][0] if o < len(bounds) else len(words)
    at = next((i for i in range(start, min(end, len(words))) if words[i].lower() == first), None)
    if at is None:
        return False
    for n, b in enumerate(bounds):
        if n in (s, o) or b[1] != at or b[0] < start:
            continue
        worn = any(r["subject"] == s and r["object"] == n and r["relation"].lower() in ("in", "wearing", "dressed in", "of")
                   for r in relations)
        if not _joined((start, b[0]), bounds, words) and not worn and [w.lower() for w in words[start:b[0]]] != ["of"]:
            return True
    return False


# Pronouns that name a doer ("someone holding up food"), which the vocabulary does not list as people.
AGENT_PRONOUNS = frozenset({"someone", "somebody", "anyone", "anybody", "everyone", "everybody"})


def _another_doer(relations: list[dict], s: int, o: int, bounds: list, first: str, words: list[str] | None,
                  agents: frozenset[int]) -> bool:
    """Whether the verb `first` may be another noun's than its subject s's: a participle after s as the object of an
    earlier noun's phrase, or listed with one (`_listed_prepositional_object`), or an action verb after a nearer doer
    (`_nearer_agent`)."""
    if first.endswith(("ing", "ed")) and (_prepositional_object(relations, s, bounds)
                                          or _listed_prepositional_object(relations, s, bounds, words)):
        return True
    return _nearer_agent(relations, s, o, bounds, first, words, agents)


def _listed_prepositional_object(relations: list[dict], s: int, bounds: list, words: list[str] | None) -> bool:
    """Whether entity s is coordinated after the object of an earlier noun's prepositional phrase, one of the phrase's
    list ("a man in a black hat, white shirt and black pants": the shirt and the pants are the man's too). Needs the
    caption's words."""
    seen = {s}
    n = _later_conjunct(s, bounds, words, before=False)
    while n is not None and n not in seen:
        if _prepositional_object(relations, n, bounds):
            return True
        seen.add(n)
        n = _later_conjunct(n, bounds, words, before=False)
    return False


def _nearer_agent(relations: list[dict], s: int, o: int, bounds: list, first: str, words: list[str] | None,
                  agents: frozenset[int]) -> bool:
    """Whether an action verb (not one of `THINGS_DO`, nor a past participle) comes after one of `agents` other than
    its subject s and after s, with no "and" joining the two: English reads the nearer doer as the verb's subject ("the
    front of a restaurant with someone holding up food"; "a man with his dog walking on a beach" may be either), unless
    "while" opens the verb's clause, whose subject is the sentence's. Needs the caption's words."""
    if not words or not agents or first in THINGS_DO or first.endswith("ed"):
        return False
    start, end = bounds[s][1], bounds[o][0] if bounds[o][0] >= bounds[s][1] else len(words)
    at = next((i for i in range(start, min(end, len(words))) if words[i].lower() == first), None)
    if at is None or words[at - 1].lower() == "while":  # "an adult standing behind a girl while holding an umbrella"
        return False
    return any(n not in (s, o) and n < len(bounds) and start <= bounds[n][0] and bounds[n][1] <= at
               and not _joined((start, bounds[n][0]), bounds, words) for n in agents)


# Prepositions of a path, which need their verb of motion: "a man riding a snowboard down a slope" goes down it, "a man
# down a slope" says nothing the caption does, and "a zebra ... off the ground" lost what comes off it.
DIRECTIONAL = frozenset({"down", "up", "along", "across", "through", "around", "toward", "towards", "off", "off of", "into", "onto",
                         "past", "from", "out of", "away from"})


# Verbs of going that say the path without their object ("riding down a slope", "walks past chairs", "leads through a
# paddock"), as the subject goes along with what it rides or leads (`CARRYING_VERBS`); "carries down" needs its object.
GOING_VERBS = frozenset({"ride", "walk", "drive", "lead", "paddle", "row", "skate", "ski"})


def with_path_verbs(graph: dict, words: list[str] | None = None) -> dict:
    """`graph` with each bare preposition of a path whose verb of going comes before it give that verb back: "a man riding a
    snowboard down a snow covered slope" relates the man "riding down" the slope, which is what the caption says and the gold
    graphs keep (docs/gold_graphs.md), not "down" ("a man down a slope" lost its verb). The verb is the subject's relation
    to the nearest object between it and the phrase's (`GOING_VERBS`, in any inflection); any other dropped verb leaves the
    relation for `_verb_dropped` to refuse."""
    relations = graph.get("relations") or []
    try:
        bounds = [e["span_bounds"] for e in graph["entities"]]
    except (KeyError, TypeError):
        return graph
    out, changed = [], False
    for rel in relations:
        s, o = rel["subject"], rel["object"]
        relation = " ".join(str(rel["relation"]).lower().split())
        if relation in DIRECTIONAL and max(s, o) < len(bounds) and bounds[s][1] < bounds[o][0]:
            verbs = sorted((bounds[r["object"]][0], r) for r in relations
                           if r["subject"] == s and r["object"] not in (s, o) and r["object"] < len(bounds)
                           and len(r["relation"].split()) == 1 and r["relation"].lower() not in PREPOSITIONS
                           and bounds[s][1] <= bounds[r["object"]][0] and bounds[r["object"]][1] <= bounds[o][0])
            if verbs and _contact_verb(verbs[-1][1], GOING_VERBS):
                verb = verbs[-1][1]
                lemma = str(verb.get("lemma_relation") or verb["relation"]).lower()
                rel = {**rel, "relation": f"{verb['relation']} {rel['relation']}", "lemma_relation": f"{lemma} {relation}"}
                changed = True
        out.append(rel)
    return {**graph, "relations": out} if changed else graph


def _verb_dropped(relations: list[dict], s: int, o: int, relation: str, bounds: list, words: list[str] | None) -> bool:
    """Whether the relation is a bare preposition of a path (`DIRECTIONAL`) that in the caption follows a verb between
    its subject and its object: the verb's own object ("riding a snowboard down a snow covered slope") or, with the
    caption's words, an -ing word outside every noun phrase ("a zebra bending down eating something off the ground").
    The phrase goes with that verb, which the relation lacks."""
    phrase = relation.split()
    if " ".join(phrase) not in DIRECTIONAL and phrase[:1] not in (["up"], ["down"], ["across"], ["through"], ["along"]):
        return False  # "up the side of a cement ramp" is a path as "up" is
    start, end = bounds[s][1], bounds[o][0]
    if end <= start:
        return False
    if any(r["subject"] == s and r["object"] not in (s, o) and r["object"] < len(bounds)
           and r["relation"].lower().split(" ", 1)[0] not in PREPOSITIONS
           and start <= bounds[r["object"]][0] and bounds[r["object"]][1] <= end for r in relations):
        return True
    if not words:
        return False
    inside = {i for b in bounds for i in range(b[0], b[1])}
    return any(i not in inside and len(words[i]) > 4 and words[i].lower().endswith("ing") for i in range(start, min(end, len(words))))


def _transfers(relations: list[dict], s: int, n: int, last: str, picture: bool) -> bool:
    """Whether the phrase (ending in `last`) holds of subject s whichever noun it hangs off, s or n: what
    sits on, in or at a thing near Z is near Z too ("people sitting on a bench near a lake"), a container
    or a whole where its content or part is ("a vase of flowers on a table"); who holds, cooks or plays a
    thing in a room or next to Z is there too ("a person cooking some food in a kitchen"), though not on
    what it rests on ("holding two apples on a plate"); who rides, walks or carries a thing goes where it
    goes ("a person riding skis on a snowy slope")."""
    for r in relations:
        if r["subject"] != s or r["object"] != n:
            continue
        if r["relation"].lower() == "of" and not picture:
            return True  # "a vase of flowers on a dining table": the vase is where its flowers are
        if last in PROXIMITY and _last_phrase(r["relation"].lower()) in SUPPORT:
            return True
        if _contact_verb(r, CONTACT_VERBS) and last in CO_LOCATED or _contact_verb(r, CARRYING_VERBS) and last in PATH:
            return True
    return False


def _placed_elsewhere(relations: list[dict], s: int, o: int, bounds: list) -> bool:
    """Whether entity o has a prepositional phrase of place of its own to a later noun other than s ("cars on a
    street"; not "a toddler with a big smile")."""
    return any(r["subject"] == o and r["object"] not in (s, o) and r["object"] < len(bounds) and bounds[r["object"]][0] >= bounds[o][1]
               and r["relation"].lower().split(" ", 1)[0] in PREPOSITIONS and r["relation"].lower() not in ("of", "with")
               for r in relations)


def _prepositional_object(relations: list[dict], s: int, bounds: list) -> bool:
    """Whether entity s is the object of an earlier noun's prepositional phrase ("a man on a skateboard")."""
    return any(r["object"] == s and r["subject"] != s and r["relation"].lower().split(" ", 1)[0] in PREPOSITIONS
               and r["relation"].lower() != "of" and r["subject"] < len(bounds) and bounds[r["subject"]][1] <= bounds[s][0]
               for r in relations)


def _predicate_object(relations: list[dict], s: int, bounds: list, words: list[str] | None) -> bool:
    """Whether entity s is the object of an earlier noun's phrase after a copula ("a man is at a kitchen counter"):
    a phrase of place that follows ("by a dog") may say where the copula's subject is. Needs the caption's words."""
    if not words:
        return False
    return any(r["object"] == s and r["subject"] != s and r["subject"] < len(bounds) and bounds[r["subject"]][1] <= bounds[s][0]
               and r["relation"].lower().split(" ", 1)[0] in PREPOSITIONS
               and COPULAS & {w.lower() for w in words[bounds[r["subject"]][1]:bounds[s][0]]}
               for r in relations)


def _right_after(words: list[str] | None, span: list, word: str) -> bool:
    """Whether `word` comes right after the noun phrase `span` in the caption's words ("a bicycle leaning";
    not "a kite while standing", "her cell phone and sitting"); without the words it may, so True."""
    if not words:
        return True
    end = span[1]
    return end < len(words) and words[end].lower() == word


def _verb_phrase(relation: str, other: str) -> bool:
    """Whether `relation` is an -ing verb with its prepositional phrase ("walking behind"), another verb than
    `other`; not a past participle's ("a lady dressed in khakis standing in a bathroom": what it is in says how
    the subject is, and stands nowhere)."""
    first = relation.split(" ", 1)[0]
    return first.endswith("ing") and first not in PREPOSITIONS and first != other and _last_phrase(relation) not in ("", "of")


def _verb_object(relations: list[dict], s: int, bounds: list) -> bool:
    """Whether entity s is the object of an earlier noun's verb that neither holds nor carries it ("pedestrians
    crossing a street"; not "a man holding a dog")."""
    return any(r["object"] == s and r["subject"] != s and r["subject"] < len(bounds) and bounds[r["subject"]][1] <= bounds[s][0]
               and len(r["relation"].split()) == 1 and r["relation"].lower().endswith(("ing", "ed", "s"))
               and not _contact_verb(r, CONTACT_VERBS | CARRYING_VERBS)
               for r in relations)


def _contact_verb(rel: dict, verbs: frozenset[str]) -> bool:
    """Whether the relation is one of `verbs` alone or with "with", in any inflection ("holds", "cutting", "rides",
    "playing with")."""
    words = " ".join(rel["relation"].lower().split()).split(" ")
    if words[1:] == ["with"]:
        words = words[:1]
    if len(words) != 1 or words[0] in PREPOSITIONS:
        return False
    lemma = str(rel.get("lemma_relation") or "").lower().split()[:1]
    forms = {words[0], *lemma} - {""}  # both: spaCy lemmatises "rides" as "rid"
    return any({w, w[:-1], w[:-2], w[:-3], w[:-3] + "e", w[:-4]} & verbs for w in forms)


def _last_phrase(relation: str) -> str:
    """The spatial phrase a relation ends with: "sitting next to" -> "next to", "standing on" -> "on"."""
    words = relation.split()
    for n in range(len(words)):
        if words[n] in PREPOSITIONS:
            return " ".join(words[n:])
    return ""


def sample_subgraphs(candidates: list[dict], k: int, rng) -> list[dict]:
    """`k` of `candidates` (more than k), in their order. MosaiCLIP samples positive-negative pairs
    by category (Singh et al. 2023, App. B): a one-object sub-graph with attributes (f_obj) or a
    two-object one with a relation (f_attr, f_rel); a bare object has no negative and is in no pair.
    So each draw picks a kind with `SAMPLE_WEIGHTS` among the kinds with sub-graphs left, then one
    of that kind uniformly; bare objects fill the places left once no other sub-graph is."""
    pools: dict[str, list[int]] = {"relation": [], "attributed": [], "bare": []}
    for i, sg in enumerate(candidates):
        kind = "relation" if sg["relations"] else "attributed" if sg["objects"][0]["attributes"] else "bare"
        pools[kind].append(i)
    chosen = []
    while len(chosen) < k:
        kinds = [kind for kind in SAMPLE_WEIGHTS if pools[kind]]
        if not kinds:
            chosen += rng.sample(pools["bare"], k - len(chosen))
            break
        pool = pools[rng.choices(kinds, weights=[SAMPLE_WEIGHTS[kind] for kind in kinds])[0]]
        chosen.append(pool.pop(rng.randrange(len(pool))))
    return [candidates[i] for i in sorted(chosen)]


def decompose_record(
    record: dict, *, max_subgraphs: int = DEFAULT_MAX, keep_caption: bool = True, seed: int = 0, text_key: str = "caption",
    vocab=None, max_keys: int = MAX_KEYS,
) -> dict:
    if vocab is None:
        from mosaictool.vocab import load

        vocab = load()
    words = (record.get("tokens") or {}).get("words")
    graph = with_said_verbs(record["graph"], words)
    candidates = _candidates_of_said(graph, vocab, words, (record.get("tokens") or {}).get("tags"))
    if len(candidates) > max_subgraphs:
        candidates = sample_subgraphs(candidates, max_subgraphs, record_rng(seed, record["id"], "decompose"))
    subgraphs = []
    if keep_caption:
        subgraphs.append({"kind": "caption", "text": record[text_key], "objects": [], "relations": [], "key": caption_key(graph, vocab)})
    subgraphs.extend({**sg, "key": canonical_key(sg, vocab)} for sg in candidates)
    return {**record, "subgraphs": subgraphs, "subgraph_keys": subgraph_keys(graph, vocab, max_keys)}


def decompose(
    records: Iterable[dict], *, max_subgraphs: int = DEFAULT_MAX, keep_caption: bool = True, seed: int = 0, text_key: str = "caption",
    vocab=None, max_keys: int = MAX_KEYS,
) -> Iterator[dict]:
    """Add `subgraphs` and `subgraph_keys` to every record (one record out per record in, order
    kept); `vocab` is a loaded Vocab or a vocabulary folder (None: the shipped one)."""
    from mosaictool.vocab import load

    if vocab is None or isinstance(vocab, (str, os.PathLike)):
        vocab = load(vocab)
    for record in records:
        yield decompose_record(
            record, max_subgraphs=max_subgraphs, keep_caption=keep_caption, seed=seed, text_key=text_key, vocab=vocab, max_keys=max_keys,
        )
