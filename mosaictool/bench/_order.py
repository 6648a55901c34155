"""The four ARO word-order perturbations (benchmarks.md §1, ARO `dataset_zoo/perturbations.py`).

- shuffle_nouns_and_adj: spaCy tags; permute the NN/NNS/NNP/NNPS tokens, then the JJ/JJR/JJS tokens
  (two numpy draws, nouns first); join tokens with single spaces ("yak .").
- shuffle_allbut_nouns_and_adj: permute every other token (punctuation, DT, VB*, IN, ...).
- shuffle_within_trigrams: word tokens in chunks of 3 (last chunk 1-2); shuffle inside each chunk.
- shuffle_trigrams: shuffle the order of the chunks.

The streams match ARO's: numpy's legacy generator seeded like `np.random.seed(1)` for the first
two, Python's `random.Random(1)` for the trigram ones, consumed in annotation order × caption × the
four functions. NLTK is not a dependency here, so `word_tokenize` is approximated by a Treebank-
style regex tokenizer (punctuation and contractions split off); captions rarely tell them apart.
Bit-exact equality with ARO's runs is best-effort (it also needs the same spaCy tags).
"""

from __future__ import annotations

import random
import re

import numpy as np

NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
ADJ_TAGS = frozenset({"JJ", "JJR", "JJS"})

_CONTRACTION = re.compile(r"(?i)\b(\w+)(n't|'s|'re|'ve|'ll|'d|'m)\b")
_SPLIT_PUNCT = re.compile(r"([,;:@#$%&?!()\[\]{}\"]|\.\.\.)")
_FINAL_PERIOD = re.compile(r"(?<![.\s])\.(?=\s|$)")


def word_tokenize(text: str) -> list[str]:
    """Treebank-style word tokens: punctuation, sentence periods and contractions split off."""
    text = _CONTRACTION.sub(r"\1 \2", text)
    text = _SPLIT_PUNCT.sub(r" \1 ", text)
    text = _FINAL_PERIOD.sub(" .", text)
    return text.split()


def trigrams(tokens: list[str]) -> list[list[str]]:
    return [tokens[i : i + 3] for i in range(0, len(tokens), 3)]


def _join_chunks(chunks: list[list[str]]) -> str:
    return " ".join(" ".join(c) for c in chunks)


class OrderPerturber:
    """Applies the four perturbations in ARO's order with ARO's two random streams."""

    def __init__(self, seed: int = 1, nlp=None):
        self.np_rng = np.random.RandomState(seed)
        self.py_rng = random.Random(seed)
        self._nlp = nlp

    @property
    def nlp(self):
        if self._nlp is None:
            import spacy

            from mosaictool.stages.parse import resolve_model

            self._nlp = spacy.load(resolve_model(None), exclude=["ner", "parser", "lemmatizer"])
        return self._nlp

    def shuffle_nouns_and_adj(self, doc) -> str:
        text = np.array([t.text for t in doc])
        nouns = [i for i, t in enumerate(doc) if t.tag_ in NOUN_TAGS]
        adjs = [i for i, t in enumerate(doc) if t.tag_ in ADJ_TAGS]
        text[nouns] = self.np_rng.permutation(text[nouns])
        text[adjs] = self.np_rng.permutation(text[adjs])
        return " ".join(text)

    def shuffle_allbut_nouns_and_adj(self, doc) -> str:
        text = np.array([t.text for t in doc])
        mask = np.array([t.tag_ not in NOUN_TAGS and t.tag_ not in ADJ_TAGS for t in doc], dtype=bool)
        text[mask] = self.np_rng.permutation(text[mask])
        return " ".join(text)

    def shuffle_within_trigrams(self, caption: str) -> str:
        chunks = trigrams(word_tokenize(caption))
        for chunk in chunks:
            self.py_rng.shuffle(chunk)
        return _join_chunks(chunks)

    def shuffle_trigrams(self, caption: str) -> str:
        chunks = trigrams(word_tokenize(caption))
        self.py_rng.shuffle(chunks)
        return _join_chunks(chunks)

    def perturb_all(self, captions: list[str], batch_size: int = 256) -> list[list[str]]:
        """[[nouns_adj, allbut, within_trigrams, trigrams] for each caption], in ARO's draw order."""
        docs = self.nlp.pipe(captions, batch_size=batch_size)
        return [
            [
                self.shuffle_nouns_and_adj(doc),
                self.shuffle_allbut_nouns_and_adj(doc),
                self.shuffle_within_trigrams(caption),
                self.shuffle_trigrams(caption),
            ]
            for caption, doc in zip(captions, docs)
        ]
