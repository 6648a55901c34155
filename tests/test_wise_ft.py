"""WiSE-FT interpolation: endpoints, scopes, metadata, architecture checks."""

from __future__ import annotations

import json

import pytest
import torch

from mosaictool.cli import app
from mosaictool.errors import MosaicError
from mosaictool.model import openclip
from mosaictool.model.wise_ft import interpolate, wise_ft
from train_fixtures import TINY_MODEL, write_tiny_model


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
    assert mid["wise_ft"] == {"alpha": 0.5, "scope": "visual", "zeroshot": str(pair / "zs.pt"), "finetuned": str(pair / "ft.pt")}
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
