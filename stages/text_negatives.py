"""Caption-level hard negatives: NegCLIP swaps, replace, bigram shuffle, ARO order perturbations.

- NegCLIP (ARO issue #13 gist; Yuksekgonul et al. 2023, App. C): swap two noun phrases of more than 2 words or two
  verb phrases by string replacement (every occurrence) and lower-case; swap two tokens tagged NN,
  NNS, or of POS ADV, ADJ. The gist used en_core_web_lg; we use the same small model `parse` loads.
  What is ours on top of the gist: tokens keep the caption's own spacing (the gist joins them with
  spaces: "dog ."), "a"/"an" agree with the word after a swap ("an clock"), and two tokens are not
  swapped when they are the same word or the two halves of one compound noun, or when the swap
  would put a word twice in a row ("a ball player hitting a tennis tennis").
- replace (SugarCrepe / FSC-CLIP style, Oh et al. 2024, App. A.1): one object, attribute or relation of
  the caption's graph replaced by an antonym from the vocabulary, else by a co-hyponym (same
  group / category / type); no WordNet needed.
- shuffle: bigram shuffle — the caption's words (final . ! ? dropped) in chunks of two, the chunks
  in a new order.
- order: the four ARO perturbations (Yuksekgonul et al. 2023, Table 1), in `mosaictool.perturb` (evaluate's
  COCO / Flickr30k-Order use the same functions).

Every function takes a `random.Random`; the four order functions are importable for evaluation
(COCO / Flickr30k-Order), e.g. `shuffle_nouns_and_adj(text, rng, nlp)`.
"""

from __future__ import annotations

import functools
import random
import re

from mosaictool.stages.subgraph import indefinite_article, object_node

# --- NegCLIP ----------------------------------------------------------------------------------

_MATCHERS: dict[int, object] = {}


def _verb_phrase_matcher(vocab):
    matcher = _MATCHERS.get(id(vocab))
    if matcher is None:
        from spacy.matcher import Matcher

        matcher = Matcher(vocab)
        matcher.add(
            "verb_phrase",
            [[{"POS": "VERB", "OP": "?"}, {"POS": "ADV", "OP": "*"}, {"POS": "AUX", "OP": "*"}, {"POS": "VERB", "OP": "+"}]],
        )
        _MATCHERS[id(vocab)] = matcher
    return matcher


_ARTICLE = re.compile(r"\b(an?)(\s+)([\w'-]+)", flags=re.IGNORECASE)


def fix_articles(text: str) -> str:
    """'a' / 'an' agreeing with the word after it ("an clock" -> "a clock", "a apple" -> "an
    apple"), keeping the article's case."""
    def agree(m: re.Match) -> str:
        article = indefinite_article(m.group(3))
        if m.group(1)[0].isupper():
            article = article.upper() if m.group(1).isupper() and len(m.group(1)) > 1 else article.capitalize()
        return f"{article}{m.group(2)}{m.group(3)}"

    return _ARTICLE.sub(agree, text)


def _swap_strings(sentence: str, a: str, b: str) -> str:
    placeholder = "\x00"
    return sentence.replace(a, placeholder).replace(b, a).replace(placeholder, b)


def negclip_swaps(doc, rng: random.Random) -> list[tuple[str, str, str, str]]:
    """NegCLIP's six candidates for one parsed caption: (transform, from, to, text) for those that
    could be made. `from`/`to` are the two swapped pieces."""
    from spacy.util import filter_spans

    sentence = doc.text
    out = []
    chunks = [c.text for c in doc.noun_chunks if len(c.text.split()) > 2]
    if len(chunks) >= 2:
        a, b = rng.sample(chunks, 2)
        out.append(("negclip:np", a, b, fix_articles(_swap_strings(sentence, a, b).lower())))
    spans = filter_spans([doc[s:e] for _, s, e in _verb_phrase_matcher(doc.vocab)(doc)])
    if len(spans) > 1:
        a, b = (s.text for s in rng.sample(spans, 2))
        out.append(("negclip:vp", a, b, fix_articles(_swap_strings(sentence, a, b).lower())))
    # one pass over the Doc: each spaCy Token is an object made anew on every access
    tokens, spaces, tags, pos = zip(*((t.text, t.whitespace_, t.tag_, t.pos_) for t in doc)) if len(doc) else ((), (), (), ())
    tokens = list(tokens)
    for transform, labels, wanted in (
        ("negclip:NN", tags, "NN"),
        ("negclip:NNS", tags, "NNS"),
        ("negclip:ADV", pos, "ADV"),
        ("negclip:ADJ", pos, "ADJ"),
    ):
        idxs = [i for i, label in enumerate(labels) if label == wanted]
        if len(idxs) >= 2:
            i, j = rng.sample(idxs, 2)  # the gist's draw, so that its pair stays the first choice
            pairs = [(i, j)] + [(x, y) for n, x in enumerate(idxs) for y in idxs[n + 1:] if {x, y} != {i, j}]
            pair = next((p for p in pairs if _swappable(doc, tokens, *p)), None)
            if pair is None:
                continue
            i, j = pair
            swapped = list(tokens)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            out.append((transform, tokens[i], tokens[j], fix_articles("".join(w + sp for w, sp in zip(swapped, spaces)).strip())))
    return out


def _swappable(doc, tokens: list[str], i: int, j: int) -> bool:
    """Whether swapping tokens i and j changes the caption and reads as two words in new places:
    not the same word, not the two halves of one compound ("tennis racket"), and no word twice in a row."""
    if tokens[i].lower() == tokens[j].lower():
        return False
    a, b = doc[i], doc[j]
    if (a.dep_ == "compound" and a.head.i == j) or (b.dep_ == "compound" and b.head.i == i):
        return False
    swapped = list(tokens)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    return all(swapped[k].lower() != swapped[k + 1].lower() for k in (i - 1, i, j - 1, j) if 0 <= k < len(swapped) - 1)


# --- bigram shuffle -----------------------------------------------------------------------------


def shuffle_bigrams(text: str, rng: random.Random, tries: int = 10) -> str | None:
    """The caption's words in chunks of two, the chunks reordered; None when no other order exists."""
    words = text.strip().rstrip(".!?").split()
    chunks = [words[i : i + 2] for i in range(0, len(words), 2)]
    if len(chunks) < 2:
        return None
    original = list(chunks)
    for _ in range(tries):
        rng.shuffle(chunks)
        if chunks != original:
            return fix_articles(" ".join(" ".join(c) for c in chunks))
    return None


# --- replace ------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=4096)  # re's own cache holds 512 patterns; a corpus has thousands of words
def _whole_word(word: str) -> re.Pattern:
    return re.compile(rf"(?<![\w-]){re.escape(word)}(?![\w-])", flags=re.IGNORECASE)


def _replace_word(sentence: str, old: str, new: str) -> str | None:
    """Replace the first whole-word `old` (case-insensitive) by `new`, keeping a leading capital
    and fixing 'a'/'an' right before it."""
    match = _whole_word(old).search(sentence)
    if match is None:
        return None
    found = match.group(0)
    if found.isupper() and len(found) > 1:
        new = new.upper()
    elif found[:1].isupper():
        new = new[:1].upper() + new[1:]
    before, after = sentence[: match.start()], sentence[match.end() :]
    article = re.search(r"\b(an?)(\s+)$", before, flags=re.IGNORECASE)
    if article:
        fixed = indefinite_article(new)
        if article.group(1).isupper() and found.isupper():
            fixed = fixed.upper()
        elif article.group(1)[0].isupper():
            fixed = fixed.capitalize()
        before = before[: article.start()] + fixed + article.group(2)
    return before + new + after


def replace_negatives(caption: str, graph: dict, vocab, rng: random.Random) -> list[tuple[str, str, str, str, str]]:
    """Up to three candidates, (transform, category, from, to, text): one object, one attribute and
    one relation of the caption replaced by a word that contradicts it, by the rules of the graph
    negatives (`negate._Sampler`: an antonym or an exclusive co-member that fits the object; an
    unknown word is left alone)."""
    from mosaictool.stages.negate import _Sampler

    fallback = random.Random()
    fallback.setstate(rng.getstate())  # its own draws: `rng`'s stay those made without counts
    sampler = _Sampler(vocab, rng, True, fallback_rng=fallback)
    entities = graph.get("entities") or []
    found = (_replace_object(caption, entities, vocab, rng, sampler), _replace_attribute(caption, entities, vocab, rng, sampler),
             _replace_relation(caption, entities, graph.get("relations") or [], vocab, rng, sampler))
    return [candidate for candidate in found if candidate is not None]


def _replace_object(caption: str, entities: list[dict], vocab, rng: random.Random, sampler) -> tuple | None:
    objects = [e for e in entities if vocab.known("objects", str(e.get("lemma_head", ""))) is not None]
    if not objects:
        return None
    entity = rng.choice(objects)
    node = object_node(entity, None)
    lemma, head = node["lemma"], node["noun"]
    from mosaictool.stages.negate import ON_ONLY, _uncounted_mass  # negate imports this module

    # a place said "on" only is no replacement after "in", as in graph negatives: "a man that has ski's and is
    # standing in the snow" -> not "in the asphalt"
    said_in = re.search(rf"\bin\s+{re.escape(str(entity.get('span') or head))}\b", caption, re.IGNORECASE)
    new = sampler.object(lemma, {lemma} | (ON_ONLY if said_in else set()),
                         [a for a in entity.get("attributes") or [] if isinstance(a, str)])
    if new is None:
        return None

    # a mass noun keeps its singular without a count, as in graph negatives ("a box that has butter", not "butters")
    new_form = vocab.plural(new) if node["plural"] and not _uncounted_mass(new, node.get("count")) else new
    text = _replace_word(caption, head, new_form)
    return ("replace:obj", "obj", head, new_form, text) if text is not None else None


def _replace_attribute(caption: str, entities: list[dict], vocab, rng: random.Random, sampler) -> tuple | None:
    from mosaictool.stages.negate import SNOW_SPORT_WORDS, SNOWY  # negate imports this module

    # "A man skiing down a snowy hill alone." -> "... a grassy hill" is no scene: the sport says the snow, as in the graph
    # negatives (blind review r23)
    on_snow = not SNOW_SPORT_WORDS.isdisjoint(re.findall(r"[a-z]+", caption.lower()))
    owners = {}
    for e in entities:
        for a in e.get("attributes") or []:
            if isinstance(a, str) and vocab.known("attributes", a) is not None and not (on_snow and a.lower() in SNOWY):
                owners.setdefault(a, str(e.get("lemma_head", "")).lower())
    attributes = sorted(owners)
    if not attributes:
        return None
    attribute = rng.choice(attributes)
    new = sampler.attribute(attribute, set(attributes), owners[attribute])
    text = _replace_word(caption, attribute, new) if new else None
    return ("replace:att", "attr", attribute, new, text) if text is not None else None


def _replace_relation(caption: str, entities: list[dict], relations: list[dict], vocab, rng: random.Random, sampler) -> tuple | None:
    def lemma(i) -> str:
        return str(entities[i].get("lemma_head", "")).lower() if isinstance(i, int) and 0 <= i < len(entities) else ""

    ends = {}
    for r in relations:
        ends.setdefault(" ".join(r["relation"].lower().split()), (lemma(r.get("subject")), lemma(r.get("object"))))
    known = sorted(r for r in ends if vocab.known("relations", r) is not None)
    if not known:
        return None
    relation = rng.choice(known)
    new = sampler.relation(relation, *ends[relation])
    text = _replace_word(caption, relation, new) if new else None
    return ("replace:rel", "rel", relation, new, text) if text is not None else None
