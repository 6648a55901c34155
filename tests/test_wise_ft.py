"""WiSE-FT interpolation: endpoints, scopes, metadata, architecture checks."""

from __future__ import annotations

import json

import pytest
import torch

from helpers import refused_leaving_files
from mosaictool.cli import app
from mosaictool.errors import MosaicError
from mosaictool.model import openclip
from mosaictool.model.wise_ft import interpolate, wise_ft
from train_fixtures import TINY_MODEL, lora_reference_weights, write_tiny_model


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("wise")
    cfg = write_tiny_model(root)
    zs = openclip.create("test-tiny", model_config_file=cfg, seed=1)
    ft = openclip.create("test-tiny", model_config_file=cfg, seed=2)
    openclip.save_checkpoint(root / "zs.pt", zs)
    openclip.save_checkpoint(root / "ft.pt", ft, config={"method": "mosaiclip"}, step=7)
    torch.save(zs.model.state_dict(), root / "zs_weights.pt")  # plain open_clip weights file
    return root


def test_interpolate_endpoints_midpoint_and_scopes():
    zs = {"visual.w": torch.zeros(2), "transformer.w": torch.zeros(2), "logit_scale": torch.tensor(0.0),
          "attn_mask": torch.tensor([1, 2])}
    ft = {"visual.w": torch.ones(2), "transformer.w": torch.full((2,), 2.0), "logit_scale": torch.tensor(4.0),
          "attn_mask": torch.tensor([3, 4])}
    assert interpolate(zs, ft, 0.0)["visual.w"].tolist() == [0, 0]
    assert interpolate(zs, ft, 1.0)["transformer.w"].tolist() == [2, 2]
    half = interpolate(zs, ft, 0.25)
    assert half["visual.w"].tolist() == [0.25, 0.25] and float(half["logit_scale"]) == 1.0
    assert half["attn_mask"].tolist() == [3, 4]  # integer buffers are copied, not blended
    vis = interpolate(zs, ft, 0.0, "visual")
    assert vis["visual.w"].tolist() == [0, 0] and vis["transformer.w"].tolist() == [2, 2] and float(vis["logit_scale"]) == 4
    txt = interpolate(zs, ft, 0.0, "text")
    assert txt["visual.w"].tolist() == [1, 1] and txt["transformer.w"].tolist() == [0, 0] and float(txt["logit_scale"]) == 4
    with pytest.raises(MosaicError, match="different weights"):
        interpolate({"a": torch.zeros(1)}, {"b": torch.zeros(1)}, 0.5)
    with pytest.raises(MosaicError, match="different architectures"):
        interpolate({"a": torch.zeros(1)}, {"a": torch.zeros(2)}, 0.5)


def test_wise_ft_checkpoints(pair):
    paths = wise_ft(str(pair / "zs.pt"), str(pair / "ft.pt"), [0, 0.5, 1], out=pair / "out", scope="visual")
    assert [p.name for p in paths] == ["wise_ft_alpha_0.000.pt", "wise_ft_alpha_0.500.pt", "wise_ft_alpha_1.000.pt"]
    zs, ft = (openclip.read_checkpoint(pair / n)["state_dict"] for n in ("zs.pt", "ft.pt"))
    mid = openclip.read_checkpoint(paths[1])
    assert mid["wise_ft"] == {"alpha": 0.5, "scope": "visual", "rule": "linear", "finetuned_share": 0.5,
                              "zeroshot": str(pair / "zs.pt"), "finetuned": str(pair / "ft.pt")}
    assert mid["step"] == 7 and mid["config"] == {"method": "mosaiclip"}
    key = "visual.conv1.weight"
    torch.testing.assert_close(mid["state_dict"][key], (zs[key] + ft[key]) / 2)
    assert torch.equal(mid["state_dict"]["token_embedding.weight"], ft["token_embedding.weight"])
    assert torch.equal(openclip.read_checkpoint(paths[0])["state_dict"][key], zs[key])
    openclip.load_checkpoint(paths[1])  # a loadable model


def test_zeroshot_as_open_clip_weights_file_equals_checkpoint(pair):
    a = wise_ft(str(pair / "zs_weights.pt"), str(pair / "ft.pt"), [0.3], out=pair / "a")[0]
    b = wise_ft(str(pair / "zs.pt"), str(pair / "ft.pt"), [0.3], out=pair / "b")[0]
    sa, sb = openclip.read_checkpoint(a)["state_dict"], openclip.read_checkpoint(b)["state_dict"]
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


def test_refuses_other_architectures(pair, tmp_path, runner):
    wide = dict(TINY_MODEL, embed_dim=48)
    cfg = tmp_path / "test-wide.json"
    cfg.write_text(json.dumps(wide))
    openclip.save_checkpoint(tmp_path / "wide.pt", openclip.create("test-wide", model_config_file=cfg, seed=0))
    with pytest.raises(MosaicError, match="different architectures"):
        wise_ft(str(tmp_path / "wide.pt"), str(pair / "ft.pt"), [0.5], out=tmp_path / "o")
    result = runner.invoke(app, ["wise-ft", "--zeroshot", str(tmp_path / "wide.pt"), "--finetuned",
                                 str(pair / "ft.pt"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and "different architectures" in result.stderr
    assert not list((tmp_path / "o").glob("*.pt"))


def test_cli(pair, runner):
    result = runner.invoke(app, ["wise-ft", "--zeroshot", str(pair / "zs.pt"), "--finetuned", str(pair / "ft.pt"),
                                 "--alpha", "0.25,0.75", "--scope", "text", "--out", str(pair / "cli")])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == [str(pair / "cli" / "wise_ft_alpha_0.250.pt"), str(pair / "cli" / "wise_ft_alpha_0.750.pt")]
    for args, message in ((["--alpha", "2"], "lie in [0, 1]"), (["--alpha", "x"], "comma-separated"),
                          (["--scope", "both"], "choose one of all, visual, text")):
        bad = runner.invoke(app, ["wise-ft", "--zeroshot", str(pair / "zs.pt"), "--finetuned", str(pair / "ft.pt"),
                                  "--out", str(pair / "bad"), *args])
        assert bad.exit_code == 1 and message in bad.stderr, bad.output


# ---- a LoRA run: ours (linear in the merged weights) and FSC-CLIP's (adapters scaled by alpha) --------


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    """base.pt (the run's start), ft.pt (the adapters, random, merged into it, config lora 2, as train
    writes it) and the LoRA model itself (its A and B, for the hand reference)."""
    import dataclasses

    from mosaictool.model import lora

    root = tmp_path_factory.mktemp("wise_lora")
    cfg = write_tiny_model(root)
    base = openclip.create("test-tiny", model_config_file=cfg, seed=1)
    openclip.save_checkpoint(root / "base.pt", base)
    model = lora.add_lora(openclip.create("test-tiny", model_config_file=cfg, seed=1).model, 2)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    openclip.save_checkpoint(root / "ft.pt", dataclasses.replace(base, model=lora.merged_model(model)),
                             config={"method": "fsc-clip", "lora": 2})
    return root, base.model.state_dict(), model


def with_adapters_scaled(model, alpha):
    """FSC-CLIP's patch_wise_ft on a LoRA model, by hand: every A and B times alpha, the base kept."""
    import copy

    scaled = copy.deepcopy(model)
    with torch.no_grad():
        for n, p in scaled.named_parameters():
            if "lora_" in n:
                p.mul_(alpha)
    return scaled


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.5, 1.0])
def test_fsc_lora_rule_is_the_adapters_scaled_by_alpha(lora_run, tmp_path, alpha):
    root, base, model = lora_run
    (path,) = wise_ft(str(root / "base.pt"), str(root / "ft.pt"), [alpha], out=tmp_path, rule="fsc-lora")
    assert path.name == f"wise_ft_fsc-lora_alpha_{alpha:.3f}.pt"
    ckpt = openclip.read_checkpoint(path)
    assert ckpt["wise_ft"]["rule"] == "fsc-lora" and ckpt["wise_ft"]["finetuned_share"] == pytest.approx(alpha ** 2)
    want = lora_reference_weights(base, with_adapters_scaled(model, alpha), 2)  # W + (alpha B)(alpha A) / r
    for k in base:
        torch.testing.assert_close(ckpt["state_dict"][k], want[k], msg=lambda m: f"{k}: {m}")
    key = "visual.transformer.resblocks.0.attn.out_proj.weight"
    delta = lora_reference_weights(base, model, 2)[key] - base[key]
    torch.testing.assert_close(ckpt["state_dict"][key], base[key] + alpha ** 2 * delta)  # the update shrinks as alpha^2


def test_linear_rule_on_a_lora_run_moves_the_update_linearly(lora_run, tmp_path):
    """Ours: with the un-adapted base as zero-shot, theta(alpha) = W + alpha dW; at 0.5 the two rules differ
    (half the update vs a quarter)."""
    root, base, model = lora_run
    ours, theirs = (wise_ft(str(root / "base.pt"), str(root / "ft.pt"), [0.5], out=tmp_path / rule, rule=rule)[0]
                    for rule in ("linear", "fsc-lora"))
    full = lora_reference_weights(base, model, 2)
    key = "transformer.resblocks.0.mlp.c_fc.weight"
    linear, fsc = (openclip.read_checkpoint(p)["state_dict"][key] for p in (ours, theirs))
    torch.testing.assert_close(linear, base[key] + 0.5 * (full[key] - base[key]))
    torch.testing.assert_close(fsc, base[key] + 0.25 * (full[key] - base[key]))
    assert ours.name == "wise_ft_alpha_0.500.pt" and openclip.read_checkpoint(ours)["wise_ft"]["rule"] == "linear"


def test_fsc_lora_rule_refuses_a_full_fine_tune_and_a_foreign_base(lora_run, pair, tmp_path, runner):
    root, _, _ = lora_run
    with pytest.raises(MosaicError, match="not trained with --lora"):
        wise_ft(str(pair / "zs.pt"), str(pair / "ft.pt"), [0.5], out=tmp_path / "a", rule="fsc-lora")
    other = tmp_path / "other.pt"  # same architecture, other weights: not the LoRA run's base
    openclip.save_checkpoint(other, openclip.create("test-tiny", model_config_file=write_tiny_model(tmp_path), seed=5))
    with pytest.raises(MosaicError, match=r"not the base of the LoRA run .*frozen"):
        wise_ft(str(other), str(root / "ft.pt"), [0.5], out=tmp_path / "b", rule="fsc-lora")
    result = runner.invoke(app, ["wise-ft", "--zeroshot", str(root / "base.pt"), "--finetuned", str(root / "ft.pt"),
                                 "--rule", "fsc", "--out", str(tmp_path / "c")])
    assert result.exit_code == 1 and "--rule 'fsc': choose one of linear, fsc-lora" in result.stderr
    assert not any(tmp_path.glob("[abc]/*.pt"))
    result = runner.invoke(app, ["wise-ft", "--zeroshot", str(root / "base.pt"), "--finetuned", str(root / "ft.pt"),
                                 "--rule", "fsc-lora", "--alpha", "0.5", "--out", str(tmp_path / "d")])
    assert result.exit_code == 0 and result.stdout.split() == [str(tmp_path / "d" / "wise_ft_fsc-lora_alpha_0.500.pt")]


# --- bad input (moved from test_bad_flags_more.py) ---

@pytest.mark.parametrize("alpha", ["0.5,,1", "0.5,", ",0.5"])
def test_wise_ft_alpha_empty_item(tmp_path, alpha):
    refused_leaving_files(tmp_path, ["wise-ft", "--zeroshot", tmp_path / "a.pt", "--finetuned", tmp_path / "b.pt", "--out", tmp_path / "w",
                       "--alpha", alpha], f"--alpha {alpha!r}", "empty item")

