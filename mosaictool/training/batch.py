"""The one batch contract every training method uses.

A batch holds B images and, per image, a fixed number of *slots* for positive texts (Kp) and for
negative texts (Kn); masks say which slots are filled. Only the filled slots' tokens are stored
(row-major: image 0's filled slots first), so the text encoder never sees padding, and the
features are scattered back into the fixed slots before the loss. Fixed slots give every rank
the same tensor shapes, which `all_gather` needs, and make the owner of a positive slot simply
`slot // Kp`.

Each method (mosaictool.methods) says how many slots it wants at a step (Method.slots) and fills
them (Method.select): clip 1 + 0, negclip 1 + 1, mosaiclip --max-pos + --max-neg.

`pos_ids` / `neg_ids` identify each slot's text (a stable hash), so the loss can treat equal texts
of different images as the same sub-graph. For methods with Method.uses_subgraph_keys (mosaiclip)
`image_keys` holds each image's sub-graph keys (record `subgraph_keys`) and `pos_keys` / `neg_keys`
each slot's key (`texts.*.key`), hashed like the ids, 0 = none: the loss's P(i) by containment
(docs/stages.md, decompose; docs/training.md). Other methods carry None there.

Hard-negative images are ordinary samples of the batch: an image with its own caption
and negatives, appended after the B anchors, as NegCLIP's batch is [images; hard images] with
the captions of both. `is_hard` marks them (for statistics only; the loss does not care).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from mosaictool.model.text_tower import length_buckets, text_lengths, text_tower, trims_text


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
    image_keys: torch.Tensor | None = None  # (B, K) int64: hashes of each image's sub-graph keys, 0-padded
    pos_keys: torch.Tensor | None = None  # (B, Kp) int64: hash of each slot's sub-graph key (0: none / empty)
    neg_keys: torch.Tensor | None = None  # (B, Kn) int64

    def __post_init__(self) -> None:
        b = self.images.shape[0]
        assert self.pos_mask.shape[0] == b and self.neg_mask.shape[0] == b, "masks must have one row per image"
        assert int(self.pos_mask.sum()) == self.pos_tokens.shape[0], "pos_tokens must hold exactly the filled slots"
        assert int(self.neg_mask.sum()) == self.neg_tokens.shape[0], "neg_tokens must hold exactly the filled slots"

    @property
    def size(self) -> int:
        return self.images.shape[0]

    def to(self, device, non_blocking: bool = False) -> "Batch":
        return Batch(**{k: None if v is None else v.to(device, non_blocking=non_blocking) for k, v in self._fields()})

    def pin_memory(self) -> "Batch":
        return Batch(**{k: None if v is None else v.pin_memory() for k, v in self._fields()})

    def _fields(self):
        return ((k, getattr(self, k)) for k in self.__dataclass_fields__)

    def texts_per_image(self) -> tuple[float, float]:
        b = max(self.size, 1)
        return float(self.pos_mask.sum()) / b, float(self.neg_mask.sum()) / b


def fill_slots(features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scatter the features of the filled slots into a zero tensor of all slots: (B*K, *F).
    Differentiable; empty slots are zero and must be masked by the loss."""
    slots = features.new_zeros(mask.numel(), *features.shape[1:])
    return slots.index_put((mask.reshape(-1).nonzero()[:, 0],), features)


def _cat_padded(parts: list[torch.Tensor]) -> torch.Tensor:
    """Concatenate along dim 0, zero-padding (False for bool) every other dim to the largest part."""
    shape = [max(p.shape[d] for p in parts) for d in range(1, parts[0].ndim)]
    padded = []
    for p in parts:
        pad = [x for d in reversed(range(1, p.ndim)) for x in (0, shape[d - 1] - p.shape[d])]
        padded.append(torch.nn.functional.pad(p, pad) if any(pad) else p)
    return torch.cat(padded)


@dataclass
class DenseFeatures:
    """Per-patch and per-token features in the joint space (projected, not normalised), for losses
    that align text tokens with image patches (FSC-CLIP). Text rows are in slot layout like
    Features.pos / .neg; W is the longest text of the micro-batch (padding: mask False)."""

    patches: torch.Tensor  # (B, P, D): the ViT's output tokens without the class token, projected
    pos_tokens: torch.Tensor  # (B*Kp, W, D): every token of each positive slot (zeros in empty slots)
    pos_token_mask: torch.Tensor  # (B*Kp, W) bool: the text's tokens, start and end tokens included
    neg_tokens: torch.Tensor  # (B*Kn, W, D)
    neg_token_mask: torch.Tensor  # (B*Kn, W) bool


@dataclass
class Features:
    """What a loss gets: the features of a batch in slot layout. For --accum-freq the micro-batches'
    Features are joined field by field (Features.cat), so a loss sees the big batch's layout."""

    image: torch.Tensor  # (B, D) L2-normalised
    pos: torch.Tensor  # (B*Kp, D) L2-normalised positive slots, image-major; empty slots zero
    pos_mask: torch.Tensor  # (B, Kp) bool
    neg: torch.Tensor  # (B*Kn, D)
    neg_mask: torch.Tensor  # (B, Kn) bool
    logit_scale: torch.Tensor  # scalar, exp()'d
    pos_ids: torch.Tensor | None = None  # (B, Kp) int64 text identities; None: every slot is distinct
    neg_ids: torch.Tensor | None = None  # (B, Kn)
    image_keys: torch.Tensor | None = None  # (B, K) int64 sub-graph key hashes (Batch.image_keys); None: no keys
    pos_keys: torch.Tensor | None = None  # (B, Kp) int64
    neg_keys: torch.Tensor | None = None  # (B, Kn)
    dense: DenseFeatures | None = None  # only when the method asks for it (Method.dense)

    @staticmethod
    def cat(parts: list["Features"], logit_scale: torch.Tensor) -> "Features":
        def join(get):
            values = [get(p) for p in parts]
            return None if values[0] is None else _cat_padded(values)

        dense = None
        if parts[0].dense is not None:
            dense = DenseFeatures(**{f: join(lambda p, f=f: getattr(p.dense, f)) for f in DenseFeatures.__dataclass_fields__})
        fields = [f for f in Features.__dataclass_fields__ if f not in ("logit_scale", "dense")]
        return Features(**{f: join(lambda p, f=f: getattr(p, f)) for f in fields}, logit_scale=logit_scale, dense=dense)


class ContrastiveForward(torch.nn.Module):
    """images, tokens -> (normalised image features, normalised text features, exp(logit_scale)).

    For open_clip's `CLIP` text tower (causal mask; argmax/eos/first pooling) each text only needs the
    positions up to its end token: under the causal mask no later position reaches its pooled
    feature (nor, for `dense`, its own tokens' features). So the texts are split into a few length
    buckets (length_buckets) and the tower runs once per bucket on that bucket's longest length,
    features put back in the batch order: MosaiCLIP's batches mix a few long captions with many
    short sub-graph texts, and padding all of them to the longest costs ~2.5x the text compute of
    3 buckets (perf/text_buckets.py).
    Features and gradients are unchanged (one bucket is the plain cut after the longest text). All
    buckets use the same parameters, so DDP (which wraps this module) sees each used once per
    backward. Other text towers run the model's own encode_text.
    """

    def __init__(self, model, max_buckets: int = 3):
        super().__init__()
        self.model = model
        self.max_buckets = max_buckets
        self.trim = trims_text(model)

    def forward(self, images: torch.Tensor, tokens: torch.Tensor, dense: bool = False):
        """-> (image features, text features, scale), plus (patch tokens (N, P, D), token features
        (T, L', D)) with `dense` (both projected, not normalised; L' the longest text; a shorter
        bucket's positions past its longest text are zero, which the token mask `tokens != 0` hides)."""
        m = self.model
        if dense:
            if not self.trim or not hasattr(m.visual, "_pool"):
                from mosaictool.errors import MosaicError

                raise MosaicError(f"{type(m.visual).__name__}: this method needs patch and token features, which only "
                                  "open_clip's ViT + text transformer (CLIP) towers give here; choose a ViT model")
            v = m.visual
            pooled, patches = v._pool(v.transformer(v._embeds(images)))
            if v.proj is not None:
                pooled, patches = pooled @ v.proj, patches @ v.proj
            image_f = torch.nn.functional.normalize(pooled, dim=-1)
        else:
            image_f = m.encode_image(images, normalize=True)
        if not self.trim or tokens.shape[0] == 0:
            text_f = m.encode_text(tokens, normalize=True)
            extra = (patches, text_f.new_zeros(0, 1, text_f.shape[-1])) if dense else ()  # no text: no tokens
            return image_f, text_f, m.logit_scale.exp(), *extra
        lengths = text_lengths(tokens).cpu()
        groups = length_buckets(lengths, self.max_buckets)
        longest = int(lengths.max())
        # one embedding lookup for every bucket: its backward writes a dense (vocabulary x width)
        # gradient, which per bucket cost ~7 ms a bucket on the demo's tiny model (perf/step_profile.py)
        embedded = m.token_embedding(tokens[:, :longest])
        if len(groups) == 1:
            pooled, token_f = text_tower(m, tokens, embedded, longest, dense)
        else:
            parts = [text_tower(m, tokens[g.to(tokens.device)], embedded[g.to(tokens.device)], int(lengths[g].max()), dense)
                     for g in groups]
            inverse = torch.argsort(torch.cat(groups)).to(tokens.device)  # batch position -> row of the buckets' output
            pooled = torch.cat([p for p, _ in parts]).index_select(0, inverse)
            token_f = None
            if dense:  # each bucket's positions zero-padded to the longest text
                token_f = torch.cat([torch.nn.functional.pad(t, (0, 0, 0, longest - t.shape[1]))
                                     for _, t in parts]).index_select(0, inverse)
        text_f = torch.nn.functional.normalize(pooled, dim=-1)
        if dense:
            return image_f, text_f, m.logit_scale.exp(), patches, token_f
        return image_f, text_f, m.logit_scale.exp()


def normalize_images(images: torch.Tensor, mean, std, dtype=torch.float32) -> torch.Tensor:
    """uint8 (B, 3, H, W) -> normalised float, on whatever device the images are."""
    mean_t = torch.tensor(mean, device=images.device, dtype=dtype).view(1, 3, 1, 1) * 255
    std_t = torch.tensor(std, device=images.device, dtype=dtype).view(1, 3, 1, 1) * 255
    return (images.to(dtype) - mean_t) / std_t


def batch_features(model, batch: Batch, *, mean, std, device, autocast=contextlib.nullcontext, text_ids: bool = True,
                   dense: bool = False) -> Features:
    """One forward pass over a micro-batch (images + all filled text slots as one text batch).
    `model` is a ContrastiveForward, possibly DDP-wrapped. `text_ids=False` passes no ids and no
    sub-graph keys: every slot is a distinct text. `dense` adds the patch and token features (DenseFeatures)."""
    images = normalize_images(batch.images.to(device, non_blocking=True), mean, std)
    tokens = batch_tokens(batch).to(device, non_blocking=True)
    with autocast():
        out = model(images, tokens, dense) if dense else model(images, tokens)
    return slot_features(batch, out[0], out[1], out[2], tokens, device=device, text_ids=text_ids,
                         dense=(out[3], out[4]) if dense else None)


def batch_tokens(batch: Batch) -> torch.Tensor:
    """The micro-batch's texts as one text batch: its filled positive slots, then its negative ones."""
    return torch.cat([batch.pos_tokens, batch.neg_tokens])


def slot_features(batch: Batch, image_f: torch.Tensor, text_f: torch.Tensor, scale: torch.Tensor, tokens: torch.Tensor,
                  *, device, text_ids: bool = True, dense: tuple[torch.Tensor, torch.Tensor] | None = None) -> Features:
    """A micro-batch's Features from its encoded images and texts (batch_tokens order): the texts put
    in their slots, with ids and sub-graph keys (unless `text_ids` is False); `dense`: (patch tokens,
    token features)."""
    image_f, text_f = image_f.float(), text_f.float()
    n_pos = batch.pos_tokens.shape[0]
    pos_mask, neg_mask = batch.pos_mask.to(device), batch.neg_mask.to(device)
    feats = Features(
        image=image_f, pos=fill_slots(text_f[:n_pos], pos_mask), pos_mask=pos_mask,
        neg=fill_slots(text_f[n_pos:], neg_mask), neg_mask=neg_mask, logit_scale=scale.float(),
        pos_ids=batch.pos_ids.to(device) if text_ids else None, neg_ids=batch.neg_ids.to(device) if text_ids else None,
    )
    if text_ids and batch.image_keys is not None:
        feats.image_keys, feats.pos_keys, feats.neg_keys = (
            t.to(device) for t in (batch.image_keys, batch.pos_keys, batch.neg_keys))
    if dense is not None:
        patches, token_f = dense[0].float(), dense[1].float()
        token_mask = tokens[:, : token_f.shape[1]] != 0
        feats.dense = DenseFeatures(
            patches=patches,
            pos_tokens=fill_slots(token_f[:n_pos], pos_mask), pos_token_mask=fill_slots(token_mask[:n_pos], pos_mask),
            neg_tokens=fill_slots(token_f[n_pos:], neg_mask), neg_token_mask=fill_slots(token_mask[n_pos:], neg_mask),
        )
    return feats


def make_forward_backward(cfg, method, model, images, precision, info) -> Callable:
    """A run's (a TrainConfig's) forward and backward over a step's micro-batches: -> the last micro-batch's
    loss terms. `images` has the model's mean and std, `precision` autocast() and backward(loss)."""
    train_model = ContrastiveForward(model)
    if info.distributed:
        ddp_kwargs = {"device_ids": [info.device]} if precision.device_type == "cuda" else {}
        train_model = torch.nn.parallel.DistributedDataParallel(train_model, **ddp_kwargs)
    loss_fn = method.make_loss(local_loss=cfg.local_loss, rank=info.rank, world_size=info.world_size)

    def encode(batch):
        return batch_features(train_model, batch, mean=images.mean, std=images.std, device=info.device,
                              autocast=precision.autocast, text_ids=cfg.merge_equal_texts, dense=method.dense)

    def forward_backward(micro: list) -> dict:
        if len(micro) == 1:
            losses = loss_fn(encode(micro[0]))
            precision.backward(losses["loss"])
            return losses
        # Features of every micro-batch without gradient first; then each micro-batch again with
        # gradient, joined with the others' cached features field by field (Features.cat), so
        # the loss sees the big batch's layout.
        with torch.no_grad():
            cached = [encode(b) for b in micro]
        for j, b in enumerate(micro):
            last = j == len(micro) - 1
            sync = contextlib.nullcontext() if last or not info.distributed else train_model.no_sync()
            with sync:
                live = encode(b)
                parts = [live if m == j else cached[m] for m in range(len(micro))]
                scale = live.logit_scale if last else live.logit_scale.detach()  # its gradient counted once
                losses = loss_fn(Features.cat(parts, scale))
                precision.backward(losses["loss"])
        return losses

    return forward_backward
