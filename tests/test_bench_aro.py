"""ARO loaders and scoring on small files in the official formats, with placeholder images."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from mosaictool.bench import aro
from mosaictool.bench.base import HEADLINE
from mosaictool.errors import MosaicError


def _vg_root(tmp_path, n_attr_cases=30):
    (tmp_path / "aro" / "images").mkdir(parents=True)
    Image.new("RGB", (50, 40), "white").save(tmp_path / "aro" / "images" / "1.jpg")
    rel = [
        {"image_path": "1.jpg", "bbox_x": 5, "bbox_y": 6, "bbox_w": 20, "bbox_h": 10, "true_caption": "the cup is on the table",
         "false_caption": "the table is on the cup", "relation_name": "on"},
        {"image_path": "1.jpg", "bbox_x": 0, "bbox_y": 0, "bbox_w": 50, "bbox_h": 40, "true_caption": "the dog is near the cat",
         "false_caption": "the cat is near the dog", "relation_name": "near"},
        {"image_path": "1.jpg", "bbox_x": 0, "bbox_y": 0, "bbox_w": 50, "bbox_h": 40,
         "true_caption": "the man is riding the horse",
         "false_caption": "the horse is riding the man", "relation_name": "riding"},
    ]
    attr = [
        {"image_path": "1.jpg", "bbox_x": 1, "bbox_y": 2, "bbox_w": 3, "bbox_h": 4,
         "true_caption": "the red cup and the blue plate",
         "false_caption": "the blue cup and the red plate", "attributes": ["red", "blue"]}
    ] * n_attr_cases + [
        {"image_path": "1.jpg", "bbox_x": 1, "bbox_y": 2, "bbox_w": 3, "bbox_h": 4,
         "true_caption": "the big dog and the small cat",
         "false_caption": "the small dog and the big cat", "attributes": ["big", "small"]}
    ]
    (tmp_path / "aro" / "visual_genome_relation.json").write_text(json.dumps(rel))
    (tmp_path / "aro" / "visual_genome_attribution.json").write_text(json.dumps(attr))
    return tmp_path


def _order_root(tmp_path):
    (tmp_path / "coco" / "val2014").mkdir(parents=True)
    (tmp_path / "aro").mkdir(exist_ok=True)
    ann = [{"image": "val2014/COCO_val2014_000000391895.jpg",
            "caption": ["A man with a red helmet on a small moped on a dirt road. ",
                        "Man riding a motor bike on a dirt road on the countryside."]}]
    (tmp_path / "aro" / "coco_karpathy_test.json").write_text(json.dumps(ann))
    (tmp_path / "aro" / "flickr30k_test.json").write_text(json.dumps([{"image": "flickr30k-images/1.jpg",
                                                                       "caption": ["Two dogs play in the grass."]}]))
    return tmp_path


def test_excluded_relations_ship_with_the_package():
    ex = aro.excluded_relations()
    assert len(ex) == 157 and {"of", "with", "near", "next to"} <= ex and "on" not in ex


def test_pre_caption_matches_aro():
    assert aro.pre_caption("A man (with) a RED helmet;  on a moped. ") == "a man with a red helmet on a moped"
    assert aro.pre_caption("it's a dog, isn't it!") == "it's a dog, isn't it"
    assert aro.pre_caption(" ".join(["w"] * 40)) == " ".join(["w"] * 30)


def test_vg_loader_crops_and_orders_options(tmp_path):
    root = _vg_root(tmp_path)
    items = aro.Aro().load(root, subtasks=["VG-Relation"])
    assert len(items) == 3
    first = items[0]
    assert first.images[0].box == (5.0, 6.0, 25.0, 16.0)  # (x, y, x+w, y+h)
    assert first.images[0].path == str(root / "aro" / "images" / "1.jpg")
    assert first.texts == ["the table is on the cup", "the cup is on the table"]  # [false, true]
    assert first.meta == {"subtask": "VG-Relation", "group": "on", "correct": 1}
    assert len(aro.Aro().load(root, subtasks=["VG-Relation"], limit=2)) == 2


def test_vg_tie_is_wrong_exclusions_and_small_attribute_groups(tmp_path):
    root = _vg_root(tmp_path)
    items = aro.Aro().load(root, subtasks=["VG-Relation", "VG-Attribution"])
    sims = []
    for it in items:
        if it.meta["group"] == "on":
            sims.append(np.array([[0.2, 0.2]]))  # tie -> argmax picks the false caption
        elif it.meta["group"] == "riding":
            sims.append(np.array([[0.1, 0.3]]))
        elif it.meta["group"] == "near":  # excluded relation, right answer
            sims.append(np.array([[0.1, 0.3]]))
        elif it.meta["group"] == "red_blue":
            sims.append(np.array([[0.1, 0.3]]))
        else:  # big_small: 1 case < 25 -> dropped though it is wrong
            sims.append(np.array([[0.5, 0.3]]))
    rows = {(r["subtask"], r["metric"]): r for r in aro.Aro().score(items, sims, logit_scale=100)}
    assert "near" in aro.excluded_relations()
    assert rows[("VG-Relation", "accuracy")]["value"] == pytest.approx(0.5)  # mean(on=0, riding=1)
    assert rows[("VG-Relation", "accuracy")]["n"] == 2
    assert rows[("VG-Relation", "micro_accuracy")]["value"] == pytest.approx(2 / 3)
    assert rows[("VG-Relation/on", "accuracy")]["value"] == 0.0 and rows[("VG-Relation/on", "accuracy")]["detail"]
    assert rows[("VG-Attribution", "accuracy")]["value"] == 1.0
    assert rows[("VG-Attribution", "groups_kept")]["value"] == 1 and rows[("VG-Attribution", "groups_kept")]["n"] == 2
    mu = rows[("VG-Relation", "mu_c")]["value"]
    assert mu == pytest.approx(np.mean([0.5, 1 / (1 + np.exp(-20)), 1 / (1 + np.exp(-20))]))
    assert (HEADLINE, "accuracy") not in rows  # only with all four subtasks


@pytest.mark.slow
def test_order_loader_perturbs_raw_caption_then_normalises(tmp_path):
    root = _order_root(tmp_path)
    items = aro.Aro().load(root, subtasks=["COCO-Order"])
    assert len(items) == 2  # one case per caption
    it = items[0]
    assert it.images[0].path == str(root / "coco" / "val2014" / "COCO_val2014_000000391895.jpg") and it.images[0].box is None
    assert it.texts[0] == "a man with a red helmet on a small moped on a dirt road"
    assert len(it.texts) == 5
    for t in it.texts[1:]:
        assert t == aro.pre_caption(t) and sorted(t.split()) == sorted(it.texts[0].split())
    again = aro.Aro().load(root, subtasks=["COCO-Order"])
    assert [i.texts for i in again] == [i.texts for i in items]  # seeded like ARO (seed_all(1))
    flickr = aro.Aro().load(root, subtasks=["Flickr30k-Order"])
    assert flickr[0].images[0].path.endswith("flickr30k/flickr30k-images/1.jpg")


def test_order_tie_counts_right_and_headline_is_mean_of_four(tmp_path):
    root = _order_root(_vg_root(tmp_path))
    items = aro.Aro().load(root)
    sims = []
    for it in items:
        if it.meta["subtask"] in ("COCO-Order", "Flickr30k-Order"):
            sims.append(np.full((1, 5), 0.2))  # all tied -> index 0 -> right
        else:
            sims.append(np.array([[0.1, 0.3]]))
    rows = {(r["subtask"], r["metric"]): r["value"] for r in aro.Aro().score(items, sims)}
    assert rows[("COCO-Order", "accuracy")] == 1.0 and rows[("COCO-Order", "mu_c")] == pytest.approx(0.2)
    assert rows[(HEADLINE, "accuracy")] == pytest.approx(1.0)


def test_missing_annotations_name_the_files_and_the_fix(tmp_path):
    root = _vg_root(tmp_path)
    with pytest.raises(MosaicError, match="coco_karpathy_test.json") as e:
        aro.Aro().load(root)
    assert "--bench aro:VG-Relation+VG-Attribution" in str(e.value)
    (root / "aro" / "visual_genome_relation.json").write_text("[{]")
    with pytest.raises(MosaicError, match="invalid JSON"):
        aro.Aro().load(root, subtasks=["VG-Relation"])
    (root / "aro" / "visual_genome_relation.json").write_text(json.dumps([{"image_path": "1.jpg"}]))
    with pytest.raises(MosaicError, match="entry 0: missing .bbox_x."):
        aro.Aro().load(root, subtasks=["VG-Relation"])
