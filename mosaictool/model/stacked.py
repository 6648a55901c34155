"""Several open_clip CLIPs of one architecture run as one model: each weight of the R models stacked
on a leading run dimension, every layer one batched op over the runs (`baddbmm`, a LayerNorm with
per-run gain and bias), as PyTorch's model-ensembling recipe stacks its members' weights
(torch.func.stack_module_state), written out by hand: vmap over functional_call measured slower
here, and the towers' length buckets and lazy embedding rows need the shapes in hand.

What it is for: the demo's tiny models pay a per-op price (autograd, dispatch, small kernels; on a
GPU, launches) that does not grow with the op's size; stacked, R fine-tuning runs pay it once
(mosaictool.training.multirun). Each run keeps its own weights, and the forward of run r is the
forward of model r: the losses, gradients and optimiser steps of the runs never mix (the loss of
the stack is the sum of the runs' losses, so run r's gradient is its own loss's).

The text tower cuts its padding as the single-run forward does (mosaictool.training.batch.
ContrastiveForward: under the causal mask no position after a text's end reaches its features),
in a few length buckets over the runs' texts, each run's texts sorted by length. Runs may bring
different numbers of texts: a run with fewer is padded with empty texts whose features are dropped.
Without dense features the last block of each tower runs only at the pooled position (the class
token; the end token), for the same features: nothing else of its output is read.

The token embedding (49,408 x width: ~90% of the demo model's weights) holds, per run, only the
rows a batch ever looked up as a trainable table (`active`): a row no text used has no gradient, so
AdamW's moments stay exactly zero and each step only decays it, p <- p (1 - lr wd) (decoupled weight
decay, Loshchilov & Hutter 2019). Those rows keep their value and the product of the factors
(`pending`), applied when a batch first uses the row or the weights are read. This spares the step
the dense gradient, its norm and the optimiser's pass over ~3M untouched values per run; the result
differs from the dense path only by the rounding of that product (a few float32 ulps). It holds for
AdamW only (SGD's L2 decay enters the gradient and the momentum): with `lazy_rows=False` every row
is trainable.

Supported: open_clip's `CLIP` with a ViT image tower and a causal text transformer of default
residual blocks (what `supports` checks); the engine trains anything else one run at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from mosaictool.model.text_tower import length_buckets, text_lengths, trims_text

EMBEDDING = "token_embedding.weight"


def supports(model) -> str | None:
    """Why `model` cannot be stacked (None: it can)."""
    from open_clip.transformer import LayerNorm, QuickGELU, ResidualAttentionBlock, VisionTransformer

    if not trims_text(model):
        return "its text tower is not open_clip's causal transformer with end-token pooling"
    if getattr(model, "logit_bias", None) is not None or not isinstance(getattr(model, "text_projection", None), nn.Parameter):
        return "it has a logit bias or a linear text projection"
    v = getattr(model, "visual", None)
    if type(v) is not VisionTransformer or v.grid_size[0] != v.grid_size[1] or len(set(v.conv1.kernel_size)) != 1:
        return "its image tower is not open_clip's VisionTransformer on square patches"
    if (v.attn_pool is not None or v.pool_type != "tok" or v.final_ln_after_pool or v.proj is None
            or not isinstance(v.patch_dropout, nn.Identity) or type(v.ln_pre) is not LayerNorm or v.conv1.bias is not None):
        return "its ViT pools or embeds patches other than with the class token"
    for tower in (v.transformer, model.transformer):
        if not tower.batch_first or tower.grad_checkpointing:
            return "its transformer is not batch-first or checkpoints activations"
        for block in tower.resblocks:
            attn = getattr(block, "attn", None)
            if (type(block) is not ResidualAttentionBlock or hasattr(block, "ln_1_kv")
                    or not isinstance(block.ls_1, nn.Identity) or not isinstance(block.ls_2, nn.Identity)
                    or not isinstance(attn, nn.MultiheadAttention) or not attn._qkv_same_embed_dim
                    or attn.in_proj_bias is None or attn.dropout or not attn.batch_first
                    or type(block.ln_1) is not LayerNorm or type(block.ln_2) is not LayerNorm
                    or not isinstance(block.mlp.gelu, (nn.GELU, QuickGELU))):
                return "its residual blocks are not open_clip's default ones"
    return None


@dataclass
class StackedOutput:
    """The features of every run: image (R, B, E) and each run's texts (n_r, E), L2-normalised;
    logit scales (R,), exp()'d; with dense features, per run (None for a run without) its projected
    patch tokens (B, P, E) and its texts' token features (n_r, L_r, E), L_r its longest text."""

    image: torch.Tensor
    texts: list[torch.Tensor]
    logit_scale: torch.Tensor
    patches: list[torch.Tensor | None] | None = None
    tokens: list[torch.Tensor | None] | None = None


class StackedCLIP:
    """R models (`supports`) of one architecture as stacked trainable tensors (`leaves`)."""

    def __init__(self, models: list, *, lazy_rows: bool = True, max_buckets: int = 4):
        first = models[0]
        self.runs = len(models)
        self.device = first.logit_scale.device
        self.max_buckets = max_buckets
        named = [dict(m.named_parameters()) for m in models]
        with torch.no_grad():
            stacked = {k: torch.stack([n[k].detach() for n in named]) for k in named[0]}
        self._ndim = {k: p.ndim for k, p in named[0].items()}
        embedding = stacked.pop(EMBEDDING)
        self.leaves: dict[str, torch.Tensor] = {k: v.requires_grad_() for k, v in stacked.items()}
        # the token embedding: `rows` (R, V, D) holds every row, `active` the vocabulary ids whose
        # rows train (leaves[EMBEDDING], in that order), `slot` each id's place in it (-1: none)
        self.lazy_rows = lazy_rows
        self.rows = embedding
        vocab = embedding.shape[1]
        self.pending = torch.ones(self.runs, dtype=torch.float64, device=self.device)
        self._known = torch.full((vocab,), not lazy_rows)  # on the host: which ids have a slot (no device sync)
        if lazy_rows:
            self.active = torch.zeros(0, dtype=torch.long, device=self.device)
            self.slot = torch.full((vocab,), -1, dtype=torch.long, device=self.device)
            self.leaves[EMBEDDING] = embedding[:, :0].clone().requires_grad_()
        else:
            self.active = torch.arange(vocab, device=self.device)
            self.slot = self.active.clone()
            self.leaves[EMBEDDING] = embedding.clone().requires_grad_()
        v = first.visual
        self.patch = v.conv1.kernel_size[0]
        self.grid = v.grid_size[0]
        self.image_heads = v.transformer.resblocks[0].attn.num_heads
        self.text_heads = first.transformer.resblocks[0].attn.num_heads
        self.image_layers = len(v.transformer.resblocks)
        self.text_layers = len(first.transformer.resblocks)
        self.eps = {name: m.eps for name, m in first.named_modules() if isinstance(m, nn.LayerNorm)}
        self.quick_gelu = not isinstance(v.transformer.resblocks[0].mlp.gelu, nn.GELU)
        self.gelu_approximate = "none" if self.quick_gelu else v.transformer.resblocks[0].mlp.gelu.approximate
        self.pool_type = first.text_pool_type
        self.eos_id = getattr(first, "text_eos_id", None)

    # ---- the parameters ------------------------------------------------------------------------

    def named_leaves(self) -> list[tuple[str, torch.Tensor, int]]:
        """(name, stacked tensor, the ndim of one model's parameter), in the models' parameter order."""
        return [(k, self.leaves[k], self._ndim[k]) for k in self._ndim]

    def use_tokens(self, tokens: list[torch.Tensor], optimizer: torch.optim.Optimizer) -> None:
        """Make the embedding rows of `tokens` (every run's) trainable before the step that reads them:
        each joins with its pending decay applied and zero optimiser state (what it has in a dense run)."""
        if not self.lazy_rows:
            return
        ids = torch.unique(torch.cat([t.reshape(-1).cpu() for t in tokens]))
        new = ids[~self._known[ids]]
        if new.numel() == 0:
            return
        self._known[new] = True
        new = new.to(self.device)
        old = self.leaves[EMBEDDING]
        with torch.no_grad():
            joined = (self.rows[:, new] * self.pending.view(-1, 1, 1)).to(self.rows.dtype)
            grown = torch.cat([old.detach(), joined], dim=1).requires_grad_()
        self.slot[new] = torch.arange(self.active.numel(), self.active.numel() + new.numel(), device=self.device)
        self.active = torch.cat([self.active, new])
        self.leaves[EMBEDDING] = grown
        _replace_param(optimizer, old, grown)

    def after_step(self, lr: float, weight_decay: float) -> None:
        """After the optimiser's step: the untrained rows' decay, logit_scale kept in [0, log 100]."""
        with torch.no_grad():
            self.leaves["logit_scale"].clamp_(0, math.log(100))
        if self.lazy_rows and weight_decay:
            self.pending *= 1 - lr * weight_decay

    def state_dict(self, run: int) -> dict[str, torch.Tensor]:
        """Run `run`'s weights by parameter name (the embedding's every row, its decay applied)."""
        with torch.no_grad():
            out = {k: self.leaves[k][run].detach().clone() for k in self._ndim if k != EMBEDDING}
            table = (self.rows[run] * self.pending[run]).to(self.rows.dtype)
            table[self.active] = self.leaves[EMBEDDING][run].detach()
            out[EMBEDDING] = table
        return out

    def optimizer_state(self, optimizer: torch.optim.Optimizer, run: int) -> dict[str, dict]:
        """Run `run`'s optimiser state by parameter name, in a single model's shapes (the embedding's
        untrained rows: zero, as a dense run has them)."""
        out = {}
        for name, leaf, _ in self.named_leaves():
            state = optimizer.state.get(leaf)
            if not state:
                continue
            if name == EMBEDDING:
                out[name] = {k: _rows_state(v, run, self.active, self.rows.shape[1]) if _per_row(v, leaf) else v.clone()
                             for k, v in state.items()}
            else:
                out[name] = {k: v[run].clone() if _per_row(v, leaf) else v.clone() for k, v in state.items()}
        return out

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, states: list[dict[str, dict]]) -> None:
        """Stack the runs' optimiser states (optimizer_state's form; all runs at the same step). The
        embedding rows with any non-zero state in any run become trainable."""
        if not states or not states[0]:
            return
        if self.lazy_rows and EMBEDDING in states[0]:
            moments = [v for s in states for v in s[EMBEDDING].values() if v.ndim == 2]
            used = torch.stack(moments).ne(0).any(dim=0).any(dim=1).nonzero()[:, 0]
            self.use_tokens([used], optimizer)
        for name, leaf, _ in self.named_leaves():
            if name not in states[0]:
                continue
            one = self.rows.shape[1:] if name == EMBEDDING else leaf.shape[1:]  # a single model's shape
            stacked = {}
            for key, value in states[0][name].items():
                if key == "step" or value.shape != one:  # the step count: the same in every run
                    stacked[key] = value.clone().to(leaf.device)
                elif name == EMBEDDING:
                    stacked[key] = torch.stack([s[name][key].to(leaf.device)[self.active] for s in states])
                else:
                    stacked[key] = torch.stack([s[name][key] for s in states]).to(leaf.device)
            optimizer.state[leaf] = stacked

    # ---- the forward ---------------------------------------------------------------------------

    def forward(self, images: torch.Tensor, texts: list[torch.Tensor], *, text_groups: list[list[int]] | None = None,
                dense: bool | list[bool] = False) -> StackedOutput:
        """images (R, B, 3, S, S) normalised; texts[r] (n_r, context) token ids of run r. `text_groups`:
        runs whose texts go through the text tower together (default: all); `dense` (for every run,
        or per run) adds patch and token features (None for the runs without)."""
        dense = [dense] * self.runs if isinstance(dense, bool) else list(dense)
        image, patches = self._encode_images(images, dense)
        text_out: list = [None] * self.runs
        token_out: list = [None] * self.runs
        for group in text_groups or [list(range(self.runs))]:
            with_tokens = any(dense[r] for r in group)
            feats, toks = self._encode_texts(group, [texts[r] for r in group], with_tokens)
            for j, r in enumerate(group):
                text_out[r] = F.normalize(feats[j], dim=-1)
                if dense[r]:
                    token_out[r] = toks[j]
        return StackedOutput(F.normalize(image, dim=-1), text_out, self.leaves["logit_scale"].exp(),
                             patches if any(dense) else None, token_out if any(dense) else None)

    def _ln(self, x: torch.Tensor, name: str, runs=slice(None)) -> torch.Tensor:
        """LayerNorm over the last dim with run r's gain and bias on x[r] (x: (R, ..., D))."""
        w, b = self.leaves[name + ".weight"][runs], self.leaves[name + ".bias"][runs]
        shape = (w.shape[0],) + (1,) * (x.ndim - 2) + (w.shape[1],)
        y = F.layer_norm(x, x.shape[-1:], eps=self.eps[name])
        return torch.addcmul(b.view(shape).to(y.dtype), y, w.view(shape).to(y.dtype))

    def _linear(self, x: torch.Tensor, weight: str, bias: str, runs=slice(None), rows=slice(None)) -> torch.Tensor:
        """x (R, N, Din) @ run r's weight^T + bias; `rows`: a slice of the weight's output rows."""
        w, b = self.leaves[weight][runs][:, rows], self.leaves[bias][runs][:, rows]
        return torch.baddbmm(b.unsqueeze(1).to(x.dtype), x, w.transpose(1, 2).to(x.dtype))

    def _gelu(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x) if self.quick_gelu else F.gelu(x, approximate=self.gelu_approximate)

    def _block(self, x: torch.Tensor, pre: str, heads: int, causal: bool, runs, at: torch.Tensor | None = None) -> torch.Tensor:
        """One residual block on x (R, N, L, D), `causal`: under the text tower's causal mask; with `at`
        (R, N) only at those positions -> (R, N, 1, D)."""
        r, n, length, d = x.shape
        hd = d // heads
        h = self._ln(x, pre + "ln_1", runs).reshape(r, n * length, d)
        qkv = pre + "attn.in_proj_weight", pre + "attn.in_proj_bias"
        if at is None:
            q, k, v = self._linear(h, *qkv, runs).view(r * n, length, 3, heads, hd).permute(2, 0, 3, 1, 4)
            out_len = length
            base = x
        else:
            k, v = self._linear(h, *qkv, runs, slice(d, 3 * d)).view(r * n, length, 2, heads, hd).permute(2, 0, 3, 1, 4)
            picked = at.reshape(r, n, 1, 1).expand(r, n, 1, d)
            base = x.gather(2, picked)
            hq = h.view(r, n, length, d).gather(2, picked).reshape(r, n, d)
            q = self._linear(hq, *qkv, runs, slice(0, d)).view(r * n, 1, heads, hd).transpose(1, 2)
            out_len = 1
        if causal and at is not None:  # the query's row of the causal mask: no key after it
            later = torch.arange(length, device=x.device) > at.reshape(-1, 1)
            row = torch.zeros(later.shape, dtype=q.dtype, device=x.device).masked_fill_(later, float("-inf"))
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=row.view(r * n, 1, 1, length))
        else:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        a = a.permute(0, 2, 1, 3).reshape(r, n * out_len, d)
        x = base + self._linear(a, pre + "attn.out_proj.weight", pre + "attn.out_proj.bias", runs).view(r, n, out_len, d)
        h = self._ln(x, pre + "ln_2", runs).reshape(r, n * out_len, d)
        h = self._gelu(self._linear(h, pre + "mlp.c_fc.weight", pre + "mlp.c_fc.bias", runs))
        return x + self._linear(h, pre + "mlp.c_proj.weight", pre + "mlp.c_proj.bias", runs).view(r, n, out_len, d)

    def _encode_images(self, images: torch.Tensor, dense: list[bool]) -> tuple[torch.Tensor, list]:
        """-> pooled features (R, B, E), and per run its projected patch tokens (B, P, E) where dense
        (None elsewhere). The last block runs whole only for the runs with dense features."""
        P = self.leaves
        r, b, c = images.shape[:3]
        g, p = self.grid, self.patch
        # the patch embedding (a convolution with stride = kernel) as a matmul over the cut-out patches
        x = images[..., : g * p, : g * p].reshape(r, b, c, g, p, g, p).permute(0, 1, 3, 5, 2, 4, 6)
        x = x.reshape(r, b * g * g, c * p * p)
        w = P["visual.conv1.weight"]
        x = torch.bmm(x, w.reshape(r, w.shape[1], -1).transpose(1, 2).to(x.dtype)).view(r, b, g * g, -1)
        cls = P["visual.class_embedding"].view(r, 1, 1, -1).expand(r, b, 1, -1).to(x.dtype)
        x = torch.cat([cls, x], dim=2) + P["visual.positional_embedding"].unsqueeze(1).to(x.dtype)
        x = self._ln(x, "visual.ln_pre")
        last = self.image_layers - 1
        for i in range(last):
            x = self._block(x, f"visual.transformer.resblocks.{i}.", self.image_heads, False, slice(None))
        pooled, patches = [], [None] * r
        for lo, hi in _runs_of(dense):  # runs alike in dense: one call each, on a view of their weights
            runs = slice(lo, hi)
            at = None if dense[lo] else torch.zeros(hi - lo, b, dtype=torch.long, device=x.device)  # the class token
            y = self._block(x[runs], f"visual.transformer.resblocks.{last}.", self.image_heads, False, runs, at)
            y = self._ln(y, "visual.ln_post", runs)
            proj = P["visual.proj"][runs].to(y.dtype)
            pooled.append(torch.bmm(y[:, :, 0], proj))
            if dense[lo]:
                tokens = torch.bmm(y[:, :, 1:].reshape(hi - lo, -1, y.shape[-1]), proj).view(hi - lo, b, g * g, -1)
                patches[lo:hi] = tokens.unbind(0)
        return torch.cat(pooled), patches

    def _pool_at(self, tokens: torch.Tensor) -> torch.Tensor:
        """The position each text is pooled at (open_clip's text_global_pool)."""
        if self.pool_type == "first":
            return torch.zeros(tokens.shape[:-1], dtype=torch.long, device=tokens.device)
        if self.pool_type == "eos":
            return (tokens == self.eos_id).int().argmax(dim=-1)
        return tokens.argmax(dim=-1)

    def _encode_texts(self, runs: list[int], texts: list[torch.Tensor], dense: bool):
        """The texts of `runs` (each (n_j, context), best on the host: their lengths and order are worked
        out there) -> per run (pooled (n_j, E), token features or None)."""

        P = self.leaves
        r = len(runs)
        contiguous = runs == list(range(runs[0], runs[0] + r))  # a view of the weights, not a copy
        index = slice(runs[0], runs[0] + r) if contiguous else torch.tensor(runs, device=self.device)
        width = max(t.shape[0] for t in texts)
        context = texts[0].shape[1]
        if width == 0:
            empty = P["text_projection"].new_zeros(0, P["text_projection"].shape[1])
            return [empty] * r, [empty.new_zeros(0, 1, empty.shape[1])] * r
        # each run's texts sorted by length, empty texts first: rank j of every run in one bucket
        texts = [t.cpu() for t in texts]
        lengths = [text_lengths(t) for t in texts]
        order = [torch.argsort(ln, stable=True) for ln in lengths]
        padded = torch.zeros(r, width, context, dtype=texts[0].dtype)
        profile = torch.zeros(width, dtype=torch.long)
        ranks = []  # per run: the rank of each of its texts
        for j, (t, o, ln) in enumerate(zip(texts, order, lengths)):
            start = width - t.shape[0]
            padded[j, start:] = t[o]
            profile[start:] = torch.maximum(profile[start:], ln[o])
            back = torch.empty_like(o)
            back[o] = torch.arange(t.shape[0])
            ranks.append(start + back)
        longest = max(1, int(profile.max()))
        padded = padded.to(self.device, non_blocking=True)
        where = torch.cat(ranks).to(self.device, non_blocking=True)
        # a bucket's tower call serves every run: its fixed price in texts is a single run's over R
        buckets = length_buckets(profile.clamp(min=1), self.max_buckets, overhead=max(1, 16 // r))
        ids = self.slot[padded[:, :, :longest]]
        table = P[EMBEDDING][index]
        rows = table.shape[1]
        flat = (ids.clamp(min=0) + torch.arange(r, device=self.device).view(r, 1, 1) * rows).reshape(-1)
        embedded = F.embedding(flat, table.reshape(r * rows, -1)).view(r, width, longest, -1)
        pool_at = self._pool_at(padded[:, :, :longest])
        pooled_parts, token_parts = [], []
        for bucket in buckets:
            lo, hi = int(bucket[0]), int(bucket[-1]) + 1
            length = int(profile[lo:hi].max().clamp(min=1))
            x = embedded[:, lo:hi, :length] + P["positional_embedding"][index, :length].unsqueeze(1).to(embedded.dtype)
            at = pool_at[:, lo:hi].clamp(max=length - 1)
            for i in range(self.text_layers):
                last = i == self.text_layers - 1 and not dense
                x = self._block(x, f"transformer.resblocks.{i}.", self.text_heads, True, index, at if last else None)
            x = self._ln(x, "ln_final", index)
            proj = P["text_projection"][index].to(x.dtype)
            if dense:
                pooled = x.gather(2, at.view(r, -1, 1, 1).expand(r, hi - lo, 1, x.shape[-1]))[:, :, 0]
                tokens = torch.bmm(x.reshape(r, -1, x.shape[-1]), proj).view(r, hi - lo, length, -1)
                token_parts.append(F.pad(tokens, (0, 0, 0, longest - length)))
            else:
                pooled = x[:, :, 0]
            pooled_parts.append(torch.bmm(pooled, proj))
        pooled = torch.cat(pooled_parts, dim=1)  # rank order (the buckets cover the ranks in order)
        token_f = torch.cat(token_parts, dim=1) if dense else None
        out_pooled, out_tokens = [], []
        at = 0
        for j, (t, ln) in enumerate(zip(texts, lengths)):
            n = t.shape[0]
            rank = where[at: at + n]  # text i of run j sits at rank[i]
            at += n
            out_pooled.append(pooled[j].index_select(0, rank))
            if dense:
                cut = max(1, int(ln.max())) if n else 1
                out_tokens.append(token_f[j].index_select(0, rank)[:, :cut])
        return out_pooled, out_tokens if dense else None


def _runs_of(flags: list[bool]) -> list[tuple[int, int]]:
    """The ranges [lo, hi) of consecutive equal flags."""
    cuts = [0] + [i for i in range(1, len(flags)) if flags[i] != flags[i - 1]] + [len(flags)]
    return list(zip(cuts, cuts[1:]))


def _per_row(value: torch.Tensor, leaf: torch.Tensor) -> bool:
    """Whether an optimiser state tensor has the leaf's shape (a moment) rather than a scalar (the step)."""
    return value.shape == leaf.shape


def _rows_state(value: torch.Tensor, run: int, active: torch.Tensor, vocab: int) -> torch.Tensor:
    full = value.new_zeros((vocab,) + tuple(value.shape[2:]))
    full[active] = value[run]
    return full


def _replace_param(optimizer: torch.optim.Optimizer, old: torch.Tensor, new: torch.Tensor) -> None:
    """Put `new` (`old` with rows appended on dim 1) in `old`'s place in the optimiser; its state's
    moments get zero rows (what a row without gradient has)."""
    for group in optimizer.param_groups:
        for i, p in enumerate(group["params"]):
            if p is old:
                group["params"][i] = new
    state = optimizer.state.pop(old, None)
    if state:
        extra = new.shape[1] - old.shape[1]
        optimizer.state[new] = {
            k: torch.cat([v, v.new_zeros((v.shape[0], extra) + tuple(v.shape[2:]))], dim=1) if _per_row(v, old) else v
            for k, v in state.items()}
