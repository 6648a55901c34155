"""Contrastive losses over the batch contract (mosaictool.training.batch).

`MultiPositiveContrastiveLoss` is MosaiCLIP's coarse-to-fine loss (Singh et al. 2023, Sec. 3.5), and it is
also CLIP's and NegCLIP's loss, which are its special cases:

    texts  = [all positive slots; all negative slots]           (empty slots masked out)
    L_i2t  = mean over images i of  -1/|P(i)| * sum_{k in P(i)} log softmax_j(s * u_i . v_j)[k]
    L_t2i  = mean over positive texts k of  -log softmax_i(s * u_i . v_k)[owner(k)]
    L      = (L_i2t + L_t2i) / 2

Negatives only ever appear in the i2t denominators. With one positive and no negative slot per
image this is exactly open_clip's ClipLoss; with one positive and one negative it is NegCLIP's.
The paper writes sums, so its t2i term, one per positive text, outweighs i2t, one per image, by the
number of positives per image (about 3 with --max-pos 3). `weighting="paper"` keeps that balance
and divides both sums by the number of images (the learning rate stays independent of the batch
size); `weighting="mean"` averages each direction over its own terms, as written above. With one
positive per image the two are the same.

Equal texts (`pos_ids` / `neg_ids`, a hash per text) are the same sub-graph: the paper's P(i) is
every positive text of the batch whose sub-graph is in image i's graph, so a positive text of image
j that equals one of i's positives is a positive of i too; a negative equal to one of i's positives
is not a negative for i; and in t2i, images that also own a positive text are left out of its
denominator. Short sub-graph texts ("a red circle") repeat across images; without this they would
be pushed apart from images they describe. Without ids every slot is distinct (the formulas above).

Sub-graph containment (`image_keys`, `pos_keys`, `neg_keys`: stable hashes of canonical sub-graph
keys, 0 = none; docs/stages.md, decompose) is the paper's P(i) = {k : g_k is a sub-graph of G_i}: a
positive column whose key is in image i's key set (every sub-graph of G_i, weaker readings included)
is a positive of i, a negative column whose key is in it leaves i's row, and in t2i the images
whose key set holds the text's key leave its denominator (its owner stays: the target). A text or
image without keys falls back to the equal-text rule above; both rules are OR-ed. Without
`image_keys` (clip, negclip) nothing changes. The paper writes the denominators over every text
and image (Sec. 3.5: sum_{j=1}^{|B_t|} in i2t, sum_{i=1}^{|B_I|} in t2i) and says nothing of texts true
of several images; taking out those the graph says are true of the image (`denominators="masked"`,
the default) is what makes P(i) a set of positives rather than positives that are also pushed away
as negatives. `denominators="all"` keeps the equations' denominators as written: every filled text
in each i2t row, every image in each t2i column; P(i) and the targets are the same under both.

Distributed: features are gathered with gradient and laid out as [positives of rank 0, 1, ...;
negatives of rank 0, 1, ...], so the owner of positive slot j is still j // Kp (ranks' images are
concatenated in rank order too). With `local_loss` a rank computes only its own images' rows and
its own positives' columns, normalised by the global counts and scaled by the world size, so the
gradients DDP averages are those of the global loss.
"""

from __future__ import annotations

import torch
from torch import nn

from mosaictool.model.collectives import all_gather_no_grad, all_gather_with_grad, all_reduce_sum


class MultiPositiveContrastiveLoss(nn.Module):
    def __init__(self, *, local_loss: bool = False, rank: int = 0, world_size: int = 1, weighting: str = "mean",
                 denominators: str = "masked"):
        super().__init__()
        if weighting not in ("mean", "paper"):
            raise ValueError(f"weighting {weighting!r}: 'mean' or 'paper'")
        if denominators not in ("masked", "all"):
            raise ValueError(f"denominators {denominators!r}: 'masked' or 'all'")
        self.weighting = weighting
        self.mask_denominators = denominators == "masked"
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
        pos_ids: torch.Tensor | None = None,  # (B, Kp) int64 text identities; None: every slot distinct
        neg_ids: torch.Tensor | None = None,  # (B, Kn)
        image_keys: torch.Tensor | None = None,  # (B, K) int64 sub-graph key hashes of each image, 0 = padding
        pos_keys: torch.Tensor | None = None,  # (B, Kp) int64 key hash of each slot's text, 0 = none
        neg_keys: torch.Tensor | None = None,  # (B, Kn)
    ) -> dict[str, torch.Tensor]:
        b, kp = pos_mask.shape
        kn = neg_mask.shape[1]
        world = self.world_size
        local = self.local_loss and world > 1
        device = image_features.device
        if pos_ids is None or neg_ids is None:  # distinct ids, unique across ranks too
            first_slot = self.rank * b
            pos_ids = (first_slot * kp + torch.arange(b * kp, device=device)).view(b, kp)
            neg_ids = -1 - (first_slot * kn + torch.arange(b * kn, device=device)).view(b, kn)
        if world > 1:
            all_images = all_gather_with_grad(image_features)
            all_pos = all_gather_with_grad(pos_features)
            all_neg = all_gather_with_grad(neg_features)
            all_pos_mask, all_neg_mask = all_gather_no_grad(pos_mask), all_gather_no_grad(neg_mask)
            all_pos_ids, all_neg_ids = all_gather_no_grad(pos_ids), all_gather_no_grad(neg_ids)
        else:
            all_images, all_pos, all_neg = image_features, pos_features, neg_features
            all_pos_mask, all_neg_mask, all_pos_ids, all_neg_ids = pos_mask, neg_mask, pos_ids, neg_ids
        containment = image_keys is not None
        if containment:
            pos_keys = torch.zeros_like(pos_ids) if pos_keys is None else pos_keys
            neg_keys = torch.zeros_like(neg_ids) if neg_keys is None else neg_keys
            if world > 1:
                image_keys = _gather_padded(image_keys)
                pos_keys, neg_keys = all_gather_no_grad(pos_keys), all_gather_no_grad(neg_keys)
            sorted_image_keys = image_keys.sort(dim=1).values
            text_keys = torch.cat([pos_keys.reshape(-1), neg_keys.reshape(-1)])
        n_images = all_images.shape[0]
        texts = torch.cat([all_pos, all_neg])
        text_valid = torch.cat([all_pos_mask.reshape(-1), all_neg_mask.reshape(-1)])
        n_pos_columns = all_pos.shape[0]
        is_pos_column = torch.arange(texts.shape[0], device=device) < n_pos_columns

        # owns[i, u]: image i has a (filled) positive whose text is u; equal texts = the same sub-graph
        text_uid = torch.unique(torch.cat([all_pos_ids.reshape(-1), all_neg_ids.reshape(-1)]), return_inverse=True)[1]
        owns = torch.zeros(n_images, int(text_uid.max()) + 1, dtype=torch.bool, device=device)
        owner_of_slot = torch.arange(n_images, device=device).repeat_interleave(kp)
        filled = all_pos_mask.reshape(-1)
        owns[owner_of_slot[filled], text_uid[:n_pos_columns][filled]] = True

        first_image = self.rank * b if local else 0
        rows = slice(first_image, first_image + b) if local else slice(0, n_images)
        row_images = image_features if local else all_images
        n_rows = row_images.shape[0]

        # image -> texts. Positives of image i: every positive column whose text i owns (its own slots
        # and equal texts of other images) or whose sub-graph is in G_i; such a negative column is left out.
        match = owns[rows][:, text_uid]
        if containment:
            match |= _contains(sorted_image_keys[rows], text_keys)
        match &= text_valid
        positive = match & is_pos_column
        excluded = ~text_valid | (match & ~is_pos_column) if self.mask_denominators else ~text_valid
        logits_i2t = (logit_scale * row_images @ texts.T).masked_fill(excluded, float("-inf"))
        logp_i2t = logits_i2t.log_softmax(dim=1)
        n_positive = positive.sum(1)
        per_image = torch.where(positive, logp_i2t, 0.0).sum(1) / n_positive.clamp(min=1)
        has_pos = n_positive > 0
        i2t_sum = -per_image[has_pos].sum()

        # positive text -> images: target = its owner; masked: other images owning the same text or holding
        # its sub-graph are left out
        col_slots = torch.arange(first_image * kp, (first_image + n_rows) * kp, device=device)
        col_features = pos_features if local else all_pos
        col_valid = filled[col_slots]
        owners = col_slots // kp
        logits_t2i = logit_scale * col_features @ all_images.T
        if self.mask_denominators:
            also_owner = owns[:, text_uid[col_slots]].T  # (columns, images)
            if containment:
                also_owner |= _contains(sorted_image_keys, text_keys[col_slots]).T
            also_owner[torch.arange(col_slots.shape[0], device=device), owners] = False
            logits_t2i = logits_t2i.masked_fill(also_owner, float("-inf"))
        logp_t2i = logits_t2i.log_softmax(dim=1).gather(1, owners[:, None])[:, 0]
        t2i_sum = -logp_t2i[col_valid].sum()

        n_rows_with_pos = has_pos.sum().to(logits_i2t.dtype)
        n_columns = col_valid.sum().to(logits_i2t.dtype)
        scale = 1.0
        if local:
            n_rows_with_pos, n_columns = all_reduce_sum(torch.stack([n_rows_with_pos, n_columns]).detach())
            scale = float(world)  # DDP averages over ranks; the sum of the ranks' terms is the global loss
        i2t = i2t_sum / n_rows_with_pos.clamp(min=1)
        t2i = t2i_sum / (n_rows_with_pos if self.weighting == "paper" else n_columns).clamp(min=1)
        loss = scale * (i2t + t2i) / 2
        return {"loss": loss, "i2t": scale * i2t, "t2i": scale * t2i}


def _contains(sorted_keys: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """(R, K) rows of key hashes sorted ascending, (C,) key hashes -> (R, C) bool: key c is in row r
    (0 is no key: never contained). One binary search per (row, key)."""
    r, k = sorted_keys.shape
    if k == 0 or keys.numel() == 0:
        return torch.zeros(r, keys.numel(), dtype=torch.bool, device=keys.device)
    query = keys.unsqueeze(0).expand(r, -1).contiguous()
    at = torch.searchsorted(sorted_keys, query).clamp_(max=k - 1)
    return (sorted_keys.gather(1, at) == query) & (query != 0)


def _gather_padded(keys: torch.Tensor) -> torch.Tensor:
    """all_gather of (B, K) key rows whose K differs between ranks: zero-padded to the widest."""
    width = int(all_gather_no_grad(torch.tensor([keys.shape[1]], device=keys.device)).max())
    return all_gather_no_grad(torch.nn.functional.pad(keys, (0, width - keys.shape[1])))


class ContrastiveLoss(MultiPositiveContrastiveLoss):
    """The same loss on a mosaictool.training.batch.Features (what the training loop passes a method's
    loss): loss, i2t, t2i. The batch carries sub-graph keys only for methods whose
    Method.uses_subgraph_keys is True (mosaiclip); without them the loss is the equal-text one."""

    def forward(self, f) -> dict[str, torch.Tensor]:
        return super().forward(f.image, f.pos, f.pos_mask, f.neg, f.neg_mask, f.logit_scale, f.pos_ids, f.neg_ids,
                               f.image_keys, f.pos_keys, f.neg_keys)
