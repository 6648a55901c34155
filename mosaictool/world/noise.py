"""Web-like noisy train captions: what alt-text does to a caption that COCO's annotators would not.

MosaiCLIP's robustness claim (Singh et al. 2023, Sec. 4.3 and Table 1) compares fine-tuning on
COCO's written captions with YFCC-FT, a sample of YFCC-15M, whose texts are Flickr titles,
descriptions and tags (Thomee et al. 2016): NegCLIP lost more than 10 points of ARO, MosaiCLIP did
not. A noisy caption here is the clean one changed by one or more of these kinds, each drawn with
the record's own random stream (the clean world's draws stay as they are):

- `wrong_attribute`: one noun phrase gets a colour, size or texture its object does not have (a new
  adjective or a replaced one), such that the phrase fits no object of the scene;
- `dropped_mention`: every phrase of one object the caption names is removed (with its relations),
  so the caption no longer says an object the image shows;
- `fragment`: alt-text's shapes: a caption cut after some word (`truncated`, maybe "..."), "image
  may contain: " and its phrases (`may_contain`), the phrases as a bare list (`noun_list`), or its
  nouns and adjectives as shuffled tags (`keywords`, the adjectives bound to no noun); all but
  `truncated` drop the relations;
- `unrelated_words`: words about the file, not the image, before or after the caption: file names
  ("IMG_2041.JPG"), cameras ("canon eos 5d"), tags ("#abstract"), dates, web words ("stock photo").
  None of them is a word of the world (tested).

`add_noise` returns the noisy caption, the mentions of what it says (what a perfect parser would
read from it: the contract of a world record's `mentions`), and the noise entries: each has its
`kind` and the character `spans` of its words in the noisy caption ([] where the noise is an
absence), and what it changed:

    wrong_attribute  object (scene index), mention (index in the noisy mentions), attribute, value
                     (the wrong one), true (the object's), word (as written), replaced (the word it
                     replaced, or null when added)
    dropped_mention  object, words (its removed phrases), relations (the relation words removed with them)
    fragment         form; truncated: cut (the removed text); the others: relations (words lost);
                     keywords: unbound (the adjectives left as loose tags)
    unrelated_words  words (each unrelated string)
"""

from __future__ import annotations

import copy
import random

from mosaictool.world.captions import (
    ATTRIBUTE_ORDER,
    join_list,
    lit,
    matches,
    segment_text,
    segment_words,
)
from mosaictool.world.vocab import (
    COLOURS,
    SIZE_WORDS,
    SIZES,
    TEXTURE_WORDS,
    TEXTURES,
    attribute_kind,
    word_meanings,
)

NOISE_KINDS = ("wrong_attribute", "dropped_mention", "fragment", "unrelated_words")  # also the order they apply in
FRAGMENT_FORMS = ("truncated", "may_contain", "noun_list", "keywords")
ATTRIBUTE_VALUES = {"colour": COLOURS, "size": SIZES, "texture": TEXTURES}
WORD_FOR = {"size": SIZE_WORDS, "texture": TEXTURE_WORDS}
EXTRA_KIND = 0.3  # each further kind joins a noisy caption with this chance

MAY_CONTAIN = ("image may contain: ", "may contain: ", "photo may contain: ")
CAMERAS = ("canon eos 5d", "nikon d90", "sony alpha", "iphone 6", "olympus e-m10", "fujifilm x100", "lumix")
TAGS = ("art", "design", "minimal", "abstract", "geometry", "pattern", "colorful", "graphic", "artwork", "wallpaper")
WEB_WORDS = ("photo", "picture", "image", "stock photo", "hd wallpaper", "untitled", "flickr", "explore", "copyright",
             "free download", "vintage poster", "by anna k.", "my collection", "uploaded")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
          "december")


# --- what a mention says ------------------------------------------------------------------------


def said_description(mention: dict) -> dict:
    """The world description a mention's words make ({shape, colour, size, texture}, unsaid ones absent)."""
    meanings = word_meanings()
    shape = meanings["objects"][mention["noun"]]
    desc = {} if shape == "shape" else {"shape": shape}
    for word in mention["attributes"]:
        desc[attribute_kind(word)] = meanings["attributes"][word]
    return desc


def wrong_values(mention: dict, scene: dict) -> dict[str, list[str]]:
    """attribute -> the values that, said of the mention, make a phrase no object of the scene fits
    (and its own object does not have)."""
    desc = said_description(mention)
    own = scene["objects"][mention["object"]]
    out = {}
    for kind in ATTRIBUTE_ORDER:
        values = [v for v in ATTRIBUTE_VALUES[kind] if v != own[kind]
                  and not any(matches({**desc, kind: v}, o) for o in scene["objects"])]
        if values:
            out[kind] = values
    return out


# --- the caption being edited ----------------------------------------------------------------------


class _Noisy:
    """A caption's segments (render_parts) and a working copy of its mentions, edited kind by kind."""

    def __init__(self, parts: dict, scene: dict, rng: random.Random):
        self.sentences = copy.deepcopy(parts["sentences"])
        self.joiner = parts["joiner"]
        self.mentions = copy.deepcopy(parts["mentions"])
        self.scene = scene
        self.rng = rng
        self.pieces: list[dict] | None = None  # the flat segment list, once a fragment or junk made it
        self.noise: list[dict] = []
        self.wrong_mention: int | None = None  # the mention that carries a wrong attribute

    def flat(self) -> list[dict]:
        """The caption as one list of segments (joiners included); a new list each time."""
        if self.pieces is not None:
            return list(self.pieces)
        pieces = []
        for k, sent in enumerate(self.sentences):
            if k:
                pieces.append(lit(self.joiner))
            pieces.extend(sent["segs"])
        return pieces

    def text_of(self, seg: dict) -> str:
        return segment_text(seg, self.mentions)

    def entry(self, kind: str, **fields) -> int:
        self.noise.append({"kind": kind, **fields})
        return len(self.noise) - 1

    # ---- wrong_attribute
    def wrong_attribute_options(self) -> list[int]:
        return [s["m"] for sent in self.sentences for s in sent["segs"]
                if s["t"] == "np" and self.mentions["mentions"][s["m"]]["object"] is not None
                and wrong_values(self.mentions["mentions"][s["m"]], self.scene)]

    def wrong_attribute(self) -> bool:
        options = self.wrong_attribute_options()
        if not options:
            return False
        rng = self.rng
        m = options[rng.randrange(len(options))]
        mention = self.mentions["mentions"][m]
        values = wrong_values(mention, self.scene)
        kind = sorted(values)[rng.randrange(len(values))]
        value = values[kind][rng.randrange(len(values[kind]))]
        table = WORD_FOR.get(kind)
        word = value if table is None else table[value][rng.randrange(len(table[value]))]
        words = mention["attributes"]
        old = next((w for w in words if attribute_kind(w) == kind), None)
        if old is not None:
            words[words.index(old)] = word
        else:
            at = sum(ATTRIBUTE_ORDER.index(attribute_kind(w)) < ATTRIBUTE_ORDER.index(kind) for w in words)
            words.insert(at, word)
        self.wrong_mention = m
        self.entry("wrong_attribute", object=mention["object"], attribute=kind, value=value,
                   true=self.scene["objects"][mention["object"]][kind], word=word, replaced=old)
        return True

    # ---- dropped_mention
    def _without(self, obj: int) -> tuple[list[dict], list[str], list[str]]:
        """The sentences without any phrase of object `obj`, and the removed phrases and relation words."""
        of = self.mentions["mentions"]
        words, rels, out = [], [], []
        for sent in self.sentences:
            segs = sent["segs"]
            hit = [s for s in segs if s["t"] == "np" and of[s["m"]]["object"] == obj]
            if not hit:
                out.append(sent)
                continue
            words += [self.text_of(s) for s in hit]
            if sent["clause"] == "np":
                continue
            if sent["clause"] == "rel":
                rels += [self.text_of(s) for s in segs if s["t"] == "rel"]
                lead = [s for s in segs[:1] if s["t"] == "lit"]
                other = next(s for s in segs if s["t"] == "np" and of[s["m"]]["object"] != obj)
                out.append({"clause": "np", "segs": lead + [other]})
            else:  # a list: the other phrases, without the count of them all
                kept = [s for s in segs if s["t"] == "np" and of[s["m"]]["object"] != obj]
                if kept:
                    out.append({"clause": "list", "segs": join_list(kept, ", ", " and ")})
        return out, words, rels

    def dropped_mention_options(self) -> list[int]:
        named = {self.mentions["mentions"][s["m"]]["object"] for sent in self.sentences for s in sent["segs"] if s["t"] == "np"}
        named.discard(None)
        if self.wrong_mention is not None:
            named.discard(self.mentions["mentions"][self.wrong_mention]["object"])
        return sorted(k for k in named if self._without(k)[0])

    def dropped_mention(self) -> bool:
        options = self.dropped_mention_options()
        if not options:
            return False
        obj = options[self.rng.randrange(len(options))]
        self.sentences, words, rels = self._without(obj)
        self.entry("dropped_mention", object=obj, words=words, relations=rels)
        return True

    # ---- fragment
    def _cuts(self) -> list[int]:
        """Where a truncation may cut (before a space of the text): after a whole phrase and the wrong
        attribute's phrase, and before the last word."""
        text, first, need = "", None, 0
        for seg in self.flat():
            text += self.text_of(seg)
            if seg["t"] in ("np", "count") and first is None:
                first = len(text)
            if seg["t"] == "np" and seg["m"] == self.wrong_mention:
                need = len(text)
        if first is None:
            return []
        return [c for c in range(max(first, need), len(text)) if text[c] == " " and text[c + 1:].strip()]

    def fragment_options(self) -> list[str]:
        pieces = self.flat()
        phrases = [s for s in pieces if s["t"] == "np"]
        forms = []
        if self._cuts():
            forms.append("truncated")
        if phrases or any(s["t"] == "count" for s in pieces):
            forms.append("may_contain")
        if phrases:
            forms.append("noun_list")
            if self.wrong_mention is None:  # tags would leave the wrong adjective bound to nothing
                forms.append("keywords")
        return forms

    def fragment(self) -> bool:
        forms = self.fragment_options()
        if not forms:
            return False
        rng = self.rng
        form = forms[rng.randrange(len(forms))]
        pieces = self.flat()
        lost = [self.text_of(s) for s in pieces if s["t"] == "rel"]
        e = self.entry("fragment", form=form)
        if form == "truncated":
            self._truncate(e)
            return True
        self.noise[e]["relations"] = lost
        items, seen = [], set()
        for seg in pieces:
            if seg["t"] == "np" or (seg["t"] == "count" and form == "may_contain"):
                item = {**seg, "det": ""} if seg["t"] == "np" else seg
                if self.text_of(item) not in seen:
                    seen.add(self.text_of(item))
                    items.append(item)
        if form == "may_contain":
            self.pieces = [lit(MAY_CONTAIN[rng.randrange(len(MAY_CONTAIN))], e)] + join_list(items, ", ", ", ")
        elif form == "noun_list":
            self.pieces = join_list(items, ", ", ", ")
        else:  # keywords: each noun a phrase of its own, the adjectives loose tags beside them
            tags, unbound = [], []
            for item in items:
                for word in self.mentions["mentions"][item["m"]]["attributes"]:
                    if word not in unbound:
                        unbound.append(word)
                        tags.append(lit(word, e))
                self.mentions["mentions"][item["m"]]["attributes"] = []
                if self.text_of(item) not in {self.text_of(t) for t in tags}:
                    tags.append(item)
            rng.shuffle(tags)
            sep = ", " if rng.random() < 0.6 else " "
            self.pieces = join_list(tags, sep, sep)
            self.noise[e]["unbound"] = unbound
        return True

    def _truncate(self, e: int) -> None:
        rng = self.rng
        cuts = self._cuts()
        cut = cuts[rng.randrange(len(cuts))]
        kept, text = [], ""
        for seg in self.flat():
            words = self.text_of(seg)
            if len(text) + len(words) <= cut:
                kept.append(seg)
            elif len(text) < cut:
                kept.append(lit(words[:cut - len(text)], e))  # a phrase cut in its middle: loose words
            text += words
        self.noise[e]["cut"] = text[cut:].strip()
        while kept and kept[-1]["t"] == "lit" and not kept[-1]["text"].rstrip(" .;:,"):
            kept.pop()
        if kept and kept[-1]["t"] == "lit":
            kept[-1] = {**kept[-1], "text": kept[-1]["text"].rstrip(" .;:,")}
        # a relation word whose phrases did not both survive is a loose word too
        present = {s["m"] for s in kept if s["t"] in ("np", "count")}
        for k, seg in enumerate(kept):
            rel = self.mentions["relations"][seg["r"]] if seg["t"] == "rel" else None
            if rel is not None and not (rel["subject"] in present and rel["object"] in present):
                kept[k] = lit(self.text_of(seg), e)
        if rng.random() < 0.5:
            kept.append(lit("...", e))
        self.pieces = kept

    # ---- unrelated_words
    def junk(self) -> str:
        rng = self.rng
        which = rng.randrange(5)
        if which == 0:
            n = rng.randrange(10000)
            return [f"img_{n:04d}", f"IMG_{n:04d}.JPG", f"DSC{n:05d}", f"P{100000 + n:07d}.jpg", f"photo_{n % 1000:03d}"][rng.randrange(5)]
        if which == 1:
            return CAMERAS[rng.randrange(len(CAMERAS))]
        if which == 2:
            tags = rng.sample(TAGS, rng.choice((1, 2, 3)))
            return " ".join(f"#{t}" for t in tags)
        if which == 3:
            y, m, d = rng.randrange(2004, 2015), rng.randrange(1, 13), rng.randrange(1, 29)
            return [f"{y}-{m:02d}-{d:02d}", f"{MONTHS[m - 1]} {d}, {y}", f"{d:02d}/{m:02d}/{y}"][rng.randrange(3)]
        return WEB_WORDS[rng.randrange(len(WEB_WORDS))]

    def unrelated_words(self) -> bool:
        rng = self.rng
        pieces = self.flat()
        e = self.entry("unrelated_words", words=[])
        for _ in range(1 if rng.random() < 0.7 else 2):
            words = self.junk()
            self.noise[e]["words"].append(words)
            if rng.random() < 0.4:
                pieces.insert(0, lit(words, e))
                pieces.insert(1, lit((": ", " - ", " ")[rng.randrange(3)]))
            else:
                pieces.append(lit((" - ", " | ", " ", ", ")[rng.randrange(4)]))
                pieces.append(lit(words, e))
        self.pieces = pieces
        return True

    # ---- the result
    def result(self) -> tuple[str, dict, list[dict]]:
        pieces = self.flat()
        order: dict[int, int] = {}
        for seg in pieces:
            if seg["t"] in ("np", "count") and seg["m"] not in order:
                order[seg["m"]] = len(order)
        relations = []
        for seg in pieces:
            if seg["t"] == "rel":
                rel = self.mentions["relations"][seg["r"]]
                if rel["subject"] in order and rel["object"] in order:
                    relations.append({**rel, "subject": order[rel["subject"]], "object": order[rel["object"]]})
        mentions = {"mentions": [self.mentions["mentions"][m] for m in order], "relations": relations}
        text = ""
        for entry in self.noise:
            entry["spans"] = []
        for seg in pieces:
            words = self.text_of(seg)
            if seg.get("noise") is not None:
                self.noise[seg["noise"]]["spans"].append([len(text), len(text) + len(words)])
            if seg["t"] == "np" and seg["m"] == self.wrong_mention:
                entry = next(n for n in self.noise if n["kind"] == "wrong_attribute")
                tokens = segment_words(seg, self.mentions)
                at = tokens.index(entry["word"])
                start = len(text) + sum(len(t) + 1 for t in tokens[:at])
                entry["spans"].append([start, start + len(entry["word"])])
                entry["mention"] = order[seg["m"]]
            text += words
        return text, mentions, self.noise


def add_noise(parts: dict, scene: dict, rng: random.Random, kinds=NOISE_KINDS) -> tuple[str, dict, list[dict]] | None:
    """A noisy caption made from a clean one's segments (`captions.render_parts`): one kind of
    `kinds` that applies to it, each further one with probability EXTRA_KIND, applied in NOISE_KINDS
    order. None when no kind applies (a one-object caption cannot drop a mention)."""
    noisy = _Noisy(parts, scene, rng)
    applicable = [k for k in NOISE_KINDS if k in kinds and _applies(noisy, k)]
    if not applicable:
        return None
    n = 1
    while n < len(applicable) and rng.random() < EXTRA_KIND:
        n += 1
    chosen = set(rng.sample(applicable, n))
    for kind in NOISE_KINDS:
        if kind in chosen:
            getattr(noisy, kind)()
    return noisy.result()


def _applies(noisy: _Noisy, kind: str) -> bool:
    if kind == "unrelated_words":
        return True
    return bool(getattr(noisy, f"{kind}_options")())


def noisy_record(record: dict, parts: dict, rng: random.Random, rate: float, kinds=NOISE_KINDS) -> dict:
    """The record with the fields of a noisy world: `clean_caption` and `clean_mentions` (what the
    world rendered), `noise` (the entries; [] for a caption left clean), and, for a noisy one, the
    noisy `caption` and its `mentions`. Each record is noisy with probability `rate`."""
    out = {**record, "clean_caption": record["caption"], "clean_mentions": record["mentions"], "noise": []}
    if rng.random() < rate:
        made = add_noise(parts, record["scene"], rng, kinds)
        if made is not None:
            out["caption"], out["mentions"], out["noise"] = made
    return out
