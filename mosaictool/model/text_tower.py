"""open_clip's CLIP text tower run on tokens cut after the longest text of the batch.

Under the causal mask no position after a text's end token reaches its pooled feature (argmax, eos or
first pooling) nor its own tokens' features, so cutting the padding changes no feature and saves the
padding's compute: the demo's captions fill ~14 of 32 positions. Other text towers run whole.
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
