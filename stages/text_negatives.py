"""Caption-level hard negatives: NegCLIP swaps, replace, bigram shuffle, ARO order perturbations.

- NegCLIP (ARO issue #13 gist; seed 001 App. C): swap two noun phrases of more than 2 words or two
  verb phrases by string replacement (every occurrence) and lower-case; swap two tokens tagged NN,
  NNS, or of POS ADV, ADJ and join the tokens with spaces. The gist used en_core_web_lg; we use the
  same small model `parse` loads.
- replace (SugarCrepe / FSC-CLIP style, seed 002 App. A.1): one object, attribute or relation of
  the caption's graph replaced by an antonym from the vocabulary, else by a co-hyponym (same
  group / category / type); no WordNet needed.
- shuffle: bigram shuffle — the caption's words (final . ! ? dropped) in chunks of two, the chunks
  in a new order.
- order: the four ARO perturbations (seed 001 Table 1), with ARO's spaCy tags and token joining.
  ARO tokenises trigrams with `nltk.word_tokenize`, whose punkt data cannot be installed offline;
  `word_tokenize` here is a regex tokeniser following the same Treebank conventions for captions
  (punctuation and clitics such as 's and n't become their own tokens).

Every function takes a `random.Random`; the four order functions are importable for evaluation
(COCO / Flickr30k-Order), e.g. `shuffle_nouns_and_adj(text, rng, nlp)`.
"""

from __future__ import annotations

import random
import re

from mosaictool.stages.subgraph import indefinite_article, object_node

NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
ADJ_TAGS = frozenset({"JJ", "JJR", "JJS"})


# --- tokenisation -------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""(?:[A-Za-z]+(?=n't\b))     # 'do' of "don't"
      | n't\b | '(?:s|m|d|ll|re|ve)\b   # clitics
      | \d+(?:[.,]\d+)*            # numbers, 1,000 and 3.5
      | \w+(?:-\w+)*               # words, hyphenated words
      | \.\.\. | --                # ellipsis, dash
      | [^\w\s]                    # any other symbol on its own
    """,
    re.VERBOSE | re.IGNORECASE,
)


def word_tokenize(text: str) -> list[str]:
    """Treebank-style word tokens without NLTK: "A dog's ball." -> ['A', 'dog', "'s", 'ball', '.']."""
    return _TOKEN.findall(text)


def _doc(text_or_doc, nlp):
    if not isinstance(text_or_doc, str):
        return text_or_doc  # already a spaCy Doc
    if nlp is None:
        from mosaictool.stages.parse import load_nlp

        nlp = load_nlp()
    return nlp(text_or_doc)


def _shuffle_positions(tokens: list[str], positions: list[int], rng: random.Random) -> None:
    values = [tokens[i] for i in positions]
    if len(values) > 1:  # like numpy, a permutation of one value draws nothing
        rng.shuffle(values)
    for i, value in zip(positions, values):
        tokens[i] = value


def trigrams(tokens: list[str]) -> list[list[str]]:
    """Consecutive chunks of three tokens; the last chunk has the 1-2 left over."""
    return [tokens[i : i + 3] for i in range(0, len(tokens), 3)]


# --- ARO order perturbations ----------------------------------------------------------------------


def shuffle_nouns_and_adj(text, rng: random.Random, nlp=None) -> str:
    """Nouns (NN*) shuffled among themselves, then adjectives (JJ*); tokens joined by spaces.
    `text` may be a string or a spaCy Doc; `nlp` parses strings (default: parse's model)."""
    doc = _doc(text, nlp)
    tokens = [t.text for t in doc]
    for tags in (NOUN_TAGS, ADJ_TAGS):
        _shuffle_positions(tokens, [i for i, t in enumerate(doc) if t.tag_ in tags], rng)
    return " ".join(tokens)


def shuffle_allbut_nouns_and_adj(text, rng: random.Random, nlp=None) -> str:
    """Every token that is neither noun nor adjective (punctuation included) shuffled."""
    doc = _doc(text, nlp)
    tokens = [t.text for t in doc]
    keep = NOUN_TAGS | ADJ_TAGS
    _shuffle_positions(tokens, [i for i, t in enumerate(doc) if t.tag_ not in keep], rng)
    return " ".join(tokens)


def shuffle_within_trigrams(text: str, rng: random.Random, nlp=None) -> str:
    """Words shuffled inside each trigram. `nlp` is unused (same signature as the others)."""
    chunks = trigrams(word_tokenize(text if isinstance(text, str) else text.text))
    for chunk in chunks:
        rng.shuffle(chunk)
    return " ".join(" ".join(chunk) for chunk in chunks)


def shuffle_trigrams(text: str, rng: random.Random, nlp=None) -> str:
    """Trigrams kept intact, their order shuffled."""
    chunks = trigrams(word_tokenize(text if isinstance(text, str) else text.text))
    rng.shuffle(chunks)
    return " ".join(" ".join(chunk) for chunk in chunks)


ORDER_FUNCTIONS = {
    "order:nouns_adj": shuffle_nouns_and_adj,
    "order:allbut_nouns_adj": shuffle_allbut_nouns_and_adj,
    "order:within_trigrams": shuffle_within_trigrams,
    "order:trigrams": shuffle_trigrams,
}


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
        out.append(("negclip:np", a, b, _swap_strings(sentence, a, b).lower()))
    spans = filter_spans([doc[s:e] for _, s, e in _verb_phrase_matcher(doc.vocab)(doc)])
    if len(spans) > 1:
        a, b = (s.text for s in rng.sample(spans, 2))
        out.append(("negclip:vp", a, b, _swap_strings(sentence, a, b).lower()))
    tokens = [t.text for t in doc]
    for transform, chosen in (
        ("negclip:NN", lambda t: t.tag_ == "NN"),
        ("negclip:NNS", lambda t: t.tag_ == "NNS"),
        ("negclip:ADV", lambda t: t.pos_ == "ADV"),
        ("negclip:ADJ", lambda t: t.pos_ == "ADJ"),
    ):
        idxs = [t.i for t in doc if chosen(t)]
        if len(idxs) >= 2:
            i, j = rng.sample(idxs, 2)
            swapped = list(tokens)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            out.append((transform, tokens[i], tokens[j], " ".join(swapped)))
    return out


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
            return " ".join(" ".join(c) for c in chunks)
    return None


# --- replace ------------------------------------------------------------------------------------

def _replace_word(sentence: str, old: str, new: str) -> str | None:
    """Replace the first whole-word `old` (case-insensitive) by `new`, keeping a leading capital
    and fixing 'a'/'an' right before it."""
    match = re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", sentence, flags=re.IGNORECASE)
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


def _alternative(word: str, same_kind: tuple[str, ...], antonyms: tuple[str, ...], rng: random.Random, exclude) -> str | None:
    choices = [a for a in antonyms if a not in exclude]
    if not choices:
        choices = [w for w in same_kind if w not in exclude]
    return rng.choice(choices) if choices else None


def replace_negatives(caption: str, graph: dict, vocab, rng: random.Random) -> list[tuple[str, str, str, str, str]]:
    """Up to three candidates, (transform, category, from, to, text): one object, one attribute and
    one relation of the caption replaced by an antonym, else a co-hyponym from the vocabulary."""
    entities = graph.get("entities") or []
    out = []

    objects = [e for e in entities if str(e.get("lemma_head", "")).lower() in vocab.objects]
    if objects:
        entity = rng.choice(objects)
        node = object_node(entity, None)
        lemma, head = node["lemma"], node["noun"]
        same = vocab.objects_by_group.get(vocab.group(lemma), ())
        new = _alternative(lemma, same, vocab.antonyms.get(lemma, ()), rng, {lemma})
        if new is not None:
            new_form = vocab.plural(new) if node["plural"] else new
            text = _replace_word(caption, head, new_form)
            if text is not None:
                out.append(("replace:obj", "obj", head, new_form, text))

    attributes = sorted({a for e in entities for a in e.get("attributes") or [] if a in vocab.attributes})
    if attributes:
        attribute = rng.choice(attributes)
        same = vocab.attributes_by_category.get(vocab.category(attribute), ())
        new = _alternative(attribute, same, vocab.antonyms.get(attribute, ()), rng, set(attributes))
        text = _replace_word(caption, attribute, new) if new else None
        if text is not None:
            out.append(("replace:att", "attr", attribute, new, text))

    relations = sorted({" ".join(r["relation"].lower().split()) for r in graph.get("relations") or []})
    relations = [r for r in relations if r in vocab.relations]
    if relations:
        relation = rng.choice(relations)
        same = vocab.relations_by_type.get(vocab.relation_type(relation), ())
        new = _alternative(relation, same, vocab.antonyms.get(relation, ()), rng, {relation})
        text = _replace_word(caption, relation, new) if new else None
        if text is not None:
            out.append(("replace:rel", "rel", relation, new, text))
    return out
