"""What decompose, negate and template share: the sub-graph schema, graph identity, per-record RNGs.

A sub-graph (an entry of `subgraphs`, or the `graph` of a graph negative) is

    {kind: "caption"|"object"|"relation"|null, text: str|null,
     objects:   [{noun, lemma, plural, count, attributes, determiner, entity}],
     relations: [{subject, object, relation}]}

- noun: the head noun as it reads (plural form when plural: "poles", "tennis racket");
  lemma: its singular (vocabulary lookups); plural: bool; count: number or quantity words
  ("two", "several other") or null; attributes: adjectives in caption order (quantifiers moved
  to count); determiner: "the" (the caption used a definite or possessive determiner), "a"
  (indefinite), or null (bare in the caption: "water", "frisbee"); entity: index into
  `graph.entities`, null for nodes a negative brought in.
  Optional: measure (the part the caption names: "a slice" of pizza); name: true for a name said
  mid-caption with no determiner ("Las Vegas", "Dad"), which a text leaves bare.
- relations: subject / object index into `objects`; relation as written ("sitting on").
- kind "caption" is the whole caption (text = the caption; objects and relations empty).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter

DEFINITE = frozenset("the this that these those my your his her its our their".split())
INDEFINITE = frozenset("a an another some any each every no".split())
# Adjectival modifiers that quantify rather than describe ("several other cars"): rendered with
# the count, never replaced as attributes.
QUANTIFIERS = frozenset("several many few various numerous multiple other more most lots".split())
# "someone" / "somebody" are not here: they name a person the image shows ("someone touching a cupcake").
PRONOUNS = frozenset(
    "it they them this that these those he she him her we us you i me which who whom what something "
    "one itself themselves himself herself there here none nothing".split()
)
# A determiner left as an entity's head is debris ("a view from the inside": the framing noun taken out,
# "the" stayed): it is no object, as a pronoun is none.
DETERMINERS = frozenset("the a an some each every all both another any no".split())
# Plural forms whose lemma from spaCy equals the form itself.
PLURAL_ONLY = frozenset("people police cattle clothes glasses sunglasses scissors pants jeans shorts trousers".split())
SINGULAR_COUNTS = frozenset({"one", "1", "a", "an", "single"})
PLURAL_DETERMINERS = frozenset({"these", "those", "both", "several", "many", "few", "various", "numerous"})
# Parser debris (see `clean_node`, `is_bare_preposition`, and `vocab build`): nouns that name a
# place rather than an object ("to the right of" read with an entity "right"), prepositions that
# stand alone as a relation ("left of" read as "of"), colour words fused into a noun ("an orange
# cross" read as the compound "orange cross").
SPATIAL_NOUNS = frozenset("left right top bottom front back side middle center centre rear edge corner".split())
BARE_PREPOSITIONS = frozenset("of to for from as than about like per via".split())
# Nouns of a container or a measure of what it holds ("a plate of noodles", "a cup of coffee"): their bare "of" is
# true of the image (the plate holds noodles), and a changed content or container ("a bowl of noodles", "a plate of
# rice") is a fluent false text; a framing, counting or part noun's "of" ("a group of", "a picture of", "the side
# of") stays debris.
CONTAINER_NOUNS = frozenset({"plate", "bowl", "cup", "glass", "mug", "bottle", "can", "box", "bag", "basket", "tray",
                             "platter", "dish", "jar", "carton", "pint", "spoonful", "mouthful", "forkful", "plateful"})
# English prepositions and the particles a verb takes its object through ("walking down", "leaning against",
# "standing apart"): a relation ending with one reaches its object through it (negate), and a one-word relation
# that is one is no verb (template).
PREPOSITIONS = frozenset({
    "aboard", "about", "above", "across", "after", "against", "along", "alongside", "amid", "among", "amongst", "apart",
    "around", "as", "at", "atop", "away", "before", "behind", "below", "beneath", "beside", "besides", "between", "beyond",
    "by", "down", "for", "from", "in", "inside", "into", "like", "near", "of", "off", "on", "onto", "opposite", "out",
    "outside", "over", "past", "than", "through", "throughout", "to", "together", "toward", "towards", "under",
    "underneath", "up", "upon", "via", "with", "within",
})
COLOUR_WORDS = frozenset(
    "red green blue yellow purple orange white black grey gray brown pink violet cyan magenta beige tan".split()
)
_DIRECTIONS = frozenset({"left", "right"})  # "star right": the direction of a lost "right of"
# Of the place nouns, those that never name a part of a thing ("a yellow front" of a train is one).
PLACE_ONLY = _DIRECTIONS | {"middle", "center", "centre"}


def record_rng(seed: int, record_id, purpose: str) -> random.Random:
    """An RNG that depends only on (seed, id, purpose): same output whatever the batch, worker or
    other flags. `id` 1 and "1" differ; Python's salted hash() is avoided on purpose."""
    key = f"{seed}\x1f{type(record_id).__name__}:{record_id}\x1f{purpose}".encode()
    return random.Random(int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big"))


def normalize_text(text: str) -> str:
    """The form texts are compared in: lower case, no '.' or ',', single spaces (NegCLIP's check_same,
    case-insensitive)."""
    return " ".join(text.lower().replace(".", " ").replace(",", " ").split())


def is_pronoun(entity: dict) -> bool:
    head = str(entity.get("head") or "").lower()
    return head in PRONOUNS or head in DETERMINERS


def is_absent(entity: dict) -> bool:
    """An entity the caption says is not there ("a bathroom with no toilets", "a street with no
    cars"): no text that shows it, alone or in a relation, is true of the image."""
    return any(m.get("dep") == "det" and str(m.get("lemma_span") or m.get("span") or "").lower() == "no"
               for m in entity.get("modifiers") or ())


def _plural(noun: str, lemma: str, counts: list[str], dets: list[str], attributes: list) -> bool:
    """Whether a noun is plural: spaCy lemmatises a plural noun to its singular, a singular noun is its own
    lemma (its last word decides: "stuffed animal" is one animal, though spaCy lemmatises "stuffed" to
    "stuff"). A compound after the caption's own "a" is one thing: "a tall giraffe stretches", which spaCy
    read as the compound noun "giraffe stretches" (lemma "giraffe stretch"), is one giraffe ("a short giraffe
    stretches", not "short giraffe stretches" with the article dropped); "a few stop signs" is not."""
    if (counts and counts[0] not in SINGULAR_COUNTS) or noun in PLURAL_ONLY or (
            noun.split()[-1:] and noun.split()[-1] in PLURAL_ONLY and {"a", "an"}.isdisjoint(dets)):
        return True  # "business people" too ("a business people"), not the caption's own "a dog pants"
    quantified = not QUANTIFIERS.isdisjoint(str(a).lower() for a in attributes or ())
    if noun.split()[-1:] == lemma.split()[-1:]:
        # a noun whose plural is its singular is plural after a word of many ("Several sheep standing around in the
        # grass" gave "a sheep standing in the grass")
        return quantified or not PLURAL_DETERMINERS.isdisjoint(dets)
    return bool(counts) or " " not in noun or {"a", "an"}.isdisjoint(dets) or quantified


def _capitals_singular(word: str) -> str:
    """The singular of a regular plural, for a noun in capitals, which spaCy's lemmatiser leaves as it is ("LOTS OF
    BROKEN TOILETS": not "a broken toilets")."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def _written_lemma(head: str, noun: str, lemma: str) -> str:
    """The node's lemma: a compound's first words as written ("stuffed animal", not "stuff animal"), and a noun in
    capitals made singular (`_capitals_singular`)."""
    words, lemmas = noun.split(), lemma.split()
    if lemma == noun and words and head.isupper():
        lemmas = [*words[:-1], _capitals_singular(words[-1])]
        if len(words) == 1:
            return lemmas[0]
    if len(words) > 1 and len(words) == len(lemmas):
        return " ".join([*words[:-1], lemmas[-1]])
    return lemma


def object_node(entity: dict, index: int | None) -> dict:
    """A sub-graph object from one `parse` entity."""
    noun = str(entity.get("head") or "").lower()
    lemma = str(entity.get("lemma_head") or noun).lower()
    lemma = _written_lemma(str(entity.get("head") or ""), noun, lemma)
    modifiers = entity.get("modifiers") or []
    attributes = entity.get("attributes")
    if attributes is None:
        attributes = [m.get("span", "") for m in modifiers if m.get("dep") == "amod"]
    counts, dets = [], []
    for m in modifiers:
        dep = m.get("dep")
        if dep == "nummod":
            counts.append(str(m.get("span", "")).lower())
        elif dep == "det":
            dets.append(str(m.get("span", "")).lower())
    if counts and not {"a", "an"}.isdisjoint(dets):
        # a number after "a" measures a modifier, not the noun ("a two thick wheeled bike", "a two story
        # house"): it stays where the caption put it, and the noun one (r7 read "two thin wheeled bike")
        attributes = [*counts, *attributes]
        counts = []
    plural = _plural(noun, lemma, counts, dets, attributes)
    if attributes:
        attributes = [str(a).lower() for a in attributes]
        if not QUANTIFIERS.isdisjoint(attributes):
            if plural:
                counts += [a for a in attributes if a in QUANTIFIERS]
            attributes = [a for a in attributes if a not in QUANTIFIERS]
    else:
        attributes = []
    first_word = str(entity.get("span") or "").split(" ", 1)[0].lower()
    if first_word in DEFINITE or not DEFINITE.isdisjoint(dets):
        determiner = "the"
    elif dets or first_word in INDEFINITE or counts:
        determiner = "a"
    else:
        determiner = None
    return {
        "noun": noun,
        "lemma": lemma,
        "plural": bool(plural),
        "count": " ".join(counts) if counts else None,
        "attributes": attributes,
        "determiner": determiner,
        "entity": index,
        **_measure(entity),
        **_name(entity, dets, counts),
    }


def _name(entity: dict, dets: list[str], counts: list[str]) -> dict:
    """A name the caption gives mid-sentence with no determiner ("in Las Vegas", "holding onto Dad": a kinship
    noun used as a name) takes no article in a text ("a las vegas", "a dad" read as debris: blind review r12);
    marked only then, so other nodes stay as they were."""
    words = str(entity.get("head") or "").split()
    start = (entity.get("span_bounds") or [0])[0]
    # capitalised, not in capitals: "TV" is a common noun, and a caption in capitals capitalises every noun
    if dets or counts or not start or not words or not all(w[0].isupper() and not w.isupper() for w in words):
        return {}
    return {"name": True}


def _measure(entity: dict) -> dict:
    """The part of the thing the caption names ("a slice" of pizza, parse's `measure`), said by the text
    though not in the key; nothing when there is none, so other nodes stay as they were."""
    return {"measure": str(entity["measure"]).lower()} if entity.get("measure") else {}


def node_key(node: dict) -> tuple:
    # the count as text: keys are sorted, and "dogs" (no count) beside "two dogs" compared None with "two"
    count = node.get("count")
    return (node["lemma"], node["plural"], "" if count is None else str(count), tuple(node["attributes"]))


def graph_key(graph: dict) -> tuple:
    """What makes two sub-graphs the same scene: their objects (ignoring order, where they came
    from and article style) and relations (between objects, not list positions)."""
    return graph_identity([node_key(o) for o in graph["objects"]], graph["relations"])


def graph_identity(keys: list[tuple], relations: list[dict]) -> tuple:
    """graph_key from the objects' node_keys, for callers that reuse them across related graphs."""
    return (tuple(sorted(keys)), tuple(sorted([(keys[r["subject"]], r["relation"], keys[r["object"]]) for r in relations])))


# The article goes by the first sound, not the first letter. Without a pronouncing dictionary (NLTK's CMUdict
# needs a data download) a short rule does: a vowel letter sounds as a vowel except "u" read "you" (a "u", a
# consonant, then a vowel: "utility", "uniform", "usual", but not the "un-" of "uneven", "unattended"), "eu"/"ewe"
# and "one"; a silent "h" in a few words ("hour", "honest") sounds as a vowel.
_AN_EXCEPTIONS = ("hour", "honest", "honor", "honour", "heir", "herb", "unin", "unim", "unid")
_A_EXCEPTIONS = ("uni", "eu", "ewe", "one", "once", "ufo", "uk", "usb", "u-", "u.s")
_YOU = re.compile(r"u[b-df-hj-mp-tv-z][aeiouy]")  # every consonant but "n"
# Initialisms said letter by letter, whose first letter's name starts with a vowel ("an SUV", "an RV", "an MP3"; a
# replaced "a double decker bus sits parked on a curb" gave "a suv parked on a curb")
_SPELLED = frozenset({"suv", "suvs", "rv", "rvs", "mp3", "hdtv", "lcd", "mri", "nfl", "nba", "fbi", "sms", "x-ray"})


def indefinite_article(phrase: str) -> str:
    """'a' or 'an' for the phrase that follows it, by the sound it starts with: "a utility pole",
    "a unicorn", "a one-way street", "a european city", "an hour", "an umbrella", "an 8 ball"."""
    word = phrase.strip().lower()
    if not word:
        return "a"
    if word.startswith(_AN_EXCEPTIONS) or word.split(" ", 1)[0] in _SPELLED:
        return "an"
    if word.startswith(_A_EXCEPTIONS) or _YOU.match(word):
        return "a"
    if word[0].isdigit():
        return "an" if word.startswith(("8", "11", "18")) else "a"
    return "an" if word[0] in "aeiou" else "a"


# --- canonical keys (what MosaiCLIP's P(i) compares) ----------------------------------------------
# A key names a sub-graph by meaning: each object as `noun#count[attr,attr]` (the noun's and the
# attributes' synonym heads, attributes sorted and deduplicated, `#count` only when the caption
# counted), each relation as `subject >relation> object` with the relation's synonym head; a key
# is its relations, then the objects outside any relation, each part sorted, joined by " & ":
#     "star[red]"    "circle[blue,small] >to the left of> square"    "shape#two[red]"
MAX_KEYS = 256  # per record; see subgraph_keys
_KEY_ATTRIBUTE_SUBSETS = 4  # an object with more attributes adds only its single-attribute subsets


def _node_string(noun: str, count, attributes) -> str:
    out = noun if count is None else f"{noun}#{count}"
    return f"{out}[{','.join(sorted(set(attributes)))}]" if attributes else out


def _graph_string(nodes: list[str], relations: list[tuple[int, str, int]]) -> str:
    linked = {i for s, _, o in relations for i in (s, o)}
    parts = sorted(f"{nodes[s]} >{rel}> {nodes[o]}" for s, rel, o in relations)
    return " & ".join(parts + sorted(nodes[i] for i in range(len(nodes)) if i not in linked))


def _node_parts(node: dict, vocab) -> tuple[str, object, tuple[str, ...]]:
    noun = vocab.head("objects", " ".join(str(node.get("lemma") or node.get("noun") or "").lower().split()))
    count = node.get("count")
    count = None if count in (None, "") else str(count).lower()
    attributes = tuple(vocab.head("attributes", " ".join(str(a).lower().split())) for a in node.get("attributes") or ())
    return noun, count, attributes


def _relation_head(relation: str, vocab) -> str:
    return vocab.head("relations", " ".join(str(relation).lower().split()))


def canonical_key(subgraph: dict, vocab) -> str:
    """The canonical key of a sub-graph ({objects, relations}, the schema above): equal meaning
    under `vocab`'s synonym groups gives equal keys, whatever the word order, articles or plural."""
    nodes = [_node_string(*_node_parts(o, vocab)) for o in subgraph["objects"]]
    relations = [(r["subject"], _relation_head(r["relation"], vocab), r["object"]) for r in subgraph["relations"]]
    return _graph_string(nodes, relations)


def clean_node(
    node: dict, colours: frozenset[str] = COLOUR_WORDS, things: frozenset[str] = frozenset(), adjectives: frozenset[str] = frozenset(),
) -> dict | None:
    """A node with the parser's debris taken out: None for a place noun ("right", "the middle") or a
    bare colour word ("purple", "in the dark"; not one of `things`, the vocabulary's objects: "oranges"
    are fruit; nor one that reads as a noun, `_colour_noun`: "a red light");
    place nouns dropped from the attributes;
    a trailing direction dropped ("star right" -> "star"); leading colour words of a fused compound
    moved to the attributes ("orange cross" -> "cross" with "orange"), and so are other leading
    `adjectives` (the vocabulary's attributes) of a compound that is no object when the rest is
    one ("stripy cross" -> "cross" with "stripy"; "hot dog" stays when it is an object); None for a name
    with an abbreviation ("W. Centre st.": a street's name, which read "a centre w. st", blind review r12)."""
    words = node["lemma"].split()
    if any(w.endswith(".") for w in node["noun"].split()):
        return None
    if not words or node["lemma"] in PLACE_ONLY or (node["lemma"] in colours and node["lemma"] not in things and not _colour_noun(node)):
        return None
    if not PLACE_ONLY.isdisjoint(node["attributes"]):  # "a triangle right of": "right" is no property
        node = {**node, "attributes": [a for a in node["attributes"] if a not in PLACE_ONLY]}
    drop_end = 1 if len(words) > 1 and words[-1] in _DIRECTIONS else 0
    drop_start = 0

    def fused(k: int) -> bool:
        if words[k] in colours:
            return True
        rest = " ".join(words[k + 1:len(words) - drop_end])
        return words[k] in adjectives and rest in things and " ".join(words[k:len(words) - drop_end]) not in things

    while drop_start < len(words) - drop_end - 1 and fused(drop_start):
        drop_start += 1
    if not (drop_end or drop_start):
        return node
    lemma = " ".join(words[drop_start:len(words) - drop_end])
    noun_words = node["noun"].split()
    noun = " ".join(noun_words[drop_start:len(noun_words) - drop_end]) or lemma
    attributes = list(node["attributes"]) + [w for w in words[:drop_start] if w not in node["attributes"]]
    return {**node, "noun": noun, "lemma": lemma, "attributes": attributes}


def _colour_noun(node: dict) -> bool:
    """Whether a colour word heading a node reads as a noun: a plural form ("lights", "leafy greens"), or,
    for a colour word that also names a thing (the vocabulary's "light", "gold", "coral"; not a basic
    colour term such as "purple"), described by an adjective or led by a determiner ("a red light",
    "the light"; "trimmed with gold" stays a colour)."""
    return node["noun"] != node["lemma"] or (node["lemma"] not in COLOUR_WORDS and bool(node["attributes"] or node["determiner"]))


def is_bare_preposition(relation: str) -> bool:
    return " ".join(str(relation).lower().split()) in BARE_PREPOSITIONS


def _holds(relation: str, subject: dict, content: dict, vocab) -> bool:
    """Whether a bare "of" joins a container to the food or drink it holds ("a plate of noodles", "two cups of hot
    beverages"; `CONTAINER_NOUNS`): not to a thing with an article ("the bowl of a toilet" is its part), nor to what
    `vocab` knows as no food ("two dishes of food and several blue arrows" read as dishes of arrows)."""
    if vocab is None or " ".join(str(relation).lower().split()) != "of" or str(subject.get("lemma") or "") not in CONTAINER_NOUNS:
        return False
    if content.get("determiner") == "the" or content.get("determiner") and not content.get("count"):
        return False
    lemma = str(content.get("lemma") or "")
    # a noun the vocabulary lacks is most often a dish or a misspelt food there ("a plate of scones", "of polents")
    return vocab.known("objects", lemma) is None or "food" in (vocab.object_kind(lemma), vocab.object_kind(lemma.rsplit(" ", 1)[-1]))


def _word_sets(vocab) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """`graph_nodes`'s colour words, object names and adjectives with `vocab`'s own."""
    colours = COLOUR_WORDS | {n for n, c in vocab.attributes.items() if c == "colour"}
    things = frozenset(vocab.objects) | frozenset(vocab.synonyms.get("objects", ()))
    adjectives = frozenset(vocab.attributes) | frozenset(vocab.synonyms.get("attributes", ()))
    return colours, things, adjectives


def graph_nodes(graph: dict, vocab=None) -> list[dict | None]:
    """The sub-graph nodes of a parsed graph's entities, as decompose makes them: None for pronouns,
    place nouns and what the caption says is absent ("no toilets"), fused colour compounds split
    (`clean_node`; `vocab`'s colour attributes count as colour words too)."""
    colours, things, adjectives = (COLOUR_WORDS, frozenset(), frozenset()) if vocab is None else vocab.derived(_word_sets)
    return [
        None if is_pronoun(e) or is_absent(e) else clean_node(object_node(e, i), colours, things, adjectives)
        for i, e in enumerate(graph["entities"])
    ]


def usable_relations(graph: dict, nodes: list[dict | None], vocab=None) -> list[dict]:
    """The relations a sub-graph can show: between two different kept nodes, not a bare
    preposition (the parser's "of" for "left of" says nothing true) but, with a `vocab`, a container's "of" (`_holds`)
    of one content: "a bowl of bananas, sprinkles, chocolate chips and marshmallows" is no bowl of marshmallows (blind
    review r21)."""
    kept = [r for r in graph["relations"]
            if r["subject"] != r["object"] and nodes[r["subject"]] is not None and nodes[r["object"]] is not None]
    held = [r for r in kept if is_bare_preposition(r["relation"]) and _holds(r["relation"], nodes[r["subject"]], nodes[r["object"]], vocab)]
    # the parser gives "a bowl of rice and a jar of oil" a jar of rice too: a content an earlier container holds is its own
    held = [r for r in held if not any(q["object"] == r["object"] and q["subject"] < r["subject"] for q in held)]
    contents = Counter(r["subject"] for r in held)
    return [r for r in kept if not is_bare_preposition(r["relation"]) or r in held and contents[r["subject"]] == 1]


def parse_has_attribute_or_relation(graph) -> bool:
    """Whether a parsed graph states any relation or attribute at all, before decompose keeps or drops
    anything: the wider base for "captions left with no graph negative" (negate's summary, texts-report)."""
    if not isinstance(graph, dict):
        return False
    entities = graph.get("entities") if isinstance(graph.get("entities"), list) else []
    return bool(graph.get("relations")) or any(isinstance(e, dict) and e.get("attributes") for e in entities)


def caption_key(graph: dict, vocab) -> str | None:
    """The key of the whole caption graph (pronouns, debris and the relations touching them left out)."""
    nodes = graph_nodes(graph, vocab)
    index = {i: k for k, i in enumerate(i for i, n in enumerate(nodes) if n is not None)}
    if not index:
        return None
    relations = [
        {"subject": index[r["subject"]], "object": index[r["object"]], "relation": r["relation"]}
        for r in usable_relations(graph, nodes, vocab)
    ]
    return canonical_key({"objects": [n for n in nodes if n is not None], "relations": relations}, vocab)


def _variants(node: dict, vocab) -> list[tuple[int, str]]:
    """(words dropped, node string) for every weaker reading of a node: its noun or a hypernym,
    with or without its count, with any subset of its attributes (capped, see
    _KEY_ATTRIBUTE_SUBSETS)."""
    from itertools import combinations

    noun, count, attributes = _node_parts(node, vocab)
    attributes = tuple(sorted(set(attributes)))
    if len(attributes) <= _KEY_ATTRIBUTE_SUBSETS:
        subsets = [c for k in range(len(attributes), -1, -1) for c in combinations(attributes, k)]
    else:
        subsets = [attributes] + [(a,) for a in attributes] + [()]
    out = []
    for n_drop, name in enumerate((noun, *vocab.broader("objects", noun))):
        for c_drop, c in enumerate((count, None) if count is not None else (None,)):
            for subset in subsets:
                out.append((min(n_drop, 1) + c_drop + len(attributes) - len(subset), _node_string(name, c, subset)))
    return out


def subgraph_keys(graph: dict, vocab, max_keys: int = MAX_KEYS) -> list[str]:
    """The keys of every sub-graph the decomposition can produce from a parsed graph, and of
    every weaker reading of one (attribute subsets, the noun's hypernyms, the count dropped, the
    relation's hypernyms): one object, or two objects and one relation; the whole caption's key
    first. When there are more than `max_keys`, those that drop the fewest words are kept (then
    graph order), so the exact sub-graphs always are."""
    nodes = graph_nodes(graph, vocab)
    ranked: dict[str, tuple[int, int]] = {}
    order = 0

    def add(key: str, dropped: int) -> None:
        nonlocal order
        if key not in ranked or dropped < ranked[key][0]:
            ranked[key] = (dropped, ranked[key][1] if key in ranked else order)
            order += 1

    whole = caption_key(graph, vocab)
    if whole is not None:
        add(whole, -1)
    variants = [None if n is None else _variants(n, vocab) for n in nodes]
    for v in variants:
        for dropped, name in v or ():
            add(name, dropped)
    for rel in usable_relations(graph, nodes, vocab):
        s, o = rel["subject"], rel["object"]
        head = _relation_head(rel["relation"], vocab)
        for r_drop, name in enumerate((head, *vocab.broader("relations", head))):
            for ds, vs in variants[s]:
                for do, vo in variants[o]:
                    add(f"{vs} >{name}> {vo}", ds + do + min(r_drop, 1))
    keys = sorted(ranked, key=lambda k: ranked[k])
    return keys[:max_keys]
