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

Optimiser (App. B): SGD, lr 1e-3, momentum 0.9, weight decay 1e-4, cosine schedule, batch 128,
40 epochs; then "patching": WiSE-FT of all weights with alpha 0.2 (`mosaictool wise-ft --alpha 0.2`).
"""

from __future__ import annotations

import torch
from torch import nn

from mosaictool.model.losses import MultiPositiveContrastiveLoss

DEFAULTS = {"margin": 0.2, "itm_weight": 1.0, "contrastive_weight": 1.0}
# negate's transforms that swap a predicate or a composition (an attribute) and nothing else
SWAP_TRANSFORMS = frozenset({"f_rel:replace_relation", "f_attr:replace", "f_obj", "replace:rel", "replace:att"})


def choose_swap(texts: dict, rng) -> tuple[int, int] | None:
    """(index of the positive p, index of its swapped negative p~) in a record's `texts` (template's
    output), uniformly among the predicate / composition swaps; None when the record has none."""
    pairs = [(neg.get("positive"), k) for k, neg in enumerate(texts.get("negatives") or [])
             if neg.get("transform") in SWAP_TRANSFORMS and neg.get("positive") is not None]
    return pairs[rng.randrange(len(pairs))] if pairs else None


class ProbeFTLoss(nn.Module):
    def __init__(self, *, margin: float = DEFAULTS["margin"], itm_weight: float = DEFAULTS["itm_weight"],
                 contrastive_weight: float = DEFAULTS["contrastive_weight"], local_loss: bool = False, rank: int = 0,
                 world_size: int = 1):
        super().__init__()
        self.margin, self.itm_weight, self.contrastive_weight = float(margin), float(itm_weight), float(contrastive_weight)
        self.contrastive = MultiPositiveContrastiveLoss(local_loss=local_loss, rank=rank, world_size=world_size)

    def forward(
        self,
        image_features: torch.Tensor,  # (B, D), L2-normalised
        pos_features: torch.Tensor,  # (B*Kp, D): slot 0 the caption y, slot 1 the prompt p (if filled)
        pos_mask: torch.Tensor,  # (B, Kp) bool
        neg_features: torch.Tensor,  # (B*Kn, D): slot 0 the swapped prompt p~ (if filled)
        neg_mask: torch.Tensor,  # (B, Kn) bool
        logit_scale: torch.Tensor,
        pos_ids: torch.Tensor | None = None,
        neg_ids: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        b, kp = pos_mask.shape
        kn = neg_mask.shape[1]
        pos = pos_features.view(b, kp, -1)
        caption = pos[:, 0]
        has_prompt = pos_mask[:, 1] if kp > 1 else torch.zeros(b, dtype=torch.bool, device=pos_mask.device)
        prompt = torch.where(has_prompt[:, None], pos[:, 1], caption) if kp > 1 else caption
        zero = image_features.new_zeros(())

        # ITM, image anchor: the prompt above its swap by the margin
        has_neg = neg_mask[:, 0] if kn else torch.zeros(b, dtype=torch.bool, device=neg_mask.device)
        if has_neg.any():
            swapped = neg_features.view(b, kn, -1)[:, 0]
            hinge = (self.margin - (image_features * prompt).sum(-1) + (image_features * swapped).sum(-1)).clamp(min=0)
            itm_image = hinge[has_neg].mean()
        else:
            itm_image = zero
        # ITM, caption anchor: its image above every other image of the batch by the margin
        if b > 1:
            sims = caption @ image_features.T  # (B captions, B images)
            hinge = (self.margin - sims.diagonal()[:, None] + sims).clamp(min=0)
            off = ~torch.eye(b, dtype=torch.bool, device=sims.device)
            itm_caption = hinge[off].mean()
        else:
            itm_caption = zero
        itm = (itm_image + itm_caption) / 2

        # contrastive: (image, caption) and (image, prompt), the swaps in the image->text denominators
        ids0 = pos_ids[:, :1] if pos_ids is not None else None
        ids1 = (torch.where(has_prompt, pos_ids[:, 1], pos_ids[:, 0])[:, None] if kp > 1 else ids0) if pos_ids is not None else None
        ones = torch.ones(b, 1, dtype=torch.bool, device=pos_mask.device)
        c_caption = self.contrastive(image_features, caption, ones, neg_features, neg_mask, logit_scale, ids0, neg_ids)["loss"]
        c_prompt = self.contrastive(image_features, prompt, ones, neg_features, neg_mask, logit_scale, ids1, neg_ids)["loss"]
        contrastive = (c_caption + c_prompt) / 2
        loss = self.itm_weight * itm + self.contrastive_weight * contrastive
        return {"loss": loss, "itm": itm, "itm_image": itm_image, "itm_caption": itm_caption, "contrastive": contrastive,
                "contrastive_caption": c_caption, "contrastive_prompt": c_prompt}
