"""open_clip's CLIP text tower run on tokens cut after the longest text of the batch.

Under the causal mask no position after a text's end token reaches its pooled feature (argmax, eos or
first pooling) nor its own tokens' features, so cutting the padding changes no feature and saves the
padding's compute: the demo's captions fill ~14 of 32 positions. Other text towers run whole.
`length_buckets` splits a batch of texts into length groups, so that the tower runs once per group
on that group's longest length.
"""

from __future__ import annotations

import torch


def trims_text(model) -> bool:
    """Whether `model` is open_clip's CLIP with a causal text mask and end-of-text pooling."""
    return (
        type(model).__name__ == "CLIP"
        and getattr(model, "attn_mask", None) is not None
        and getattr(model, "text_pool_type", None) in ("argmax", "eos", "first")
    )


def text_lengths(tokens: torch.Tensor) -> torch.Tensor:
    """Each text's positions up to its last non-padding token (the tokenizer pads with 0 after the end
    token; not the count of non-zero tokens: "!" is token 0 and can sit inside a text)."""
    positions = torch.arange(1, tokens.shape[1] + 1, device=tokens.device)
    return (tokens.ne(0) * positions).amax(dim=1)


def text_tower(model, tokens: torch.Tensor, embedded: torch.Tensor, length: int, dense: bool = False):
    """CLIP.encode_text (not normalised) on `tokens` cut to `length`, given their token embeddings (at
    least `length` positions) -> (pooled features, per-token features (N, length, D) with `dense`, else
    None); both projected."""
    from open_clip.transformer import text_global_pool

    tokens = tokens[:, :length]
    cast = model.transformer.get_cast_dtype()
    x = embedded[:, :length].to(cast) + model.positional_embedding[:length].to(cast)
    x = model.ln_final(model.transformer(x, attn_mask=model.attn_mask[:length, :length]))
    pooled = text_global_pool(x, tokens, model.text_pool_type, eos_token_id=getattr(model, "text_eos_id", None))
    proj = model.text_projection
    project = proj if isinstance(proj, torch.nn.Linear) else (lambda t: t @ proj)
    return project(pooled), project(x) if dense else None


def encode_text(model, tokens: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """model.encode_text(tokens), on the tokens cut after the longest text where `trims_text(model)`."""
    if not trims_text(model) or tokens.shape[0] == 0:
        return model.encode_text(tokens, normalize=normalize)
    length = max(1, int(text_lengths(tokens).max()))
    pooled, _ = text_tower(model, tokens, model.token_embedding(tokens[:, :length]), length)
    return torch.nn.functional.normalize(pooled, dim=-1) if normalize else pooled


def length_buckets(lengths: torch.Tensor, max_buckets: int = 3, overhead: int = 16) -> list[torch.Tensor]:
    """Split texts into at most `max_buckets` groups of indices (each ascending; groups by rising length)
    so that running the text tower once per group, padded to the group's longest text, costs least.

    Cost of a group = (its texts + `overhead`) * its longest length: the token positions it pads to,
    plus a fixed per-call price in text-equivalents, so that a split which saves a few positions
    does not add a tower call. Exact: a dynamic programme over the sorted distinct lengths (at most
    the context length of them), as an optimal split only ever cuts between lengths. Ties go to
    fewer groups; the result depends only on `lengths`. Empty input -> []."""
    if max_buckets < 1:
        raise ValueError(f"max_buckets must be >= 1, got {max_buckets}")
    lengths = lengths.detach().cpu().reshape(-1)
    if lengths.numel() == 0:
        return []
    values, counts = (t.tolist() for t in torch.unique(lengths, sorted=True, return_counts=True))
    k = len(values)
    before = [0]  # before[i]: texts shorter than values[i]
    for c in counts:
        before.append(before[-1] + c)

    def cost(s: int, i: int) -> int:  # one group holding the distinct lengths values[s:i]
        return (before[i] - before[s] + overhead) * values[i - 1]

    # best[j][i]: least cost of the i shortest distinct lengths in j groups; start[j][i]: where its last group starts
    best = [[None] * (k + 1) for _ in range(max_buckets + 1)]
    start = [[0] * (k + 1) for _ in range(max_buckets + 1)]
    best[0][0] = 0
    for j in range(1, max_buckets + 1):
        for i in range(j, k + 1):
            for s in range(j - 1, i):
                if best[j - 1][s] is not None:
                    c = best[j - 1][s] + cost(s, i)
                    if best[j][i] is None or c < best[j][i]:
                        best[j][i], start[j][i] = c, s
    n_groups = min((j for j in range(1, max_buckets + 1) if best[j][k] is not None), key=lambda j: (best[j][k], j))
    cuts, i = [], k
    for j in range(n_groups, 0, -1):
        cuts.append((start[j][i], i))
        i = start[j][i]
    return [((lengths >= values[s]) & (lengths <= values[i - 1])).nonzero()[:, 0] for s, i in reversed(cuts)]
