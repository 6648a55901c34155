"""`train --data IMAGE_SHARDS --texts TEXTS`: texts joined by key to img2dataset's image shards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import webdataset as wds

from mosaictool import methods
from mosaictool.errors import MosaicError
from mosaictool.model import openclip
from mosaictool.training import TrainConfig, train
from mosaictool.training.traindata import TrainData
from train_fixtures import make_world, write_tiny_model


@pytest.fixture
def img2dataset_world(tmp_path) -> tuple[Path, Path]:
    """(a make_world captions.jsonl with its image files, the same images in img2dataset shards: keys the
    records' ids, <key>.png, <key>.txt, <key>.json, 5 samples a tar)."""
    captions = make_world(tmp_path / "world", n=12)
    records = [json.loads(line) for line in captions.read_text().splitlines()]
    shards = tmp_path / "images"
    shards.mkdir()
    for start in range(0, len(records), 5):
        with wds.TarWriter(str(shards / f"{start // 5:05d}.tar")) as sink:
            for rec in records[start:start + 5]:
                meta = {"key": rec["id"], "caption": rec["caption"], "url": f"https://example.com/{rec['id']}.png", "status": "success"}
                sink.write({"__key__": rec["id"], "png": (captions.parent / rec["image"]).read_bytes(), "txt": rec["caption"],
                            "json": json.dumps(meta)})
    return captions, shards


def texts_file(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "image"}) + "\n" for r in records))
    return path


def test_joined_records_and_images(img2dataset_world, tmp_path):
    captions, shards = img2dataset_world
    records = [json.loads(line) for line in captions.read_text().splitlines()]
    texts = texts_file(tmp_path / "texts.jsonl", [r for r in records if r["id"] != "img-7"])
    data = TrainData.load(str(shards), method=methods.create("negclip"), texts=str(texts))
    assert [r["id"] for r in data.records] == [r["id"] for r in records]  # the shards' order
    assert data.records[7] == {"id": "img-7", "caption": records[7]["caption"]}  # no texts: its caption, no negatives
    assert data.records[3]["texts"]["negatives"]
    for rec, i in ((records[0], 0), (records[11], 11)):
        assert data.read(i) == (captions.parent / rec["image"]).read_bytes()  # located by offset in the tar


def test_a_text_without_an_image_is_an_error_unless_skip_bad(img2dataset_world, tmp_path):
    captions, shards = img2dataset_world
    records = [json.loads(line) for line in captions.read_text().splitlines()]
    texts = texts_file(tmp_path / "texts.jsonl", [*records, {**records[0], "id": "img-99"}])
    with pytest.raises(MosaicError, match=r"texts.jsonl: record 'img-99': no sample of --data .* has this key"):
        TrainData.load(str(shards), method=methods.create("negclip"), texts=str(texts))
    data = TrainData.load(str(shards), method=methods.create("negclip"), texts=str(texts), skip_bad=True)
    assert len(data) == 12
    with pytest.raises(MosaicError, match="--texts joins records to the images of WebDataset shards"):
        TrainData.load(str(captions), method=methods.create("negclip"), texts=str(texts))


def test_training_on_joined_shards_equals_training_on_the_jsonl(img2dataset_world, tmp_path):
    captions, shards = img2dataset_world
    records = [json.loads(line) for line in captions.read_text().splitlines()]
    texts = texts_file(tmp_path / "texts.jsonl", records)
    common = dict(model_config=str(write_tiny_model(tmp_path)), method="negclip", batch_size=4, steps=2, warmup=1, quiet=True)
    a = train(TrainConfig(data=str(shards / "{00000..00002}.tar"), texts=str(texts), out=str(tmp_path / "a"), **common))
    b = train(TrainConfig(data=str(captions), out=str(tmp_path / "b"), **common))
    wa, wb = openclip.read_checkpoint(a)["state_dict"], openclip.read_checkpoint(b)["state_dict"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert json.loads((tmp_path / "a" / "config.json").read_text())["texts"] == str(texts)


def test_a_key_in_two_shards_is_one_line_naming_both(img2dataset_world, tmp_path):
    """A tar copied twice into --data: its samples trained twice, the second time without their texts."""
    import shutil

    captions, shards = img2dataset_world
    records = [json.loads(line) for line in captions.read_text().splitlines()]
    shutil.copy(shards / "00000.tar", shards / "00003.tar")
    texts = texts_file(tmp_path / "texts.jsonl", records)
    with pytest.raises(MosaicError) as e:
        TrainData.load(str(shards), method=methods.create("negclip"), texts=str(texts))
    assert f"{shards / '00003.tar'}#img-0: key 'img-0' is also a sample of {shards / '00000.tar'}" in str(e.value)
    data = TrainData.load(str(shards), method=methods.create("negclip"), texts=str(texts), skip_bad=True)
    assert len(data) == 12
