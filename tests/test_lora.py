"""LoRA through peft on open_clip's towers: only adapters train, and the merged model is a plain
open_clip model with the LoRA model's embeddings."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mosaictool.errors import MosaicError
from mosaictool.model import lora, openclip
from train_fixtures import lora_reference_weights, write_tiny_model


@pytest.fixture
def tiny(tmp_path):
    cfg = write_tiny_model(tmp_path)
    return lambda: openclip.create("test-tiny", model_config_file=cfg, seed=0)


def embed(model, bundle):
    g = torch.Generator().manual_seed(1)
    images = torch.randn(3, 3, 32, 32, generator=g)
    tokens = bundle.tokenizer(["a red circle left of a blue square", "a green square", "two yellow circles"])
    with torch.no_grad():
        return model.encode_image(images), model.encode_text(tokens)


@pytest.mark.slow
def test_adapters_start_at_the_base_model_and_only_they_train(tiny):
    bundle = tiny()
    before = embed(bundle.model, bundle)
    lora.add_lora(bundle.model, 4)
    after = embed(bundle.model, bundle)
    for a, b in zip(before, after):
        torch.testing.assert_close(a, b)  # B = 0 at the start
    trainable = [n for n, p in bundle.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    # both towers, attention included
    for part in ("visual.transformer.resblocks.0.attn", "visual.transformer.resblocks.0.mlp.c_fc", "visual.conv1",
                 "transformer.resblocks.0.attn", "transformer.resblocks.0.mlp.c_proj"):
        assert any(n.startswith(part) for n in trainable), part


def test_gradients_reach_every_adapter(tiny):
    bundle = tiny()
    model = lora.add_lora(bundle.model, 2)
    with torch.no_grad():  # B != 0, so that A gets gradients too
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    images = torch.randn(2, 3, 32, 32)
    tokens = bundle.tokenizer(["a red circle", "a blue square"])
    (model.encode_image(images).sum() + model.encode_text(tokens).sum()).backward()
    for n, p in model.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and p.grad.abs().sum() > 0, n


def test_merged_model_is_plain_open_clip_with_the_lora_embeddings(tiny, tmp_path):
    bundle = tiny()
    plain_keys = set(bundle.model.state_dict())
    model = lora.add_lora(bundle.model, 4)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.2)
    lora_embeddings = embed(model, bundle)
    merged = lora.merged_model(model)
    assert set(merged.state_dict()) == plain_keys
    assert not lora.is_lora(merged) and lora.is_lora(model)  # the training model keeps its adapters
    # the merged weights differ from the base ones (the adapters did something) ...
    base = tiny().model.state_dict()
    assert not torch.equal(merged.state_dict()["visual.transformer.resblocks.0.mlp.c_fc.weight"],
                           base["visual.transformer.resblocks.0.mlp.c_fc.weight"])
    # ... and a plain model that loads them (strict), through a mosaictool checkpoint, embeds like the LoRA model
    import dataclasses

    path = tmp_path / "merged.pt"
    openclip.save_checkpoint(path, dataclasses.replace(bundle, model=merged))
    loaded = openclip.load_checkpoint(path)
    assert not lora.is_lora(loaded.model)
    for got, want in zip(embed(loaded.model, loaded), lora_embeddings):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert set(lora.merged_state_dict(model)) == plain_keys
    assert set(lora.merged_state_dict(loaded.model)) == plain_keys  # no adapter: its own weights


def test_bad_rank_is_a_clear_error(tiny):
    with pytest.raises(MosaicError, match="--lora 0"):
        lora.add_lora(tiny().model, 0)


# ---- `train --lora RANK` end to end (tiny model, CPU) ------------------------------------------


@pytest.fixture
def run_config(tmp_path):
    from mosaictool.training import TrainConfig
    from train_fixtures import make_world

    data, model_cfg = make_world(tmp_path / "w", n=8), write_tiny_model(tmp_path)
    return lambda out, **kw: TrainConfig(**{**dict(data=str(data), out=str(tmp_path / out), model_config=str(model_cfg),
                                                   batch_size=4, steps=2, warmup=1, lr=1e-2, lora=4, quiet=True), **kw})


def test_train_lora_writes_plain_open_clip_weights(run_config, tiny):
    """Only the adapters train (the base is what it was), and final.pt is what merging them gives: a plain
    open_clip CLIP, built from the config alone, loads it strictly and embeds like the trained LoRA model."""
    import copy
    import json

    import open_clip

    from mosaictool.training import train

    trained = {}
    final = train(run_config("run"), on_step=lambda step, metrics, model: trained.update(model=copy.deepcopy(model)))
    model = trained["model"]
    fresh = tiny()
    base = fresh.model.state_dict()
    start = lora.add_lora(tiny().model, 4).state_dict()
    for k, v in model.state_dict().items():
        if "lora_B" in k:
            assert v.abs().sum() > 0, k  # the adapters trained (B starts at zero)
        elif ".lora_" not in k:  # base weights untouched, bit for bit (the attention's forward never edits them)
            torch.testing.assert_close(v, start[k], rtol=0, atol=0, msg=k)
    weights = openclip.read_checkpoint(final)["state_dict"]
    merged = lora.merged_state_dict(model)
    assert weights.keys() == base.keys() == merged.keys()
    for k in base:
        torch.testing.assert_close(weights[k], merged[k], rtol=0, atol=0, msg=k)
    reference = lora_reference_weights(base, model, 4)  # every adapted weight W + B A / rank, by hand
    for k in base:
        torch.testing.assert_close(weights[k], reference[k], msg=lambda m: f"{k}: {m}")
    changed = {k for k in base if not torch.equal(weights[k], base[k])}
    assert {"visual.transformer.resblocks.0.attn.in_proj_weight", "transformer.resblocks.0.attn.out_proj.weight"} <= changed
    assert "visual.conv1.weight" in changed and "transformer.resblocks.0.mlp.c_proj.weight" in changed
    assert not any(k.endswith("bias") or ".ln_" in k or k in ("logit_scale", "positional_embedding") for k in changed)
    plain = open_clip.CLIP(**json.loads(Path(run_config("run").model_config).read_text()))
    plain.load_state_dict(weights)  # strict
    for got, want in zip(embed(plain, fresh), embed(model, fresh)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_train_lora_resume_is_exact(run_config, tmp_path):
    """4 steps in one go = 2 steps, a stop, --resume for the last 2 (LoRA model and optimizer restored);
    last.pt holds plain merged weights (evaluate / --pretrained read it) with the LoRA model beside them."""
    from mosaictool.training import TrainConfig, train

    reference = openclip.read_checkpoint(train(run_config("ref", steps=4)))["state_dict"]

    def stop(step, metrics, model):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(run_config("cut", steps=4, save_every=2), on_step=stop)
    last = openclip.read_checkpoint(tmp_path / "cut" / "last.pt")
    assert last["step"] == 2 and last["state_dict"].keys() == reference.keys()
    assert any(".lora_B." in k for k in last["lora_state"])
    assert not lora.is_lora(openclip.load_checkpoint(tmp_path / "cut" / "last.pt").model)
    resumed = openclip.read_checkpoint(train(TrainConfig(data="", out=str(tmp_path / "cut"), quiet=True), resume=True))
    for k in reference:
        torch.testing.assert_close(resumed["state_dict"][k], reference[k], rtol=0, atol=0, msg=k)


def test_train_negative_rank_is_one_line_naming_lora(run_config, tmp_path):
    from typer.testing import CliRunner

    from mosaictool.cli import app

    cfg = run_config("neg")
    result = CliRunner().invoke(app, ["train", "--data", cfg.data, "--model-config", cfg.model_config, "--lora", "-1",
                                      "--out", cfg.out])
    assert result.exit_code == 1 and "--lora -1" in result.output and "Traceback" not in result.output
    assert not Path(cfg.out).exists()


# ---- against the FSC-CLIP authors' LoRA ----------------------------------------------------------
# ytaek-oh/fsc-clip at commit 604015db3f009a8f7485f1fb7e21d8343c67664a: src/training/models/lora_utils/
# patch.py (which layers get an adapter, each built with lora_alpha 1) and lora_layers.py (their shapes
# and forwards, loralib's).


def official_lora_parameter_count(model, r: int) -> int:
    """The adapter parameters patch_vit_clip_lora + mark_only_lora_as_trainable leave trainable
    (patch.py:63-80, utils.py:13-16), from the shapes lora_layers.py gives them:
    every nn.Linear outside attention (patch.py:13-25): Linear A (r, in), B (out, r) (lora_layers.py:64-65);
    every nn.Conv2d (patch.py:28-44): Conv2d A (r k, in k), B (out k, r k) (lora_layers.py:146-151);
    every resblock's attention (patch.py:47-60): MultiheadAttention in_proj A (r, D), B (3 D, r)
    (lora_layers.py:264-266) and its out_proj Linear (281-288)."""
    import torch.nn as nn

    total = 0
    for name, m in model.named_modules():
        if isinstance(m, nn.Linear) and "attn" not in name:
            total += r * m.in_features + m.out_features * r
        elif isinstance(m, nn.Conv2d):
            k = m.kernel_size[0]
            total += r * k * m.in_channels * k + m.out_channels * k * r * k
    for transformer in (model.visual.transformer, model.transformer):
        for block in transformer.resblocks:
            d = block.attn.embed_dim
            total += r * d + 3 * d * r + (r * d + d * r)
    return total


def test_vit_b_32_trains_as_many_adapter_parameters_as_the_authors_lora():
    """ViT-B-32 (open_clip, no weights), rank 4: 4,141,056 trainable parameters, 3,158,016 of them in
    conv1's adapter (peft's own conv adapter would have 15,360)."""
    import open_clip

    model = open_clip.create_model("ViT-B-32", pretrained=None)
    want = official_lora_parameter_count(model, 4)
    lora.add_lora(model, 4)
    got = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert got == want == 4_141_056
    conv = sum(p.numel() for n, p in model.named_parameters() if p.requires_grad and n.startswith("visual.conv1."))
    assert conv == 4 * 32 * 3 * 32 + 768 * 32 * 4 * 32


def official_conv_forward(x, weight, lora_a, lora_b, r, conv):
    """lora_layers.Conv2d.forward, lora_layers.py:178-189 (not merged), lora_alpha 1 (scaling 152)."""
    scaling = 1 / r
    return torch.nn.functional.conv2d(x, weight + (lora_b @ lora_a).view(weight.shape) * scaling, None, conv.stride,
                                      conv.padding, conv.dilation, conv.groups)


def official_linear_forward(x, weight, bias, lora_a, lora_b, r):
    """lora_layers.Linear.forward, lora_layers.py:104-115 (not merged, no dropout), lora_alpha 1 (scaling 66)."""
    scaling = 1 / r
    return torch.nn.functional.linear(x, weight, bias) + (x @ lora_a.T @ lora_b.T) * scaling


def test_conv1_and_linear_adapters_compute_what_the_authors_layers_compute(tiny):
    """The same A and B in ours and in a transcription of their forwards: the same outputs, and merging
    folds exactly that update into the plain weights."""
    bundle = tiny()
    model = lora.add_lora(bundle.model, 2)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    conv = model.visual.conv1
    base_conv = conv.get_base_layer()
    a, b = conv.lora_A["default"].weight, conv.lora_B["default"].weight
    k = base_conv.kernel_size[0]
    assert a.shape == (2 * k, base_conv.in_channels * k) and b.shape == (base_conv.out_channels * k, 2 * k)
    images = torch.randn(2, 3, 32, 32, generator=g)
    with torch.no_grad():
        torch.testing.assert_close(conv(images), official_conv_forward(images, base_conv.weight, a, b, 2, base_conv))
        fc = model.transformer.resblocks[0].mlp.c_fc
        x = torch.randn(3, fc.in_features, generator=g)
        base_fc = fc.get_base_layer()
        torch.testing.assert_close(fc(x), official_linear_forward(x, base_fc.weight, base_fc.bias, fc.lora_A["default"].weight,
                                                                  fc.lora_B["default"].weight, 2))
        merged = lora.merged_model(model).state_dict()["visual.conv1.weight"]
        torch.testing.assert_close(merged, base_conv.weight + (b @ a).view(base_conv.weight.shape) / 2)


# ---- the attention's adapters against a hand reference W + dW (Hu et al. 2022, Eq. 3) --------------


def randomize_adapters(model, seed=0, scale=0.2):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_" in n:
                p.copy_(torch.randn(p.shape, generator=g) * scale)


def attention_adapters(attn):
    """(W_in, A_in, B_in, W_out, A_out, B_out) of a LoRA-wrapped nn.MultiheadAttention, found by the
    parameters' names (what the state dict holds), not through the adapter's own methods."""
    params = dict(attn.named_parameters())

    def find(suffix, out_proj):
        return next(p for n, p in params.items() if n.endswith(suffix) and ("out_proj" in n) == out_proj)

    return (find("in_proj_weight", False), find("lora_A.default.weight", False), find("lora_B.default.weight", False),
            find("out_proj.base_layer.weight", True), find("lora_A.default.weight", True),
            find("lora_B.default.weight", True))


def reference_attention(attn, x, w_in, a_in, b_in, w_out, a_out, b_out, r, mask=None):
    """nn.MultiheadAttention's own computation with in_proj W + B A / r and out_proj W + B A / r
    (lora_alpha 1: the authors' scaling), open_clip's batch-first call."""
    base = attn.get_base_layer() if hasattr(attn, "get_base_layer") else attn
    q = x.transpose(0, 1)
    out, _ = torch.nn.functional.multi_head_attention_forward(
        q, q, q, base.embed_dim, base.num_heads, w_in + b_in @ a_in / r, base.in_proj_bias, None, None, False, 0.0,
        w_out + b_out @ a_out / r, base.out_proj.bias, training=False, need_weights=False, attn_mask=mask)
    return out.transpose(0, 1)


@pytest.mark.parametrize("tower", ["visual", "text"])
def test_attention_output_is_the_hand_reference_w_plus_delta_w(tiny, tower):
    bundle = tiny()
    model = lora.add_lora(bundle.model, 2)
    randomize_adapters(model)
    block = (model.visual.transformer if tower == "visual" else model.transformer).resblocks[0]
    attn = block.attn
    base = attn.get_base_layer()
    x = torch.randn(3, 5, base.embed_dim, generator=torch.Generator().manual_seed(3))
    mask = None if tower == "visual" else torch.full((5, 5), float("-inf")).triu(1)
    with torch.no_grad():
        got = block.attention(x, attn_mask=mask)
        want = reference_attention(attn, x, *(p.detach() for p in attention_adapters(attn)), r=2, mask=mask)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_merged_attention_weights_are_w_plus_delta_w(tiny):
    bundle = tiny()
    model = lora.add_lora(bundle.model, 2)
    randomize_adapters(model)
    merged = lora.merged_state_dict(model)
    for prefix in ("visual.transformer.resblocks.0.attn", "transformer.resblocks.0.attn"):
        w_in, a_in, b_in, w_out, a_out, b_out = (p.detach() for p in attention_adapters(model.get_submodule(prefix)))
        torch.testing.assert_close(merged[f"{prefix}.in_proj_weight"], w_in + b_in @ a_in / 2,
                                   msg=lambda m: f"{prefix} in_proj: {m}")
        torch.testing.assert_close(merged[f"{prefix}.out_proj.weight"], w_out + b_out @ a_out / 2,
                                   msg=lambda m: f"{prefix} out_proj: {m}")


def test_attention_adapter_gradients_are_autograd_through_the_hand_reference(tiny):
    bundle = tiny()
    model = lora.add_lora(bundle.model, 2)
    randomize_adapters(model)
    block = model.visual.transformer.resblocks[0]
    attn = block.attn
    x = torch.randn(3, 5, attn.get_base_layer().embed_dim, generator=torch.Generator().manual_seed(4))
    target = torch.randn(3, 5, attn.get_base_layer().embed_dim, generator=torch.Generator().manual_seed(5))
    ours = attention_adapters(attn)
    (block.attention(x) * target).sum().backward()
    leaves = [p.detach().clone().requires_grad_(i not in (0, 3)) for i, p in enumerate(ours)]
    (reference_attention(attn, x, *leaves, r=2) * target).sum().backward()
    for name, i in (("in_proj A", 1), ("in_proj B", 2), ("out_proj A", 4), ("out_proj B", 5)):
        torch.testing.assert_close(ours[i].grad, leaves[i].grad, rtol=1e-4, atol=1e-6,
                                   msg=lambda m: f"{name}: {m}")
