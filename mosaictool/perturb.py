"""ARO's four word-order perturbations (Yuksekgonul et al. 2023, Table 1) and the tokenisation they use.

Shared by the `negate` stage (order negatives) and `evaluate` (COCO / Flickr30k-Order), so both use
the very same functions. ARO's noun/adjective shuffles follow spaCy tags and join tokens with
spaces; its trigram shuffles tokenise with `nltk.word_tokenize`, i.e. NLTK's Treebank word tokenizer
applied to each sentence that NLTK's punkt model finds. `word_tokenize` here is that same tokenizer
(`NLTKWordTokenizer`) on the whole caption: it needs no downloaded data (punkt does), and a caption
is one sentence, so the tokens are ARO's. A caption of several sentences differs in the period that
ends an inner sentence: punkt makes "snow." two tokens, the tokenizer alone splits only the final
period (3 of the 4,345 COCO captions SugarCrepe uses; punkt's English model is not shipped with NLTK).
Every function takes a `random.Random` (or anything with `.shuffle`, e.g. numpy's RandomState).
"""

from __future__ import annotations

import functools
import random

NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
ADJ_TAGS = frozenset({"JJ", "JJR", "JJS"})


# --- tokenisation -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _treebank():
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


def word_tokenize(text: str) -> list[str]:
    """NLTK's Treebank word tokens: "A dog's ball." -> ['A', 'dog', "'s", 'ball', '.']."""
    return _treebank().tokenize(text)


def _doc(text_or_doc, nlp):
    if not isinstance(text_or_doc, str):
        return text_or_doc  # already a spaCy Doc
    if nlp is None:
        from mosaictool.nlp import load_nlp

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
