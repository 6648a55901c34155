"""The one batch contract every training method uses.

A batch holds B images and, per image, a fixed number of *slots* for positive texts (Kp) and for
negative texts (Kn); masks say which slots are filled. Only the filled slots' tokens are stored
(row-major: image 0's filled slots first), so the text encoder never sees padding, and the
features are scattered back into the fixed slots before the loss. Fixed slots give every rank
the same tensor shapes, which `all_gather` needs, and make the owner of a positive slot simply
`slot // Kp`.

    method       Kp          Kn
    clip         1           0
    negclip      1           1   (+ hard images: extra samples, each with its own texts)
    mosaiclip    --max-pos   --max-neg   (curriculum stage 1: 1 and 1)

`pos_ids` / `neg_ids` identify each slot's text (a stable hash), so the loss can treat equal texts
of different images as the same sub-graph.

Hard-negative images (NegCLIP) are ordinary samples of the batch: an image with its own caption
and negatives, appended after the B anchors, as NegCLIP's batch is [images; hard images] with
the captions of both. `is_hard` marks them (for statistics only; the loss does not care).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch


@dataclass
class Batch:
    images: torch.Tensor  # (B, 3, H, W) float
    pos_tokens: torch.Tensor  # (pos_mask.sum(), L) long: the filled positive slots, row-major
    pos_mask: torch.Tensor  # (B, Kp) bool; every image has at least one positive
    neg_tokens: torch.Tensor  # (neg_mask.sum(), L) long
    neg_mask: torch.Tensor  # (B, Kn) bool; Kn may be 0
    is_hard: torch.Tensor  # (B,) bool: appended hard-negative image
    indices: torch.Tensor  # (B,) long: dataset index of each image (for tests and debugging)
    pos_ids: torch.Tensor  # (B, Kp) int64: a stable hash of each slot's text (0 for empty slots)
    neg_ids: torch.Tensor  # (B, Kn) int64

    def __post_init__(self) -> None:
        b = self.images.shape[0]
        assert self.pos_mask.shape[0] == b and self.neg_mask.shape[0] == b, "masks must have one row per image"
        assert int(self.pos_mask.sum()) == self.pos_tokens.shape[0], "pos_tokens must hold exactly the filled slots"
        assert int(self.neg_mask.sum()) == self.neg_tokens.shape[0], "neg_tokens must hold exactly the filled slots"

    @property
    def size(self) -> int:
        return self.images.shape[0]

    @property
    def pos_owner(self) -> torch.Tensor:
        """Image index of every filled positive text (in pos_tokens order)."""
        return self.pos_mask.nonzero()[:, 0]

    @property
    def neg_owner(self) -> torch.Tensor:
        return self.neg_mask.nonzero()[:, 0]

    def to(self, device, non_blocking: bool = False) -> "Batch":
        return Batch(**{k: getattr(self, k).to(device, non_blocking=non_blocking) for k in self.__dataclass_fields__})

    def pin_memory(self) -> "Batch":
        return Batch(**{k: getattr(self, k).pin_memory() for k in self.__dataclass_fields__})

    def texts_per_image(self) -> tuple[float, float]:
        b = max(self.size, 1)
        return float(self.pos_mask.sum()) / b, float(self.neg_mask.sum()) / b


def fill_slots(features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scatter the features of the filled slots into a zero tensor of all slots: (B*K, D).
    Differentiable; empty slots are zero and must be masked by the loss."""
    slots = features.new_zeros(mask.numel(), features.shape[-1])
    return slots.index_put((mask.reshape(-1).nonzero()[:, 0],), features)


class ContrastiveForward(torch.nn.Module):
    """images, tokens -> (normalised image features, normalised text features, exp(logit_scale)).

    For open_clip's `CLIP` text tower (causal mask; argmax/eos/first pooling) the tokens are cut after
    the longest text of the batch: under the causal mask no position after a text's end token reaches
    its pooled feature, so features and gradients are unchanged while the tower runs on that length
    instead of the whole context (48 or 77): several times less text compute for captions and
    sub-graph texts. Other text towers run the model's own encode_text. DDP wraps this module.
    """

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.trim = (
            type(model).__name__ == "CLIP"
            and getattr(model, "attn_mask", None) is not None
            and getattr(model, "text_pool_type", None) in ("argmax", "eos", "first")
        )

    def forward(self, images: torch.Tensor, tokens: torch.Tensor):
        m = self.model
        image_f = m.encode_image(images, normalize=True)
        if not self.trim or tokens.shape[0] == 0:
            return image_f, m.encode_text(tokens, normalize=True), m.logit_scale.exp()
        from open_clip.transformer import text_global_pool

        length = int((tokens != 0).sum(1).max())  # the tokenizer pads with 0 after the end token
        tokens = tokens[:, :length]
        cast = m.transformer.get_cast_dtype()
        x = m.token_embedding(tokens).to(cast) + m.positional_embedding[:length].to(cast)
        x = m.ln_final(m.transformer(x, attn_mask=m.attn_mask[:length, :length]))
        x = text_global_pool(x, tokens, m.text_pool_type, eos_token_id=getattr(m, "text_eos_id", None))
        x = m.text_projection(x) if isinstance(m.text_projection, torch.nn.Linear) else x @ m.text_projection
        return image_f, torch.nn.functional.normalize(x, dim=-1), m.logit_scale.exp()


def text_id(text: str) -> int:
    """A 63-bit hash that is the same in every process (Python's hash() is salted per process)."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1 or 1


def batch_features(model, batch: Batch, *, mean, std, device, autocast=contextlib.nullcontext, text_ids: bool = True):
    """One forward pass over a micro-batch (images + all filled text slots as one text batch):
    (image features, positive slots, positive mask, negative slots, negative mask, logit scale,
    positive ids, negative ids), the loss's argument order. `model` is a ContrastiveForward,
    possibly DDP-wrapped. `text_ids=False` passes no ids: every slot is a distinct text."""
    from mosaictool.model.data import normalize_images

    images = normalize_images(batch.images.to(device, non_blocking=True), mean, std)
    tokens = torch.cat([batch.pos_tokens, batch.neg_tokens]).to(device, non_blocking=True)
    with autocast():
        image_f, text_f, scale = model(images, tokens)
    image_f, text_f = image_f.float(), text_f.float()
    n_pos = batch.pos_tokens.shape[0]
    pos_mask, neg_mask = batch.pos_mask.to(device), batch.neg_mask.to(device)
    pos_f, neg_f = fill_slots(text_f[:n_pos], pos_mask), fill_slots(text_f[n_pos:], neg_mask)
    ids = (batch.pos_ids.to(device), batch.neg_ids.to(device)) if text_ids else (None, None)
    return image_f, pos_f, pos_mask, neg_f, neg_mask, scale.float(), *ids
