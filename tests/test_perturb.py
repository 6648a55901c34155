"""ARO's trigram perturbations tokenise like `nltk.word_tokenize` (NLTK's Treebank word tokenizer):
the tricky captions a hand-written regex got wrong (ordinals, decades, quotes, slashes, "...",
"word.word", contractions, possessives) give NLTK's tokens, and the shuffles use exactly them."""

from __future__ import annotations

import random

import pytest

from mosaictool import perturb

# What NLTK's Treebank tokenizer (ARO's `nltk.word_tokenize` on a one-sentence caption) makes of them.
TRICKY = {
    "A man on 5th Avenue in the 1950s.": ["A", "man", "on", "5th", "Avenue", "in", "the", "1950s", "."],
    'a 3D "TV" and a 2nd-floor window': ["a", "3D", "``", "TV", "''", "and", "a", "2nd-floor", "window"],
    "a cat/dog sign... near www.example.com": ["a", "cat/dog", "sign", "...", "near", "www.example.com"],
    "Two men aren't smiling; the men's hats.": ["Two", "men", "are", "n't", "smiling", ";", "the", "men", "'s",
                                                "hats", "."],
    "It's a 'vintage' car (red) at 10:30 - $5.50!": ["It", "'s", "a", "'", "vintage", "'", "car", "(", "red", ")",
                                                      "at", "10:30", "-", "$", "5.50", "!"],
    "a dog.a cat": ["a", "dog.a", "cat"],
    "I'd say they're gonna win": ["I", "'d", "say", "they", "'re", "gon", "na", "win"],
}


@pytest.mark.parametrize("caption", list(TRICKY))
def test_tokens_are_nltk_treebank_tokens(caption):
    from nltk.tokenize import NLTKWordTokenizer

    assert perturb.word_tokenize(caption) == TRICKY[caption] == NLTKWordTokenizer().tokenize(caption)


@pytest.mark.parametrize("caption", list(TRICKY))
def test_same_as_nltk_word_tokenize_on_one_sentence(caption):
    """ARO calls `nltk.word_tokenize`: punkt splits sentences, then the Treebank tokenizer runs on each.
    On one sentence that is `word_tokenize(..., preserve_line=True)`, which needs no punkt data; punkt's
    algorithm, untrained (no download either), finds one sentence in each of these captions."""
    import nltk
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    assert PunktSentenceTokenizer().tokenize(caption) == [caption]
    assert perturb.word_tokenize(caption) == nltk.word_tokenize(caption, preserve_line=True)


def test_several_sentences_differ_only_in_the_inner_period():
    """The documented difference: punkt ends an inner sentence, so ARO's tokens split its period off;
    the whole caption through the Treebank tokenizer keeps "snow." whole."""
    import nltk
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    caption = "A dog in the snow. Two cats on a mat."
    sentences = PunktSentenceTokenizer().tokenize(caption)
    aro = [t for s in sentences for t in nltk.word_tokenize(s, preserve_line=True)]
    ours = perturb.word_tokenize(caption)
    assert len(sentences) == 2 and aro[:5] == ["A", "dog", "in", "the", "snow"] and aro[5] == "."
    assert ours == ["A", "dog", "in", "the", "snow.", *aro[6:]]


@pytest.mark.parametrize("caption", list(TRICKY))
def test_trigram_shuffles_move_whole_nltk_tokens(caption):
    tokens = TRICKY[caption]
    # ARO draws from Python's `random` after random.seed(1): the same seeded stream gives the same result
    within = perturb.shuffle_within_trigrams(caption, random.Random(1))
    assert within == perturb.shuffle_within_trigrams(caption, random.Random(1))
    expected_rng = random.Random(1)
    chunks = perturb.trigrams(list(tokens))
    for chunk in chunks:
        expected_rng.shuffle(chunk)
    assert within == " ".join(" ".join(c) for c in chunks)

    shuffled = perturb.shuffle_trigrams(caption, random.Random(1))
    order = perturb.trigrams(list(tokens))
    random.Random(1).shuffle(order)
    assert shuffled == " ".join(" ".join(c) for c in order)
    assert sorted(shuffled.split()) == sorted(tokens)
