"""NegCLIP's hard images in the demo: mined as the ARO paper mined them (each image's 3 nearest
neighbours in the starting model's image space, Yuksekgonul et al. 2023, App. C.2) by default, the
world's twins only as a named oracle; the mining checked against brute force, its determinism, and
the count of mined neighbours that are twins."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mosaictool.demo import DemoConfig, finetune
from mosaictool.demo.config import MINED_NEIGHBOURS
from mosaictool.demo.report import mined_twins_line
from mosaictool.training import TrainConfig
from mosaictool.training.data import mine_for, nearest_indices


def test_the_demo_mines_its_hard_images_by_default_and_names_the_twins_an_oracle():
    assert MINED_NEIGHBOURS == 3  # ARO App. C.2: "for each image we collect the 3 most similar images"
    for cfg in (DemoConfig(), DemoConfig.preset(quick=True), DemoConfig.preset(gpu=True)):
        assert cfg.hard_image_source == "mined"
        # (record_hard_images, hard_images) of the row's TrainConfig: mined, no twins
        assert cfg.row_hard_image_settings("negclip") == (False, 3) and cfg.row_hard_image_settings("clip") == (False, 0)
    oracle = DemoConfig(hard_image_source="twin-oracle")
    assert oracle.row_hard_image_settings("negclip") == (True, 0) and oracle.row_hard_image_settings("mosaiclip") == (False, 0)
    assert DemoConfig(hard_images="none").row_hard_image_settings("negclip") == (False, 0)
    assert DemoConfig(hard_images="all").row_hard_image_settings("mosaiclip") == (False, 3)


def test_nearest_indices_orders_ties_by_column():
    """topk leaves the order of equal values to the kernel; a sampler's draw from the list must not."""
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        rows, cols = int(torch.randint(1, 8, (1,), generator=g)), int(torch.randint(4, 20, (1,), generator=g))
        sims = torch.randint(0, 3, (rows, cols), generator=g).float()  # many ties
        k = int(torch.randint(1, cols, (1,), generator=g))
        expected = np.stack([np.lexsort((np.arange(cols), -row))[:k] for row in sims.numpy()])
        assert nearest_indices(sims, k).tolist() == expected.tolist()


@pytest.fixture(scope="module")
def two_captions(tiny_worlds, tmp_path_factory):
    """The tiny world as the demo's fine-tuning data: every image twice, with its caption and as
    `<id>-plain` (data.two_captions), the twins named by each record's hard_images."""
    world, _ = tiny_worlds(n=12)
    records = [json.loads(line) for line in world.read_text().splitlines()]
    doubled = []
    for rec in records:
        doubled += [rec, {**rec, "id": f"{rec['id']}-plain", "hard_images": [f"{h}-plain" for h in rec["hard_images"]]}]
    path = tmp_path_factory.mktemp("two-captions") / "captions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in doubled))
    return path, world.parent  # the records, and the folder of their images


def _config(data: tuple[Path, Path], base: Path) -> TrainConfig:
    return TrainConfig(data=str(data[0]), image_root=str(data[1]), out="", method="negclip", model="mosaic-tiny",
                       pretrained=str(base), hard_images=3, record_hard_images=False, device="cpu")


def test_mined_neighbours_are_the_k_nearest_by_cosine_in_the_base_image_space(two_captions, tiny_checkpoint):
    from mosaictool.model.openclip import load_checkpoint
    from mosaictool.training.batch import normalize_images
    from mosaictool.training.transform import ImagePrep, ImageTransform

    data, neighbours = mine_for(_config(two_captions, tiny_checkpoint))
    ids = [r["id"] for r in data.records]
    assert len(ids) == 24 and len(neighbours) == 24
    # brute force: every distinct image (by its bytes: scenes may repeat) embedded by the base, cosine
    # in float64, the 3 largest (ties by index), each named by the first record that shows it
    bundle = load_checkpoint(tiny_checkpoint)
    images = ImagePrep.of(bundle)
    transform = ImageTransform(images.size, augment=False)
    first: dict[bytes, int] = {}
    for i in range(len(ids)):
        first.setdefault(data.read(i), i)
    assert len(first) < 12  # the tiny world repeats a scene: the same bytes are never a neighbour
    distinct = list(first.values())
    batch = torch.stack([transform(data.read(i), None) for i in distinct])
    with torch.no_grad():
        feats = bundle.model.encode_image(normalize_images(batch, images.mean, images.std)).double().numpy()
    feats /= np.linalg.norm(feats, axis=1, keepdims=True)
    sims = feats @ feats.T
    np.fill_diagonal(sims, -np.inf)
    for i in range(len(ids)):
        a = distinct.index(first[data.read(i)])
        expected = [distinct[b] for b in np.lexsort((np.arange(len(distinct)), -sims[a]))[:3]]
        assert neighbours[i] == expected, ids[i]  # its -plain record too: the same image, the same neighbours
        assert all(data.read(j) != data.read(i) for j in expected)  # never itself


def test_mining_is_the_same_on_every_run_and_thread_count(two_captions, tiny_checkpoint):
    cfg = _config(two_captions, tiny_checkpoint)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        _, one = mine_for(cfg)
        _, again = mine_for(cfg)
        torch.set_num_threads(2)
        _, two = mine_for(cfg)
    finally:
        torch.set_num_threads(threads)
    assert one == again == two


def test_share_mined_mines_once_and_counts_the_twins(two_captions, tiny_checkpoint, tmp_path, monkeypatch):
    """Runs of one base on one data set share one mining (kept in OUT/mined/ under its digest), each
    run folder gets the neighbours and the twin counts, and the report's line reads them."""
    import mosaictool.training.data as training_data

    calls = []
    real = training_data.mine_for
    monkeypatch.setattr(training_data, "mine_for", lambda tc, shards=None: calls.append(tc.pretrained) or real(tc, shards))
    cfg = _config(two_captions, tiny_checkpoint)
    todo = [dataclasses.replace(cfg, pretrained=None, out=str(tmp_path / "runs" / f"negclip-seed{s}"), seed=s) for s in range(3)]
    finetune.share_mined(todo + [dataclasses.replace(todo[0], hard_images=0, out=str(tmp_path / "runs" / "clip"))],
                         tiny_checkpoint, tmp_path, None)
    assert calls == [str(tiny_checkpoint)]  # once, in the miner's image space (the runs' own start is not asked)
    assert len(list((tmp_path / "mined").glob("hard-images-*.json"))) == 1
    assert not (tmp_path / "runs" / "clip").exists()  # a run that mines nothing gets nothing
    _, expected = real(cfg)
    twins = None
    for tc in todo:
        assert json.loads((Path(tc.out) / "mined_hard_images.json").read_text()) == expected
        twins = json.loads((Path(tc.out) / finetune.MINED_TWINS).read_text())
    # the same count by hand: the tiny world's twins are img-i and img-(i^1)
    data, _ = real(cfg)
    ids = [r["id"] for r in data.records]
    by_hand = sum(int(ids[i].split("-")[1]) ^ 1 == int(ids[j].split("-")[1])
                  for i in range(0, 24, 2) for j in expected[i])
    assert twins == {"images": 12, "neighbours": 36, "twins": by_hand, "images_with_twin": twins["images_with_twin"]}
    finetune.share_mined(todo, tiny_checkpoint, tmp_path, None)
    assert calls == [str(tiny_checkpoint)]  # kept: not mined again
    line = mined_twins_line({"NegCLIP": [Path(todo[0].out) / "final.pt"]}, ["NegCLIP"])
    assert line.startswith(f"Mined hard images (NegCLIP): {by_hand} of the 36 mined neighbours ")


def test_the_twin_count_on_a_constructed_case(tmp_path):
    # a's twin is b (and b's is a); c has none. Neighbours: a -> b, c; b -> c, a; c -> a, b; the
    # -plain records show the same images and are counted once
    records = [{"id": "a", "hard_images": ["b"]}, {"id": "a-plain", "hard_images": ["b-plain"]},
               {"id": "b", "hard_images": ["a"]}, {"id": "b-plain", "hard_images": ["a-plain"]},
               {"id": "c", "hard_images": None}, {"id": "c-plain", "hard_images": None}]
    neighbours = [[2, 4], [2, 4], [4, 0], [4, 0], [0, 2], [0, 2]]
    twins = finetune.twin_share(records, neighbours)
    assert twins == {"images": 3, "neighbours": 6, "twins": 2, "images_with_twin": 2}
    assert finetune.twins_sentence(twins).startswith("2 of the 6 mined neighbours (33.3%) are the image's own twins")
    assert finetune.twins_sentence(twins).endswith("2 of 3 images have one among theirs")
    run = tmp_path / "negclip-seed0"
    run.mkdir()
    (run / finetune.MINED_TWINS).write_text(json.dumps(twins))
    assert mined_twins_line({"NegCLIP": [run / "final.pt"]}, ["NegCLIP"]) == (
        "Mined hard images (NegCLIP): 2 of the 6 mined neighbours (33.3%) are the image's own twins (arrangement, binding "
        "or shape; the twin oracle's hard images); 2 of 3 images have one among theirs.")
    assert mined_twins_line({"NegCLIP": [tmp_path / "oracle" / "final.pt"]}, ["NegCLIP"]) == ""  # the twin oracle: no line
    assert mined_twins_line({}, []) == ""


def test_the_twin_oracle_still_gives_the_twins(two_captions, tmp_path):
    """--hard-image-source twin-oracle: the records' twins are the hard images, nothing is mined."""
    from mosaictool.methods import create
    from mosaictool.training.data import load_run_data
    from mosaictool.training.distributed import DistInfo
    from mosaictool.training.transform import ImagePrep

    record_hard, k = DemoConfig(hard_image_source="twin-oracle").row_hard_image_settings("negclip")
    cfg = TrainConfig(data=str(two_captions[0]), image_root=str(two_captions[1]), out=str(tmp_path / "run"), method="negclip",
                      model="mosaic-tiny", record_hard_images=record_hard, hard_images=k, device="cpu")
    info = DistInfo(rank=0, world_size=1, local_rank=0, device="cpu")
    data, use_hard = load_run_data(cfg, create("negclip", {}), None, ImagePrep(size=32, mean=(0.5,) * 3, std=(0.5,) * 3), info)
    ids = [r["id"] for r in data.records]
    assert use_hard and not (tmp_path / "run" / "mined_hard_images.json").exists()
    assert all([ids[j] for j in data.hard[i]] == data.records[i]["hard_images"] for i in range(len(ids)))
    assert sum(bool(h) for h in data.hard) == 24
