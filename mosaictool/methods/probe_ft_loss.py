"""The loss of --method probe-ft (mosaictool/methods/probe_ft.py has the equations): its own module so
that the registry, and with it `mosaictool --help`, imports no torch."""

from __future__ import annotations

import torch
from torch import nn

from mosaictool.model.losses import MultiPositiveContrastiveLoss


class ProbeFTLoss(nn.Module):
    # no defaults here: the method's options own them (probe_ft.DEFAULTS), and this module must not
    # import probe_ft, which the registry loads without torch
    def __init__(self, *, margin: float, itm_weight: float, contrastive_weight: float, local_loss: bool = False,
                 rank: int = 0, world_size: int = 1):
        super().__init__()
        self.margin, self.itm_weight, self.contrastive_weight = float(margin), float(itm_weight), float(contrastive_weight)
        self.contrastive = MultiPositiveContrastiveLoss(local_loss=local_loss, rank=rank, world_size=world_size)

    def forward(self, f) -> dict[str, torch.Tensor]:
        """The loss on a mosaictool.training.batch.Features (what the training loop passes)."""
        return self.compute(f.image, f.pos, f.pos_mask, f.neg, f.neg_mask, f.logit_scale, f.pos_ids, f.neg_ids)

    def compute(
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
