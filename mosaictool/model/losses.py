"""Contrastive losses over the batch contract (mosaictool.model.batch).

`MultiPositiveContrastiveLoss` is MosaiCLIP's coarse-to-fine loss (seed 000, Sec. 3.5), and it is
also CLIP's and NegCLIP's loss, which are its special cases:

    texts  = [all positive slots; all negative slots]           (empty slots masked out)
    L_i2t  = mean over images i of  -1/|P(i)| * sum_{k in P(i)} log softmax_j(s * u_i . v_j)[k]
    L_t2i  = mean over positive texts k of  -log softmax_i(s * u_i . v_k)[owner(k)]
    L      = (L_i2t + L_t2i) / 2

Negatives only ever appear in the i2t denominators. With one positive and no negative slot per
image this is exactly open_clip's ClipLoss; with one positive and one negative it is NegCLIP's.
The paper writes sums; means keep the learning rate independent of the batch size.

Distributed: features are gathered with gradient and laid out as [positives of rank 0, 1, ...;
negatives of rank 0, 1, ...], so the owner of positive slot j is still j // Kp (ranks' images are
concatenated in rank order too). With `local_loss` a rank computes only its own images' rows and
its own positives' columns, normalised by the global counts and scaled by the world size, so the
gradients DDP averages are those of the global loss.
"""

from __future__ import annotations

import torch
from torch import nn

from mosaictool.model.distributed import all_gather_no_grad, all_gather_with_grad, all_reduce_sum


class MultiPositiveContrastiveLoss(nn.Module):
    def __init__(self, *, local_loss: bool = False, rank: int = 0, world_size: int = 1):
        super().__init__()
        self.local_loss = local_loss
        self.rank = rank
        self.world_size = world_size

    def forward(
        self,
        image_features: torch.Tensor,  # (B, D), L2-normalised
        pos_features: torch.Tensor,  # (B*Kp, D): positive slots, image-major
        pos_mask: torch.Tensor,  # (B, Kp) bool
        neg_features: torch.Tensor,  # (B*Kn, D)
        neg_mask: torch.Tensor,  # (B, Kn) bool
        logit_scale: torch.Tensor,  # scalar, already exp()'d
    ) -> dict[str, torch.Tensor]:
        b, kp = pos_mask.shape
        world = self.world_size
        if world > 1:
            all_images = all_gather_with_grad(image_features)
            all_pos = all_gather_with_grad(pos_features)
            all_neg = all_gather_with_grad(neg_features)
            all_pos_mask = all_gather_no_grad(pos_mask)
            all_neg_mask = all_gather_no_grad(neg_mask)
        else:
            all_images, all_pos, all_neg, all_pos_mask, all_neg_mask = (
                image_features, pos_features, neg_features, pos_mask, neg_mask
            )
        texts = torch.cat([all_pos, all_neg])
        text_valid = torch.cat([all_pos_mask.reshape(-1), all_neg_mask.reshape(-1)])

        if self.local_loss and world > 1:
            rows_images, rows_pos, rows_pos_mask = image_features, pos_features, pos_mask
            first_image = self.rank * b
        else:
            rows_images, rows_pos, rows_pos_mask = all_images, all_pos, all_pos_mask
            first_image = 0
        n_rows = rows_images.shape[0]

        # image -> texts: row i's positives sit at columns (first_image + i) * Kp + k
        logits_i2t = logit_scale * rows_images @ texts.T
        logits_i2t = logits_i2t.masked_fill(~text_valid, float("-inf"))
        logp_i2t = logits_i2t.log_softmax(dim=1)
        pos_cols = (first_image * kp + torch.arange(n_rows * kp, device=texts.device)).view(n_rows, kp)
        logp_pos = logp_i2t.gather(1, pos_cols)
        n_pos_per_image = rows_pos_mask.sum(1)
        has_pos = n_pos_per_image > 0
        per_image = torch.where(rows_pos_mask, logp_pos, 0.0).sum(1) / n_pos_per_image.clamp(min=1)
        i2t_sum = -per_image[has_pos].sum()

        # positive text -> images: column k's owner is first_image + k // Kp
        logits_t2i = logit_scale * rows_pos @ all_images.T
        owners = first_image + torch.arange(n_rows * kp, device=texts.device) // kp
        logp_t2i = logits_t2i.log_softmax(dim=1).gather(1, owners[:, None])[:, 0]
        t2i_sum = -logp_t2i[rows_pos_mask.reshape(-1)].sum()

        n_images = has_pos.sum().to(logits_i2t.dtype)
        n_texts = rows_pos_mask.sum().to(logits_i2t.dtype)
        scale = 1.0
        if self.local_loss and world > 1:
            n_images, n_texts = all_reduce_sum(torch.stack([n_images, n_texts]).detach())
            scale = float(world)  # DDP averages over ranks; the sum of the ranks' terms is the global loss
        i2t = i2t_sum / n_images.clamp(min=1)
        t2i = t2i_sum / n_texts.clamp(min=1)
        loss = scale * (i2t + t2i) / 2
        return {"loss": loss, "i2t": scale * i2t, "t2i": scale * t2i}
