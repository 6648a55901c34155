"""WiSE-FT: weight-space ensembles of a zero-shot and a fine-tuned model (Wortsman et al., 2022).

Two rules (`rule`):
  linear    theta(alpha) = (1 - alpha) * theta_zeroshot + alpha * theta_finetuned, every weight in scope
            (Wortsman et al. 2022, Eq. 1; FSC-CLIP's code for fully fine-tuned models).
  fsc-lora  for a `--lora` run: its adapters A and B each scaled by alpha, as FSC-CLIP's code does
            (ytaek-oh/fsc-clip src/training/models/model_utils.py:89-111 at 604015d: the adapters are
            interpolated toward zero, the base weights kept). The update (alpha B)(alpha A) / r shrinks as
            alpha^2, so on the merged checkpoint theta(alpha) = theta_base + alpha^2 (theta_finetuned -
            theta_base): the zero-shot model must be the run's own base (every weight LoRA leaves frozen
            equal), which is checked.

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
from mosaictool.locks import folder_lock
from mosaictool.model import lora
from mosaictool.paths import Write, check_outputs, checkpoint

SCOPES = ("all", "visual", "text")
RULES = ("linear", "fsc-lora")


def weight_of_finetuned(alpha: float, rule: str) -> float:
    """The fine-tuned side's share c in theta = (1 - c) theta_zeroshot + c theta_finetuned."""
    if rule not in RULES:
        raise MosaicError(f"--rule {rule!r}: choose one of {', '.join(RULES)}")
    return alpha if rule == "linear" else alpha * alpha


def in_scope(key: str, scope: str) -> bool:
    if scope == "all":
        return True
    visual = key.startswith("visual.")
    if scope == "visual":
        return visual
    return not visual and key not in ("logit_scale", "logit_bias")


def interpolate(zeroshot: dict, finetuned: dict, alpha: float, scope: str = "all", rule: str = "linear") -> dict:
    """The state dict theta(alpha) by `rule`; non-float tensors (buffers like attention masks) are copied."""
    import torch

    share = weight_of_finetuned(alpha, rule)
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
            merged[key] = ((1 - share) * w0.double() + share * w1.double()).to(w1.dtype)
        else:
            merged[key] = w1.clone()
    return merged


def _zeroshot_state(spec: str, finetuned_path: str, ft_ckpt: dict) -> dict:
    from mosaictool.model import openclip

    try:
        ours = os.path.isfile(spec) and openclip.is_mosaictool_checkpoint(spec)
    except MosaicError as e:  # unreadable, or it carries code
        raise MosaicError(f"--zeroshot {e}") from None
    if ours:
        zs = openclip.read_checkpoint(spec)
        for field in ("model_name", "quick_gelu", "model_cfg"):
            if zs.get(field) != ft_ckpt.get(field):
                raise MosaicError(
                    f"{spec} and {finetuned_path} are different architectures ({field}: {zs.get(field)!r} vs "
                    f"{ft_ckpt.get(field)!r}); WiSE-FT needs the fine-tuned model's own starting point"
                )
        openclip.check_finite(zs["state_dict"], spec)
        state = openclip.without_ddp_prefix(zs["state_dict"])
        openclip.check_dtypes(openclip.without_ddp_prefix(ft_ckpt["state_dict"]), state, spec)
        return state
    # open_clip weights (a tag or a file) for the fine-tuned checkpoint's architecture and activation
    try:
        bundle = openclip.create(ft_ckpt["model_name"], spec, force_quick_gelu=ft_ckpt["quick_gelu"], stored_config=ft_ckpt["model_cfg"])
    except MosaicError as e:
        raise MosaicError(f"--zeroshot {spec}: {e}") from None
    return bundle.model.state_dict()


def check_lora_base(zeroshot: dict, finetuned: dict, ft_ckpt: dict, zeroshot_spec: str, finetuned_path: str) -> None:
    """The fsc-lora rule's preconditions: `finetuned` is a --lora run and `zeroshot` its base (every weight
    LoRA leaves frozen is equal in both)."""
    import torch

    rank = (ft_ckpt.get("config") or {}).get("lora", 0)
    if not rank:
        raise MosaicError(f"--rule fsc-lora scales a LoRA run's adapters, but {finetuned_path} was not trained with "
                          "--lora (its config has no rank): use --rule linear (the authors' rule for such models too)")
    for key, w1 in finetuned.items():
        if torch.is_floating_point(w1) and not lora.is_adapted(key) and not torch.equal(zeroshot[key], w1):
            raise MosaicError(f"--rule fsc-lora: {zeroshot_spec} is not the base of the LoRA run {finetuned_path} "
                              f"({key}, a weight --lora leaves frozen, differs); give the run's starting weights")


def output_name(alpha: float, rule: str) -> str:
    """`wise_ft_alpha_<alpha>.pt` (linear, the default) or `wise_ft_<rule>_alpha_<alpha>.pt`."""
    return f"wise_ft_alpha_{alpha:.3f}.pt" if rule == "linear" else f"wise_ft_{rule}_alpha_{alpha:.3f}.pt"


def wise_ft(
    zeroshot: str,
    finetuned: str,
    alphas: Sequence[float],
    *,
    out: str | os.PathLike,
    scope: str = "all",
    rule: str = "linear",
    device: str = "cpu",
) -> list[Path]:
    """Write one checkpoint per alpha to `out/<output_name(alpha, rule)>`; returns their paths.
    The weights are mixed on `device` and written back from the CPU (readable anywhere). None of
    them may be a checkpoint it reads; the folder is locked while they are written."""
    if scope not in SCOPES:
        raise MosaicError(f"--scope {scope!r}: choose one of {', '.join(SCOPES)}")
    weight_of_finetuned(0.0, rule)  # refuses an unknown rule before any file is read
    if not alphas:
        raise MosaicError("give at least one --alpha")
    bad = [a for a in alphas if not 0 <= a <= 1]
    if bad:
        raise MosaicError(f"--alpha {bad[0]}: alphas lie in [0, 1] (0 = zero-shot, 1 = fine-tuned)")
    alphas = [alpha + 0.0 for alpha in alphas]  # -0.0 is alpha 0, not a file named "-0.000"
    out = Path(out)
    names = [output_name(alpha, rule) for alpha in alphas]
    for i, name in enumerate(names):
        first = names.index(name)
        if first != i:  # the second would replace the first's file
            twice = "is given twice" if alphas[first] == alphas[i] else f"and {alphas[first]} both name {name} (three decimals)"
            raise MosaicError(f"--alpha {alphas[i]} {twice}: give each alpha once")
    check_outputs([Write("--out", out, tuple(names))], [*checkpoint("--finetuned", finetuned), *checkpoint("--zeroshot", zeroshot)])
    with folder_lock(out, "mosaictool wise-ft"):
        return _write(zeroshot, finetuned, alphas, names, out, scope, rule, device)


def _write(zeroshot: str, finetuned: str, alphas: Sequence[float], names: list[str], out: Path, scope: str, rule: str,
           device: str) -> list[Path]:
    from mosaictool.model import openclip

    if os.path.isfile(zeroshot) and os.path.isfile(finetuned) and os.path.samefile(zeroshot, finetuned):
        raise MosaicError(f"{finetuned}: given as both --zeroshot and --finetuned: every alpha would be this model; "
                          "--zeroshot takes the weights the fine-tuning started from")
    ft_bundle = openclip.load_checkpoint(finetuned)
    ft_ckpt = openclip.read_checkpoint(finetuned)
    theta1 = {k: v.to(device, copy=True) for k, v in ft_bundle.model.state_dict().items()}
    theta0 = {k: v.to(device) for k, v in _zeroshot_state(zeroshot, finetuned, ft_ckpt).items()}
    if rule == "fsc-lora":
        check_lora_base(theta0, theta1, ft_ckpt, zeroshot, finetuned)
    keep = {k: v for k, v in ft_ckpt.items() if k in ("config", "method", "step", "total_steps")}
    paths = []
    for alpha, name in zip(alphas, names):
        ft_bundle.model.load_state_dict(interpolate(theta0, theta1, alpha, scope, rule))
        path = out / name
        openclip.save_checkpoint(
            path, ft_bundle, **keep,
            wise_ft={"alpha": alpha, "scope": scope, "rule": rule, "finetuned_share": weight_of_finetuned(alpha, rule),
                     "zeroshot": str(zeroshot), "finetuned": str(finetuned)},
        )
        paths.append(path)
    return paths
