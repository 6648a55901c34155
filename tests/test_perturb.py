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


def test_same_as_nltk_word_tokenize_when_punkt_is_installed():
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        pytest.skip("NLTK's punkt data is not installed (python -m nltk.downloader punkt_tab)")
    for caption in TRICKY:
        assert perturb.word_tokenize(caption) == nltk.word_tokenize(caption)


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
