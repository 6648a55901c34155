"""The vocabularies the graph stages draw from: objects N, attributes A, relations R (MosaiCLIP
App. B), antonym pairs, and irregular plurals.

A vocabulary is a folder of tab-separated files, each with a header line:

    objects.tsv      name  group     [count]   group = co-hyponym class (mammal, vehicle, shape, ...)
    attributes.tsv   name  category  [count] [applies_to]
                                               category = colour, size, material, texture, state, ...;
                                               applies_to: object kinds (groups.tsv) it can describe,
                                               comma-separated, "*" for any (blank: its category's)
    relations.tsv    name  type      [count] [symmetric]
                                               type = spatial, action, possessive, comparative;
                                               symmetric "yes": "A r B" means "B r A" ("next to"); or
                                               the object kinds both ends must be of ("playing with":
                                               person,animal: "a man playing with a dog", not "a dog
                                               playing with a frisbee")
    categories.tsv   category  exclusive  applies_to  [basic_only]   (attribute categories and relation types)
                                               optional; exclusive "yes": two members cannot both hold
                                               ("red", "blue"), so any member contradicts another; "no":
                                               only an antonym does ("big" / "small"; "large" ->
                                               "massive" would not be false); basic_only "yes": only
                                               members without a hypernym replace ("blue" for "maroon",
                                               never "crimson"); an attribute whose applies_to is
                                               "none" is never drawn and only an antonym replaces it
    groups.tsv       group  kind               optional; object group -> kind (person, animal, food,
                                               plant, place, body, thing) that applies_to names
    object_attributes.tsv  object attribute count   optional; co-occurrences (`vocab build`)
    relation_triples.tsv   subject relation object count   optional; co-occurrences (`vocab build`)
    antonyms.tsv     a     b                   optional; symmetric pairs of any of the three kinds
    plurals.tsv      singular  plural          optional; irregular plurals (the shipped list if absent)
    synonyms.tsv     kind  name  head          optional; `name` means the same as `head` (kind: objects,
                                               attributes or relations); a head stands for its group
    hypernyms.tsv    kind  name  hypernym      optional; `hypernym` is true of every `name` ("star" ->
                                               "shape"), transitively
    parts.tsv        part  whole               optional; objects: `part` is part of `whole` or found in it
                                               ("wall" - "home", "floor" - "attic"): neither replaces the other
    overlaps.tsv     name  other  relation     optional; objects one may name the other by WordNet (`vocab wordnet`):
                                               relation "synonym" (a shared sense: "bun" - "roll") or "kind"
                                               (`name` is a kind of `other`: "desk" - "table"); neither replaces
                                               the other, and unlike hypernyms.tsv they stay out of heads and keys

Synonym groups and hypernyms keep negatives false: `negate` never replaces a word by one of its own
group, its hypernyms or its hyponyms (`Vocab.unsafe`), and canonical sub-graph keys name a word by
its group's head (`Vocab.head`), so that equal meaning gives equal keys.

Categories and kinds keep a replacement a contradiction rather than a guess: "brand new" is no
age of a person, "burgundy" no colour of a dog. Co-occurrence counts say what a corpus shows
together (`attribute_count`, `relation_count`): `negate` prefers replacements seen with the object
("a brown dog" -> "a black dog"), as Visual Genome's statistics would (MosaiCLIP App. B draws its
sets N, A, R from VG).

Names are lower-case; relations are written as they read between two noun phrases ("next to",
"sitting on"). This folder holds the default vocabulary, written for mosaictool; its overlaps.tsv is derived from
WordNet 3.0 (Princeton University; Fellbaum, 1998) by `mosaictool vocab wordnet`:
`load()` reads it, `load(path)` a user's (from `mosaictool vocab build` or `vocab import-vg`).
"""

from __future__ import annotations

import csv
import functools
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mosaictool.errors import MosaicError

DEFAULT_DIR = Path(__file__).resolve().parent
UNKNOWN = "other"  # group / category / type of a name whose kind is not known

_KINDS = (("objects", "group"), ("attributes", "category"), ("relations", "type"))
OVERLAP_RELATIONS = ("synonym", "kind")  # overlaps.tsv: a shared WordNet sense; `name` a kind of `other`
SCENE_MATE_SHARE = 0.1  # the least share of a thing's company that makes another its scene-mate (`Vocab.scene_mates`)


def _per_vocabulary(method):
    """A Vocab method's result memoized per instance and arguments, in the instance itself: its tables go with it
    (a class-level functools.lru_cache would keep every vocabulary a process loads alive)."""
    @functools.wraps(method)
    def memoized(self, *args):
        memo = self.__dict__.setdefault("_memo", {})
        key = (method, args)
        if key not in memo:
            memo[key] = method(self, *args)
        return memo[key]
    return memoized


@dataclass(eq=False)  # compared by identity: its lookups are cached per instance
class Vocab:
    objects: dict[str, str]  # name -> group
    attributes: dict[str, str]  # name -> category
    relations: dict[str, str]  # name -> type
    antonym_pairs: list[tuple[str, str]] = field(default_factory=list)
    plurals: dict[str, str] = field(default_factory=dict)  # irregular singular -> plural
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> name -> count
    source: str = ""
    synonyms: dict[str, dict[str, str]] = field(default_factory=dict)  # kind -> name -> head
    hypernyms: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)  # kind -> name -> hypernyms
    parts: tuple[tuple[str, str], ...] = ()  # (part, whole) of objects
    overlaps: tuple[tuple[str, str, str], ...] = ()  # (name, other, "synonym" | "kind") of objects
    categories: dict[str, dict] = field(default_factory=dict)  # category -> {exclusive, applies_to, basic_only}
    applies_to: dict[str, frozenset[str]] = field(default_factory=dict)  # attribute -> kinds (overrides its category's)
    kinds: dict[str, str] = field(default_factory=dict)  # object group -> kind
    symmetric: frozenset[str] = frozenset()  # relations
    symmetric_between: dict[str, frozenset[str]] = field(default_factory=dict)  # relation -> kinds of both ends
    object_attributes: dict[tuple[str, str], int] = field(default_factory=dict)  # (object, attribute) -> count
    relation_triples: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (subject, relation, object) -> count
    # Whether the counts are of a reference corpus (the shipped ones: other benchmarks' captions) rather than of the
    # captions being negated (`vocab build`). Such counts are sparse for any one caption's words, so negate backs
    # off to groups and falls back to unseen replacements rather than lose a caption's only negative, and they
    # only rank replacements: f_rel:join takes no edge from them (a relation seen elsewhere joined to a caption
    # is mostly one the caption leaves open: "the guys in a gym").
    reference_counts: bool = False

    @_per_vocabulary
    def derived(self, build):
        """`build(self)`, a table a stage derives from this vocabulary, built once per vocabulary and kept with it
        (so no module-level cache holds vocabularies: a stage's tables go when its vocabulary does)."""
        return build(self)

    # --- contradiction and plausibility ----------------------------------------------------------

    def is_symmetric(self, relation: str, subj: str | None = None, obj: str | None = None) -> bool:
        """Whether "A r B" means "B r A" ("next to", "near"): swapping its objects makes no negative.
        A relation symmetric only between some kinds ("playing with": "a man playing with a dog", not
        "a dog playing with a frisbee") is so when `subj` and `obj` are both of those kinds."""
        name = self.known("relations", relation) or " ".join(relation.lower().split())
        names = tuple(n for v in _symmetric_spellings(name) for n in (v, self.head("relations", v)))
        if any(n in self.symmetric for n in names):
            return True
        kinds = next((self.symmetric_between[n] for n in names if n in self.symmetric_between), None)
        return kinds is not None and subj is not None and obj is not None and {self.object_kind(subj), self.object_kind(obj)} <= kinds

    def attribute_count(self, obj: str, attr: str) -> int:
        """How often the corpus `vocab build` read showed `attr` on `obj` (0: never, or no counts)."""
        return self.object_attributes.get((obj.lower(), attr.lower()), 0)

    def relation_count(self, subj: str, rel: str, obj: str) -> int:
        """How often the corpus showed "subj rel obj" (0: never, or no counts)."""
        return self.relation_triples.get((subj.lower(), rel.lower(), obj.lower()), 0)

    def is_general(self, kind: str, name: str) -> bool:
        """Whether `name` is a broad word, the hypernym of five or more listed words ("food",
        "animal", "vehicle"): a co-member of its group may well be one of its hyponyms that
        hypernyms.tsv does not list ("a noodle" is food), so none safely contradicts it."""
        return self.head(kind, name) in self._general(kind)

    @_per_vocabulary
    def _general(self, kind: str) -> frozenset[str]:
        hyponyms: dict[str, int] = {}
        for hypers in self._broader(kind).values():
            for h in hypers:
                hyponyms[h] = hyponyms.get(h, 0) + 1
        return frozenset(h for h, n in hyponyms.items() if n >= 5)

    def seen_relations(self, subj: str) -> tuple[tuple[str, str], ...]:
        """(relation, object) pairs the corpus showed with `subj` as subject, in a fixed order."""
        return self._by_subject.get(subj.lower(), ())

    def seen_attributes(self, obj: str) -> tuple[str, ...]:
        """Attributes the corpus showed on `obj`, in a fixed order."""
        return self._by_object.get(obj.lower(), ())

    @functools.cached_property
    def _by_subject(self) -> dict[str, tuple[tuple[str, str], ...]]:
        out: dict[str, list] = {}
        for s, r, o in sorted(self.relation_triples):
            out.setdefault(s, []).append((r, o))
        return {k: tuple(v) for k, v in out.items()}

    @functools.cached_property
    def _by_object(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list] = {}
        for o, a in sorted(self.object_attributes):
            out.setdefault(o, []).append(a)
        return {k: tuple(v) for k, v in out.items()}

    def _class(self, noun: str) -> str:
        # an object's group (groups.tsv), or the noun itself where the vocabulary has none for it
        name = noun.lower()
        group = self.group(self.known("objects", name) or name)
        return f"@{group}" if group != UNKNOWN else name

    def attribute_seen_in_group(self, obj: str, attr: str) -> bool:
        """Whether the corpus showed `attr` on an object of `obj`'s group ("sandy" on a beach for a
        field): the backoff of `attribute_count` where counts from a few thousand captions are sparse."""
        category = self.category(attr)
        exclusive = category != UNKNOWN and self.is_exclusive(category)
        return (self._backoff_class(obj) if exclusive else self._class(obj), attr.lower()) in self._attribute_pairs(exclusive)

    def attribute_plausible(self, obj: str, attr: str, *, many: int = 20, canonical: int = 3) -> bool:
        """Whether the counts make `attr` plausible on `obj`: seen with it (or a synonym), or with its group where
        `obj`'s own counts say little of `attr`'s category. Where they say much, a member they never showed is
        implausible, whatever the group shows: `many` showings of the category ("a green flower": a flower seen 26
        times in six colours, never green), or `canonical` showings all of one member ("a white stop sign": a stop sign
        seen red five times, and in no other colour; blind review r12). True without counts, and for an object
        neither the counts nor the vocabulary's groups know."""
        if not self.object_attributes:
            return True
        name = self.head("attributes", attr.lower())
        own = self.seen_attributes(obj)
        if any(self.head("attributes", a) == name for a in own):
            return True
        category = self.category(attr)
        shown: Counter[str] = Counter()
        for a in own:
            if category != UNKNOWN and self.category(a) == category:
                shown[self.head("attributes", a)] += self.attribute_count(obj, a)
        if sum(shown.values()) >= many or (len(shown) == 1 and sum(shown.values()) >= canonical):
            return False
        if not own and self.group(obj) == UNKNOWN:
            return True
        return self.attribute_seen_in_group(obj, attr)

    def relation_seen_in_group(self, subj: str, rel: str, obj: str, *, subject: bool, object: bool) -> bool:
        """Whether the corpus showed `rel` between the two ends, each taken as its group where asked
        (`subject`, `object`): "a seagull flying over" a liquid read as any bird flying over it. The
        backoff of `relation_count` (Katz 1987's back-off, here to the word's class)."""
        s = self._backoff_class(subj) if subject else subj.lower()
        o = self._backoff_class(obj) if object else obj.lower()
        return (s, rel.lower(), o) in self._group_triples

    def relation_takes_object(self, rel: str, obj: str) -> bool:
        """Whether the corpus showed `rel` before `obj`, or before an object of `obj`'s group, whatever the subject: the
        object end of `relation_seen_in_group`'s backoff alone. A relation no such object was seen with mostly does not
        go with it ("suitcases outside a pile", "people outside an audience", "two men away from a kite": blind review r14)."""
        rel = rel.lower()
        return (rel, obj.lower()) in self._relation_objects or (rel, self._backoff_class(obj)) in self._relation_objects

    @functools.cached_property
    def _relation_objects(self) -> frozenset[tuple[str, str]]:
        return frozenset(pair for _, r, o in self.relation_triples for pair in ((r, o), (r, self._backoff_class(o))))

    def relation_count_in_group(self, subj: str, rel: str, obj: str) -> int:
        """How often the corpus showed `rel` between an object of `subj`'s group and one of `obj`'s (each end taken as
        `relation_seen_in_group` takes it): the backoff of `relation_count` where neither order was seen by name."""
        return self._group_triple_counts.get((self._backoff_class(subj), rel.lower(), self._backoff_class(obj)), 0)

    @functools.cached_property
    def _group_triple_counts(self) -> Counter[tuple[str, str, str]]:
        out: Counter[tuple[str, str, str]] = Counter()
        for (s, r, o), n in self.relation_triples.items():
            out[self._backoff_class(s), r, self._backoff_class(o)] += n
        return out

    def _backoff_class(self, noun: str) -> str:
        # a body part backs off to itself: which bodies have one is the part's own fact ("a horse with a mane" says
        # nothing of a cow's: blind review r11), not its group's, and so are its colours (blue eyes make no blue mane:
        # blind review r12)
        return noun.lower() if self.object_kind(self.known("objects", noun.lower()) or noun.lower()) == "body" else self._class(noun)

    @_per_vocabulary
    def _attribute_pairs(self, exclusive: bool) -> frozenset[tuple[str, str]]:
        # a body part's colour (an exclusive category's member) backs off to the part alone; its size, relative to
        # the body, to the part's group ("a short tongue" as any body part's "short")
        classify = self._backoff_class if exclusive else self._class
        return frozenset((classify(o), a) for o, a in self.object_attributes)

    @functools.cached_property
    def _group_triples(self) -> frozenset[tuple[str, str, str]]:
        out = set()
        for s, r, o in self.relation_triples:
            gs, go = self._backoff_class(s), self._backoff_class(o)
            out.update(((gs, r, o), (s, r, go), (gs, r, go)))
        return frozenset(out)

    def is_exclusive(self, category: str) -> bool:
        """Whether any two members of `category` contradict each other (categories.tsv; yes if unlisted)."""
        return self.categories.get(category, {}).get("exclusive", True)

    def is_basic_only(self, category: str) -> bool:
        """Whether only members without a hypernym replace others (categories.tsv basic_only)."""
        return self.categories.get(category, {}).get("basic_only", False)

    def object_kind(self, noun: str) -> str:
        """person, animal, food, plant, place, body or thing (groups.tsv); a noun the vocabulary lacks
        counts as a thing, as most unlisted nouns of captions are ("chalkboard", "decker bus")."""
        return self.kinds.get(self.group(noun), "thing")

    def applies(self, attr: str, obj: str) -> bool:
        """Whether `attr` can describe `obj` at all: its own or its category's applies_to lists
        `obj`'s kind ("young" a person or animal, "burgundy" no animal); true with no rule."""
        attr = attr.lower()
        kinds = self.applies_to.get(attr)
        if kinds is None:
            kinds = self.categories.get(self.attributes.get(attr, ""), {}).get("applies_to")
        if kinds is None or "*" in kinds:
            return True
        return self.object_kind(obj) in kinds or self.group(obj) in kinds

    def known(self, kind: str, word: str) -> str | None:
        """The vocabulary's name for `word`, inflection undone where the word itself is unlisted
        ("holds" -> "holding", "sits on" -> "sitting on", "older" -> "old"); None when unknown."""
        table = getattr(self, kind)
        word = " ".join(word.lower().split())
        if word in table:
            return word
        if word in self.synonyms.get(kind, {}):
            return word
        forms = _relation_forms(word) if kind == "relations" else _attribute_forms(word) if kind == "attributes" else ()
        return next((f for f in forms if f in table), None)

    def head(self, kind: str, name: str) -> str:
        """The head of `name`'s synonym group (the name itself when it has none)."""
        return self._heads(kind).get(name, name)

    def broader(self, kind: str, name: str) -> tuple[str, ...]:
        """The heads of every hypernym of `name`, transitively, in a fixed order."""
        return self._broader(kind).get(self.head(kind, name), ())

    def unsafe(self, kind: str, name: str) -> frozenset[str]:
        """Every word that may be true whenever `name` is, or that `name` may be true of: its synonym
        group, its hypernyms' groups and its hyponyms' groups. A replacement drawn from these would
        not make a negative."""
        return self._unsafe(kind).get(self.head(kind, name), frozenset((name,)))

    def kinds_of(self, kind: str, name: str) -> frozenset[str]:
        """Every word that may name what `name` names: its synonym group, its hyponyms' groups at any depth and
        the words WordNet says may name one thing with it (`overlaps`), but not its hypernyms: a caption's "child"
        may be a girl, its "girl" need not be any child it names."""
        return self._narrower(kind).get(self.head(kind, name), frozenset((name,)))

    @staticmethod
    def same_kind_of_thing(name: str, other: str) -> bool:
        """Whether `other` may name a kind of the one-word `name`, or `name` one of `other`: one ends in the
        other's last word ("ball" / "volleyball", "bedroom" / "hotel room"). An English compound names a kind of its
        last part, so the caption's noun leaves such a replacement open ("a toddler hitting the ball" -> "the
        volleyball", "a bedroom" -> "a hotel room" may hold: blind review r13), as `unsafe`'s do. A name of two words
        already says its kind: "a tennis ball" -> "a volleyball" contradicts it. A word of three letters or fewer is
        left out: it ends too many unrelated words ("ant" / "elephant", "man" / "woman")."""
        if " " in name:
            return False
        a, b = name, other.split()[-1]
        short, long_ = sorted((a, b), key=len)
        return len(short) > 3 and long_.endswith(short)

    @_per_vocabulary
    def opposites_on_axis(self, relation: str) -> tuple[str, ...]:
        """The relations opposite spatial `relation` on its axis, and their synonyms ("to the left of" -> "to the right
        of", "on the right of"), in a fixed order: worked out once per vocabulary, not once per caption."""
        head = self.head("relations", relation)
        group = {head, relation} | {n for n in self.synonyms.get("relations", {}) if self.head("relations", n) == head}
        opposites = {a for m in group for a in self.antonyms.get(m, ())}
        opposites |= {n for n in self.relations if self.head("relations", n) in {self.head("relations", a) for a in opposites}}
        return tuple(sorted(n for n in opposites if n in self.relations))

    @functools.cached_property
    def scene_mates(self) -> dict[str, frozenset[str]]:
        """name -> the things it usually comes with: those that make at least `SCENE_MATE_SHARE` of the company the
        co-occurrence counts (`relation_triples`) show it in, tied by any relation either way round, each end also read
        by its last word ("household bathroom with shower": bathroom and shower). A speaker is named with a monitor in
        half its triples, a sink with a bathroom in a fifth; a truck with a building in 4%, a car with a street in 7%:
        the first two go without saying, the last two do not."""
        company: dict[str, Counter] = {}

        def keys(name: str) -> set[str]:
            words = name.split()
            return {k for k in (name, self.known("objects", name), self.known("objects", words[-1]) if words else None) if k}

        for (s, _, o), n in self.relation_triples.items():
            ks, ko = keys(s), keys(o)
            for a in ks:
                for b in ko - ks:
                    company.setdefault(a, Counter())[b] += n
                    company.setdefault(b, Counter())[a] += n
        out: dict[str, set[str]] = {}
        for name, seen in company.items():
            total = sum(seen.values())
            for other, n in seen.items():
                if n >= SCENE_MATE_SHARE * total:
                    out.setdefault(other, set()).add(name)  # other -> the things that usually come with it
        return {k: frozenset(v) for k, v in out.items()}

    @functools.cached_property
    def compounds_by_word(self) -> dict[str, frozenset[str]]:
        """word -> the object names of two words or more that have it ("sign": "street sign", "stop sign")."""
        out: dict[str, set[str]] = {}
        for name in self.object_names:
            for w in name.split() if len(name.split()) > 1 else ():
                out.setdefault(w, set()).add(name)
        return {k: frozenset(v) for k, v in out.items()}

    @_per_vocabulary
    def _heads(self, kind: str) -> dict[str, str]:
        table = self.synonyms.get(kind, {})
        heads = {}
        for name in table:
            head, seen = name, set()
            while head in table and head not in seen:  # chains resolve to their end; cycles stop
                seen.add(head)
                head = table[head]
            heads[name] = head
        return heads

    @_per_vocabulary
    def _members(self, kind: str) -> dict[str, frozenset[str]]:
        out: dict[str, set[str]] = {}
        for name, head in self._heads(kind).items():
            out.setdefault(head, {head}).add(name)
        return {h: frozenset(m) for h, m in out.items()}

    @_per_vocabulary
    def _broader(self, kind: str) -> dict[str, tuple[str, ...]]:
        direct: dict[str, set[str]] = {}
        for name, hypers in self.hypernyms.get(kind, {}).items():
            direct.setdefault(self.head(kind, name), set()).update(self.head(kind, h) for h in hypers)
        out = {}
        for start in direct:
            found, todo = [], [start]
            while todo:
                for h in sorted(direct.get(todo.pop(), ())):
                    if h != start and h not in found:
                        found.append(h)
                        todo.append(h)
            out[start] = tuple(found)
        return out

    @_per_vocabulary
    def _narrower(self, kind: str) -> dict[str, frozenset[str]]:
        members = self._members(kind)
        related: dict[str, set[str]] = {head: {head} for head in members}
        for head, hypers in self._broader(kind).items():
            for h in hypers:
                related.setdefault(h, {h}).add(head)
        for name, other in self._overlap_heads(kind):
            related.setdefault(name, {name}).add(other)
            related.setdefault(other, {other}).add(name)
        return {head: frozenset(w for h in heads for w in members.get(h, (h,))) for head, heads in related.items()}

    def _overlap_heads(self, kind: str) -> list[tuple[str, str]]:
        """The pairs of `overlaps` (objects only) as their synonym groups' heads."""
        return [(self.head(kind, n), self.head(kind, o)) for n, o, _ in self.overlaps] if kind == "objects" else []

    @_per_vocabulary
    def _unsafe(self, kind: str) -> dict[str, frozenset[str]]:
        members = self._members(kind)
        related: dict[str, set[str]] = {}
        for head, hypers in self._broader(kind).items():
            for h in hypers:
                related.setdefault(head, {head}).add(h)
                related.setdefault(h, {h}).add(head)  # the hyponym side
        if kind == "objects":  # "a wall" -> "a home" is no negative: the wall may be the home's
            for part, whole in self.parts:
                part, whole = self.head(kind, part), self.head(kind, whole)
                related.setdefault(part, {part}).add(whole)
                related.setdefault(whole, {whole}).add(part)
            for name, other in self._overlap_heads(kind):  # one word, not transitively: "desk" - "table", not "desk" - "stand"
                related.setdefault(name, {name}).add(other)
                related.setdefault(other, {other}).add(name)
        for head in members:
            related.setdefault(head, {head})
        return {
            head: frozenset(w for h in heads for w in members.get(h, (h,)))
            for head, heads in related.items()
        }

    # Sorted tuples, so that sampling with a seeded RNG is reproducible across runs and machines.
    @functools.cached_property
    def object_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.objects))

    @functools.cached_property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.attributes))

    @functools.cached_property
    def relation_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.relations))

    @functools.cached_property
    def objects_by_group(self) -> dict[str, tuple[str, ...]]:
        return _group(self.objects)

    @functools.cached_property
    def attributes_by_category(self) -> dict[str, tuple[str, ...]]:
        return _group(self.attributes)

    @functools.cached_property
    def relations_by_type(self) -> dict[str, tuple[str, ...]]:
        return _group(self.relations)

    @functools.cached_property
    def antonyms(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, set[str]] = {}
        for a, b in self.antonym_pairs:
            out.setdefault(a, set()).add(b)
            out.setdefault(b, set()).add(a)
        return {k: tuple(sorted(v)) for k, v in out.items()}

    @functools.cached_property
    def _plural_forms(self) -> set[str]:
        return set(self.plurals.values())

    def group(self, noun: str) -> str:
        return self.objects.get(noun.lower(), UNKNOWN)

    def category(self, attribute: str) -> str:
        return self.attributes.get(attribute.lower(), UNKNOWN)

    def relation_type(self, relation: str) -> str:
        return self.relations.get(relation.lower(), UNKNOWN)

    def plural(self, noun: str) -> str:
        """The plural of a (possibly multi-word) noun: irregular list first, then English rules."""
        words = noun.split()
        if not words:
            return noun
        head = words[-1]
        if noun in self.plurals:
            return self.plurals[noun]
        if head in self.plurals:
            return " ".join(words[:-1] + [self.plurals[head]])
        if head in self._plural_forms:
            return noun
        if head.endswith(("s", "x", "z", "ch", "sh")):
            head += "es"
        elif head.endswith("y") and len(head) > 1 and head[-2] not in "aeiou":
            head = head[:-1] + "ies"
        else:
            head += "s"
        return " ".join(words[:-1] + [head])

    def summary(self) -> dict[str, dict[str, int]]:
        """Entry counts per group / category / type, for `vocab show`."""
        return {
            "objects": {k: len(v) for k, v in self.objects_by_group.items()},
            "attributes": {k: len(v) for k, v in self.attributes_by_category.items()},
            "relations": {k: len(v) for k, v in self.relations_by_type.items()},
        }


def _ing_forms(verb: str) -> list[str]:
    """Present participles a verb form may have ("holds" -> "holding", "sits" -> "sitting", "rides"
    -> "riding"), in a fixed order: every base form the -s ending allows, each with the three
    spellings of -ing. The vocabulary lists relations as participles ("sitting on")."""
    bases = [verb]
    if verb.endswith("ies"):
        bases.append(verb[:-3] + "y")
    if verb.endswith("es"):
        bases.append(verb[:-2])
    if verb.endswith("s") and not verb.endswith("ss"):
        bases.append(verb[:-1])
    if verb.endswith("ed"):
        bases += [verb[:-2], verb[:-1]]
    out = []
    for b in bases:
        if len(b) < 2:
            continue
        out += [b + "ing", b[:-1] + "ing" if b.endswith("e") else b + "ing", b + b[-1] + "ing"]
    return list(dict.fromkeys(out))


# Adverbs that only sharpen a relation ("right next to", "directly beside") and the particles a symmetric relation
# is also spelt with ("near to", "close by"): "A near to B" is as symmetric as "A near B".
INTENSIFIERS = ("right", "directly", "just", "very", "closely", "immediately")
SYMMETRIC_PARTICLES = ("to", "by")


def _symmetric_spellings(name: str) -> tuple[str, ...]:
    """`name` and its spellings with an intensifier dropped, a trailing "to" / "by" dropped, and either added
    ("right next to" -> "next to", "near to" -> "near", "close by" -> "close to")."""
    words = name.split()
    while len(words) > 1 and words[0] in INTENSIFIERS:
        words = words[1:]
    if len(words) > 1 and words[-1] in SYMMETRIC_PARTICLES:
        words = words[:-1]
    stem = " ".join(words)
    return tuple(dict.fromkeys([name, stem, *(f"{stem} {p}" for p in SYMMETRIC_PARTICLES)]))


def _relation_forms(relation: str) -> list[str]:
    words = relation.split()
    if not words:
        return []
    rest = words[1:]
    forms = [" ".join([f, *rest]) for f in _ing_forms(words[0])]
    if len(words) > 1 and words[-1] == "of":  # "inside of" reads as "inside"
        forms.append(" ".join(words[:-1]))
    return forms


def _attribute_forms(attr: str) -> list[str]:
    """Positive degree of a comparative or superlative ("older", "biggest", "happier"); a compound adjective written
    with a space for its hyphen ("a heart shaped cake": "heart-shaped")."""
    out = [attr.replace(" ", "-")] if " " in attr else []
    for suffix in ("er", "est"):
        if attr.endswith(suffix) and len(attr) > len(suffix) + 2:
            stem = attr[: -len(suffix)]
            out += [stem, stem + "e"]
            if stem[-1] == stem[-2]:
                out.append(stem[:-1])  # "bigger" -> "big"
            if stem.endswith("i"):
                out.append(stem[:-1] + "y")  # "happier" -> "happy"
    return out


def _group(mapping: dict[str, str]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for name in sorted(mapping):
        out.setdefault(mapping[name], []).append(name)
    return {k: tuple(v) for k, v in sorted(out.items())}


def _read_tsv(path: Path, columns: tuple[str, ...], optional: tuple[str, ...] = ()) -> list[dict[str, str]]:
    if not path.is_file():  # a folder, or a FIFO that would block the read forever
        raise MosaicError(f"{path}: not a regular file; a vocabulary folder holds TSV files (see `mosaictool vocab build`)")
    try:
        return _read_tsv_rows(path, columns, optional)
    except UnicodeDecodeError as e:
        raise MosaicError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start} of a read); save the file as UTF-8") from None


def _read_tsv_rows(path: Path, columns: tuple[str, ...], optional: tuple[str, ...]) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or any(c not in header for c in columns):
            raise MosaicError(f"{path}: the first line must be the header {chr(9).join(columns)!r}, got {header!r}")
        idx = {c: header.index(c) for c in columns + optional if c in header}
        rows = []
        for lineno, row in enumerate(_rows(reader, path), start=2):
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) < len(header):
                raise MosaicError(f"{path}:{lineno}: expected {len(header)} tab-separated columns, got {len(row)}")
            rows.append({c: row[i].strip() for c, i in idx.items()})
        return rows


def _rows(reader, path: Path):
    try:
        yield from reader
    except csv.Error as e:  # a cell over csv's field size limit (131,072 characters): no vocabulary word
        raise MosaicError(f"{path}:{reader.line_num}: {e}") from None


def load(path: str | os.PathLike | None = None) -> Vocab:
    """Read a vocabulary folder; `None` is the default vocabulary shipped with mosaictool."""
    if path is None:
        return _load_default()
    return _load(Path(path))


@functools.lru_cache(maxsize=1)
def _load_default() -> Vocab:
    return _load(DEFAULT_DIR)


def _load(folder: Path) -> Vocab:
    if not folder.is_dir():
        raise MosaicError(f"{folder}: no such vocabulary folder (make one with `mosaictool vocab build` or `vocab import-vg`)")
    tables: dict[str, dict[str, str]] = {}
    counts: dict[str, dict[str, int]] = {}
    marks = _WordMarks({}, set(), {})
    for kind, column in _KINDS:
        path = folder / f"{kind}.tsv"
        if not path.exists():
            raise MosaicError(f"{path}: missing; a vocabulary folder needs objects.tsv, attributes.tsv and relations.tsv")
        tables[kind], kind_counts = _read_kind(path, column, marks)
        if kind_counts:
            counts[kind] = kind_counts
    antonyms_path = folder / "antonyms.tsv"
    pairs = (
        [(r["a"].lower(), r["b"].lower()) for r in _read_tsv(antonyms_path, ("a", "b"))]
        if antonyms_path.exists()
        else []
    )
    plurals_path = folder / "plurals.tsv"
    if not plurals_path.exists():
        plurals_path = DEFAULT_DIR / "plurals.tsv"
    plurals = {r["singular"].lower(): r["plural"].lower() for r in _read_tsv(plurals_path, ("singular", "plural"))}
    kinds = {}
    if (folder / "groups.tsv").exists():
        kinds = {r["group"].lower(): r["kind"].lower() for r in _read_tsv(folder / "groups.tsv", ("group", "kind"))}
    return Vocab(
        objects=tables["objects"],
        attributes=tables["attributes"],
        relations=tables["relations"],
        antonym_pairs=pairs,
        plurals=plurals,
        counts=counts,
        source=str(folder),
        synonyms=_synonyms(folder),
        hypernyms=_hypernyms(folder),
        parts=tuple((r["part"].lower(), r["whole"].lower()) for r in _read_tsv(folder / "parts.tsv", ("part", "whole")))
        if (folder / "parts.tsv").exists() else (),
        overlaps=_overlaps(folder / "overlaps.tsv"),
        categories=_categories(folder),
        applies_to=marks.applies_to,
        kinds=kinds,
        symmetric=frozenset(marks.symmetric),
        symmetric_between=marks.symmetric_between,
        object_attributes=_counted(folder / "object_attributes.tsv", ("object", "attribute")),
        relation_triples=_counted(folder / "relation_triples.tsv", ("subject", "relation", "object")),
        reference_counts=folder.resolve() == DEFAULT_DIR,
    )


@dataclass
class _WordMarks:
    """The optional columns of the kind tables, gathered over all three: what a word applies to, which
    words are symmetric, and between which kinds."""
    applies_to: dict[str, frozenset[str]]
    symmetric: set[str]
    symmetric_between: dict[str, frozenset[str]]


def _read_kind(path: Path, column: str, marks: _WordMarks) -> tuple[dict[str, str], dict[str, int]]:
    """One of objects.tsv, attributes.tsv, relations.tsv: each name's label (its `column`) and its count
    where given; its applies_to and symmetric cells go into `marks`."""
    table, kind_counts = {}, {}
    for row in _read_tsv(path, ("name", column), ("count", "applies_to", "symmetric")):
        name = row["name"].lower()
        if not name:
            continue
        label = row[column] or UNKNOWN
        if table.get(name, label) != label:
            raise MosaicError(f"{path}: {name!r} is listed twice, with {column} {table[name]!r} and {label!r}; keep one")
        table[name] = label
        if row.get("applies_to"):
            marks.applies_to[name] = _kinds_cell(row["applies_to"])
        if _yes(row.get("symmetric", "")):
            marks.symmetric.add(name)
        elif row.get("symmetric"):
            marks.symmetric_between[name] = _kinds_cell(row["symmetric"])
        if row.get("count"):
            try:
                kind_counts[name] = int(row["count"])
            except ValueError:
                raise MosaicError(f"{path}: count {row['count']!r} of {name!r} is not an integer") from None
            if kind_counts[name] < 0:
                raise MosaicError(f"{path}: count {row['count']!r} of {name!r} is negative")
    return table, kind_counts


def _synonyms(folder: Path) -> dict[str, dict[str, str]]:
    synonyms: dict[str, dict[str, str]] = {}
    if (folder / "synonyms.tsv").exists():
        for r in _read_tsv(folder / "synonyms.tsv", ("kind", "name", "head")):
            synonyms.setdefault(_kind(r["kind"], folder / "synonyms.tsv"), {})[r["name"].lower()] = r["head"].lower()
    return synonyms


def _hypernyms(folder: Path) -> dict[str, dict[str, tuple[str, ...]]]:
    hypernyms: dict[str, dict[str, tuple[str, ...]]] = {}
    if (folder / "hypernyms.tsv").exists():
        for r in _read_tsv(folder / "hypernyms.tsv", ("kind", "name", "hypernym")):
            table = hypernyms.setdefault(_kind(r["kind"], folder / "hypernyms.tsv"), {})
            table[r["name"].lower()] = table.get(r["name"].lower(), ()) + (r["hypernym"].lower(),)
    return hypernyms


def _overlaps(path: Path) -> tuple[tuple[str, str, str], ...]:
    if not path.exists():
        return ()
    rows = []
    for r in _read_tsv(path, ("name", "other", "relation")):
        if r["relation"] not in OVERLAP_RELATIONS:
            raise MosaicError(f"{path}: the row {r['name']!r} - {r['other']!r}: relation must be one of "
                              f"{', '.join(OVERLAP_RELATIONS)}, got {r['relation']!r}")
        rows.append((r["name"].lower(), r["other"].lower(), r["relation"]))
    return tuple(rows)


def _categories(folder: Path) -> dict[str, dict]:
    categories = {}
    if (folder / "categories.tsv").exists():
        for r in _read_tsv(folder / "categories.tsv", ("category", "exclusive", "applies_to"), ("basic_only",)):
            if r["category"].lower() in categories:
                raise MosaicError(f"{folder / 'categories.tsv'}: {r['category']!r} is listed twice; keep one")
            categories[r["category"].lower()] = {
                "exclusive": _yes(r["exclusive"]),
                "applies_to": _kinds_cell(r["applies_to"]) if r["applies_to"] else None,
                "basic_only": _yes(r.get("basic_only", "")),
            }
    return categories


def _counted(path: Path, columns: tuple[str, ...]) -> dict[tuple[str, ...], int]:
    """An optional table of counts (object_attributes.tsv, relation_triples.tsv): the lower-cased
    `columns` of a row -> its count."""
    if not path.exists():
        return {}
    return {tuple(r[c].lower() for c in columns): _count(r["count"], path) for r in _read_tsv(path, (*columns, "count"))}


def _yes(cell: str) -> bool:
    return cell.strip().lower() in ("yes", "true", "1")


def _kinds_cell(cell: str) -> frozenset[str]:
    return frozenset(k.strip().lower() for k in cell.split(",") if k.strip())


def _count(cell: str, path: Path) -> int:
    try:
        value = int(cell)
    except ValueError:
        raise MosaicError(f"{path}: count {cell!r} is not an integer") from None
    if value < 0:
        raise MosaicError(f"{path}: count {cell!r} is negative")
    return value


def _kind(value: str, path: Path) -> str:
    if value not in ("objects", "attributes", "relations"):
        raise MosaicError(f"{path}: kind {value!r} must be objects, attributes or relations")
    return value


# the files `save` writes in a vocabulary folder
FILES = ("objects.tsv", "attributes.tsv", "relations.tsv", "antonyms.tsv", "plurals.tsv", "synonyms.tsv", "hypernyms.tsv", "parts.tsv",
         "overlaps.tsv", "categories.tsv", "groups.tsv", "object_attributes.tsv", "relation_triples.tsv")


def save(vocab: Vocab, folder: str | os.PathLike) -> None:
    """Write `vocab` as a vocabulary folder (TSV files; a `count` column where counts are known)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for kind, column in _KINDS:
        table = getattr(vocab, kind)
        kind_counts = vocab.counts.get(kind, {})
        names = sorted(table, key=lambda n: (-kind_counts.get(n, 0), n))
        extra = ("applies_to" if kind == "attributes" and vocab.applies_to
                 else "symmetric" if kind == "relations" and (vocab.symmetric or vocab.symmetric_between) else "")
        lines = [f"name\t{column}" + ("\tcount" if kind_counts else "") + (f"\t{extra}" if extra else "")]
        for name in names:
            line = f"{name}\t{table[name]}"
            if kind_counts:
                line += f"\t{kind_counts.get(name, 0)}"
            if extra == "applies_to":
                line += "\t" + ",".join(sorted(vocab.applies_to.get(name, ())))
            elif extra == "symmetric":
                line += "\tyes" if name in vocab.symmetric else "\t" + ",".join(sorted(vocab.symmetric_between.get(name, ())))
            lines.append(line)
        _write_text(folder / f"{kind}.tsv", "\n".join(lines) + "\n")
    _write_text(folder / "antonyms.tsv", "a\tb\n" + "".join(f"{a}\t{b}\n" for a, b in vocab.antonym_pairs))
    _write_text(folder / "plurals.tsv", "singular\tplural\n" + "".join(f"{s}\t{p}\n" for s, p in vocab.plurals.items()))
    _write_text(folder / "synonyms.tsv", "kind\tname\thead\n" + "".join(
        f"{kind}\t{name}\t{head}\n" for kind in sorted(vocab.synonyms) for name, head in sorted(vocab.synonyms[kind].items())
    ))
    _write_text(folder / "hypernyms.tsv", "kind\tname\thypernym\n" + "".join(
        f"{kind}\t{name}\t{h}\n" for kind in sorted(vocab.hypernyms) for name, hs in sorted(vocab.hypernyms[kind].items()) for h in hs
    ))
    if vocab.parts:
        _write_text(folder / "parts.tsv", "part\twhole\n" + "".join(f"{p}\t{w}\n" for p, w in vocab.parts))
    if vocab.overlaps:
        _write_text(folder / "overlaps.tsv", "name\tother\trelation\n" + "".join(f"{n}\t{o}\t{r}\n" for n, o, r in vocab.overlaps))
    if vocab.categories:
        _write_text(folder / "categories.tsv", "category\texclusive\tapplies_to\tbasic_only\n" + "".join(
            f"{c}\t{'yes' if r['exclusive'] else 'no'}\t{','.join(sorted(r['applies_to'] or ()))}\t{'yes' if r.get('basic_only') else ''}\n"
            for c, r in sorted(vocab.categories.items())
        ))
    if vocab.kinds:
        _write_text(folder / "groups.tsv", "group\tkind\n" + "".join(f"{g}\t{k}\n" for g, k in sorted(vocab.kinds.items())))
    save_cooccurrences(folder, vocab.object_attributes, vocab.relation_triples)


def save_cooccurrences(folder: str | os.PathLike, object_attributes: dict, relation_triples: dict) -> None:
    """Write the co-occurrence tables (object_attributes.tsv, relation_triples.tsv) of a vocabulary
    folder, most frequent first; an empty table writes no file."""
    folder = Path(folder)
    if object_attributes:
        _write_text(folder / "object_attributes.tsv", "object\tattribute\tcount\n" + "".join(
            f"{o}\t{a}\t{n}\n" for (o, a), n in sorted(object_attributes.items(), key=lambda x: (-x[1], x[0]))
        ))
    if relation_triples:
        _write_text(folder / "relation_triples.tsv", "subject\trelation\tobject\tcount\n" + "".join(
            f"{s}\t{r}\t{o}\t{n}\n" for (s, r, o), n in sorted(relation_triples.items(), key=lambda x: (-x[1], x[0]))
        ))


def _write_text(path: Path, text: str) -> None:
    from mosaictool.atomic import write_text

    write_text(path, text)
