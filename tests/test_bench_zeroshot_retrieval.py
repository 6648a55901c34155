"""Zero-shot classification (class folders, prompt ensembles) and Karpathy retrieval (+ perturbations)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from mosaictool.bench import retrieval, zeroshot
from mosaictool.bench.base import HEADLINE, ImageRef, Item
from mosaictool.bench.engine import Similarities
from mosaictool.errors import MosaicError


@pytest.fixture
def zs_root(tmp_path):
    task = tmp_path / "zeroshot" / "colour"
    (task / "test" / "00").mkdir(parents=True)
    (task / "test" / "01").mkdir(parents=True)
    (task / "test" / "02").mkdir(parents=True)
    (task / "classnames.txt").write_text("red\ngreen\nblue\n")
    (task / "templates.txt").write_text("a photo of a {c}.\n{c} shape\n")
    for i, c in enumerate(["red", "green", "blue"]):
        Image.new("RGB", (4, 4), c).save(task / "test" / f"{i:02d}" / "a.png")
    Image.new("RGB", (4, 4), "red").save(task / "test" / "00" / "b.jpg")
    (task / "test" / "00" / "notes.txt").write_text("not an image")
    return tmp_path


def test_zeroshot_loader(zs_root):
    items = zeroshot.ZeroShot().load(zs_root)
    assert len(items) == 1
    it = items[0]
    assert it.meta["labels"] == [0, 0, 1, 2] and len(it.images) == 4
    assert it.texts[:2] == ["a photo of a red.", "red shape"] and len(it.texts) == 6
    assert it.meta["ensembles"] == [[0, 1], [2, 3], [4, 5]]
    assert zeroshot.ZeroShot().open_subtasks
    assert len(zeroshot.ZeroShot().load(zs_root, limit=2)[0].images) == 2


def test_zeroshot_ensembles_average_embeddings_then_renormalise():
    item = Item([ImageRef("x")], ["p0", "p1", "q0", "q1"], {"ensembles": [[0, 1], [2, 3]]})
    img = np.array([[1.0, 0.0, 0.0]])
    txt = np.array([[1, 0, 0], [0, 1, 0], [0.6, 0.8, 0], [0.6, 0.8, 0]], dtype=float)
    sims = Similarities([item], img, txt, {item.images[0]: 0}, {t: i for i, t in enumerate(item.texts)})[0]
    # class 0: mean (0.5, 0.5) renormalised -> cos 0.707 (not the mean cosine 0.5); class 1: 0.6
    np.testing.assert_allclose(sims, [[np.sqrt(0.5), 0.6]])


def test_zeroshot_scores_top1_top5_and_per_class_recall(zs_root):
    item = zeroshot.ZeroShot().load(zs_root)[0]
    sims = np.array([[0.9, 0.1, 0.1], [0.2, 0.2, 0.1], [0.1, 0.8, 0.1], [0.5, 0.1, 0.2]])  # second: tie -> class 0
    rows = {(r["subtask"], r["metric"]): r["value"] for r in zeroshot.ZeroShot().score([item], [sims])}
    assert rows[("colour", "top1")] == 0.75
    assert ("colour", "top5") not in rows  # only 3 classes
    assert rows[("colour", "mean_per_class_recall")] == pytest.approx((1 + 1 + 0) / 3)
    assert rows[(HEADLINE, "top1")] == 0.75


def test_zeroshot_layout_errors(tmp_path, zs_root):
    with pytest.raises(MosaicError, match="no tasks"):
        zeroshot.ZeroShot().load(tmp_path / "nothing")
    (zs_root / "zeroshot" / "colour" / "test" / "7").mkdir()
    with pytest.raises(MosaicError, match="class folders must be class indices"):
        zeroshot.ZeroShot().load(zs_root)
    (zs_root / "zeroshot" / "colour" / "templates.txt").write_text("no placeholder\n")
    with pytest.raises(MosaicError, match="template without"):
        zeroshot.ZeroShot().load(zs_root)


@pytest.fixture
def ret_root(tmp_path):
    (tmp_path / "aro").mkdir()
    ann = [
        {"image": "val2014/a.jpg", "caption": ["A red cube left of a blue ball.", "A cube and a ball."]},
        {"image": "val2014/b.jpg", "caption": ["Two green dogs on the grass."]},
        {"image": "val2014/c.jpg", "caption": ["A man riding a horse on a beach."]},
    ]
    (tmp_path / "aro" / "coco_karpathy_test.json").write_text(json.dumps(ann))
    return tmp_path


def test_retrieval_loader_and_scoring(ret_root):
    items = retrieval.Retrieval().load(ret_root)
    assert len(items) == 1
    it = items[0]
    assert it.meta == {"subtask": "coco", "owner": [0, 0, 1, 2]}
    assert it.texts[0] == "a red cube left of a blue ball" and it.images[1].path.endswith("coco/val2014/b.jpg")
    sims = np.array([[0.1, 0.9, 0.2, 0.3], [0.8, 0.1, 0.5, 0.4], [0.4, 0.4, 0.4, 0.4]])
    rows = {(r["subtask"], r["metric"]): r for r in retrieval.Retrieval().score(items, [sims])}
    assert rows[("coco", "image_to_text_R@1")]["value"] == pytest.approx(1 / 3) and rows[("coco", "image_to_text_R@1")]["n"] == 3
    assert rows[("coco", "text_to_image_R@1")]["n"] == 4
    assert len(rows) == 6
    assert len(retrieval.Retrieval().load(ret_root, limit=2)[0].images) == 2


def test_retrieval_perturbed_subtasks(ret_root):
    items = retrieval.Retrieval().load(ret_root, subtasks=["coco-perturbed"])
    assert [it.meta["subtask"] for it in items] == [
        "coco/shuffle_nouns_and_adj", "coco/shuffle_allbut_nouns_and_adj", "coco/shuffle_within_trigrams", "coco/shuffle_trigrams"
    ]
    plain = retrieval.Retrieval().load(ret_root)[0]
    for it in items:
        assert len(it.texts) == 4 and it.images == plain.images
        for t, orig in zip(it.texts, plain.texts):
            assert sorted(t.replace(",", " ").split()) == sorted(orig.replace(",", " ").split())
    with pytest.raises(MosaicError, match="flickr30k_test.json not found"):
        retrieval.Retrieval().load(ret_root, subtasks=["flickr30k"])
