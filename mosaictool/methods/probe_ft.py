"""The Probe paper's fine-tuning (Schiappa et al. 2023, Sec. 5, App. B): an image-text matching (ITM) triplet loss
on predicate- or composition-swapped negatives, plus a contrastive loss that keeps CLIP's space.

Per image i: its caption y_i (positive slot 0), a prompt p_i (positive slot 1: a positive text whose
swapped version we have; y_i itself when the swap is of the caption) and the swapped prompt p~_i
(negative slot 0: `negate`'s relation or attribute replacement of p_i). With cosines s(.,.) of the
L2-normalised features and margin m:

    ITM_image   = mean over images with a p~ of  max(0, m - s(x_i, p_i) + s(x_i, p~_i))
                  (anchor image, positive prompt, negative = the same prompt with the swap)
    ITM_caption = mean over images i, and over the other images j of the batch, of
                  max(0, m - s(y_i, x_i) + s(y_i, x_j))
                  (anchor caption, positive its image; the paper names no negative image: every
                  other image of the batch is one, averaged)
    ITM         = (ITM_image + ITM_caption) / 2                  ("the average of the two")
    C_caption   = CLIP's contrastive loss on (x_i, y_i), the p~ in the image->text denominators
    C_prompt    = the same on (x_i, p_i)
    C           = (C_caption + C_prompt) / 2                     ("the average of the two")
    loss        = itm_weight * ITM + contrastive_weight * C

The triplet of Chechik et al. [6] is a hinge on similarities; the paper gives no margin, so m is a
flag (0.2 on cosines). The contrastive terms are `MultiPositiveContrastiveLoss` (open_clip's ClipLoss
with hard negatives in the denominators), so they gather across ranks like the other methods; the
ITM terms compare an image with its own texts and its own rank's images, so each rank computes them
on its micro-batch and DDP's averaging of gradients averages them over ranks.

Training: `mosaictool train --method probe-ft` with --margin, --itm-weight, --contrastive-weight.
`--recipe paper` is App. B's optimisation, every number of it: SGD, lr 1e-3 (".001"), momentum 0.9,
weight decay 1e-4 (".0001"), a cosine schedule, batch 128, 40 epochs; the paper names no warmup and no
gradient clipping, so none. `paper-text` and `paper-vision` are the same with the image or the text tower
frozen (Table 2's CLIP Patched (T) and (V); `paper` is (VT)). Flags given explicitly win. Then the
paper's "patching": WiSE-FT of all weights at alpha 0.2, `mosaictool wise-ft BASE FINETUNED --alpha 0.2`.

Texts (`select`): positive slot 0 = the caption, slot 1 = the positive p of a randomly chosen
predicate / composition swap (SWAP_TRANSFORMS of `negate`: a relation or an attribute replaced, in a
sub-graph or, with `negate --text replace`, in the caption), negative slot 0 = that swap. RelComp's
composition groups (Sec. 5, Fig. 9: anchor "A large bed ...", positive "A giant bed ...", negative "A
tiny bed ...") take the positive with the composition replaced by a synonym and the negative with it
replaced by an antonym: with --synonym-positives (the default, as the paper), p of an attribute swap
has the swapped attribute (the negative's `from`) replaced by a word of its synonym group in the
shipped vocabulary (vocab/synonyms.tsv), drawn by the record's rng; an attribute without synonyms, or
not written as such in p, leaves p as it is. Predicate swaps keep p (the paper's relation positive is
the prompt itself). One difference kept: `negate` replaces one attribute per negative, where RelComp
replaces every composition of the caption.
"""

from __future__ import annotations

import random
import re

from mosaictool.errors import MosaicError
from mosaictool.methods.base import DemoRow, Method, Option, Selection, caption_of, require_negatives

DEFAULTS = {"margin": 0.2, "itm_weight": 1.0, "contrastive_weight": 1.0}  # the loss's options
# negate's transforms that swap a predicate or a composition (an attribute) and nothing else
SWAP_TRANSFORMS = frozenset({"f_rel:replace_relation", "f_attr:replace", "f_obj", "replace:rel", "replace:att"})
# of those, the composition (attribute) swaps: their `from` is the attribute replaced
ATTRIBUTE_SWAPS = frozenset({"f_attr:replace", "f_obj", "replace:att"})
# App. B; warmup and clipping: none named
PAPER = {"optimizer": "sgd", "lr": 1e-3, "momentum": 0.9, "wd": 1e-4, "batch_size": 128, "epochs": 40, "warmup": 0,
         "grad_clip": None, "method_options": {"synonym_positives": True}}


def choose_swap(texts: dict, rng) -> tuple[int, int] | None:
    """(index of the positive p, index of its swapped negative p~) in a record's `texts` (template's
    output), uniformly among the predicate / composition swaps; None when the record has none."""
    pairs = [(neg["positive"], k) for k, neg in enumerate(texts.get("negatives") or []) if _is_swap(neg)]
    return pairs[rng.randrange(len(pairs))] if pairs else None


def _is_swap(negative: dict) -> bool:
    """A predicate / composition swap that names the positive it was made from."""
    return negative.get("transform") in SWAP_TRANSFORMS and negative.get("positive") is not None


def synonym_positive(text: str, negative: dict, rng, vocab=None) -> str:
    """`text` with the attribute an attribute swap replaced (its `from`) replaced in turn by a synonym
    (RelComp's positives); `text` itself when the swap is a predicate's, the attribute has no synonym,
    or `text` does not contain it as a word."""
    attribute = negative.get("from")
    if negative.get("transform") not in ATTRIBUTE_SWAPS or not attribute:
        return text
    pattern = re.compile(rf"\b{re.escape(attribute)}\b", re.IGNORECASE)
    if not pattern.search(text):
        return text
    if vocab is None:
        import mosaictool.vocab as vocabulary

        vocab = vocabulary.load()
    head = vocab.head("attributes", attribute)
    group = {head} | {n for n in vocab.synonyms.get("attributes", {}) if vocab.head("attributes", n) == head}
    choices = sorted(group - {attribute})
    if not choices:
        return text
    return pattern.sub(choices[rng.randrange(len(choices))], text)


class ProbeFT(Method):
    name = "probe-ft"
    place = 50
    help = ("Probe paper (Schiappa et al. 2023): the caption, a prompt and its predicate / composition swap in an ITM triplet "
            "loss + the contrastive loss; composition swaps' positives take a synonym. Paper recipes: --recipe paper "
            "(SGD lr 1e-3, momentum 0.9, wd 1e-4, cosine, batch 128, 40 epochs, no warmup), paper-text / paper-vision "
            "(the other tower frozen); then patch with wise-ft --alpha 0.2.")
    options = (
        Option("margin", float, DEFAULTS["margin"], "probe-ft: triplet margin on cosine similarities."),
        Option("itm_weight", float, DEFAULTS["itm_weight"], "probe-ft: weight of the ITM triplet loss."),
        Option("contrastive_weight", float, DEFAULTS["contrastive_weight"], "probe-ft: weight of the contrastive loss."),
        Option("synonym_positives", bool, True,
               "probe-ft: a composition swap's positive has its attribute replaced by a synonym (the paper's RelComp)."),
    )
    recipes = {"paper": PAPER, "paper-text": {**PAPER, "lock_image": True}, "paper-vision": {**PAPER, "lock_text": True}}
    demo_rows = (DemoRow("Probe-FT"),)
    stage_hint = "mosaictool negate (its relation / attribute replacements; or --text replace), then template"

    def validate(self) -> None:
        for name in ("margin", "itm_weight", "contrastive_weight"):
            if not self.opts[name] >= 0:  # NaN too
                raise MosaicError(f"--{name.replace('_', '-')} {self.opts[name]}: must be 0 or more")
        if self.opts["itm_weight"] == 0 and self.opts["contrastive_weight"] == 0:
            raise MosaicError("--itm-weight 0 and --contrastive-weight 0 leave no loss to train with")

    def check_data(self, records, source):
        return require_negatives(self, records, source, _is_swap, "predicate- or composition-swap")

    def slots(self, step, total_steps):
        return 2, 1

    def select(self, record: dict, rng: random.Random, kp: int, kn: int) -> Selection:
        caption = caption_of(record)
        texts = record.get("texts") or {}
        pair = choose_swap(texts, rng)
        if pair is None or kn < 1:
            return Selection([caption])
        positives = texts.get("positives") or []
        p, swap = pair
        negative = texts["negatives"][swap]
        prompt = positives[p]["text"] if 0 <= p < len(positives) else caption
        if self.opts["synonym_positives"]:
            prompt = synonym_positive(prompt, negative, rng)
        pos = [caption] if prompt == caption or kp < 2 else [caption, prompt]
        return Selection(pos, [negative["text"]])

    def make_loss(self, *, local_loss: bool = False, rank: int = 0, world_size: int = 1):
        from mosaictool.methods.probe_ft_loss import ProbeFTLoss

        return ProbeFTLoss(**{k: self.opts[k] for k in DEFAULTS}, local_loss=local_loss, rank=rank, world_size=world_size)


METHOD = ProbeFT
