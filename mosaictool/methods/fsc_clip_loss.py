"""FSC-CLIP's loss (Oh et al. 2024, Eq. 1-11) as pure tensor functions and an nn.Module; the method
(texts, slots, flags) is mosaictool.methods.fsc_clip, whose docstring has the equations and the
choices the paper leaves open."""

from __future__ import annotations

import torch
from torch import nn

from mosaictool.model.collectives import all_reduce_sum

# the rules for an image's empty HN slots (--empty-hn-slots): "zero" keeps them in the softmax with
# logit 0 (the authors' code), "drop" leaves them out
EMPTY_SLOT_RULES = ("zero", "drop")


def hn_logits_global(image_features: torch.Tensor, pos_features: torch.Tensor, neg_features: torch.Tensor,
                     logit_scale: torch.Tensor) -> torch.Tensor:
    """log S_g of each image with its caption and its K HN slots: (B, 1+K).

    image_features (B, D) and pos_features (B, D) L2-normalised; neg_features (B, K, D) (empty slots
    any value)."""
    texts = torch.cat([pos_features[:, None], neg_features], dim=1)
    return logit_scale * torch.einsum("bd,bkd->bk", image_features, texts)


def text_aligned_patches(patch_tokens: torch.Tensor, token_features: torch.Tensor) -> torch.Tensor:
    """v^ of Eq. 6-7 for every (image, text, token): (B, T, W, D).

    patch_tokens (B, P, D): projected patch embeddings v_p of each image; token_features (B, T, W, D):
    T texts of W token embeddings t_w per image. The weights carry no gradient (see the module doc)."""
    with torch.no_grad():
        s = torch.einsum("btwd,bpd->btwp", token_features, patch_tokens)
        low = s.amin(dim=-1, keepdim=True)
        span = s.amax(dim=-1, keepdim=True) - low
        # a span within rounding error of s (|s_wp| <= |t_w| max_p |v_p|) is a tie: (s - low) / span
        # would turn rounding noise into weights
        bound = token_features.norm(dim=-1, keepdim=True) * patch_tokens.norm(dim=-1).amax(-1)[:, None, None, None]
        tie = span <= 1000 * torch.finfo(s.dtype).eps * bound
        a = torch.where(tie, 1.0, (s - low) / torch.where(tie, 1.0, span))
        a = a / a.sum(dim=-1, keepdim=True)  # >= 1 before: the max patch has weight 1
    return torch.einsum("btwp,bpd->btwd", a, patch_tokens)


def hn_logits_local(patch_tokens: torch.Tensor, token_features: torch.Tensor, token_mask: torch.Tensor,
                    logit_scale: torch.Tensor) -> torch.Tensor:
    """log S_l (Eq. 8) of each image with each of its texts: (B, T).

    token_mask (B, T, W) bool: the tokens that count. A text without any valid token gets -inf
    (it must be masked by the caller)."""
    v_hat = nn.functional.normalize(text_aligned_patches(patch_tokens, token_features), dim=-1)
    t = nn.functional.normalize(token_features, dim=-1)
    per_token = logit_scale * (v_hat * t).sum(-1)  # cos(v^_w, t_w) / tau: (B, T, W)
    empty = ~token_mask.any(-1, keepdim=True)
    # a text with no valid token: count all its tokens (finite gradients), then -inf as a whole
    scores = per_token.masked_fill(~(token_mask | empty), float("-inf")).logsumexp(-1)
    return scores.masked_fill(empty[..., 0], float("-inf"))


def focal_hn_loss(logits: torch.Tensor, neg_mask: torch.Tensor, *, gamma: float, smoothing: float,
                  empty_slots: str = "zero") -> torch.Tensor:
    """Focal(p_i, y~_i) of Eq. 9-10 per image: (B,). logits (B, 1+K) = log S (column 0: the caption),
    neg_mask (B, K) bool: filled HN slots. Images without HN get 0 (the caller leaves them out).

    empty_slots: "zero" (the authors' code) keeps an empty slot in the softmax with logit 0, what
    their zero-filled features and scores give, and target 0; "drop" leaves it out of the softmax."""
    valid = torch.cat([torch.ones_like(neg_mask[:, :1]), neg_mask], dim=1)
    if empty_slots == "zero":
        logp = torch.where(valid, logits, 0.0).log_softmax(dim=1)
    elif empty_slots == "drop":
        logp = logits.masked_fill(~valid, float("-inf")).log_softmax(dim=1)
        logp = torch.where(valid, logp, 0.0)  # no -inf * 0 (nan) in the sums or their gradients
    else:
        raise ValueError(f"empty_slots {empty_slots!r}: one of {EMPTY_SLOT_RULES}")
    p = torch.where(valid, logp.exp(), 0.0)
    n_texts = valid.sum(1, keepdim=True).to(logits.dtype)  # 1 + K_i
    target = valid.to(logits.dtype) * smoothing / n_texts
    target[:, 0] += 1.0 - smoothing
    return -(target * (1.0 - p).pow(gamma) * logp).sum(1)


class FSCCLIPLoss(nn.Module):
    """L_total of Eq. 11 with its named terms: loss, clip, i2t, t2i, hn_global, hn_local.

    The HN terms are reported unweighted; `loss` weighs them with lambda_global and lambda_local."""

    def __init__(self, *, lambda_global: float = 0.5, lambda_local: float = 0.2, focal_gamma: float = 2.0,
                 label_smoothing: float = 0.02, empty_hn_slots: str = "zero", local_loss: bool = False, rank: int = 0,
                 world_size: int = 1):
        super().__init__()
        from mosaictool.model.losses import MultiPositiveContrastiveLoss

        self.lambda_global = lambda_global
        self.lambda_local = lambda_local
        self.gamma = focal_gamma
        self.smoothing = label_smoothing
        self.empty_hn_slots = empty_hn_slots
        self.world_size = world_size
        self.clip = MultiPositiveContrastiveLoss(local_loss=local_loss, rank=rank, world_size=world_size)

    def forward(self, f) -> dict[str, torch.Tensor]:
        """The loss on a mosaictool.training.batch.Features (one positive slot per image)."""
        b, k = f.neg_mask.shape
        if f.pos_mask.shape[1] != 1:
            raise ValueError("fsc-clip takes one positive slot per image (the caption)")
        d = f.image.shape[1]
        dense = {}
        if f.dense is not None:
            w = f.dense.pos_tokens.shape[1]
            pos_token_mask, neg_token_mask = f.dense.pos_token_mask.clone(), f.dense.neg_token_mask.clone()
            pos_token_mask[:, 0] = False  # the start token: the same embedding for every text (causal mask)
            neg_token_mask[:, 0] = False
            dense = dict(patch_tokens=f.dense.patches, pos_tokens=f.dense.pos_tokens, pos_token_mask=pos_token_mask,
                         neg_tokens=f.dense.neg_tokens.view(b, k, w, -1), neg_token_mask=neg_token_mask.view(b, k, w))
        return self.compute(f.image, f.pos, f.neg.view(b, k, d), f.neg_mask, f.logit_scale, pos_ids=f.pos_ids, **dense)

    def compute(
        self,
        image_features: torch.Tensor,  # (B, D) normalised
        pos_features: torch.Tensor,  # (B, D) normalised: the caption of each image (one positive slot)
        neg_features: torch.Tensor,  # (B, K, D) normalised, empty slots any value
        neg_mask: torch.Tensor,  # (B, K) bool
        logit_scale: torch.Tensor,  # exp()'d
        patch_tokens: torch.Tensor | None = None,  # (B, P, D) projected patch embeddings
        pos_tokens: torch.Tensor | None = None,  # (B, W, D) caption token embeddings (projected)
        pos_token_mask: torch.Tensor | None = None,  # (B, W) bool
        neg_tokens: torch.Tensor | None = None,  # (B, K, W, D)
        neg_token_mask: torch.Tensor | None = None,  # (B, K, W) bool
        pos_ids: torch.Tensor | None = None,  # (B, 1) text identities for L_clip (equal captions)
    ) -> dict[str, torch.Tensor]:
        b = image_features.shape[0]
        ones = torch.ones(b, 1, dtype=torch.bool, device=image_features.device)
        no_neg = image_features.new_zeros(0, image_features.shape[1])
        empty = torch.zeros(b, 0, dtype=torch.bool, device=image_features.device)
        empty_ids = None if pos_ids is None else pos_ids.new_zeros(b, 0)
        clip = self.clip(image_features, pos_features, ones, no_neg, empty, logit_scale, pos_ids, empty_ids)

        has_hn = neg_mask.any(1)
        n_hn = has_hn.sum().to(image_features.dtype)
        scale = 1.0
        if self.world_size > 1:
            n_hn = all_reduce_sum(n_hn.detach())
            scale = float(self.world_size)  # DDP averages over ranks: the ranks' terms sum to the global one
        denominator = n_hn.clamp(min=1)

        def term(logits):
            per_image = focal_hn_loss(logits, neg_mask, gamma=self.gamma, smoothing=self.smoothing,
                                      empty_slots=self.empty_hn_slots)
            return scale * torch.where(has_hn, per_image, 0.0).sum() / denominator

        out = {"clip": clip["loss"], "i2t": clip["i2t"], "t2i": clip["t2i"]}
        total = clip["loss"]
        if self.lambda_global:
            out["hn_global"] = term(hn_logits_global(image_features, pos_features, neg_features, logit_scale))
            total = total + self.lambda_global * out["hn_global"]
        if self.lambda_local:
            if patch_tokens is None or pos_tokens is None or neg_tokens is None:
                raise ValueError("the local HN loss needs patch_tokens, pos_tokens and neg_tokens (dense features)")
            tokens = torch.cat([pos_tokens[:, None], neg_tokens], dim=1)
            token_mask = torch.cat([pos_token_mask[:, None], neg_token_mask], dim=1)
            out["hn_local"] = term(hn_logits_local(patch_tokens, tokens, token_mask, logit_scale))
            total = total + self.lambda_local * out["hn_local"]
        out["loss"] = total
        return out
