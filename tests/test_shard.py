"""`shard` writes WebDataset shards that `train` reads exactly like the JSONL + images they came from."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import torch

from mosaictool import methods
from mosaictool.cli import app
from mosaictool.model import openclip
from mosaictool.training import TrainConfig, train
from mosaictool.training.data import TrainData
from train_fixtures import make_world, write_tiny_model


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    root = tmp_path_factory.mktemp("shard")
    data = make_world(root / "w", n=12)
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["shard", str(data), "--image-root", str(data.parent), "--out",
                                      str(root / "shards"), "--shard-size", "5", "-q"])
    assert result.exit_code == 0, result.output
    return data, root / "shards"


def test_layout_sizes_and_members(sharded):
    data, shards = sharded
    assert sorted(p.name for p in shards.iterdir()) == ["000000.tar", "000001.tar", "000002.tar", "sizes.json"]
    assert json.loads((shards / "sizes.json").read_text()) == {"000000.tar": 5, "000001.tar": 5, "000002.tar": 2}
    with tarfile.open(shards / "000000.tar") as tar:
        names = tar.getnames()
        assert names[:3] == ["000000000.json", "000000000.png", "000000000.txt"]
        member = json.loads(tar.extractfile("000000000.json").read())
        caption = tar.extractfile("000000000.txt").read().decode()
    first = json.loads(Path(data).read_text().splitlines()[0])
    assert member == first  # every record field is kept, texts and hard_images included
    assert caption == first["caption"]  # the webdataset convention (img2dataset, open_clip_train)


def test_train_reads_folder_glob_and_brace_pattern_like_the_jsonl(sharded):
    data, shards = sharded
    plain = TrainData.load(str(data), method=methods.create("mosaiclip"))
    for spec in (str(shards), str(shards / "*.tar"), str(shards / "{000000..000002}.tar")):
        loaded = TrainData.load(spec, method=methods.create("mosaiclip"))
        assert loaded.records == plain.records
        assert [loc.read() for loc in loaded.images] == [loc.read() for loc in plain.images]


def test_each_shard_is_indexed_once_per_process_until_it_changes(sharded, tmp_path, monkeypatch):
    """The demo's fine-tuning runs (forked after preload_shards) read the index instead of the tars."""
    import shutil

    from mosaictool.training import data as data_module

    shards = tmp_path / "shards"
    shutil.copytree(sharded[1], shards)
    calls = []
    real = data_module.index_tar
    monkeypatch.setattr(data_module, "index_tar", lambda path: calls.append(Path(path).name) or real(path))
    data_module.preload_shards(str(shards))
    assert sorted(calls) == ["000000.tar", "000001.tar", "000002.tar"]
    first = TrainData.load(str(shards), method=methods.create("mosaiclip"))
    again = TrainData.load(str(shards / "*.tar"), method=methods.create("clip"))
    assert len(calls) == 3 and again.records == first.records == TrainData.load(str(sharded[0]),
                                                                                method=methods.create("mosaiclip")).records
    # a rewritten shard (another size) is read again; a record the slim form cannot read stays whole
    # and is refused by the method's check as before
    tar = shards / "000002.tar"
    with tarfile.open(tar) as t:
        members = [(m, t.extractfile(m).read()) for m in t.getmembers()]
    import io

    with tarfile.open(tar, "w") as t:
        for m, body in members:
            if m.name.endswith(".json"):
                rec = json.loads(body)
                body = json.dumps({**rec, "texts": ["not", "an", "object"]} if rec["id"] == "img-11" else rec).encode()
                m.size = len(body)
            t.addfile(m, io.BytesIO(body))
    skipped = TrainData.load(str(shards), method=methods.create("mosaiclip"), skip_bad=True)
    assert calls[3:] == ["000002.tar"]
    assert [r["id"] for r in skipped.records] == [r["id"] for r in first.records if r["id"] != "img-11"]


def test_training_on_shards_equals_training_on_jsonl(sharded, tmp_path):
    data, shards = sharded
    model_cfg = write_tiny_model(tmp_path)
    common = dict(model_config=str(model_cfg), method="negclip", batch_size=4, steps=2, warmup=1, quiet=True)
    a = train(TrainConfig(data=str(shards), out=str(tmp_path / "a"), **common))
    b = train(TrainConfig(data=str(data), out=str(tmp_path / "b"), **common))
    wa, wb = openclip.read_checkpoint(a)["state_dict"], openclip.read_checkpoint(b)["state_dict"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_images_decoded_before_the_runs_give_the_same_training(sharded, tmp_path, monkeypatch):
    """The demo decodes every image once (decode_shard_images) before forking its runs: a run then
    decodes none and trains the same weights as one that decodes its own."""
    from mosaictool.training import data as data_module

    _, shards = sharded
    model_cfg = write_tiny_model(tmp_path)
    size = json.loads(model_cfg.read_text())["vision_cfg"]["image_size"]
    common = dict(data=str(shards), model_config=str(model_cfg), method="clip", batch_size=4, steps=3, warmup=1, quiet=True,
                  augment=False)
    own = openclip.read_checkpoint(train(TrainConfig(out=str(tmp_path / "own"), **common)))["state_dict"]
    monkeypatch.setattr(data_module, "_DECODED", {})
    assert not data_module.decode_shard_images(str(shards), size, max_bytes=12 * 3 * size * size - 1)  # over the bound
    assert data_module._DECODED == {}
    assert data_module.decode_shard_images(str(shards), size)
    rows, images = data_module._DECODED[(str(shards), size)]
    assert images.shape == (12, 3, size, size) and len(rows) == 12
    decodes = []
    real = data_module.TrainDataset._decode
    monkeypatch.setattr(data_module.TrainDataset, "_decode", lambda self, i, rng: decodes.append(i) or real(self, i, rng))
    shared = openclip.read_checkpoint(train(TrainConfig(out=str(tmp_path / "shared"), **common)))["state_dict"]
    assert decodes == [] and all(torch.equal(own[k], shared[k]) for k in own)
    # another size, or random crops: the run decodes its own
    train(TrainConfig(out=str(tmp_path / "crops"), **{**common, "augment": True}))
    assert decodes


def test_same_input_same_bytes(sharded, tmp_path, runner):
    data, shards = sharded
    result = runner.invoke(app, ["shard", str(data), "--image-root", str(data.parent), "--out", str(tmp_path / "s"),
                                 "--shard-size", "5", "-q"])
    assert result.exit_code == 0
    for name in ("000000.tar", "000002.tar", "sizes.json"):
        assert (tmp_path / "s" / name).read_bytes() == (shards / name).read_bytes()
    again = runner.invoke(app, ["shard", str(data), "--image-root", str(data.parent), "--out", str(tmp_path / "s")])
    assert again.exit_code == 1 and "already holds shards" in again.stderr


def test_missing_and_corrupt_images(sharded, tmp_path, runner):
    data, _ = sharded
    lines = Path(data).read_text().splitlines()
    (data.parent / "images" / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really a png")
    missing = dict(json.loads(lines[0]), id="missing", image="images/none.png")
    corrupt = dict(json.loads(lines[0]), id="corrupt", image="images/bad.png")
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[0], json.dumps(missing), json.dumps(corrupt), lines[1]]) + "\n")
    args = ["shard", str(broken), "--image-root", str(data.parent), "-q"]
    fail = runner.invoke(app, args + ["--out", str(tmp_path / "x")])
    assert fail.exit_code == 1 and "image not found" in fail.stderr and "none.png" in fail.stderr
    assert not list((tmp_path / "x").glob("*")), "no partial shards, no leftovers"
    ok = runner.invoke(app, args + ["--out", str(tmp_path / "y"), "--skip-bad"])
    assert ok.exit_code == 0, ok.output
    assert "skipped 2 bad record(s)" in ok.stderr and "corrupt image" in ok.stderr
    assert json.loads((tmp_path / "y" / "sizes.json").read_text()) == {"000000.tar": 2}
    no_image = runner.invoke(app, ["shard", str(broken), "--out", str(tmp_path / "z"), "--image-key", "picture"])
    assert no_image.exit_code == 1 and "missing 'picture'" in no_image.stderr
