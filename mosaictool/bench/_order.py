"""ARO's four word-order perturbations for COCO-Order / Flickr30k-Order, with ARO's random streams.

The perturbations themselves are the functions the `negate` stage uses (mosaictool.perturb;
docs/evaluate.md, "ARO's order perturbations"). ARO draws the noun/adjective shuffles from numpy's global generator after
`np.random.seed(1)` and the trigram shuffles from Python's `random.seed(1)`, consumed in
annotation order × caption × the four functions. `RandomState.shuffle` on a list makes the same
draws as `np.random.permutation` on the array, so handing the first two functions a RandomState
(they call `rng.shuffle`) reproduces ARO's stream; bit-exactness also needs ARO's spaCy tags and
NLTK tokens, so it stays best-effort.
"""

from __future__ import annotations

import random

import numpy as np

PERTURBATIONS = ["shuffle_nouns_and_adj", "shuffle_allbut_nouns_and_adj", "shuffle_within_trigrams", "shuffle_trigrams"]


class OrderPerturber:
    def __init__(self, seed: int = 1, nlp=None):
        self.np_rng = np.random.RandomState(seed)
        self.py_rng = random.Random(seed)
        self._nlp = nlp

    @property
    def nlp(self):
        if self._nlp is None:
            from mosaictool.nlp import load_nlp

            self._nlp = load_nlp()
        return self._nlp

    def perturb_all(self, captions: list[str], batch_size: int = 256) -> list[list[str]]:
        """The four perturbations of each raw caption, in PERTURBATIONS order and ARO's draw order."""
        from mosaictool import perturb as tn

        out = []
        for caption, doc in zip(captions, self.nlp.pipe(captions, batch_size=batch_size)):
            out.append(
                [
                    tn.shuffle_nouns_and_adj(doc, self.np_rng),
                    tn.shuffle_allbut_nouns_and_adj(doc, self.np_rng),
                    tn.shuffle_within_trigrams(caption, self.py_rng),
                    tn.shuffle_trigrams(caption, self.py_rng),
                ]
            )
        return out
