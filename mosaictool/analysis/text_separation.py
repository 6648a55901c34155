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


def false_caption_cosines(bundle, items: Sequence[Item], batch_size: int = 256) -> np.ndarray:
    """Per item, the mean cosine between its correct text (meta["correct"]) and its other texts, as
    the model's text tower encodes them (normalised features)."""
    import torch

    from mosaictool.model.text_tower import encode_text

    texts = list(dict.fromkeys(t for item in items for t in item.texts))
    index = {t: i for i, t in enumerate(texts)}
    model = bundle.model.eval()
    feats = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            tokens = bundle.tokenizer(texts[start:start + batch_size])
            feats.append(encode_text(model, tokens.to(next(model.parameters()).device), normalize=True).float().cpu())
    features = torch.cat(feats).numpy() if feats else np.zeros((0, 1), dtype=np.float32)
    out = np.empty(len(items))
    for k, item in enumerate(items):
        right = item.meta["correct"]
        true = features[index[item.texts[right]]]
        others = [features[index[t]] for j, t in enumerate(item.texts) if j != right]
        out[k] = float(np.mean([true @ o for o in others]))
    return out
