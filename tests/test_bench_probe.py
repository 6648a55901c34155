"""Probe-R / Probe-C / Probe-B scoring (Schiappa et al. 2023, Sec. 3.4) on tiny files in the documented layout, with
hand-built similarity matrices and hand-computed expected values; and `evaluate` end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import orjson
import pytest
from PIL import Image
from typer.testing import CliRunner

from mosaictool.bench import get
from mosaictool.bench.base import HEADLINE
from mosaictool.bench.probe_b import average_precision
from mosaictool.cli import app
from mosaictool.errors import MosaicError


def sig(x: float) -> float:
    """Two-way softmax probability of the option whose logit is x above the other's."""
    return 1 / (1 + math.exp(-x))


def by_key(rows):
    return {(r["subtask"], r["metric"]): r["value"] for r in rows}


def _jsonl(path, recs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _img(path, colour=(200, 0, 0)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (24, 24), colour).save(path)


# --- Probe-R -----------------------------------------------------------------------------------------

TEXTS = {"R1": "a photo of a man riding a horse", "R2": "a photo of a man eating a horse",
         "R3": "a photo of a cloud riding a horse",
         "O1": "a photo of a man", "O3": "a photo of a cloud"}


def test_probe_r_scores(tmp_path):
    """Subject-only images count as ONE image per group (the mean of their logits), as the authors'
    eval_relation_understanding.py does; the old rule (one case per image) gave O1_vs_R1 0.5 here.
    The headline is R1 vs R2 accuracy (Table 2 = Table 3's Acc column), no longer its mu_c."""
    _jsonl(tmp_path / "probe_r" / "probe_r.jsonl", [
        {"id": "a", "image": "1.jpg", "texts": TEXTS, "subject_images": ["2.jpg", "3.jpg"]},
        {"id": "b", "image": "4.jpg", "texts": TEXTS, "subject_images": []},
    ])
    bench = get("probe_r")
    items = bench.load(tmp_path)
    assert [it.meta["subtask"] for it in items] == ["anchor", "subject", "anchor"]
    assert items[0].texts == [TEXTS[k] for k in ("R1", "R2", "R3", "O1")]
    assert items[1].texts == [TEXTS[k] for k in ("O1", "R1", "R2", "R3", "O3")]
    assert items[1].images[1].path == str(tmp_path / "probe_r" / "3.jpg")
    sims = [np.array([[0.30, 0.29, 0.31, 0.25]]),  # R2 lower (right), R3 higher (wrong), O1 lower (right)
            # image 2 alone would put R1 above O1; the mean [.25, .225, .15, .2, .15] has O1 first
            np.array([[0.3, 0.2, 0.1, 0.1, 0.1], [0.2, 0.25, 0.2, 0.3, 0.2]]),
            np.array([[0.3, 0.3, 0.1, 0.3]])]  # R1 == R2 (tie: wrong), R3 lower (right), O1 tie (wrong)
    rows = bench.score(items, sims, logit_scale=100.0)
    got = by_key(rows)
    assert got[("R1_vs_R2", "accuracy")] == 0.5 and got[("R1_vs_R3", "accuracy")] == 0.5 and got[("R1_vs_O1", "accuracy")] == 0.5
    assert got[("R1_vs_R2", "mu_c")] == pytest.approx((sig(1) + 0.5) / 2)
    assert got[("R1_vs_R3", "mu_c")] == pytest.approx((sig(-1) + sig(20)) / 2)
    assert got[("R1_vs_O1", "mu_c")] == pytest.approx((sig(5) + 0.5) / 2)
    for sub, mu in [("O1_vs_R1", sig(2.5)), ("O1_vs_R2", sig(10)), ("X_O1/R1_vs_R2", sig(7.5)), ("X_O1/R1_vs_R3", sig(2.5)),
                    ("O1_vs_O3", sig(10))]:
        assert got[(sub, "accuracy")] == 1.0 and got[(sub, "mu_c")] == pytest.approx(mu), sub
    assert {r["subtask"]: r["n"] for r in rows}["O1_vs_R1"] == 1  # one comparison per group
    assert got[(HEADLINE, "accuracy")] == got[("R1_vs_R2", "accuracy")] and (HEADLINE, "mu_c") not in got
    # Table 3's four columns are shown; the code's other comparisons are detail rows
    assert {r["subtask"] for r in rows if not r.get("detail")} == {"R1_vs_R3", "R1_vs_R2", "O1_vs_R1", "O1_vs_R2", HEADLINE}
    assert len(bench.load(tmp_path, limit=1)) == 2


def test_probe_r_bad_file(tmp_path):
    (tmp_path / "probe_r").mkdir()
    (tmp_path / "probe_r" / "probe_r.jsonl").write_text('{"id": "a", "image": "1.jpg", "texts": {}}\n')
    with pytest.raises(MosaicError, match=r"probe_r.jsonl:1: missing field\(s\) subject_images"):
        get("probe_r").load(tmp_path)
    with pytest.raises(MosaicError, match="probe build r"):
        get("probe_r").load(tmp_path / "nowhere")


# --- Probe-C -----------------------------------------------------------------------------------------


def test_probe_c_scores(tmp_path):
    def g(i, split, cat):
        return {"id": i, "split": split, "category": cat, "images": [f"{i}1.jpg", f"{i}2.jpg"], "texts": [f"{i} one", f"{i} two"]}

    _jsonl(tmp_path / "probe_c" / "probe_c.jsonl", [g("a", "composition", "size"), g("b", "composition", "color"),
                                                    g("c", "object", "size")])
    bench = get("probe_c")
    items = bench.load(tmp_path)
    sims = [np.array([[0.3, 0.2], [0.1, 0.4]]),  # all right
            np.array([[0.3, 0.2], [0.35, 0.3]]),  # text wrong (.3 < .35), image wrong (.3 < .35)
            np.array([[0.2, 0.2], [0.1, 0.3]])]  # text: tie (wrong); image right
    got = by_key(bench.score(items, sims, logit_scale=100.0))
    assert (got[("composition", "text")], got[("composition", "image")], got[("composition", "group")]) == (0.5, 0.5, 0.5)
    assert (got[("object", "text")], got[("object", "image")], got[("object", "group")]) == (0.0, 1.0, 0.0)
    mu_a, mu_b = (sig(10) + sig(30)) / 2, (sig(10) + sig(-5)) / 2
    assert got[("composition", "mu_c")] == pytest.approx((mu_a + mu_b) / 2)
    assert got[("object", "mu_c")] == pytest.approx((0.5 + sig(20)) / 2)
    assert got[("composition/size", "group")] == 1.0 and got[("composition/color", "group")] == 0.0
    assert got[(HEADLINE, "mu_c")] == got[("composition", "mu_c")]
    assert [it.meta["subtask"] for it in bench.load(tmp_path, subtasks=["object"])] == ["object"]


# --- Probe-B -----------------------------------------------------------------------------------------


def test_average_precision_by_hand():
    """Per image over its class ranking, with the authors' epsilon; a run of tied scores is one rank
    (scikit-learn's rule), so a tie no longer depends on list order (it used to: [0, 1] -> 0.5, [1, 0] -> 1)."""
    assert average_precision(np.array([0.9, 0.8, 0.7]), np.array([0, 1, 1])) == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert average_precision(np.array([0.5, 0.5]), np.array([0, 1])) == average_precision(np.array([0.5, 0.5]),
                                                                                          np.array([1, 0])) \
        == pytest.approx(0.5)
    assert average_precision(np.array([0.9, 0.5, 0.5, 0.1]), np.array([0, 1, 1, 0])) == pytest.approx(2 / 3)
    for k in range(4):  # a constant model: 1/4 wherever its one class sits
        assert average_precision(np.zeros(4), np.eye(4)[k]) == pytest.approx(0.25)


def _softmax(row, k):
    e = np.exp(100 * (np.asarray(row) - max(row)))
    return e[k] / e.sum()


def test_probe_b_scores(tmp_path):
    folder = tmp_path / "probe_b"
    folder.mkdir()
    (folder / "classes.txt").write_text("dog\ncat\ncar\n")
    views = {"x0": "a.png", "x0_patch": "b.png", "x1": "c.png"}
    _jsonl(folder / "probe_b.jsonl", [
        {"id": "1", "split": "MR", "filler": "black", "images": views, "labels": ["dog"], "target": None},
        {"id": "2", "split": "MR", "filler": "black", "images": views, "labels": ["cat", "car"], "target": None},
        {"id": "3", "split": "R", "filler": "black", "images": views, "labels": ["dog", "cat"], "target": "dog"},
    ])
    bench = get("probe_b")
    items = bench.load(tmp_path)
    assert items[0].texts == ["a photo of a dog.", "a photo of a cat.", "a photo of a car."]
    assert items[2].texts == ["a photo of a dog.", "a photo of a car."]  # R: target + classes not in the image
    r1 = np.array([[0.3, 0.1, 0.2], [0.3, 0.1, 0.2], [0.1, 0.2, 0.3]])
    r2 = np.array([[0.1, 0.3, 0.2], [0.2, 0.3, 0.1], [0.3, 0.2, 0.1]])
    r3 = np.array([[0.3, 0.2], [0.2, 0.3], [0.3, 0.3]])
    got = by_key(bench.score(items, [r1, r2, r3], logit_scale=100.0))
    # AP per image (was per class): record 1 (dog) 1, 1, 1/3; record 2 (cat, car) 1, 5/6, 7/12
    assert got[("MR/black", "mAP_x0")] == pytest.approx(1) and got[("MR/black", "mAP_x0_patch")] == pytest.approx(11 / 12)
    assert got[("MR/black", "mAP_x1")] == pytest.approx(11 / 24)
    # robustness per image, then the mean (was the ratio of the two mAPs)
    assert got[("MR/black", "robustness_x0_x1")] == pytest.approx(11 / 24)
    assert got[("MR/black", "robustness_x0_x0_patch")] == pytest.approx(11 / 12)
    assert got[("MR/black", "robustness_x0_patch_x1")] == pytest.approx((1 / 3 + 0.7) / 2)
    # confidence change: the mean over each image's objects, then over images (was over all pairs)
    expected = np.mean([_softmax(r1[0], 0) - _softmax(r1[2], 0),
                        np.mean([_softmax(r2[0], k) - _softmax(r2[2], k) for k in (1, 2)])])
    assert got[("MR/black", "confidence_change_x0_x1")] == pytest.approx(expected)
    assert got[("R/black", "accuracy_x0")] == 1.0
    assert got[("R/black", "accuracy_x0_patch")] == 0.0 and got[("R/black", "accuracy_x1")] == 0.0
    # R: robustness = the relative change of the target's softmax confidence (Table 9), not of accuracy
    assert got[("R/black", "robustness_x0_x1")] == pytest.approx(0.5 / sig(10))
    assert got[("R/black", "robustness_x0_patch_x1")] == pytest.approx(0.5 / sig(-10))
    assert got[("R/black", "confidence_change_x0_x0_patch")] == pytest.approx(sig(10) - sig(-10))
    assert got[("MR", "mAP_x1")] == got[(HEADLINE, "mAP_x1")] == pytest.approx(11 / 24)
    assert got[("R", "accuracy_x0")] == 1.0


def test_probe_b_unknown_class(tmp_path):
    folder = tmp_path / "probe_b"
    folder.mkdir()
    (folder / "classes.txt").write_text("dog\n")
    views = {"x0": "a.png", "x0_patch": "b.png", "x1": "c.png"}
    _jsonl(folder / "probe_b.jsonl", [{"id": "1", "split": "MR", "filler": "black", "images": views,
                                       "labels": ["cow"], "target": None}])
    with pytest.raises(MosaicError, match="cow not in classes.txt"):
        get("probe_b").load(tmp_path)
    _jsonl(folder / "probe_b.jsonl", [{"id": "1", "split": "MR", "filler": "black", "images": views,
                                       "labels": [], "target": None}])
    with pytest.raises(MosaicError, match="record 1: split MR needs the classes present"):  # no AP without a present class
        get("probe_b").load(tmp_path)


# --- end to end: build from tiny VG / COCO files, then evaluate --------------------------------------


def test_build_then_evaluate(tmp_path, tiny_checkpoint):
    from mosaictool.stages import probe_build as pb

    ckpt = tiny_checkpoint
    vg = [{"image_id": i, "relationships": [{"predicate": p, "subject": {"name": s}, "object": {"name": o}}]}
          for i, (s, p, o) in enumerate([("man", "riding", "horse"), ("man", "near", "tree"), ("dog", "on", "grass")], 1)]
    (tmp_path / "rel.json").write_text(json.dumps(vg))
    for i in (1, 2, 3):
        _img(tmp_path / "vg" / f"{i}.jpg", (60 * i, 0, 0))
    data = tmp_path / "data"
    pb.write_jsonl(pb.build_probe_r(tmp_path / "rel.json", tmp_path / "vg", data / "probe_r"), data / "probe_r" / "probe_r.jsonl")
    parsed = [{"image_id": 1, "graph": {"entities": [{"lemma_head": "dog", "attributes": ["small"]}]}},
              {"image_id": 2, "graph": {"entities": [{"lemma_head": "dog", "attributes": ["big"]}]}}]
    (tmp_path / "caps.json").write_text(json.dumps({"images": [{"id": i, "file_name": f"{i}.jpg"} for i in (1, 2)],
                                                    "annotations": [{"image_id": i, "caption": "x"} for i in (1, 2)]}))
    pb.write_jsonl(pb.build_probe_c(tmp_path / "caps.json", tmp_path / "vg", data / "probe_c", parsed=parsed),
                   data / "probe_c" / "probe_c.jsonl")
    inst = {"images": [{"id": 1, "file_name": "1.jpg", "width": 24, "height": 24}],
            "categories": [{"id": 1, "name": "dog"}, {"id": 2, "name": "cat"}],
            "annotations": [{"image_id": 1, "category_id": 1, "segmentation": [[2, 2, 10, 2, 10, 10, 2, 10]],
                             "bbox": [2, 2, 8, 8]}]}
    (tmp_path / "inst.json").write_text(json.dumps(inst))
    pb.write_jsonl(pb.build_probe_b(tmp_path / "inst.json", tmp_path / "vg", data / "probe_b",
                                    fillers=("gray",), min_object=0.01),
                   data / "probe_b" / "probe_b.jsonl")
    out = tmp_path / "r.jsonl"
    res = CliRunner().invoke(app, ["evaluate", "--bench", "probe_r,probe_c,probe_b", "-c", str(ckpt), "--data-root",
                                   str(data), "-o", str(out)])
    assert res.exit_code == 0, res.stderr
    rows = [orjson.loads(x) for x in out.read_text().splitlines()]
    heads = {r["benchmark"]: r for r in rows if r["subtask"] == HEADLINE}
    assert set(heads) == {"probe_r", "probe_c", "probe_b"}
    assert all(0 <= r["value"] <= 1 for r in heads.values())


# --- the world's versions ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_world(tmp_path_factory):
    from mosaictool.world.generate import generate_world

    out = tmp_path_factory.mktemp("pw") / "world"
    generate_world(out, seed=0, train=0, eval_scale=0.1)
    return out


def test_world_probe_c_pairs_are_antonym_or_object_swaps(small_world):
    from mosaictool.stages.probe_build import load_antonyms

    ant, _ = load_antonyms()
    recs = [json.loads(x) for x in (small_world / "test" / "probe_c" / "probe_c.jsonl").read_text().splitlines()]
    info = json.loads((small_world / "manifest.json").read_text())["counts"]["test"]
    assert len(recs) == info["probe_c_composition"] + info["probe_c_object"] == 12
    for r in recs:
        (a1, n1), (a2, n2) = r["compositions"]
        if r["split"] == "composition":
            assert n1 == n2 and a2 in ant[a1]  # the world's pairs are in the shipped map
        else:
            assert a1 == a2 and n1 != n2
        s1, s2 = r["scenes"]
        assert [o for o in s1["objects"][1:]] == [o for o in s2["objects"][1:]]  # only the target differs
        assert all(o["shape"] not in (n1, n2) for o in s1["objects"][1:])
        folder = small_world / "test" / "probe_c"
        assert (folder / r["images"][0]).read_bytes() != (folder / r["images"][1]).read_bytes()


def test_world_probe_b_images(small_world):
    folder = small_world / "test" / "probe_b"
    recs = [json.loads(x) for x in (folder / "probe_b.jsonl").read_text().splitlines()]
    assert {(r["split"], r["filler"]) for r in recs} == {(s, f) for s in ("MR", "R") for f in ("black", "gray", "noise", "scene")}
    assert (folder / "prompts.txt").read_text().splitlines()[0] == "a circle."
    mr = next(r for r in recs if r["split"] == "MR" and r["filler"] == "black")
    x0, x0p, x1 = (np.asarray(Image.open(folder / mr["images"][v])) for v in ("x0", "x0_patch", "x1"))
    changed = (x0 != x0p).any(axis=2)
    assert changed.any() and (x0p[changed] == 0).all()  # a black patch ...
    for o in mr["scene"]["objects"]:  # ... hiding no object
        bx0, by0, bx1, by1 = o["bbox"]
        assert not changed[by0:by1, bx0:bx1].any()
    inside = np.zeros(x1.shape[:2], bool)
    for o in mr["scene"]["objects"]:
        bx0, by0, bx1, by1 = o["bbox"]
        inside[by0:by1, bx0:bx1] = True
    assert (x1[~inside] == 0).all() and (x1[inside] != 0).any()
    r = next(r for r in recs if r["split"] == "R")
    assert r["target"] in r["labels"] and len(r["labels"]) == len(r["scene"]["objects"])


@pytest.mark.slow
def test_world_bench_scores_the_probes(small_world, tmp_path, tiny_checkpoint):
    ckpt = tiny_checkpoint
    out = tmp_path / "r.jsonl"
    res = CliRunner().invoke(app, ["evaluate", "--bench", "world:probe_c+probe_b+aro", "-c", str(ckpt), "--data-root",
                                   str(small_world), "-o", str(out)])
    assert res.exit_code == 0, res.stderr
    rows = {(r["subtask"], r["metric"]): r for r in (orjson.loads(x) for x in out.read_text().splitlines())}
    assert rows[("probe_c/composition", "group")]["n"] == 6 and ("probe_c/object", "mu_c") in rows
    assert rows[("probe_b/MR/black", "mAP_x1")]["n"] == 2 and ("probe_b/R", "accuracy_x1") in rows
    # the probes stay out of the world's headline: it is still the mean of the ARO accuracies here
    aro_acc = [r["value"] for k, r in rows.items() if k[1] == "accuracy" and k[0] in ("aro/VG-Relation",
                                                                                      "aro/VG-Attribution", "aro/COCO-Order")]
    assert rows[(HEADLINE, "accuracy")]["value"] == pytest.approx(np.mean([v for v in aro_acc if v is not None]))
