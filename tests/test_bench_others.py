"""Winoground (jsonl + parquet), SVO-Probes, WhatsUp, EqBen and SPEC: no annotation files of these
are in ../shared, so each test writes a tiny file in the format each benchmark's repository documents
(see each mosaictool/bench module's docstring), loads it, and scores hand-built similarity matrices, ties included."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from mosaictool.bench import get
from mosaictool.bench.base import HEADLINE, ImageRef, Item
from mosaictool.bench.eqben import BENCHMARK as EQBEN
from mosaictool.bench.spec import BENCHMARK as SPEC
from mosaictool.bench.svo_probes import BENCHMARK as SVO
from mosaictool.bench.whatsup import BENCHMARK as WHATSUP
from mosaictool.bench.winoground import BENCHMARK as WINO
from mosaictool.errors import MosaicError

# s[image, caption] for one Winoground-style pair
PERFECT = [[0.9, 0.1], [0.1, 0.9]]
TEXT_ONLY = [[0.5, 0.4], [0.6, 0.7]]  # text ok (.5>.4, .7>.6); image: .5>.6 fails
TIE = [[0.5, 0.5], [0.1, 0.9]]  # s(c0,i0) == s(c1,i0): text wrong, image right


def rows_by_key(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["subtask"], r["metric"]): r for r in rows}


def png_bytes(color) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGBA", (8, 8), color).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def tiny_bundle():
    from mosaictool.model.openclip import create

    return create("mosaic-tiny", None, seed=0)


def test_all_registered():
    for name, bench in [("winoground", WINO), ("svo_probes", SVO), ("whatsup", WHATSUP), ("eqben", EQBEN), ("spec", SPEC)]:
        assert get(name) is bench
        assert bench.layout and bench.subtasks


# ---------------------------------------------------------------- Winoground

WINO_RECORDS = [
    {"id": 0, "image_0": "ex_0_img_0", "image_1": "ex_0_img_1", "caption_0": "an old person kisses a young person",
     "caption_1": "a young person kisses an old person", "tag": "Adjective-Age", "secondary_tag": "", "num_main_preds": 1,
     "collapsed_tag": "Relation"},
    {"id": 1, "image_0": "ex_1_img_0", "image_1": "ex_1_img_1", "caption_0": "a cat on a mat", "caption_1": "a mat on a cat",
     "tag": "Noun", "secondary_tag": "", "num_main_preds": 1, "collapsed_tag": "Object"},
    {"id": 2, "image_0": "ex_2_img_0", "image_1": "ex_2_img_1", "caption_0": "red ball blue box",
     "caption_1": "blue ball red box",
     "tag": "Adjective-Color", "secondary_tag": "Symbolic", "num_main_preds": 2, "collapsed_tag": "Both"},
]


def test_winoground_jsonl_layout(tmp_path):
    data = tmp_path / "winoground" / "data"
    data.mkdir(parents=True)
    (data / "examples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in WINO_RECORDS))
    items = WINO.load(tmp_path)
    assert [it.meta for it in items] == [{"subtask": "Relation", "id": 0}, {"subtask": "Object", "id": 1},
                                         {"subtask": "Both", "id": 2}]
    assert items[0].images == [ImageRef(str(data / "images" / "ex_0_img_0.png")),
                               ImageRef(str(data / "images" / "ex_0_img_1.png"))]
    assert items[0].texts == ["an old person kisses a young person", "a young person kisses an old person"]
    assert [it.meta["id"] for it in WINO.load(tmp_path, subtasks=["Object"])] == [1]
    (data / "examples.jsonl").write_text(json.dumps(WINO_RECORDS[0]) + "\n{not json\n")
    with pytest.raises(MosaicError, match=r"examples\.jsonl:2: invalid JSON"):
        WINO.load(tmp_path)


def test_winoground_parquet_layout_end_to_end(tmp_path, tiny_bundle):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mosaictool.bench.engine import EngineOptions, evaluate

    rows = [
        {**{k: v for k, v in r.items() if not k.startswith("image")},
         "image_0": {"bytes": png_bytes((i * 40, 0, 0, 255)), "path": None},
         "image_1": {"bytes": png_bytes((0, i * 40, 0, 128)), "path": None}}
        for i, r in enumerate(WINO_RECORDS)
    ]
    data = tmp_path / "winoground" / "data"
    data.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), data / "test-00000-of-00001.parquet")
    items = WINO.load(tmp_path)
    assert len(items) == 3 and items[2].images[1].data == rows[2]["image_1"]["bytes"]
    assert items[2].images[1].path.endswith("test-00000-of-00001.parquet:row 2:image_1")
    out = list(evaluate([(WINO, None)], [("tiny", tiny_bundle)], tmp_path, EngineOptions(quiet=True)))
    keys = rows_by_key(out)
    assert keys[(HEADLINE, "group")]["n"] == 3 and keys[("all", "text")]["n"] == 3


def test_winoground_missing_data_says_what_to_put_where(tmp_path):
    with pytest.raises(MosaicError, match=r"examples\.jsonl.*parquet"):
        WINO.load(tmp_path)


def test_winoground_scores_strict_with_tag_rows():
    items = [Item([ImageRef("a"), ImageRef("b")], ["c0", "c1"], {"subtask": t}) for t in ("Object", "Relation", "Both", "Both")]
    sims = [np.array(m) for m in (PERFECT, TEXT_ONLY, TIE, PERFECT)]
    k = rows_by_key(WINO.score(items, sims))
    assert (k[("all", "text")]["value"], k[("all", "image")]["value"], k[("all", "group")]["value"]) == (0.75, 0.75, 0.5)
    assert k[("Relation", "text")]["value"] == 1.0 and k[("Relation", "group")]["value"] == 0.0
    assert k[("Relation", "text")]["detail"] and "detail" not in k[("all", "text")]
    assert k[("Both", "text")]["value"] == 0.5 and k[("Both", "image")]["value"] == 1.0
    assert k[(HEADLINE, "group")] == {"subtask": HEADLINE, "metric": "group", "value": 0.5, "n": 4}
    assert (HEADLINE, "group") not in rows_by_key(WINO.score(items[:2], sims[:2]))


# ---------------------------------------------------------------- SVO-Probes

SVO_ROWS = [
    # sentence, pos_triplet, neg_triplet, subj_neg, verb_neg, obj_neg, pos_url, neg_url, pos_image_id, neg_image_id
    ("A man rides a horse.", "man,ride,horse", "woman,ride,horse", "True", "False", "False", "u1", "u2", "11", "12"),
    ("A man rides a horse.", "man,ride,horse", "man,feed,horse", "False", "True", "False", "u1", "u3", "11", "13"),
    ("A dog catches a ball.", "dog,catch,ball", "dog,catch,frisbee", "False", "False", "True", "u4", "u5", "14", "15"),
    ("A dog catches a ball.", "dog,catch,ball", "cat,chase,ball", "True", "True", "False", "u4", "u6", "14", "16"),
]


def write_svo(root: Path) -> None:
    (root / "svo_probes").mkdir(parents=True)
    with open(root / "svo_probes" / "svo_probes.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["sentence", "pos_triplet", "neg_triplet", "subj_neg", "verb_neg", "obj_neg", "pos_url", "neg_url",
                    "pos_image_id", "neg_image_id"])
        w.writerows(SVO_ROWS)


def test_svo_keeps_rows_with_exactly_one_negative_type(tmp_path):
    write_svo(tmp_path)
    items = SVO.load(tmp_path)
    assert [it.meta["subtask"] for it in items] == ["subj_neg", "verb_neg", "obj_neg"]  # the 2-type row is excluded
    images = tmp_path / "svo_probes" / "images"
    assert items[1].images == [ImageRef(str(images / "11.jpg")), ImageRef(str(images / "13.jpg"))]
    assert items[1].texts == ["A man rides a horse."]
    assert [it.meta["subtask"] for it in SVO.load(tmp_path, subtasks=["obj_neg"])] == ["obj_neg"]


def test_svo_bad_flag_and_missing_column(tmp_path):
    write_svo(tmp_path)
    path = tmp_path / "svo_probes" / "svo_probes.csv"
    path.write_text(path.read_text().replace("False,False,True,u4", "maybe,False,True,u4", 1))
    with pytest.raises(MosaicError, match=r"svo_probes\.csv: line 4: subj_neg = 'maybe'"):
        SVO.load(tmp_path)
    path.write_text("sentence,pos_image_id\nx,1\n")
    with pytest.raises(MosaicError, match="missing column"):
        SVO.load(tmp_path)


def test_svo_pairwise_image_selection_tie_is_wrong():
    def case(sub, pos, neg):
        return Item([ImageRef("p"), ImageRef("n")], ["s"], {"subtask": sub}), np.array([[pos], [neg]])

    cases = [case("subj_neg", 0.3, 0.2), case("subj_neg", 0.2, 0.2), case("verb_neg", 0.1, 0.4), case("obj_neg", 0.5, 0.1)]
    k = rows_by_key(SVO.score(*map(list, zip(*cases))))
    assert k[("subj_neg", "accuracy")]["value"] == 0.5 and k[("verb_neg", "accuracy")]["value"] == 0.0
    assert k[(HEADLINE, "accuracy")]["value"] == pytest.approx((0.5 + 0.0 + 1.0) / 3)
    assert k[(HEADLINE, "accuracy")]["n"] == 4


# ---------------------------------------------------------------- WhatsUp

def controlled_records(folder: str, objects: list[tuple[str, str]], preps: list[tuple[str, str]]) -> list[dict]:
    out = []
    for a, b in objects:
        for slug, words in preps:
            captions = [f"A {a} {w} a {b}" for _, w in preps]
            right = captions.pop([s for s, _ in preps].index(slug))
            out.append({"image_path": f"data/{folder}/{a}_{slug}_{b}.jpeg", "caption_options": [right, *captions]})
    return out


A_PREPS = [("on", "on"), ("under", "under"), ("left_of", "to the left of"), ("right_of", "to the right of")]
B_PREPS = [("in-front_of", "in front of"), ("behind", "behind"), ("left_of", "to the left of"), ("right_of", "to the right of")]


def write_whatsup(root: Path) -> None:
    base = root / "whatsup"
    base.mkdir(parents=True)
    files = {
        "controlled_images_dataset.json": controlled_records("controlled_images",
                                                             [("mug", "table"), ("beer-bottle", "armchair")], A_PREPS),
        "controlled_clevr_dataset.json": controlled_records("controlled_clevr", [("cube", "sphere")], B_PREPS),
        "coco_qa_one_obj.json": [[139, "A photo of a dog on the left", "A photo of a dog on the right"]],
        "coco_qa_two_obj.json": [[632, "A cup above a plate", "A cup below a plate"]],
        "vg_qa_one_obj.json": [[2345, "A photo of a tree on the top", "A photo of a tree on the bottom"]],
        "vg_qa_two_obj.json": [[2346, "A man in front of a car", "A man behind a car"]],
    }
    for name, recs in files.items():
        (base / name).write_text(json.dumps(recs))


def test_whatsup_layout_and_meta(tmp_path):
    write_whatsup(tmp_path)
    items = WHATSUP.load(tmp_path)
    base = tmp_path / "whatsup"
    assert len(items) == 8 + 4 + 4
    first = items[0]
    assert first.images == [ImageRef(str(base / "controlled_images" / "mug_on_table.jpeg"))]
    assert first.texts[0] == "A mug on a table" and len(first.texts) == 4
    assert first.meta == {"subtask": "WhatsUp_A", "preposition": "on", "pair": ("mug", "table"), "slot": "on"}
    b = [it for it in items if it.meta["subtask"] == "WhatsUp_B"]
    assert [it.meta["slot"] for it in b] == ["in-front", "behind", "left", "right"]
    assert [it.meta["preposition"] for it in b] == ["in-front_of", "behind", "left_of", "right_of"]
    qa = {it.meta["subtask"]: it for it in items if "QA" in it.meta["subtask"]}
    assert qa["COCO_QA_ONE"].images[0].path == str(base / "val2017" / "000000000139.jpg")
    assert qa["VG_QA_TWO"].images[0].path == str(base / "vg_images" / "2346.jpg")
    assert [qa[s].meta["preposition"] for s in ("COCO_QA_ONE", "COCO_QA_TWO", "VG_QA_ONE", "VG_QA_TWO")] == [
        "left", "above", "top", "front"]


def test_whatsup_argmax_ties_correct_and_pair_set_accuracy(tmp_path):
    write_whatsup(tmp_path)
    items = WHATSUP.load(tmp_path, subtasks=["WhatsUp_A"])
    right, wrong, tie = [0.9, 0.1, 0.1, 0.1], [0.1, 0.9, 0.1, 0.1], [0.5, 0.5, 0.1, 0.1]
    # mug/table: on right, under tie (right), left right, right wrong -> on&under pair only
    # beer-bottle/armchair: all right -> both pairs, full set
    sims = [np.array([s]) for s in (right, tie, right, wrong, right, right, right, right)]
    k = rows_by_key(WHATSUP.score(items, sims))
    assert k[("WhatsUp_A", "accuracy")]["value"] == 7 / 8
    assert k[("WhatsUp_A", "pair_accuracy")]["value"] == 3 / 4  # 3 of 8/2 pairs
    assert k[("WhatsUp_A", "set_accuracy")]["value"] == 1 / 2  # 1 of 8/4 sets
    assert k[("WhatsUp_A/right_of", "accuracy")] == {"subtask": "WhatsUp_A/right_of", "metric": "accuracy",
                                                     "value": 0.5, "n": 2, "detail": True}
    assert (HEADLINE, "accuracy") not in k


def test_whatsup_headline_is_the_mean_of_six(tmp_path):
    write_whatsup(tmp_path)
    items = WHATSUP.load(tmp_path)
    sims = []
    for it in items:
        good = it.meta["subtask"] != "VG_QA_ONE"
        s = np.full((1, len(it.texts)), 0.1)
        s[0, 0 if good else 1] = 0.9
        sims.append(s)
    k = rows_by_key(WHATSUP.score(items, sims))
    assert k[("VG_QA_ONE", "accuracy")]["value"] == 0.0
    assert k[(HEADLINE, "accuracy")]["value"] == pytest.approx(5 / 6)


# ---------------------------------------------------------------- EqBen

def pair(i: int, caption_list: bool = False, ext: str = "png") -> dict:
    c0, c1 = f"caption {i} a", f"caption {i} b"
    return {"image0": f"img/{i}_0.{ext}", "caption0": [c0, "alt"] if caption_list else c0,
            "image1": f"img/{i}_1.{ext}", "caption1": [c1] if caption_list else c1}


def write_eqben(root: Path) -> None:
    ann = root / "eqben" / "annotations"
    ann.mkdir(parents=True)
    files = {
        "eqbenag": {"video1": {"subj1": [pair(0, True), pair(1, True)], "subj2": [pair(2, True)]}},
        "eqbenyoucook2": {"vid": [pair(3, ext="npy")]},
        "eqbengebc": {"vid": [pair(4), pair(5)]},
        "eqbenkubric_loc": [pair(6)],
        "eqbenkubric_attr": [pair(7)],
        "eqbenkubric_cnt": [pair(8)],
        "eqbensd": [pair(9)],
    }
    for name, ann_data in files.items():
        (ann / f"{name}.json").write_text(json.dumps(ann_data))


def test_eqben_nested_formats_load_in_order(tmp_path):
    write_eqben(tmp_path)
    items = EQBEN.load(tmp_path)
    assert [it.meta["subtask"] for it in items][:4] == ["eqbenag"] * 3 + ["eqbenyoucook2"]
    assert len(items) == 10
    assert items[0].texts == ["caption 0 a", "caption 0 b"]  # eqbenag: first caption of the list
    assert items[0].images[0] == ImageRef(str(tmp_path / "eqben" / "images" / "img" / "0_0.png"))
    assert items[3].images[1].path.endswith("3_1.npy")
    assert len(EQBEN.load(tmp_path, limit=1)) == 7
    (tmp_path / "eqben" / "annotations" / "eqbensd.json").write_text(json.dumps([{"image0": "a", "caption0": "b"}]))
    with pytest.raises(MosaicError, match=r"eqbensd\.json: \[0\]: missing .image1."):
        EQBEN.load(tmp_path, subtasks=["eqbensd"])


def test_eqben_headline_averages_kubric_first(tmp_path):
    write_eqben(tmp_path)
    items = EQBEN.load(tmp_path)
    group_right = {"eqbenag": [1, 1, 0], "eqbenyoucook2": [1], "eqbengebc": [0, 0], "eqbenkubric_loc": [1],
                   "eqbenkubric_attr": [0], "eqbenkubric_cnt": [0], "eqbensd": [1]}
    flat = [v for sub in group_right.values() for v in sub]
    sims = [np.array(PERFECT if ok else TIE) for ok in flat]
    k = rows_by_key(EQBEN.score(items, sims))
    assert k[("eqbenag", "group")]["value"] == pytest.approx(2 / 3)
    assert k[("eqbenag", "image")]["value"] == 1.0  # TIE breaks text only
    assert k[("eqbenkubric", "group")]["value"] == pytest.approx(1 / 3)
    assert k[(HEADLINE, "group")]["value"] == pytest.approx(np.mean([2 / 3, 1, 0, 1 / 3, 1]))


# ---------------------------------------------------------------- SPEC

def write_spec(root: Path) -> None:
    for sub in ("absolute_size", "relative_size", "absolute_spatial", "relative_spatial", "existence", "count"):
        d = root / "spec" / sub
        d.mkdir(parents=True)
        (d / "image2text.json").write_text(json.dumps([{"query": "images/q0.jpg",
                                                        "keys": ["small x", "large x", "medium x"], "label": 1}]))
        (d / "text2image.json").write_text(json.dumps([{"query": "large x",
                                                        "keys": ["images/a.jpg", "images/b.jpg"], "label": 0}]))


def test_spec_layout_and_directions(tmp_path):
    write_spec(tmp_path)
    items = SPEC.load(tmp_path)
    assert len(items) == 12
    i2t, t2i = items[0], items[1]
    assert i2t.images == [ImageRef(str(tmp_path / "spec" / "absolute_size" / "images" / "q0.jpg"))] and len(i2t.texts) == 3
    assert t2i.texts == ["large x"] and len(t2i.images) == 2
    assert (i2t.meta["direction"], t2i.meta["direction"]) == ("i2t", "t2i")
    bad = tmp_path / "spec" / "count" / "text2image.json"
    bad.write_text(json.dumps([{"query": "x", "keys": ["a.jpg"], "label": 3}]))
    with pytest.raises(MosaicError, match=r"text2image\.json: item 0: label 3 outside"):
        SPEC.load(tmp_path, subtasks=["count"])


def test_spec_argmax_first_and_mean_over_subsets(tmp_path):
    write_spec(tmp_path)
    items = SPEC.load(tmp_path)
    sims = []
    for it in items:
        if it.meta["direction"] == "i2t":  # label 1; count subset ties 0 and 1: argmax picks 0, wrong
            sims.append(np.array([[0.5, 0.5, 0.1]]) if it.meta["subtask"] == "count" else np.array([[0.1, 0.5, 0.2]]))
        else:  # label 0; a tie picks 0, right
            sims.append(np.array([[0.4], [0.4]]))
    k = rows_by_key(SPEC.score(items, sims))
    assert k[("count", "i2t_accuracy")]["value"] == 0.0 and k[("existence", "i2t_accuracy")]["value"] == 1.0
    assert k[("count", "t2i_accuracy")]["value"] == 1.0
    assert k[(HEADLINE, "i2t_accuracy")]["value"] == pytest.approx(5 / 6)
    assert k[(HEADLINE, "t2i_accuracy")]["value"] == 1.0


def test_eqben_youcook2_npy_frames_are_read_as_bgr(tmp_path):
    from mosaictool.bench.engine import open_image

    frame = np.zeros((4, 6, 3), dtype=np.uint8)
    frame[..., 0] = 200  # blue, in BGR order
    np.save(tmp_path / "f.npy", frame)
    img = open_image(ImageRef(str(tmp_path / "f.npy")))
    assert img.size == (6, 4) and img.getpixel((0, 0)) == (0, 0, 200)


# ---------------------------------------------------------------- vl_compo meta-averages

def _reference_models(shared: Path, count: int) -> list[tuple[dict, dict]]:
    ref = shared / "reference-results"
    summary = {(r["arch"], r["pretrained"]): r for r in csv.DictReader(open(ref / "results.csv"))}
    pairs = [(m, summary[(m["arch"], m["pretrained"])]) for m in csv.DictReader(open(ref / "individual_results.csv"))
             if (m["arch"], m["pretrained"]) in summary]
    return pairs[:count]


def _split(percent: float, n: int) -> list[bool]:
    k = round(percent / 100 * n)
    return [True] * k + [False] * (n - k)


def test_headlines_reproduce_vl_compo_meta_averages(real_benchmarks):
    """Cases built to hit vl_compo's per-subtask values must give its published meta-averages
    (results.csv); where the real case counts are unknown, n = 1000 per part bounds the rounding."""
    from mosaictool.bench.imagecode import BENCHMARK as IMAGECODE
    from mosaictool.bench.vl_checklist import BENCHMARK as VL_CHECKLIST
    from mosaictool.bench.vl_checklist import SOURCES

    VLC = VL_CHECKLIST[0]

    two = {True: np.array([[0.9, 0.1]]), False: np.array([[0.1, 0.9]])}
    for model, summary in _reference_models(real_benchmarks, 3):
        def value(col: str) -> float:
            return float(model[col])

        def headline_of(bench, items, sims, metric="accuracy") -> float:
            return 100 * rows_by_key(bench.score(items, sims))[(HEADLINE, metric)]["value"]

        items, sims = [], []
        for source, (cat, _, _) in SOURCES.items():
            for ok in _split(value(f"vl_checklist::{cat}"), 1000):
                items.append(Item([ImageRef("x")], ["p", "n"], {"subtask": cat, "source": source}))
                sims.append(two[ok])
        assert headline_of(VLC, items, sims) == pytest.approx(float(summary["vl_checklist"]), abs=0.05)

        items, sims = [], []
        for sub in WHATSUP.subtasks:
            for j, ok in enumerate(_split(value(f"whatsup::{sub}"), 1000)):
                items.append(Item([ImageRef("x")], ["a", "b"], {"subtask": sub, "preposition": "on",
                                                                "pair": (str(j // 4), ""), "slot": "on"}))
                sims.append(two[ok])
        assert headline_of(WHATSUP, items, sims) == pytest.approx(float(summary["whatsup"]), abs=0.05)

        items, sims = [], []
        for sub in SVO.subtasks:
            for ok in _split(value(f"svo_probes::{sub}"), 1000):
                items.append(Item([ImageRef("p"), ImageRef("n")], ["s"], {"subtask": sub}))
                sims.append(two[ok].T)
        assert headline_of(SVO, items, sims) == pytest.approx(float(summary["svo_probes"]), abs=0.05)

        items, sims = [], []
        for sub in EQBEN.subtasks:
            for ok in _split(value(f"eqben::{sub}::group"), 1000):
                items.append(Item([ImageRef("a"), ImageRef("b")], ["c0", "c1"], {"subtask": sub}))
                sims.append(np.array(PERFECT if ok else TIE))
        assert headline_of(EQBEN, items, sims, "group") == pytest.approx(float(summary["eqben"]), abs=0.05)

        # Winoground (400 cases) and ImageCoDe (1,872 video + 430 static) values are exact k / n
        items, sims = [], []
        for j, ok in enumerate(_split(value("winoground::group"), 400)):
            items.append(Item([ImageRef("a"), ImageRef("b")], ["c0", "c1"], {"subtask": ("Object", "Relation", "Both")[j % 3]}))
            sims.append(np.array(PERFECT if ok else TIE))
        assert headline_of(WINO, items, sims, "group") == pytest.approx(float(summary["winoground"]), abs=1e-4)

        items, sims = [], []
        for sub, n in (("videos", 1872), ("static", 430)):
            for ok in _split(value(f"imagecode::{sub}"), n):
                items.append(Item([ImageRef(str(i)) for i in range(10)], ["d"],
                                  {"subtask": sub, "set": "s", "target": 0 if ok else 1}))
                sims.append(np.eye(10)[:, :1])
        assert headline_of(IMAGECODE, items, sims) == pytest.approx(float(summary["imagecode"]), abs=1e-4)
