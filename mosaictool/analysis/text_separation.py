"""What a text tower alone tells apart: the cosine between a test case's true caption and each of
its false ones (ARO's relation swaps, its word-order shuffles, its attribute swaps), no image.

A bag-of-words text tower gives a caption and its relation swap (the same words) a cosine near 1
(Yuksekgonul et al. 2023, Sec. 3: "VLMs behave like bags of words"); a tower that reads who does what
to whom pulls them apart. The image decides the benchmark, but a text tower that cannot separate
the two captions leaves the image nothing to choose between.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mosaictool.bench.base import Item


def text_features(bundle, texts: Sequence[str], batch_size: int = 256) -> dict[str, np.ndarray]:
    """{text: its normalised feature from the model's text tower}, each distinct text encoded once."""
    import torch

    from mosaictool.model.text_tower import encode_text

    texts = list(dict.fromkeys(texts))
    model = bundle.model.eval()
    feats = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            tokens = bundle.tokenizer(texts[start:start + batch_size])
            feats.append(encode_text(model, tokens.to(next(model.parameters()).device), normalize=True).float().cpu())
    features = torch.cat(feats).numpy() if feats else np.zeros((0, 1), dtype=np.float32)
    return dict(zip(texts, features))


def false_caption_cosines(bundle, items: Sequence[Item], batch_size: int = 256) -> np.ndarray:
    """Per item, the mean cosine between its correct text (meta["correct"]) and its other texts, as
    the model's text tower encodes them (normalised features)."""
    features = text_features(bundle, [t for item in items for t in item.texts], batch_size)
    out = np.empty(len(items))
    for k, item in enumerate(items):
        right = item.meta["correct"]
        true = features[item.texts[right]]
        out[k] = float(np.mean([true @ features[t] for j, t in enumerate(item.texts) if j != right]))
    return out


# A relation of the same two objects that is neither the caption's nor its converse (the swap says the converse)
OTHER_AXIS = {"above": "to the left of", "below": "to the right of", "to the left of": "above", "to the right of": "below"}


def role_distance(bundle, items: Sequence[Item], batch_size: int = 256) -> float:
    """How far the text tower puts a relation caption from its swap, as a share of how far it puts it from the same
    objects in the same order with a relation of the other axis: mean d(caption, swap) / mean d(caption, other
    relation), d = 1 − cosine, over VG-Relation-style items (meta["group"]: the relation, one of OTHER_AXIS).

    0: the swap is the caption to the tower (who is where ignored); 1: a swap moves the text as far as changing the
    relation word. Raw cosines are not comparable across towers (fine-tuning draws every text closer: a base's
    caption-swap cosine of 0.70 becomes 0.92 to 0.98), a ratio of two distances in one tower is."""
    triples = []
    for item in items:
        relation = item.meta["group"]
        true = item.texts[item.meta["correct"]]
        if f" {relation} " not in true or relation not in OTHER_AXIS:
            raise ValueError(f"role_distance: {true!r} does not say {relation!r} (one of {', '.join(OTHER_AXIS)})")
        swap = next(t for j, t in enumerate(item.texts) if j != item.meta["correct"])
        triples.append((true, swap, true.replace(f" {relation} ", f" {OTHER_AXIS[relation]} ", 1)))
    features = text_features(bundle, [t for triple in triples for t in triple], batch_size)
    swap_d = np.mean([1 - features[a] @ features[b] for a, b, _ in triples])
    other_d = np.mean([1 - features[a] @ features[c] for a, _, c in triples])
    return float(swap_d / other_d)
