"""The Probe paper's fine-tuning (seed 004 Sec. 5, App. B): an image-text matching (ITM) triplet loss
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

Training: `mosaictool train --method probe-ft` with --margin, --itm-weight, --contrastive-weight. The
paper's optimiser (App. B): SGD, lr 1e-3, momentum 0.9, weight decay 1e-4, a cosine schedule, batch
128, 40 epochs, that is `--optimizer sgd --momentum 0.9 --lr 1e-3 --wd 1e-4 --batch-size 128
--epochs 40` (the paper names no warmup: add `--warmup 0`). Then the paper's "patching": WiSE-FT of
all weights at alpha 0.2, `mosaictool wise-ft BASE FINETUNED --alpha 0.2`.

Texts (`select`): positive slot 0 = the caption, slot 1 = the positive p of a randomly chosen
predicate / composition swap (SWAP_TRANSFORMS of `negate`: a relation or an attribute replaced, in a
sub-graph or, with `negate --text replace`, in the caption), negative slot 0 = that swap.
"""

from __future__ import annotations

import random

from mosaictool.errors import MosaicError
from mosaictool.methods.base import DemoRow, Method, Option, Selection, caption_of, require_negatives

DEFAULTS = {"margin": 0.2, "itm_weight": 1.0, "contrastive_weight": 1.0}
# negate's transforms that swap a predicate or a composition (an attribute) and nothing else
SWAP_TRANSFORMS = frozenset({"f_rel:replace_relation", "f_attr:replace", "f_obj", "replace:rel", "replace:att"})


def choose_swap(texts: dict, rng) -> tuple[int, int] | None:
    """(index of the positive p, index of its swapped negative p~) in a record's `texts` (template's
    output), uniformly among the predicate / composition swaps; None when the record has none."""
    pairs = [(neg["positive"], k) for k, neg in enumerate(texts.get("negatives") or []) if _is_swap(neg)]
    return pairs[rng.randrange(len(pairs))] if pairs else None


def _is_swap(negative: dict) -> bool:
    """A predicate / composition swap that names the positive it was made from."""
    return negative.get("transform") in SWAP_TRANSFORMS and negative.get("positive") is not None


class ProbeFT(Method):
    name = "probe-ft"
    help = ("Probe paper (seed 004): the caption, a prompt and its predicate / composition swap in an ITM triplet "
            "loss + the contrastive loss. Paper recipe: --optimizer sgd --momentum 0.9 --lr 1e-3 --wd 1e-4 "
            "--warmup 0, batch 128, 40 epochs; then patch with wise-ft --alpha 0.2.")
    options = (
        Option("margin", float, DEFAULTS["margin"], "probe-ft: triplet margin on cosine similarities."),
        Option("itm_weight", float, DEFAULTS["itm_weight"], "probe-ft: weight of the ITM triplet loss."),
        Option("contrastive_weight", float, DEFAULTS["contrastive_weight"], "probe-ft: weight of the contrastive loss."),
    )
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
        prompt = positives[p]["text"] if 0 <= p < len(positives) else caption
        pos = [caption] if prompt == caption or kp < 2 else [caption, prompt]
        return Selection(pos, [texts["negatives"][swap]["text"]])

    def make_loss(self, *, local_loss: bool = False, rank: int = 0, world_size: int = 1):
        from mosaictool.methods.probe_ft_loss import ProbeFTLoss

        return ProbeFTLoss(**self.opts, local_loss=local_loss, rank=rank, world_size=world_size)


METHOD = ProbeFT
