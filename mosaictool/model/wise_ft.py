"""WiSE-FT: weight-space ensembles of a zero-shot and a fine-tuned model (Wortsman et al., 2022).

    theta(alpha) = (1 - alpha) * theta_zeroshot + alpha * theta_finetuned

alpha = 0 is the zero-shot model, 1 the fine-tuned one. `scope` picks the interpolated weights:
`all` (every floating-point tensor, as FSC-CLIP does), `visual` (the image tower `visual.*` only:
MosaiCLIP_WiSE-FT) or `text` (everything outside `visual.*` except logit_scale/logit_bias).
Weights outside the scope keep their fine-tuned values. Both models must be the same architecture
(same keys and shapes; for two mosaictool checkpoints also the same model config and activation).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from mosaictool.errors import MosaicError

SCOPES = ("all", "visual", "text")


def in_scope(key: str, scope: str) -> bool:
    if scope == "all":
        return True
    visual = key.startswith("visual.")
    if scope == "visual":
        return visual
    return not visual and key not in ("logit_scale", "logit_bias")


def interpolate(zeroshot: dict, finetuned: dict, alpha: float, scope: str = "all") -> dict:
    """The state dict theta(alpha); non-float tensors (buffers like attention masks) are copied."""
    import torch

    if scope not in SCOPES:
        raise MosaicError(f"--scope {scope!r}: choose one of {', '.join(SCOPES)}")
    if zeroshot.keys() != finetuned.keys():
        only0 = sorted(zeroshot.keys() - finetuned.keys())[:3]
        only1 = sorted(finetuned.keys() - zeroshot.keys())[:3]
        raise MosaicError(f"the two models have different weights (only zero-shot: {only0}; only fine-tuned: {only1})")
    merged = {}
    for key, w1 in finetuned.items():
        w0 = zeroshot[key]
        if w0.shape != w1.shape:
            raise MosaicError(f"{key}: shape {tuple(w0.shape)} (zero-shot) vs {tuple(w1.shape)} (fine-tuned): different architectures")
        if torch.is_floating_point(w1) and in_scope(key, scope):
            merged[key] = ((1 - alpha) * w0.double() + alpha * w1.double()).to(w1.dtype)
        else:
            merged[key] = w1.clone()
    return merged


def _zeroshot_state(spec: str, finetuned_path: str, ft_ckpt: dict) -> dict:
    from mosaictool.model import openclip

    if os.path.isfile(spec) and openclip.is_mosaictool_checkpoint(spec):
        zs = openclip.read_checkpoint(spec)
        for field in ("model_name", "quick_gelu", "model_cfg"):
            if zs.get(field) != ft_ckpt.get(field):
                raise MosaicError(
                    f"{spec} and {finetuned_path} are different architectures ({field}: {zs.get(field)!r} vs "
                    f"{ft_ckpt.get(field)!r}); WiSE-FT needs the fine-tuned model's own starting point"
                )
        openclip.check_finite(zs["state_dict"], spec)
        return {k.removeprefix("module."): v for k, v in zs["state_dict"].items()}
    # open_clip weights (a tag or a file) for the fine-tuned checkpoint's architecture and activation
    try:
        bundle = openclip.create(ft_ckpt["model_name"], spec, force_quick_gelu=ft_ckpt["quick_gelu"])
    except MosaicError as e:
        raise MosaicError(f"--zeroshot {spec}: {e}") from None
    return bundle.model.state_dict()


def wise_ft(
    zeroshot: str,
    finetuned: str,
    alphas: Sequence[float],
    *,
    out: str | os.PathLike,
    scope: str = "all",
    device: str = "cpu",
) -> list[Path]:
    """Write one checkpoint per alpha to `out/wise_ft_alpha_<alpha>.pt`; returns their paths.
    The weights are mixed on `device` and written back from the CPU (readable anywhere)."""
    from mosaictool.model import openclip

    if scope not in SCOPES:
        raise MosaicError(f"--scope {scope!r}: choose one of {', '.join(SCOPES)}")
    if not alphas:
        raise MosaicError("give at least one --alpha")
    bad = [a for a in alphas if not 0 <= a <= 1]
    if bad:
        raise MosaicError(f"--alpha {bad[0]}: alphas lie in [0, 1] (0 = zero-shot, 1 = fine-tuned)")
    ft_bundle = openclip.load_checkpoint(finetuned)
    ft_ckpt = openclip.read_checkpoint(finetuned)
    theta1 = {k: v.to(device, copy=True) for k, v in ft_bundle.model.state_dict().items()}
    theta0 = {k: v.to(device) for k, v in _zeroshot_state(zeroshot, finetuned, ft_ckpt).items()}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    keep = {k: v for k, v in ft_ckpt.items() if k in ("config", "method", "step", "total_steps")}
    paths = []
    for alpha in alphas:
        ft_bundle.model.load_state_dict(interpolate(theta0, theta1, alpha, scope))
        path = out / f"wise_ft_alpha_{alpha:.3f}.pt"
        openclip.save_checkpoint(
            path, ft_bundle, **keep,
            wise_ft={"alpha": alpha, "scope": scope, "zeroshot": str(zeroshot), "finetuned": str(finetuned)},
        )
        paths.append(path)
    return paths
