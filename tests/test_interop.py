"""mosaictool's files work in the tools researchers already use: open_clip_train trains on its shards
(the `.txt` caption member), and plain open_clip loads its checkpoints with identical embeddings."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from mosaictool.io import read_records
from mosaictool.stages.shard import write_shards
from mosaictool.training import TrainConfig, train

# open_clip_train 3.3 groups tar members without handling the end-of-shard marker `{}` that
# webdataset >= 0.2.96 yields by default (KeyError: 'fname'; open_clip issue #935): passing
# eof_value=None, as suggested there, is the fix until open_clip_train takes it.
DRIVER = textwrap.dedent("""
    import functools, sys
    import open_clip
    import open_clip_train.data as data
    data.tar_file_expander = functools.partial(data.tar_file_expander, eof_value=None)
    open_clip.add_model_config(sys.argv[1])
    from open_clip_train.main import main
    main(sys.argv[2:])
""")


@pytest.fixture(scope="module")
def world(tiny_worlds, tmp_path_factory):
    root = tmp_path_factory.mktemp("interop")
    data, model_cfg = tiny_worlds(n=12)
    write_shards(read_records(data), out=root / "shards", image_root=data.parent, shard_size=5)
    return root, data, model_cfg


@pytest.mark.slow
def test_open_clip_train_trains_two_steps_on_mosaictool_shards(world, tmp_path):
    pytest.importorskip("open_clip_train")
    pytest.importorskip("pandas")  # open_clip_train.data imports it
    root, _, model_cfg = world
    args = ["--train-data", str(root / "shards" / "{000000..000002}.tar"), "--dataset-type", "webdataset",
            "--train-num-samples", "8", "--batch-size", "4", "--epochs", "1", "--workers", "0", "--model", "test-tiny",
            "--device", "cpu", "--logs", str(tmp_path), "--name", "run", "--warmup", "1", "--lr", "1e-3", "--seed", "0",
            "--log-every-n-steps", "1", "--report-to", ""]
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(model_cfg), *args], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = (tmp_path / "run" / "out.log").read_text()
    assert "[4/8 (50%)]" in log and "[8/8 (100%)]" in log  # two steps of 4 samples: image + .txt found
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "epoch_1.pt", map_location="cpu", weights_only=False)
    assert ckpt["epoch"] == 1 and "visual.conv1.weight" in {k.removeprefix("module.") for k in ckpt["state_dict"]}


def _embeddings(model, tokenizer, images: torch.Tensor, texts: list[str]):
    model.eval()
    with torch.no_grad():
        return model.encode_image(images, normalize=True), model.encode_text(tokenizer(texts), normalize=True)


def _check_plain_open_clip_loads(final: Path, name: str):
    import open_clip

    from mosaictool.model.openclip import load_checkpoint

    ours = load_checkpoint(final)
    theirs = open_clip.create_model(name, pretrained=str(final), device="cpu")
    size = ours.meta["model_cfg"]["vision_cfg"]["image_size"]
    images = torch.randn(3, 3, size, size, generator=torch.Generator().manual_seed(0))
    texts = ["a red circle left of a blue square", "a green square", "two objects"]
    a = _embeddings(ours.model, ours.tokenizer, images, texts)
    b = _embeddings(theirs, open_clip.get_tokenizer(name), images, texts)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert torch.equal(ours.model.logit_scale, theirs.logit_scale)
    fresh = open_clip.create_model(name, device="cpu")  # the weights came from the file, not from init
    assert not torch.equal(fresh.state_dict()["visual.conv1.weight"], theirs.state_dict()["visual.conv1.weight"])


@pytest.mark.slow
def test_mosaictool_checkpoint_loads_in_plain_open_clip(world, tmp_path):
    import open_clip

    _, data, model_cfg = world
    final = train(TrainConfig(data=str(data), out=str(tmp_path / "run"), model_config=str(model_cfg), method="mosaiclip",
                              batch_size=4, steps=2, warmup=1, device="cpu", quiet=True))
    open_clip.add_model_config(str(model_cfg))  # a custom architecture: plain open_clip needs its config
    _check_plain_open_clip_loads(final, "test-tiny")


@pytest.mark.slow
def test_builtin_architecture_checkpoint_loads_in_plain_open_clip(world, tmp_path):
    _, data, _ = world
    final = train(TrainConfig(data=str(data), out=str(tmp_path / "run"), model="ViT-S-32", method="clip",
                              batch_size=2, steps=1, warmup=1, device="cpu", augment=False, quiet=True))
    _check_plain_open_clip_loads(final, "ViT-S-32")
