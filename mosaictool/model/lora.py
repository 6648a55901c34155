"""LoRA (Hu et al. 2022) on open_clip's transformer towers, through peft; merged back into plain
weights for checkpoints.

`add_lora(model, rank)` wraps, in place, every attention block (nn.MultiheadAttention: its input and
output projections), both MLP linears (c_fc, c_proj) of every residual block of the image and text
transformers, and the ViT's patch embedding (conv1): the layers FSC-CLIP's code adapts (Oh et al. 2024,
Sec. 4 sets rank 4). Everything else is frozen, logit_scale included; the model keeps its class, so
the training forward, dense features and grad checkpointing see the same modules. Every adapted weight
is W + B A * scaling, B starts at zero (Hu et al. 2022, Sec. 4.1), so training starts from the base
model. (The authors' attention layer initialises its in_proj B xavier-uniform, lora_layers.py:302-304,
so theirs starts off the base model; ours does not.)

As in the authors' code (ytaek-oh/fsc-clip src/training/models/lora_utils/, commit 604015d, which
builds loralib layers with lora_alpha 1): the update B A is added with scale alpha / r = 1 / rank
(lora_layers.py:66, 152, 248), and conv1's adapter is loralib's ConvLoRA (lora_layers.py:146-150):
A (r k, in k), B (out k, r k), B A reshaped to the kernel's shape, not peft's rank-r convolution
pair. On ViT-B-32 that is 3.16M of the 4.14M trainable parameters (peft's conv adapter: 15K). The
attention's adapter is ours too (AttentionLoRA): peft's adds the out_proj update twice.

`merged_state_dict(model)` folds B A into the base weights of a copy and returns a state dict with
exactly the keys of a plain model: checkpoints are plain open_clip weights that evaluate,
wise-ft and open_clip read unchanged. Resumable ones (last.pt) hold the LoRA model's own state dict
beside them (`lora_state`): the adapters A and B, which the merged weights no longer separate.
"""

from __future__ import annotations

import copy
import functools
import re

from mosaictool.errors import MosaicError

# module names (relative to the model) that get an adapter: open_clip's ViT and text transformers
TARGETS = r"(.*\.resblocks\.\d+\.(attn|mlp\.c_fc|mlp\.c_proj))|(visual\.conv1)"
ADAPTER = "default"


def add_lora(model, rank: int, *, dropout: float = 0.0):
    """Wrap `model`'s tower layers with rank-`rank` adapters (in place) and freeze everything else.
    Returns the model."""
    import torch
    from peft import LoraConfig, LoraModel

    if rank < 1:
        raise MosaicError(f"--lora {rank}: the rank must be at least 1 (leave --lora out for full fine-tuning)")
    if is_lora(model):
        return model
    widths = [m.embed_dim for m in model.modules() if isinstance(m, torch.nn.MultiheadAttention)]
    if widths and rank > min(widths):  # B A of a w-wide layer has rank w at most: a larger one only costs memory
        raise MosaicError(f"--lora {rank}: above the width of this model's attention layers ({min(widths)}), which bounds "
                          f"an adapter's rank; choose 1..{min(widths)}")
    config = LoraConfig(r=rank, lora_alpha=1, lora_dropout=dropout, target_modules=TARGETS, bias="none")
    config._register_custom_module({torch.nn.Conv2d: patch_conv_lora_class(),
                                    torch.nn.MultiheadAttention: attention_lora_class()})
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


@functools.cache
def patch_conv_lora_class():
    """peft's LoRA Conv2d with loralib's ConvLoRA adapter (built here: peft imports torch)."""
    import torch
    from peft.tuners.lora.layer import Conv2d
    from torch import nn

    class ConvLoRA(Conv2d):
        """loralib's ConvLoRA as the authors use it on visual.conv1 (lora_layers.py:118-189 at 604015d):
        A (r k, in k) and B (out k, r k), both plain matrices; the update is (B A).view(kernel shape)
        * scaling, added to the kernel before the convolution. peft has no such conv adapter (its own
        is a rank-r conv followed by a 1x1 conv: far fewer parameters), so it is registered as a peft
        custom module: peft's merge, unmerge and merge_and_unload work through get_delta_weight.
        Like loralib's, it has no dropout (the adapter is on the weight, not the input)."""

        def update_layer(self, adapter_name, r, lora_alpha, config, **kwargs):
            super().update_layer(adapter_name, r, lora_alpha=lora_alpha, config=config, **kwargs)
            base = self.get_base_layer()
            k = base.kernel_size[0]
            if base.kernel_size != (k, k) or base.groups != 1:
                raise ValueError(f"ConvLoRA needs a square kernel and groups 1, not {base.kernel_size}, {base.groups}")
            # nn.Linear(n_in, n_out).weight is (n_out, n_in): A (r k, in k), B (out k, r k)
            self.lora_A[adapter_name] = nn.Linear(self.in_features * k, r * k, bias=False)
            self.lora_B[adapter_name] = nn.Linear(r * k, self.out_features * k, bias=False)
            self.reset_lora_parameters(adapter_name, config.init_lora_weights)  # A kaiming-uniform, B zero
            self._move_adapter_to_device_of_base_layer(adapter_name)
            self.set_adapter(self.active_adapters, inference_mode=config.inference_mode)

        def get_delta_weight(self, adapter):
            weight_a, weight_b = self.lora_A[adapter].weight, self.lora_B[adapter].weight
            dtype = weight_a.dtype
            if weight_a.device.type == "cpu" and dtype in (torch.float16, torch.bfloat16):  # slow half matmul on CPU
                weight_a, weight_b = weight_a.float(), weight_b.float()
            delta = (weight_b @ weight_a).view(self.get_base_layer().weight.shape) * self.scaling[adapter]
            return delta.to(dtype)

        def forward(self, x, *args, **kwargs):
            self._check_forward_args(x, *args, **kwargs)
            base = self.get_base_layer()
            active = [a for a in self.active_adapters if a in self.lora_A]
            if self.disable_adapters and self.merged:
                self.unmerge()
            if self.disable_adapters or self.merged or not active:
                return base(x, *args, **kwargs)
            weight = base.weight + sum(self.get_delta_weight(a).to(base.weight.dtype) for a in active)
            return base._conv_forward(x, weight, base.bias)

    return ConvLoRA


@functools.cache
def attention_lora_class():
    """peft's LoRA nn.MultiheadAttention with one update per projection (built here: peft imports torch)."""
    from peft.tuners.lora.layer import MultiheadAttention
    from torch.func import functional_call

    class AttentionLoRA(MultiheadAttention):
        """in_proj W + B A * scaling and out_proj W + B A * scaling (Hu et al. 2022, Eq. 3), as the authors'
        MultiheadAttention computes them (lora_layers.py:551-554, 787-790 at 604015d). peft's own
        layer (0.21.2, the newest release) adds out_proj's update twice in merge(), so its forward and merged
        weights use W + 2 B A while the gradient sees B A (huggingface/peft PR 3774, open).

        The forward runs nn.MultiheadAttention's own forward with the two summed weights substituted
        (torch.func.functional_call): the base weights are never edited, so they stay bit-exact and autograd
        reaches A and B through the sum. merge / unmerge add / subtract each update once, in place."""

        def forward(self, query, *args, **kwargs):
            self._check_forward_args(query, *args, **kwargs)
            base = self.get_base_layer()
            active = [a for a in self.active_adapters if a in self.lora_A]
            if self.disable_adapters and self.merged:
                self.unmerge()
            if self.disable_adapters or self.merged or not active:
                return base(query, *args, **kwargs)
            out_proj = base.out_proj  # peft's Linear around the base layer's out_proj
            w_in, w_out = base.in_proj_weight, out_proj.get_base_layer().weight
            weights = {
                "in_proj_weight": w_in + sum(self.get_delta_weight(a).to(w_in.dtype) for a in active),
                "out_proj.base_layer.weight": w_out + sum(out_proj.get_delta_weight(a).to(w_out.dtype) for a in active),
            }
            return functional_call(base, weights, (query, *args), kwargs)

        def merge(self, safe_merge: bool = False, adapter_names=None) -> None:
            _merge_attention(self, safe_merge, adapter_names)

        def unmerge(self) -> None:
            base = self.get_base_layer()
            while self.merged_adapters:
                adapter = self.merged_adapters.pop()
                if adapter in self.lora_A:
                    base.in_proj_weight.data -= self.get_delta_weight(adapter).to(base.in_proj_weight.dtype)
            if base.out_proj.merged:
                base.out_proj.unmerge()

        def _restore_weights(self):
            """Nothing to restore: the base weights stay registered parameters (peft's layer replaces them by
            plain tensors while merged, and re-registers them here)."""

    return AttentionLoRA


def _merge_attention(layer, safe_merge: bool, adapter_names) -> None:
    """AttentionLoRA.merge: each adapter's in_proj update added to the base weight once, in place, and
    out_proj's merged by its own peft Linear."""
    import torch
    from peft.tuners.tuners_utils import check_adapters_to_merge

    base = layer.get_base_layer()
    for adapter in check_adapters_to_merge(layer, adapter_names):
        if adapter not in layer.lora_A:
            continue
        merged = base.in_proj_weight.data + layer.get_delta_weight(adapter).to(base.in_proj_weight.dtype)
        if safe_merge and not torch.isfinite(merged).all():
            raise ValueError(f"NaNs detected in the merged weights. The adapter {adapter} seems to be broken")
        base.out_proj.merge(safe_merge=safe_merge, adapter_names=[adapter])
        base.in_proj_weight.data = merged
        layer.merged_adapters.append(adapter)


def is_adapted(key: str) -> bool:
    """Whether `key` of a plain model's state dict is a weight `add_lora` adapts (merged: W + B A / r)."""
    module, _, param = key.rpartition(".")
    if module.endswith(".attn.out_proj"):
        return param == "weight" and re.fullmatch(TARGETS, module.removesuffix(".out_proj")) is not None
    wanted = "in_proj_weight" if module.endswith(".attn") else "weight"
    return param == wanted and re.fullmatch(TARGETS, module) is not None


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
