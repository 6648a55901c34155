"""LoRA (Hu et al. 2022) on open_clip's transformer towers, through peft; merged back into plain
weights for checkpoints.

`add_lora(model, rank)` wraps, in place, every attention block (nn.MultiheadAttention: its input and
output projections), both MLP linears (c_fc, c_proj) of every residual block of the image and text
transformers, and the ViT's patch embedding (conv1): the layers FSC-CLIP's code adapts (seed 002,
Sec. 4 sets rank 4). Everything else is frozen, logit_scale included; the model keeps its class, so
the training forward, dense features and grad checkpointing see the same modules. lora_alpha = rank
(the update B A is added with scale 1); B starts at zero, so training starts from the base model.

`merged_state_dict(model)` folds B A into the base weights of a copy and returns a state dict with
exactly the keys of a plain model: checkpoints are plain open_clip weights that evaluate,
wise-ft and open_clip read unchanged. Resumable ones (last.pt) hold the LoRA model's own state dict
beside them (`lora_state`), base weights included: peft adapts nn.MultiheadAttention by merging B A
into its weights for each forward and subtracting it after, which moves those base weights by
rounding, so only the stored ones resume bit-exactly.
"""

from __future__ import annotations

import copy

from mosaictool.errors import MosaicError

# module names (relative to the model) that get an adapter: open_clip's ViT and text transformers
TARGETS = r"(.*\.resblocks\.\d+\.(attn|mlp\.c_fc|mlp\.c_proj))|(visual\.conv1)"
ADAPTER = "default"


def add_lora(model, rank: int, *, dropout: float = 0.0):
    """Wrap `model`'s tower layers with rank-`rank` adapters (in place) and freeze everything else.
    Returns the model."""
    from peft import LoraConfig, LoraModel

    if rank < 1:
        raise MosaicError(f"--lora {rank}: the rank must be at least 1 (leave --lora out for full fine-tuning)")
    if is_lora(model):
        return model
    config = LoraConfig(r=rank, lora_alpha=rank, lora_dropout=dropout, target_modules=TARGETS, bias="none")
    try:
        tuner = LoraModel(model, config, ADAPTER)  # injects the adapters into `model` itself, freezes the rest
    except ValueError as e:  # peft: no module matched
        raise MosaicError(
            f"--lora: no layer of this model matches {TARGETS!r} (LoRA supports open_clip's ViT and text "
            f"transformer towers): {e}"
        ) from e
    # peft's tuner, kept beside the model (not as a sub-module: the state dict keeps its keys) for
    # merge_and_unload; a deep copy of the model copies it along, pointing at the copy
    object.__setattr__(model, "_lora_tuner", tuner)
    return model


def is_lora(model) -> bool:
    return getattr(model, "_lora_tuner", None) is not None


def merged_model(model):
    """A copy of `model` with every adapter folded into its base weights and the wrappers removed:
    the plain open_clip model (same class, same state-dict keys), all parameters trainable."""
    plain = copy.deepcopy(model)
    tuner = plain.__dict__.pop("_lora_tuner")
    plain = tuner.merge_and_unload(safe_merge=True)
    for p in plain.parameters():
        p.requires_grad_(True)
    return plain


def merged_state_dict(model) -> dict:
    """The state dict of `merged_model(model)`; `model`'s own state dict when it has no adapter."""
    return merged_model(model).state_dict() if is_lora(model) else model.state_dict()


def merged_bundle(bundle):
    """`bundle` (a mosaictool.model.openclip.ModelBundle) with plain weights: its model merged when it
    has adapters (a copy; training goes on with the adapters), else `bundle` itself. What checkpoints
    hold and evaluation scores."""
    import dataclasses

    return dataclasses.replace(bundle, model=merged_model(bundle.model)) if is_lora(bundle.model) else bundle
