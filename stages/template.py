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
- Noun phrases: attributes in a fixed order (ATTRIBUTE_ORDER over the vocabulary's categories, a
  classifying position last: "an empty lower shelf"; the caption's order when one is unknown; adjacent
  attributes of one category or coordinated by the caption joined by "and": "a black and white shirt",
  "an empty and clean kitchen", "the dirty and ready bedroom" for "the bedroom is clean and ready";
  a number split off its compound joined again: "a large four-sided clock"), then the noun, then
  predicative-only adjectives without an attributive kin ("a door ajar", but "a sleeping bear"
  for "asleep"), a lone posture after a bare plural ("people
  lying") and participial phrases ("a girl playing a video game", not "a playing
  a video game girl"); "a"/"an" before a singular noun, the count word ("two") or nothing before
  a plural, "the" where the caption had a definite or possessive determiner (its own pronoun before a part
  its owner acts on: "a kitten pokes its paw"); a noun the caption
  used bare gets "a"/"an" too ("a man in a blue shirt" for "man in blue shirt": headline style
  drops articles, a phrase without one reads as broken); a mass noun ("water", vocab/mass_nouns.txt) never
  gets "a"/"an".
- Shapes: one object -> "{np}"; two objects and a relation -> "{np1} {relation} {np2}" (the
  paper's "{N1} {R} {N2}"; a finite or bare verb agrees with its subject, `agreeing`); more
  relations (f_rel's joins) continue with "and the {noun} {relation} {np3}"; objects outside any relation are joined with "and".
- style "plain" (default) is exactly that; "varied" wraps each positive in one of a curated set
  of frames ("a photo of ...", "there is ...") picked from (seed, id, positive), and renders its
  graph negatives in the same frame, so that a negative differs from its positive only where the
  graph does.
- Texts are deduplicated (compared lower-cased without . and ,); a negative equal to any positive
  is dropped, and one equal to an earlier negative of its own kind (graph or text).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from importlib import resources

from mosaictool.stages.negate import MEAT_ANIMALS
from mosaictool.stages.subgraph import (
    COLOUR_WORDS,
    CONTAINER_NOUNS,
    PREPOSITIONS,
    canonical_key,
    caption_key,
    indefinite_article,
    normalize_text,
    record_rng,
)

# English adjective order (opinion, size, age, shape, colour, material), the vocabulary's categories placed in it
ATTRIBUTE_ORDER = (
    "position", "quality", "taste", "emotion", "size", "age", "newness", "temperature", "state", "cooking",
    "posture", "activity", "weather", "shape", "form", "texture", "colour", "pattern", "finish", "sex", "topping", "material", "ground",
)
ATTRIBUTE_RANK = {c: i for i, c in enumerate(ATTRIBUTE_ORDER)}
# Positions that classify the noun (a kind of shelf or door, not where it is seen from; where it is used: an outdoor
# umbrella) stand next to it, after every other adjective: "an empty lower shelf", "a glass front door", "a black top
# hat", "a red outdoor umbrella" (Quirk et al. 1985, A Comprehensive Grammar of the English Language: classifying
# modifiers nearest the head; a colour before a purpose).
CLASSIFYING_POSITIONS = frozenset({
    "top", "upper", "lower", "bottom", "front", "rear", "back", "middle", "side", "inner", "outer", "center", "central",
    "outdoor", "indoor",
    # what a place or thing is for, as "outdoor" is: "a large commercial airplane", not "a commercial large airplane"
    "urban", "rural", "residential", "commercial",
})
# Adjectives used only predicatively (Quirk et al. 1985, the a- adjectives): "the elephant is alone",
# never "an alone elephant". Before the noun their attributive kin stands in ("a sleeping bear", "living
# leaves", "a lone elephant"); one without kin follows the noun ("a door ajar").
PREDICATIVE_ONLY = frozenset({
    "alone", "asleep", "awake", "afloat", "ajar", "aboard", "alive", "afraid", "ablaze", "adrift", "aloft", "awash",
    "alike", "aware", "aglow", "unaware",
})
ATTRIBUTIVE_KIN = {
    "alone": "lone", "asleep": "sleeping", "alive": "living", "afloat": "floating", "ablaze": "blazing",
    "adrift": "drifting", "aglow": "glowing", "afraid": "frightened",
}
# The second half of a number compound the parser split from its number ("four sided clock": count "four",
# attribute "sided"); written again as one adjective, "a large four-sided clock", "two-toned shoes".
NUMBER_COMPOUNDS = frozenset({
    "sided", "toned", "tone", "wheeled", "legged", "tiered", "layered", "storied", "story", "headed", "eyed",
    "engined", "winged", "handed", "seater", "door", "piece", "wheel", "tier", "layer",
})
NUMBER_WORDS = frozenset({"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "single", "double"})
STYLES = ("plain", "varied")
# Places of a game named like proper nouns take no article ("next to home plate", "at third base"; Quirk et
# al. 1985, zero article with names of places); "a home plate" reads as one of many (blind review r11).
ARTICLELESS_PLACES = frozenset({"home plate", "home base", "first base", "second base", "third base"})
# Pronouns the parser keeps as nouns ("someone holding out their hand"): they take no article ("a someone").
# The caption's own pronoun before a part its owner acts on ("pokes its paw"; with_owners): a determiner like "the".
POSSESSIVE_PRONOUNS = frozenset({"his", "her", "its", "their"})
INDEFINITE_PRONOUNS = frozenset({"someone", "somebody", "anyone", "anybody", "everyone", "everybody", "something", "nobody"})
# Words before an animal's name that make it its meat, said as a mass: "shredded chicken", "grilled salmon", not "a
# shredded chicken" (blind review r14).
# A whole roast is counted ("a roasted turkey", "a baked fish"), so roasting and baking are not among them.
PREPARED = frozenset({
    "shredded", "pulled", "chopped", "diced", "sliced", "minced", "breaded", "smoked", "barbecued", "bbq", "grilled", "fried",
    "cooked", "boiled", "seasoned", "marinated", "sauteed",
})


def prepared_meat(node: dict) -> bool:
    """Whether `node` is an animal's name said as its meat: singular, one of MEAT_ANIMALS, after a word of cooking."""
    return (not node["plural"] and " ".join(str(node["noun"]).lower().split()) in MEAT_ANIMALS
            and any(a.lower() in PREPARED for a in node["attributes"]))


@functools.cache
def mass_nouns() -> frozenset[str]:
    """Nouns COCO captions use without an article because they are uncountable (vocab/mass_nouns.txt, in
    part learned from captions by perf/mass_nouns.py): left bare ("on grass", "water", "cowboy gear")."""
    text = resources.files("mosaictool.vocab").joinpath("mass_nouns.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


# Frames for "varied"; {be} agrees with the first noun phrase.
FRAMES = ("{}", "a photo of {}", "a picture of {}", "there {be} {}", "an image of {}", "a close-up photo of {}")


def ordered_attributes(attributes: list[str], vocab) -> list[tuple[str, str]]:
    """(attribute, category) pairs in ATTRIBUTE_ORDER, caption order within a category; in the
    caption's own order when one is outside the vocabulary (a fluent writer's "faded wooden outdoor
    chair" read better than any rank we could give "outdoor"). A noun the parser read as a modifier (a
    listed object, not a listed attribute: "fruit" of "a glass fruit bowl") forms a compound with the noun
    and stands next to it, after every adjective, a material included (Quirk et al. 1985: the noun
    modifier nearest the head), whatever order the parser gave ("a fruit glass bowl": blind review r9)."""
    pairs = [(a, vocab.attributes.get(a, "")) for a in attributes]
    adjuncts = [p for p in pairs if not p[1] and vocab.known("objects", p[0]) is not None]
    if (pairs and ATTRIBUTE_RANK.get(pairs[-1][1], ATTRIBUTE_RANK["colour"]) < ATTRIBUTE_RANK["colour"]
            and vocab.known("objects", pairs[-1][0]) is not None):
        # a listed attribute of an early category that is a noun too, which the caption put next to the head, forms a
        # compound with it and keeps that place: "a black, beige and brown baby bear", not "a baby black, beige and brown
        # bear" (a material or colour noun stands last by its category: "a glass fruit bowl")
        adjuncts.append((pairs[-1][0], ""))
        pairs = pairs[:-1]
    if adjuncts:
        pairs = [p for p in pairs if p[0] not in {a for a, _ in adjuncts}]
    if len(pairs) > 1 and all(category in ATTRIBUTE_RANK for _, category in pairs):
        # an -ing word the caption put next to the noun after a classifying position forms a compound with it ("an
        # outdoor sitting area", "an indoor dining room") and keeps that place
        compound = pairs[-1] if pairs[-1][0].endswith("ing") and any(a in CLASSIFYING_POSITIONS for a, _ in pairs[:-1]) else None
        pairs.sort(key=lambda p: len(ATTRIBUTE_ORDER) + (p == compound) if p[0] in CLASSIFYING_POSITIONS or p == compound
                   else ATTRIBUTE_RANK[p[1]])  # stable
    return pairs + adjuncts


def possessive_noun(noun: str, vocab, lemma: str = "") -> str:
    """A compound of a person's or animal's noun and a body part, as the parser leaves "a young woman's head"
    ("woman head"), with its possessive again: "woman's head", "dogs' paws" (blind review r9: "the top of a
    young woman head"); any other noun as it is. The kinds are read from `lemma`'s words when it has as many
    ("women heads": "woman head")."""
    words = noun.split()
    bases = lemma.lower().split() if len(lemma.split()) == len(words) else [w.lower() for w in words]
    if len(words) < 2 or vocab.object_kind(bases[-1]) != "body" or vocab.object_kind(bases[-2]) not in ("person", "animal"):
        return noun
    owner = words[-2]
    words[-2] = f"{owner}'" if owner.endswith("s") else f"{owner}'s"
    return " ".join(words)


def participial(attribute: str) -> bool:
    """A verb phrase the parser kept as an attribute ("playing a video game"): it follows the noun."""
    first, _, rest = attribute.partition(" ")
    return bool(rest) and first.endswith("ing")


def _number_compound(node: dict) -> dict:
    """`node` with a number the parser split off a number compound joined back to its second half
    ("four" + "sided" -> "four-sided"; the number is the count, "four sided clock", or an attribute, "a two
    thick wheeled bike"), its number then that of the noun as written; else `node`."""
    spaced = [a for a in node["attributes"] if len(a.split()) == 2 and a.split()[0].lower() in NUMBER_WORDS
              and a.split()[1].lower() in NUMBER_COMPOUNDS]
    if spaced:  # kept as one attribute by the parser ("four sided"): hyphenated as written whole
        node = {**node, "attributes": ["-".join(a.split()) if a in spaced else a for a in node["attributes"]]}
    head = next((a for a in node["attributes"] if a.lower() in NUMBER_COMPOUNDS), None)
    if head is None:
        return node
    count = node.get("count")
    if isinstance(count, str) and count.lower() in NUMBER_WORDS:
        number, attributes = count, node["attributes"]
        plural = node["noun"].lower() != str(node.get("lemma", node["noun"])).lower()
    else:
        number = next((a for a in node["attributes"] if a.lower() in NUMBER_WORDS), None)
        if number is None:
            return node
        attributes, plural = [a for a in node["attributes"] if a is not number], node["plural"]
    attributes = [a for a in attributes if a is not head] + [f"{number}-{head}"]
    return {**node, "attributes": attributes, "count": None if number == count else count, "plural": plural}


def _coordinated(attr: str, category: str, previous: str | None) -> bool:
    """Whether `attr` joins the run before it with "and": adjectives of one category are coordinate ("red
    and blue", "empty and clean", "big and tall"); a classifying position never is ("an empty lower shelf")."""
    return previous is not None and attr not in CLASSIFYING_POSITIONS and bool(category) and category == previous


def noun_phrase(node: dict, vocab, definite: bool = False) -> str:
    measure = node.get("measure")
    if measure:
        # the part the caption names: "a woman holding onto a piece of pizza", not "... onto a pizza" (a text
        # of the whole says more than the caption); the whole keeps the caption's determiner or none, and its
        # count only where the part is one ("a chain of three trailers"; "the last two pieces" of pizza)
        one = measure.split()[0] in ("a", "an")
        whole = {**node, "measure": None, "count": node.get("count") if one else None}
        if not node["plural"] and node.get("determiner") not in ("the", *POSSESSIVE_PRONOUNS) and not whole["count"]:
            whole["determiner"], whole["plural"] = None, True  # bare, as "of pizza" is
        body = noun_phrase(whole, vocab)
        return f"{measure} of {body}" if not definite else f"the {measure.split()[-1]} of {body}"
    if definite:
        return f"the {possessive_noun(node['noun'], vocab, str(node.get('lemma') or ''))}"
    node = _number_compound(node)
    node = {**node, "noun": possessive_noun(node["noun"], vocab, str(node.get("lemma") or ""))}
    if not PREDICATIVE_ONLY.isdisjoint(a.lower() for a in node["attributes"]):
        node = {**node, "attributes": [ATTRIBUTIVE_KIN.get(a.lower(), a) for a in node["attributes"]]}
    # a posture before a bare plural reads as a verb starting the text ("lying people"): it follows the noun
    # ("people lying") when it is the only participle there and no -ing relation follows ("standing cattle
    # grazing in a field", not "cattle standing grazing": render_graph marks such a subject `posture_first`)
    postures = [a for a in node["attributes"] if vocab.attributes.get(a) == "posture" and a.endswith("ing")]
    bare_plural = node["plural"] and not node.get("count") and node.get("determiner") not in ("the", *POSSESSIVE_PRONOUNS)
    # and after another participle before the noun ("a smiling man sitting", not "a smiling sitting man": blind review r25)
    other_ing = any(a.lower().endswith("ing") and a not in postures and vocab.attributes.get(a) for a in node["attributes"])
    posture_after = ((bare_plural or other_ing) and len(postures) == 1 and not node.get("posture_first")
                     and not any(map(participial, node["attributes"])))

    trailing = node.get("trailing") or ()

    def follows(a: str) -> bool:
        return participial(a) or a.lower() in PREDICATIVE_ONLY or (posture_after and a in postures) or a in trailing

    after = [a for a in node["attributes"] if follows(a)]
    # a word of the noun read as its modifier too ("a red and grey fire hydrant" gave "hydrant"): said once
    noun_words = set(node["noun"].lower().split())
    attributes = [a for a in node["attributes"] if not follows(a) and a.lower() not in noun_words]
    if not attributes:
        body = node["noun"]
    elif len(attributes) == 1:
        body = f"{attributes[0]} {node['noun']}"
    else:
        # coordinate adjectives are one list: "red and blue", "red, white and blue" (r7: "red and orange and blue");
        # two the caption coordinated stay so when they stand together ("clean and ready": "the dirty and ready bedroom")
        listed = node["attributes"]
        joined = {(listed[i], listed[i + 1]) for i in node.get("joined") or () if i + 1 < len(listed)}
        runs: list[list[str]] = []
        previous = None
        for attr, category in ordered_attributes(attributes, vocab):
            if _coordinated(attr, category, previous) or (runs and (runs[-1][-1], attr) in joined):
                runs[-1].append(attr)
            else:
                runs.append([attr])
                previous = category or None
        words = [run[0] if len(run) == 1 else f"{', '.join(run[:-1])} and {run[-1]}" for run in runs]
        body = " ".join([*words, node["noun"]])
    if after:
        body = " ".join([body, *after])
    return _determined(node, body)


def _determined(node: dict, body: str) -> str:
    """`body` after its count, "the", "a"/"an" or nothing, as `node` says."""
    if node.get("count"):
        # "a few cows" is some cows, "few cows" hardly any: the caption's "a" stays (blind review r11: "few stores")
        if str(node["count"]).lower() == "few" and node.get("determiner") in ("a", "an"):
            return f"a few {body}"
        return f"{node['count']} {body}"
    if node.get("determiner") in ("the", *POSSESSIVE_PRONOUNS):
        return f"{node['determiner']} {body}"
    noun = node["noun"].lower()
    if body.lower() in ARTICLELESS_PLACES or node.get("name") or node.get("bare"):
        return body
    # "the" was handled above: "some water" -> "water"; a compound takes its last word's count ("cowboy gear")
    if (node["plural"] or noun in mass_nouns() or noun.rsplit(" ", 1)[-1] in mass_nouns() or noun in INDEFINITE_PRONOUNS
            or prepared_meat(node)):
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
        key = (node["noun"], tuple(node["attributes"]), count, node.get("determiner"), node["plural"], node.get("posture_first"),
               node.get("joined"), node.get("measure"), node.get("trailing"), node.get("name"), node.get("bare"))
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
        if len(stem) == 2 and stem.endswith("y"):
            bases.add(stem[0] + "ie")  # "lying" -> "lie", "tying" -> "tie" ("a luggage bag lie": blind review r11)
    return frozenset(bases)


def third_person(verb: str) -> str:
    """'stand' -> 'stands', 'punch' -> 'punches', 'fly' -> 'flies', 'go' -> 'goes'."""
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(verb) > 1 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


# Words a one-word relation is when it is no verb: prepositions and the adverbs read as relations.
NOT_VERBS = PREPOSITIONS | frozenset({
    "next", "close", "far", "nearby", "home", "back", "upside", "round", "amidst", "per", "unlike", "without", "here",
    "there", "while", "though", "although", "and", "or", "then",
})
# Participles that end in neither -ed nor -en: "made of", "held by", "cut into" stay as they are.
IRREGULAR_PARTICIPLES = frozenset({
    "made", "built", "held", "hung", "left", "set", "put", "lit", "laid", "stuck", "caught", "bound", "found", "led", "fed",
    "kept", "sold", "told", "brought", "bought", "taught", "sat", "stood", "spun", "dug", "cut", "hit", "split", "shut",
    "spread", "shot", "torn", "worn", "drawn", "grown", "thrown", "shown", "sewn", "blown", "flown", "known", "mown", "won",
    "slung", "strung", "swung", "wound", "dressed", "clad", "overgrown",
})


def bare_verb(relation: str) -> bool:
    """Whether a one-word relation is a verb's bare form, as the parser keeps an infinitive complement
    ("running to get his kite" -> "get", "pretending to punch" -> "punch"): no preposition, participle,
    colour or finite form ("holds", "has")."""
    word = relation.lower()
    return (
        word.isalpha() and len(word) > 1 and word not in NOT_VERBS and word not in IRREGULAR_PARTICIPLES and word not in COLOUR_WORDS
        and word not in SINGULAR_TO_PLURAL and word not in PLURAL_TO_SINGULAR
        and not word.endswith(("ing", "ed", "en")) and (not word.endswith("s") or word.endswith("ss"))
    )


def agreeing(relation: str, plural: bool, verbs: frozenset[str] = frozenset(), nouns=frozenset()) -> str:
    """`relation` with its first word in the subject's number, when that word is a finite "has", "is", "was"
    or "does" (or their plurals), after a plural subject the third person of a verb of `verbs` ("sits" ->
    "sit"), or, after a singular subject, a bare verb of `verbs` or a one-word
    relation that is a bare verb (`bare_verb`) and none of `nouns` (a noun read as the relation, "a man
    train tracks", is left alone): a relation copied from a plural or compound subject ("a
    horse and a dog stand in a meadow") read "a dog stand in a meadow" (r7), an infinitive "a woman
    punch a giraffe sculpture" (r8); any other relation as it is."""
    first, sep, rest = relation.partition(" ")
    form = (SINGULAR_TO_PLURAL if plural else PLURAL_TO_SINGULAR).get(first.lower())
    if not form and plural and verbs:
        # a caption's "the remains of a piece of cake sits on a plate" agrees with the cake: the text's
        # subject is the plural "the remains", which takes "sit" (blind review r12: "the remains sits")
        form = _bases_of_third_person(verbs).get(first.lower())
    if not form and not plural and (first.lower() in verbs or (not sep and bare_verb(first) and first.lower() not in nouns)):
        form = third_person(first)
    return f"{form}{sep}{rest}" if form else relation


@functools.lru_cache(maxsize=8)
def _bases_of_third_person(verbs: frozenset[str]) -> dict[str, str]:
    """{"sits": "sit", ...}: the third person singular of each of `verbs` to its bare form."""
    return {third_person(v): v for v in sorted(verbs)}


def verb_bases(vocab) -> frozenset[str]:
    """_verb_bases of `vocab`'s relations, computed once per vocabulary and kept with it."""
    return vocab.derived(_relation_verb_bases)


def _relation_verb_bases(vocab) -> frozenset[str]:
    return _verb_bases(vocab.relations)


def render_graph(graph: dict, vocab, phrases: _Phrases | None = None) -> str:
    """One sentence for a sub-graph of any shape."""
    objects, relations = graph["objects"], graph["relations"]
    phrase = phrases or (lambda node: noun_phrase(node, vocab))
    if not relations and len(objects) == 1:
        return _SPLIT_HYPHEN.sub("-", phrase(objects[0]))
    mentioned: set[int] = set()
    verbs = verb_bases(vocab)
    parts = []
    for rel in relations:
        s, o = rel["subject"], rel["object"]
        verb_follows = rel["relation"].split(" ", 1)[0].endswith("ing")
        subject_node = {**objects[s], "posture_first": verb_follows}
        if subject_node.get("trailing"):
            # before its relation a clause's verb reads as a second verb ("a woman watching holding a bat", "a
            # man balancing tilts a skateboard", "the guest enjoying on the bike"): the relation is said alone
            subject_node["attributes"] = [a for a in subject_node["attributes"] if a not in subject_node["trailing"]]
        if verb_follows and any(_begins(rel["relation"], a) for a in subject_node["attributes"]):
            # the verb of a relative clause read as the subject's attribute too ("containers that the truck is
            # pulling": "the pulling truck pulling three containers", review r9): said once, by the relation
            subject_node["attributes"] = [a for a in subject_node["attributes"] if not _begins(rel["relation"], a)]
        subject = f"the {objects[s]['noun']}" if s in mentioned else phrase(subject_node)
        mentioned.add(s)
        obj = f"the {objects[o]['noun']}" if o in mentioned else phrase(objects[o])
        mentioned.add(o)
        relation = _purpose(subject_node, agreeing(rel["relation"], bool(objects[s]["plural"]), verbs, vocab.objects), vocab.objects)
        parts.append(f"{subject} {relation} {obj} {rel['place']}" if rel.get("place") else f"{subject} {relation} {obj}")
    parts.extend(phrase(objects[i]) for i in range(len(objects)) if i not in mentioned)
    return _SPLIT_HYPHEN.sub("-", " and ".join(parts))


# A hyphenated word the tokenizer split before its hyphen ("multi -colored", blind review r11) is one word again
_SPLIT_HYPHEN = re.compile(r"(?<=\w) -(?=\w)")


def _purpose(subject: dict, relation: str, nouns=frozenset()) -> str:
    """`relation` with the "to" of purpose its bare verb lost, when the subject's phrase ends in a participle:
    "giraffes leaning down to drink at a watering hole", not "... leaning down drink at" (blind review r11);
    after a singular subject the verb agrees instead ("a giraffe leaning down drinks at")."""
    first, sep, _ = relation.partition(" ")
    if (subject.get("plural") and bare_verb(first) and (sep or first.lower() not in nouns)  # a one-word noun: "train" (agreeing)
            and any(participial(a) for a in subject["attributes"])):
        return f"to {relation}"
    return relation


def _begins(relation: str, attribute: str) -> bool:
    """Whether participle `attribute` is how `relation` begins ("pulling", "standing away" of "standing away from")."""
    relation, attribute = relation.lower(), attribute.lower()
    return attribute.split(" ", 1)[0].endswith("ing") and (relation == attribute or relation.startswith(attribute + " "))


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


def caption_joins(record: dict) -> dict[int, tuple[int, tuple[int, ...]]]:
    """For each entity, its number of attributes and the positions i of those the caption coordinates with
    the next one ("the bedroom is clean and ready": (2, (0,))), from its sub-graphs' objects and the caption."""
    caption = " ".join(str(record.get("caption") or "").lower().replace(",", " ").split())
    joins: dict[int, tuple[int, tuple[int, ...]]] = {}
    for sg in record.get("subgraphs") or []:
        for obj in sg.get("objects") or []:
            attributes, entity = obj.get("attributes") or [], obj.get("entity")
            if entity is None or entity in joins or len(attributes) < 2:
                continue
            found = tuple(i for i in range(len(attributes) - 1) if f" {attributes[i]} and {attributes[i + 1]} ".lower() in f" {caption} ")
            if found:
                joins[entity] = (len(attributes), found)
    return joins


def with_joins(graph: dict, joins: dict[int, tuple[int, tuple[int, ...]]]) -> dict:
    """`graph` with each object the caption coordinated attributes of marked `joined`, when it still has as
    many attributes (a replaced one keeps its place: "clean and ready" -> "dirty and ready")."""
    if not joins:
        return graph
    objects = []
    for obj in graph["objects"]:
        count, found = joins.get(obj.get("entity"), (0, ()))
        if found and len(obj["attributes"]) == count:
            obj = {**obj, "joined": found}
        objects.append(obj)
    return {**graph, "objects": objects}


def clause_attributes(record: dict, vocab) -> dict[int, tuple[frozenset[str], frozenset[str]]]:
    """For each entity, the attributes that are no bare adjective before its noun: (complemented, trailing).
    Complemented: an adjective whose complement is a relation of the entity ("a rack full of doughnuts": "full"
    with "full of"), which before the noun repeats it or dangles ("a full rack full of doughnuts", "a big full
    grassy field"; blind review r11). Trailing: an -ing word outside the entity's noun phrase that the
    vocabulary does not list as an attribute, the verb of a clause ("while a woman watches"): it follows the
    noun ("a woman watching"), as in the caption, not before it ("a watching woman")."""
    graph = record.get("graph")
    if not isinstance(graph, dict) or not isinstance(graph.get("entities"), list):
        return {}
    heads: dict[int, set[str]] = {}
    for rel in graph.get("relations") or []:
        words = str(rel.get("relation") or "").lower().split()
        if len(words) > 1 and words[-1] in PREPOSITIONS:
            heads.setdefault(rel.get("subject"), set()).add(words[0])
    marks = {}
    for k, ent in enumerate(graph["entities"]):
        if not isinstance(ent, dict):
            continue
        attributes = [a for a in ent.get("attributes") or [] if isinstance(a, str)]
        span = set(str(ent.get("span") or "").lower().split())
        # participles are the verbs' (render_graph says a relation's once; "a parked car" reads well alone)
        complemented = frozenset(a for a in attributes if a.lower() in heads.get(k, ()) and not a.lower().endswith(("ing", "ed")))
        trailing = frozenset(a for a in attributes if " " not in a and a.lower().endswith("ing") and a.lower() not in span
                             and a.lower() not in vocab.attributes)
        if complemented or trailing:
            marks[k] = (complemented, trailing)
    return marks


def with_clause_attributes(graph: dict, marks: dict[int, tuple[frozenset[str], frozenset[str]]], positive: dict | None = None) -> dict:
    """`graph` without its objects' complemented attributes and with their trailing ones marked (clause_attributes);
    an object a negative replaced stands where its `positive`'s did, and keeps that one's entity's marks."""
    if not marks:
        return graph
    objects = []
    for obj, entity in zip(graph["objects"], _entities(graph, positive)):
        complemented, trailing = marks.get(entity, ((), ()))
        if complemented or trailing:
            attributes = [a for a in obj["attributes"] if a not in complemented]
            obj = {**obj, "attributes": attributes}
            if any(a in trailing for a in attributes):
                obj["trailing"] = tuple(sorted(a for a in attributes if a in trailing))
        objects.append(obj)
    return {**graph, "objects": objects}


def participle_adverbs(record: dict, vocab) -> dict[int, dict[str, str]]:
    """For each entity, its participle attributes the caption says after an adverb in -ly, with that adverb ("A
    professionally dressed man", "a neatly made bed"): without it the participle says next to nothing ("a dressed
    woman poses for the camera": blind review r25). An adverb the vocabulary lists as an attribute ("friendly") is none."""
    graph = record.get("graph")
    if not isinstance(graph, dict) or not isinstance(graph.get("entities"), list):
        return {}
    found: dict[int, dict[str, str]] = {}
    for k, ent in enumerate(graph["entities"]):
        if not isinstance(ent, dict):
            continue
        words = str(ent.get("span") or "").split()
        attributes = {str(a) for a in ent.get("attributes") or []}
        for adverb, word in zip(words, words[1:]):
            if (adverb.lower().endswith("ly") and word in attributes and adverb not in attributes
                    and vocab.attributes.get(adverb.lower()) is None and word.lower().endswith(PARTICIPLE_ENDS)):
                found.setdefault(k, {})[word] = adverb.lower()
    return found


PARTICIPLE_ENDS = ("ed", "en", "made")


def with_adverbs(graph: dict, adverbs: dict[int, dict[str, str]], positive: dict | None = None) -> dict:
    """`graph` with each participle attribute of the caption's after its adverb (`participle_adverbs`), an object a
    negative replaced keeping its place's ("a professionally dressed woman poses ..."); a replaced attribute has none."""
    if not adverbs:
        return graph
    objects = []
    for obj, entity in zip(graph["objects"], _entities(graph, positive)):
        said = adverbs.get(entity)
        if said and any(a in said for a in obj["attributes"]):
            obj = {**obj, "attributes": [f"{said[a]} {a}" if a in said else a for a in obj["attributes"]]}
        objects.append(obj)
    return {**graph, "objects": objects}


def _entities(graph: dict, positive: dict | None) -> list:
    """The caption entity of each of `graph`'s objects; one a negative replaced has that of the object of `positive`
    whose place it took (None where there is none)."""
    before = (positive or {}).get("objects") or []
    return [obj.get("entity") if obj.get("entity") is not None or i >= len(before) else before[i].get("entity")
            for i, obj in enumerate(graph["objects"])]



def owned_parts(record: dict) -> dict[int, tuple[str, int]]:
    """For each entity the caption writes with a possessive pronoun and reads as a part "of" another entity
    ("a kitten pokes its paw": paw of kitten), (the pronoun, the owner's entity)."""
    graph = record.get("graph")
    if not isinstance(graph, dict) or not isinstance(graph.get("entities"), list):
        return {}
    owner_of = {rel.get("subject"): rel.get("object") for rel in graph.get("relations") or [] if rel.get("relation") == "of"}
    parts = {}
    for k, ent in enumerate(graph["entities"]):
        words = str(ent.get("span") or "").lower().split() if isinstance(ent, dict) else []
        if words and words[0] in POSSESSIVE_PRONOUNS and isinstance(owner_of.get(k), int):
            parts[k] = (words[0], owner_of[k])
    return parts


# Words before a food noun that make it an ingredient or topping, said as a mass ("a pizza with Canadian bacon and
# pineapple", "a plate of rice and chicken").
# "food that includes chicken, beans and a pickle", "a toddler eats cake": a verb of containing or eating names its food
# as such (a mass), "a chicken" and "a cake" being whole ones.
CONTAINING_CUES = frozenset({"includes", "include", "including", "contains", "contain", "containing", "eat", "eats", "eating", "ate",
                             "feed", "feeds", "feeding"})
INGREDIENT_CUES = frozenset({"with", "and", ",", "&", "of"}) | CONTAINING_CUES
# Of them, those after which an animal's name is its meat ("a plate of chicken and rice", "noodles with shrimp"); "a cat
# and chicken" may be a live one.
MEAT_CUES = frozenset({"with", "of"}) | CONTAINING_CUES
# Words that determine the noun phrase they begin ("her date", "there wedding cake" for "their"), which the parser
# does not always mark as the noun's determiner.
DETERMINER_WORDS = frozenset({"a", "an", "the", "this", "that", "these", "those", "my", "your", "our", "there", "some", "any",
                              "each", "every", "another"}) | POSSESSIVE_PRONOUNS


def bare_foods(record: dict, vocab) -> frozenset[int]:
    """The entities that are a food the caption writes bare, singular, as an ingredient (after "with", "of", "and" or a
    comma), in a caption that puts articles before its other nouns: "a pizza with Canadian bacon and pineapple" means
    pineapple as a topping, and "a pizza with a pineapple" a whole fruit (blind review r13); an animal's name that is
    meat (MEAT_ANIMALS) only after "of" or "with" ("a plate of chicken and rice"); a material after a preposition
    ("behind glass", "on white paper"). Headline-style captions,
    which drop every article ("man eating banana"), get theirs (`noun_phrase`)."""
    graph = record.get("graph")
    # the caption's own words: negate consumes parse's tokens, so the records reaching template carry none
    words = _WORD.findall(str(record.get("caption") or "").lower())
    if not isinstance(graph, dict) or not isinstance(graph.get("entities"), list) or not {"a", "an", "the"} & set(words):
        return frozenset()
    found = set()
    for k, ent in enumerate(graph["entities"]):
        cue = _word_before(words, _WORD.findall(str(ent.get("span") or "").lower())) if isinstance(ent, dict) else None
        head, lemma = str(ent.get("head") or "").lower(), str(ent.get("lemma_head") or "").lower()
        # a material said bare after a preposition is the stuff, not a thing made of it ("displayed behind glass": "a
        # glass behind a married couple" reads as a drinking glass; blind review r24)
        # (after a comma it is one of a list of things: "a plate, wine-filled glass, and bread")
        stuff = vocab.attributes.get(lemma) == "material" and cue in PLACE_WORDS | {"of", "with", "and"}
        if cue not in INGREDIENT_CUES and not stuff:
            continue
        first = str(ent.get("span") or "").lower().split()[:1]
        determined = any(m.get("dep") in ("det", "poss", "nummod") for m in ent.get("modifiers") or [] if isinstance(m, dict)) or (
            first and (first[0] in DETERMINER_WORDS or first[0] in NUMBER_WORDS or first[0].isdigit()))
        food = vocab.object_kind(lemma) == "food" or (lemma in MEAT_ANIMALS and cue in MEAT_CUES) or stuff
        if head and head == lemma and not determined and food:
            found.add(k)
    return frozenset(found)


def with_bare_foods(graph: dict, foods: frozenset[int], positive: dict | None = None) -> dict:
    """`graph` with the caption's own bare foods (`bare_foods`) marked `bare`, to be said without an article; a noun a
    negative put in their place is not the caption's and gets one ("a pizza with a plate")."""
    if not foods:
        return graph
    objects = [{**obj, "bare": True} if entity in foods and obj.get("entity") is not None and not obj["plural"] and not obj.get("count")
               else obj for obj, entity in zip(graph["objects"], _entities(graph, positive))]
    return {**graph, "objects": objects}


def with_bare_contents(graph: dict) -> dict:
    """`graph` with a container's singular content that has no article or count ("a glass of juice", "a tray of rice";
    `subgraph.CONTAINER_NOUNS`) marked `bare`, as a container's content is said: "a glass of cola", not "a glass of a
    cola"."""
    objects = list(graph["objects"])
    for rel in graph.get("relations") or []:
        o = rel["object"]
        if (" ".join(str(rel["relation"]).lower().split()) == "of" and str(objects[rel["subject"]]["lemma"]).lower() in CONTAINER_NOUNS
                and not objects[o]["plural"] and not objects[o].get("count") and not objects[o].get("determiner")):
            objects[o] = {**objects[o], "bare": True}
    return {**graph, "objects": objects}


def _same_sex(node: dict, caption_node: dict | None, vocab) -> bool:
    """Whether `node` is the caption's own noun (not a replacement) with the caption's sex attributes, if any."""
    if node.get("entity") is None:
        return False
    if caption_node is None:
        return True
    sexes = [{a for a in n["attributes"] if vocab.attributes.get(a.lower()) == "sex"} for n in (node, caption_node)]
    return node["noun"] == caption_node["noun"] and sexes[0] == sexes[1]


def _own(node: dict, caption_node: dict | None) -> bool:
    """Whether `node` is the caption's own noun, not a replacement (nor the replaced positive's other noun)."""
    return node.get("entity") is not None and (caption_node is None or node["noun"] == caption_node["noun"])


def orphaned_part(graph: dict, parts: dict[int, tuple[str, int]], vocab, positive: dict | None = None) -> bool:
    """Whether `graph` (after `with_owners`) says a body part the caption gives an owner by a possessive pronoun
    without that pronoun and without its owner, the caption's own noun, at the relation's other end: "A child places his
    hands on ... while another sheep looks at his face" -> "a cow looks at the face" (whose face? blind review r14)."""
    if not parts:
        return False
    entities = _entities(graph, positive)
    before = (positive or {}).get("objects") or []
    objects = graph["objects"]
    for i, obj in enumerate(objects):
        owned = parts.get(entities[i])
        if owned is None or obj.get("determiner") in POSSESSIVE_PRONOUNS or vocab.object_kind(obj["lemma"]) != "body":
            continue
        ends = [rel["subject"] if rel["object"] == i else rel["object"]
                for rel in graph["relations"] if i in (rel["subject"], rel["object"])]
        if not any(entities[k] == owned[1] and _own(objects[k], before[k] if k < len(before) else None) for k in ends):
            return True
    return False


def with_owners(graph: dict, parts: dict[int, tuple[str, int]], vocab, positive: dict | None = None) -> dict:
    """`graph` with each part its owner acts on said with the caption's pronoun: "a white and gray kitten pokes its
    paw", not "... pokes the paw" (blind review r11). The part must be the caption's own or another body part in its
    place (a replaced one is any thing: "swings the sloth"); "his" and "her" only while the owner is the caption's noun of the caption's sex
    (a "female tennis player holding his racket" would misread), "its" and "their" after any owner in its place."""
    if not parts:
        return graph
    entities = _entities(graph, positive)
    before = (positive or {}).get("objects") or []
    objects = list(graph["objects"])
    for rel in graph["relations"]:
        s, o = rel["subject"], rel["object"]
        # a part replaced by another part of the same owner keeps the pronoun ("man brushing his teeth" -> "a man brushing
        # his hair", not "the hair": whose?); any other thing in its place takes none ("swings the sloth")
        replaced = objects[o].get("entity") is None and vocab.object_kind(objects[o]["lemma"]) == "body"
        pronoun, owner = parts.get(objects[o].get("entity") if not replaced else entities[o], (None, None))
        if pronoun is None or entities[s] != owner or objects[o].get("determiner") != "the" or objects[o].get("count"):
            continue
        if pronoun in ("his", "her") and not _same_sex(objects[s], before[s] if s < len(before) else None, vocab):
            continue
        # "their" after a singular only where it is the caption's own person ("a couple cleaning their teeth", "a child
        # brushing their teeth"), not a thing ("a decorated cake awaits their guests": the guests are the hosts')
        person = vocab.object_kind(objects[s]["lemma"]) == "person" or objects[s]["lemma"].lower() in INDEFINITE_PRONOUNS
        if pronoun == "their" and not (objects[s]["plural"] or person and _own(objects[s], before[s] if s < len(before) else None)):
            continue
        if pronoun == "its" and objects[s]["plural"]:
            continue
        objects[o] = {**objects[o], "determiner": pronoun}
    return {**graph, "objects": objects}


# A relation of having whose object the caption places on or in the subject ("a brown vase has four black horses on it"):
# without the place the text says the vase owns horses (blind review r14).
HAVING = frozenset({"has", "have"})
PLACE_WORDS = frozenset({
    "on", "in", "at", "under", "underneath", "beneath", "inside", "outside", "near", "beside", "next", "behind", "above", "below",
    "over", "by", "against", "along", "across", "around", "atop",
})


_WORD = re.compile(r"[\w']+|[^\w\s]")
# Words after an object that begin another phrase than its own: "has a sink and a tub in it", "a dog that is on a bed"
CLAUSE_WORDS = frozenset({"and", "or", "but", "that", "which", "who", "while", "with", ",", "."})


def _word_before(words: list[str], span: list[str]) -> str | None:
    """The word before the first place `span` stands in `words` (None where it does not, or begins them)."""
    n = len(span)
    first = next((i for i in range(len(words) - n + 1) if n and words[i:i + n] == span), 0)
    return words[first - 1] if first else None


def _words_after(words: list[str], span: list[str]) -> list[str]:
    """The two words after the first place `span` stands in `words` (none where it does not)."""
    n = len(span)
    return next((words[i + n:i + n + 2] for i in range(len(words) - n + 1) if n and words[i:i + n] == span), [])


def had_places(record: dict) -> tuple[dict[tuple[int, int], str], frozenset[tuple[int, int]]]:
    """The caption's relations of having (`HAVING`) by (subject entity, object entity) whose object a place phrase follows:
    {pair: preposition} where it is "on it", "in them" and the like, said after the object (`with_places`), and the pairs
    whose object has a place of its own ("a white bathroom that has a black garbage bag on the floor"), which a text of
    the relation alone would drop ("a black bathroom has white garbage": blind review r14)."""
    graph = record.get("graph")
    if not isinstance(graph, dict) or not isinstance(graph.get("entities"), list):
        return {}, frozenset()
    # the caption's own words: the records reaching template keep no tokens
    words = _WORD.findall(str(record.get("caption") or "").lower())
    kept, placed = {}, set()
    for rel in graph.get("relations") or []:
        s, o = rel.get("subject"), rel.get("object")
        if str(rel.get("relation") or "").lower() not in HAVING or not isinstance(o, int) or not 0 <= o < len(graph["entities"]):
            continue
        after = _words_after(words, _WORD.findall(str((graph["entities"][o] or {}).get("span") or "").lower()))
        if after[1:] and after[0] in ("on", "in") and after[1] in ("it", "them"):
            kept[s, o] = after[0]
        elif after and (after[0] in PLACE_WORDS or after[0] not in CLAUSE_WORDS and after[1:] and after[1] in PLACE_WORDS):
            # "a black garbage back on the floor", "a cat sitting on the sofa": a place of the object's own
            placed.add((s, o))
    return kept, frozenset(placed)


def with_places(graph: dict, kept: dict[tuple[int, int], str], positive: dict | None = None) -> dict:
    """`graph` with each relation of having the caption follows by "on it" (`had_places`) saying it, "it" or "them" by
    the subject's number: "a black vase has four brown horses on it"."""
    if not kept:
        return graph
    entities = _entities(graph, positive)
    relations = []
    for rel in graph["relations"]:
        preposition = kept.get((entities[rel["subject"]], entities[rel["object"]]))
        if preposition and rel["relation"].lower() in HAVING:
            rel = {**rel, "place": f"{preposition} {'them' if graph['objects'][rel['subject']]['plural'] else 'it'}"}
        relations.append(rel)
    return {**graph, "relations": relations}


def _place_dropped(graph: dict, placed: frozenset[tuple[int, int]], positive: dict | None = None) -> bool:
    """Whether `graph` has a relation of having whose object has a place of its own in the caption (`had_places`)."""
    if not placed:
        return False
    entities = _entities(graph, positive)
    return any(rel["relation"].lower() in HAVING and (entities[rel["subject"]], entities[rel["object"]]) in placed
               for rel in graph["relations"])


def quoted_entities(record: dict) -> frozenset[int]:
    """The entities the caption follows with the words they name in quotes ("A sign with the word "Pub" hangs ..."):
    without them the noun says nothing ("a binder with the word": blind review r25)."""
    graph = record.get("graph")
    caption = str(record.get("caption") or "").lower()
    if not isinstance(graph, dict) or not isinstance(graph.get("entities"), list) or not QUOTES.intersection(caption):
        return frozenset()
    found = set()
    for k, ent in enumerate(graph["entities"]):
        span = str(ent.get("span") or "").lower() if isinstance(ent, dict) else ""
        if span and re.search(rf"\b{re.escape(span)}\s*[{''.join(QUOTES)}]", caption):
            found.add(k)
    return frozenset(found)


QUOTES = frozenset('"\u201c\u201d')


def record_shaping(record: dict, vocab):
    """(shaped, broken) for one record: `shaped(graph, positive)` is a sub-graph or negative graph as the caption's words
    have it said (joins, clause attributes, bare foods and contents, places, owners' pronouns, participles' adverbs);
    `broken(graph, positive)`, of a shaped negative graph, whether it drops what the caption's words need (a part's
    owner, an object's place, the words quoted after a noun), so that it is rendered as nothing. negate asks `broken`
    too, to draw another negative in place of one never shown."""
    joins = caption_joins(record)
    marks = clause_attributes(record, vocab)
    parts = owned_parts(record)
    foods = bare_foods(record, vocab)
    kept, placed = had_places(record)
    quoted = quoted_entities(record)
    adverbs = participle_adverbs(record, vocab)

    def shaped(graph: dict, positive: dict | None = None) -> dict:
        graph = with_places(with_bare_contents(with_bare_foods(graph, foods, positive)), kept, positive)
        graph = with_owners(with_clause_attributes(with_joins(graph, joins), marks, positive), parts, vocab, positive)
        return with_adverbs(graph, adverbs, positive)

    def broken(graph: dict, positive: dict | None = None) -> bool:
        return (orphaned_part(graph, parts, vocab, positive) or _place_dropped(graph, placed, positive)
                or bool(quoted.intersection(_entities(graph, positive))))
    return shaped, broken


def template_record(record: dict, vocab, *, style: str = "plain", seed: int = 0, phrases: _Phrases | None = None) -> dict:
    phrases = phrases or _Phrases(vocab)
    shaped, broken = record_shaping(record, vocab)
    positives, norms = [], {}
    position_of: dict[int, int] = {}  # subgraph index -> index in positives
    frames: dict[int, str] = {}
    varied = style == "varied"
    for i, sg in enumerate(record["subgraphs"]):
        if sg.get("kind") == "caption":
            text = sg["text"].strip()
        elif varied:
            frame = frames[i] = record_rng(seed, record["id"], f"template:{i}").choice(FRAMES)
            text = frame_text(frame, render_graph(shaped(sg), vocab, phrases), _first_plural(sg))
        else:
            text = render_graph(shaped(sg), vocab, phrases)
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
            positive = record["subgraphs"][index] if isinstance(index, int) and 0 <= index < len(record["subgraphs"]) else None
            graph = shaped(graph, positive)
            # a negative that drops what the caption's words need (a part's owner, an object's place) reads as broken: none
            text = "" if broken(graph, positive) else render_graph(graph, vocab, phrases)
            if index in frames and text:  # "varied": the positive's frame
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
