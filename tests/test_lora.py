"""LoRA through peft on open_clip's towers: only adapters train, and the merged model is a plain
open_clip model with the LoRA model's embeddings."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from train_fixtures import write_tiny_model  # noqa: E402

from mosaictool.errors import MosaicError  # noqa: E402
from mosaictool.model import lora, openclip  # noqa: E402


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
