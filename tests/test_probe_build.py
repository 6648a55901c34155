"""`probe build r|c|b` (Schiappa et al. 2023, Sec. 3, App. A): tiny VG / COCO-shaped files in tmp dirs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers import refused_leaving_files
from mosaictool.cli import app
from mosaictool.errors import MosaicError
from mosaictool.stages import probe_build as pb


def _img(path: Path, size=(40, 30), colour=(200, 30, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


def _rel(s, p, o, rid):
    return {"relationship_id": rid, "predicate": p, "subject": {"name": s}, "object": {"names": [o]}}


# --- Probe-R -----------------------------------------------------------------------------------------

VG = [
    {"image_id": 1, "relationships": [_rel("man", "is riding", "horse", 10)]},
    {"image_id": 2, "relationships": [_rel("man", "are standing next to", "tree", 20), _rel("dog", "on", "grass", 21)]},
    {"image_id": 3, "relationships": [_rel("woman", "holding", "umbrella", 30)]},
    {"image_id": 4, "relationships": [_rel("man", "standing next to", "car", 40)]},
    {"image_id": 5, "relationships": [_rel("man", "wearing", "hat", 50)]},
    {"image_id": 6, "relationships": [_rel("cat", "on", "table", 60)]},
]


@pytest.fixture
def vg(tmp_path):
    (tmp_path / "relationships.json").write_text(json.dumps(VG))
    for i in range(1, 7):
        _img(tmp_path / "images" / "VG_100K" / f"{i}.jpg")
    return tmp_path


def _seen(data):
    preds, subs, objs = {}, {}, {}
    for e in data:
        for r in e["relationships"]:
            s = r["subject"].get("name") or r["subject"]["names"][0]
            p, o = pb.clean_predicate(r["predicate"]), r["object"].get("name") or r["object"]["names"][0]
            preds.setdefault((s, o), set()).add(p)
            subs.setdefault((p, o), set()).add(s)
            objs.setdefault(e["image_id"], set()).update((s, o))
    return preds, subs, objs


def test_clean_predicate_merges_aliases():
    assert pb.clean_predicate("are standing next to") == "standing next to"
    assert pb.clean_predicate("Is ON top of a") == "on top of"
    assert pb.clean_predicate("sits on", {"sits on": "sitting on"}) == "sitting on"


def test_probe_r_swaps_are_unseen_and_subject_images_have_only_the_subject(vg):
    counts = pb.Counts()
    recs = list(pb.build_probe_r(vg / "relationships.json", vg / "images", vg / "out" / "probe_r", counts=counts))
    preds, subs, objs = _seen(VG)
    assert recs and counts.kept["groups"] == len(recs)
    predicates = {p for ps in preds.values() for p in ps}
    assert "are standing next to" not in predicates and "standing next to" in predicates  # merged
    for rec in recs:
        s, r, o = rec["relation"]
        assert rec["predicate_swap"] not in preds[(s, o)] and rec["predicate_swap"] in predicates
        assert rec["subject_swap"] not in subs[(r, o)] | {s}
        assert rec["texts"]["R1"] == f"a photo of {pb.article(s)} {r} {pb.article(o)}"
        assert rec["texts"]["O1"] == f"a photo of {pb.article(s)}"
        others = objs[rec["image_id"]] - {s}
        for iid in rec["subject_image_ids"]:
            assert s in objs[iid] and not (objs[iid] & others) and iid != rec["image_id"]
        image = (vg / "out" / "probe_r" / rec["image"]).resolve()
        assert image == (vg / "images" / "VG_100K" / f"{rec['image_id']}.jpg").resolve()
    man = next(r for r in recs if r["image_id"] == 1)  # man riding horse: 2, 4, 5 show a man and no horse
    assert sorted(man["subject_image_ids"]) == [2, 4, 5]


def test_probe_r_is_deterministic_and_seeded(vg):
    def run(seed):
        return list(pb.build_probe_r(vg / "relationships.json", vg / "images", vg / "o", seed=seed))

    assert run(0) == run(0)
    assert any(run(0) != run(s) for s in (1, 2, 3))


def test_probe_r_counts_missing_images(vg):
    (vg / "images" / "VG_100K" / "3.jpg").unlink()
    (vg / "images" / "VG_100K" / "4.jpg").unlink()
    counts = pb.Counts()
    recs = list(pb.build_probe_r(vg / "relationships.json", vg / "images", vg / "o", counts=counts))
    assert 3 not in [r["image_id"] for r in recs] and 4 not in [r["image_id"] for r in recs]
    assert counts.skipped["anchor images missing"] == 2
    assert counts.skipped["subject-only images missing"] >= 1  # image 4 was a subject-only image of the man groups
    assert all(4 not in r["subject_image_ids"] for r in recs)


def test_probe_r_wrong_shape_names_file_and_field(tmp_path):
    bad = tmp_path / "relationships.json"
    bad.write_text(json.dumps([{"image_id": 1, "relationships": [{"predicate": "on", "subject": {"name": "a"}}]}]))
    with pytest.raises(MosaicError, match=r"relationships.json: entry 0 \(image 1\): relationship 0: missing 'object'"):
        list(pb.build_probe_r(bad, tmp_path, tmp_path))
    bad.write_text(json.dumps({"image_id": 1}))
    with pytest.raises(MosaicError, match="top level: expected a list"):
        list(pb.build_probe_r(bad, tmp_path, tmp_path))


def test_probe_r_cli_writes_jsonl_and_reports(vg, runner):
    res = runner.invoke(app, ["probe", "build", "r", "--vg-relationships", str(vg / "relationships.json"),
                              "--images", str(vg / "images"), "--out", str(vg / "data")])
    assert res.exit_code == 0, res.output
    lines = (vg / "data" / "probe_r" / "probe_r.jsonl").read_text().splitlines()
    assert len(lines) == 6
    assert "probe_r: wrote 6 groups" in res.stderr
    res = runner.invoke(app, ["probe", "build", "r", "--vg-relationships", str(vg / "nope.json"), "--images", str(vg),
                              "--out", str(vg / "d2")])
    assert res.exit_code == 1 and "nope.json: VG relationships.json" in res.stderr and "--vg-relationships" in res.stderr
    assert not (vg / "d2" / "probe_r" / "probe_r.jsonl").exists()


# --- Probe-C -----------------------------------------------------------------------------------------


def _graph(*ents):
    return {"entities": [{"lemma_head": n, "attributes": list(a)} for a, n in ents], "relations": []}


PARSED = [  # image_id -> its caption graphs, as `parse` writes them
    {"image_id": 1, "graph": _graph((["small"], "dog"), ([], "grass"))},
    {"image_id": 2, "graph": _graph((["big"], "dog"),)},
    {"image_id": 3, "graph": _graph((["small"], "dog"), (["big"], "dog"))},  # both: never in a composition pair
    {"image_id": 4, "graph": _graph((["small"], "cat"),)},
    {"image_id": 5, "graph": _graph((["red"], "car"),)},
    {"image_id": 6, "graph": _graph((["red"], "bus"), ([], "car"))},  # mentions a car: no object pair with 5
    {"image_id": 7, "graph": _graph((["red"], "apple"),)},
]


@pytest.fixture
def coco_caps(tmp_path):
    caps = {"images": [{"id": i, "file_name": f"{i:012d}.jpg"} for i in range(1, 8)],
            "annotations": [{"id": 100 + i, "image_id": i, "caption": "x"} for i in range(1, 8)]}
    (tmp_path / "captions.json").write_text(json.dumps(caps))
    for i in range(1, 8):
        _img(tmp_path / "val" / f"{i:012d}.jpg")
    return tmp_path


def test_probe_c_pairs_follow_the_paper(coco_caps):
    counts = pb.Counts()
    recs = list(pb.build_probe_c(coco_caps / "captions.json", coco_caps / "val", coco_caps / "out", parsed=PARSED, counts=counts))
    comp = [r for r in recs if r["split"] == "composition"]
    obj = [r for r in recs if r["split"] == "object"]
    assert [(r["image_ids"], r["compositions"], r["category"]) for r in comp] == [
        ([2, 1], [["big", "dog"], ["small", "dog"]], "size")]
    assert comp[0]["texts"] == ["a photo of a big dog", "a photo of a small dog"]
    pairs = {tuple(r["image_ids"]) for r in obj}
    # same attribute, different nouns, neither image mentions the other's noun
    assert (5, 6) not in pairs and (6, 5) not in pairs
    for r in obj:
        (a1, n1), (a2, n2) = r["compositions"]
        assert a1 == a2 and n1 != n2
    assert {(1, 4), (4, 1)} & pairs and {(5, 7), (7, 5)} & pairs
    assert len({frozenset(p) for p in pairs}) == len(obj)  # an image pair once, whichever noun drew it
    assert counts.kept["composition groups"] == 1 and counts.kept["object groups"] == len(obj)


def test_probe_c_counts_missing_images(coco_caps):
    (coco_caps / "val" / f"{2:012d}.jpg").unlink()
    counts = pb.Counts()
    recs = list(pb.build_probe_c(coco_caps / "captions.json", coco_caps / "val", coco_caps / "out", parsed=PARSED, counts=counts))
    assert not [r for r in recs if r["split"] == "composition"]
    assert counts.skipped["images missing"] == 1


def test_probe_c_wrong_shape(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"images": [], "annotations": [{"image_id": 1}]}))
    with pytest.raises(MosaicError, match=r"c.json: annotations\[0\]: missing field 'caption'"):
        list(pb.build_probe_c(tmp_path / "c.json", tmp_path, tmp_path, parsed=[]))


def test_antonym_map_is_symmetric_and_categorised():
    ant, cat = pb.load_antonyms()
    assert "small" in ant["big"] and "big" in ant["small"] and cat["big"] == "size" and cat["wooden"] == "material"
    assert all(a in ant[b] for a in ant for b in ant[a])


def test_probe_c_cli_parses_captions(tmp_path, runner):
    caps = {"images": [{"id": i, "file_name": f"{i}.jpg"} for i in (1, 2)],
            "annotations": [{"id": 1, "image_id": 1, "caption": "A small dog sits on the grass."},
                            {"id": 2, "image_id": 2, "caption": "A big dog runs in a park."}]}
    (tmp_path / "c.json").write_text(json.dumps(caps))
    for i in (1, 2):
        _img(tmp_path / "img" / f"{i}.jpg")
    res = runner.invoke(app, ["probe", "build", "c", "--coco-captions", str(tmp_path / "c.json"),
                              "--images", str(tmp_path / "img"),
                              "--out", str(tmp_path / "data")])
    assert res.exit_code == 0, res.output
    recs = [json.loads(x) for x in (tmp_path / "data" / "probe_c" / "probe_c.jsonl").read_text().splitlines()]
    assert [r["texts"] for r in recs] == [["a photo of a big dog", "a photo of a small dog"]]
    assert recs[0]["images"] == ["../../img/2.jpg", "../../img/1.jpg"]  # relative to data/probe_c/


# --- Probe-B -----------------------------------------------------------------------------------------


def _square(x, y, s):
    return [[x, y, x + s, y, x + s, y + s, x, y + s]]


@pytest.fixture
def coco_inst(tmp_path):
    from pycocotools import mask as mask_utils

    h, w = 40, 60
    rle_mask = np.zeros((h, w), np.uint8, order="F")
    rle_mask[25:35, 40:55] = 1
    rle = mask_utils.encode(rle_mask)
    rle["counts"] = rle["counts"].decode()
    inst = {
        "images": [{"id": 1, "file_name": "a.jpg", "width": w, "height": h},
                   {"id": 2, "file_name": "b.jpg", "width": w, "height": h},
                   {"id": 3, "file_name": "gone.jpg", "width": w, "height": h}],
        "categories": [{"id": 1, "name": "dog"}, {"id": 2, "name": "cat"}, {"id": 3, "name": "car"}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 1, "segmentation": _square(2, 2, 12), "bbox": [2, 2, 12, 12], "iscrowd": 0},
            {"id": 2, "image_id": 1, "category_id": 2, "segmentation": rle, "bbox": [40, 25, 15, 10], "iscrowd": 0},
            {"id": 3, "image_id": 2, "category_id": 3, "segmentation": _square(5, 5, 10), "bbox": [5, 5, 10, 10], "iscrowd": 0},
            {"id": 4, "image_id": 3, "category_id": 3, "segmentation": _square(5, 5, 10), "bbox": [5, 5, 10, 10], "iscrowd": 0},
        ],
    }
    (tmp_path / "inst.json").write_text(json.dumps(inst))
    for name in ("a.jpg", "b.jpg"):
        _img(tmp_path / "img" / name, (w, h), (250, 250, 250))
    return tmp_path


def test_decode_mask_polygon_and_rle(coco_inst):
    inst = json.loads((coco_inst / "inst.json").read_text())
    poly = pb.decode_mask(inst["annotations"][0]["segmentation"], 40, 60)
    assert poly[5, 5] and not poly[30, 30] and abs(poly.sum() - 144) <= 30
    rle = pb.decode_mask(inst["annotations"][1]["segmentation"], 40, 60)
    assert rle.sum() == 150 and rle[30, 45] and not rle[5, 5]


def test_degenerate_coco_geometry_is_read_not_refused(coco_inst):
    """Real COCO-format files hold polygons of under 3 points and boxes with a zero side: no area, not
    malformed. A 4-number polygon is not read as a box (pycocotools' reading of it)."""
    poly = json.loads((coco_inst / "inst.json").read_text())["annotations"][0]["segmentation"]
    assert not pb.decode_mask([[5, 5, 30, 30]], 40, 60).any()
    assert (pb.decode_mask(poly + [[5, 5, 30, 30]], 40, 60) == pb.decode_mask(poly, 40, 60)).all()
    inst = json.loads((coco_inst / "inst.json").read_text())
    inst["annotations"][0]["bbox"][2] = 0
    inst["annotations"][0]["segmentation"].append([1, 1, 2, 2])
    (coco_inst / "degenerate.json").write_text(json.dumps(inst))
    images, annotations, _ = pb.coco_instances(coco_inst / "degenerate.json")
    assert sum(len(a) for a in annotations.values()) == len(inst["annotations"])


def test_probe_b_images_and_records(coco_inst):
    counts = pb.Counts()
    out = coco_inst / "data" / "probe_b"
    recs = list(pb.build_probe_b(coco_inst / "inst.json", coco_inst / "img", out, fillers=("black", "noise"), counts=counts,
                                 min_object=0.01))
    assert counts.skipped["images missing"] == 1
    mr = [r for r in recs if r["split"] == "MR"]
    assert {(r["image_id"], r["filler"]) for r in mr} == {(1, "black"), (1, "noise"), (2, "black"), (2, "noise")}
    r1 = next(r for r in mr if r["image_id"] == 1 and r["filler"] == "black")
    assert r1["labels"] == ["cat", "dog"] and (out / r1["images"]["x0"]).resolve() == (coco_inst / "img" / "a.jpg").resolve()
    x1 = np.asarray(Image.open(out / r1["images"]["x1"]))
    assert (x1[20, 30] == 0).all() and (x1[30, 45] > 200).all() and (x1[5, 5] > 200).all()  # background black, objects kept
    patched = np.asarray(Image.open(out / r1["images"]["x0_patch"]))
    changed = (patched != 250).any(axis=2)
    assert changed.sum() == 8 * 8  # 0.2 x 40 side, black
    ys, xs = np.nonzero(changed)
    for bx, by, bw, bh in ([2, 2, 12, 12], [40, 25, 15, 10]):
        assert xs.max() < bx or xs.min() >= bx + bw or ys.max() < by or ys.min() >= by + bh
    r_recs = [r for r in recs if r["split"] == "R" and r["image_id"] == 1]
    assert len(r_recs) == 2 and r_recs[0]["target"] in ("dog", "cat") and r_recs[0]["labels"] == ["cat", "dog"]
    one = np.asarray(Image.open(out / r_recs[0]["images"]["x1"]))
    kept = (5, 5) if r_recs[0]["target"] == "dog" else (30, 45)
    gone = (30, 45) if r_recs[0]["target"] == "dog" else (5, 5)
    assert (one[kept] > 200).all() and (one[gone] == 0).all()
    assert (out / "classes.txt").read_text().split("\n")[:3] == ["dog", "cat", "car"]
    again = list(pb.build_probe_b(coco_inst / "inst.json", coco_inst / "img", coco_inst / "d2",
                                  fillers=("black", "noise"), min_object=0.01,
                                  workers=2))
    def without_x0(rows):
        return [{**r, "images": {**r["images"], "x0": None}} for r in rows]

    assert without_x0(again) == without_x0(recs)
    assert (Path(coco_inst / "d2") / r1["images"]["x0_patch"]).read_bytes() == (out / r1["images"]["x0_patch"]).read_bytes()


def test_probe_b_bad_input(coco_inst, runner):
    inst = json.loads((coco_inst / "inst.json").read_text())
    del inst["annotations"][2]["segmentation"]
    (coco_inst / "bad.json").write_text(json.dumps(inst))
    res = runner.invoke(app, ["probe", "build", "b", "--coco-instances", str(coco_inst / "bad.json"),
                              "--images", str(coco_inst / "img"),
                              "--out", str(coco_inst / "d")])
    assert res.exit_code == 1 and "bad.json: annotations[2]: missing 'segmentation'" in res.stderr
    res = runner.invoke(app, ["probe", "build", "b", "--coco-instances", str(coco_inst / "inst.json"),
                              "--images", str(coco_inst / "img"),
                              "--out", str(coco_inst / "d"), "--fillers", "scene"])
    assert res.exit_code == 1 and "--scenes" in res.stderr
    scenes = coco_inst / "scenes"
    _img(scenes / "s.png", (10, 10), (0, 200, 0))
    res = runner.invoke(app, ["probe", "build", "b", "--coco-instances", str(coco_inst / "inst.json"),
                              "--images", str(coco_inst / "img"),
                              "--out", str(coco_inst / "d"), "--fillers", "scene", "--scenes", str(scenes), "--splits", "MR"])
    assert res.exit_code == 0, res.output
    assert "probe_b: wrote 2 MR groups (scene)" in res.stderr and "1 images missing" in res.stderr


# --- the builders as the paper and the authors build ------------------------------------------


SWAP_VG = [  # man riding horse is the anchor under test: "sitting on" and "chasing" are seen with its s or o
    {"image_id": 1, "relationships": [_rel("man", "riding", "horse", 10)]},
    {"image_id": 2, "relationships": [_rel("man", "sitting on", "bench", 20)]},
    {"image_id": 3, "relationships": [_rel("dog", "chasing", "horse", 30)]},
    {"image_id": 4, "relationships": [_rel("woman", "holding", "umbrella", 40)]},
    {"image_id": 5, "relationships": [_rel("cat", "under", "table", 50)]},
    {"image_id": 6, "relationships": [_rel("boy", "eating", "apple", 60)]},
    {"image_id": 7, "relationships": [_rel("girl", "riding", "bike", 70)]},
]


def test_probe_r_swaps_never_seen_with_the_subject_or_the_predicate(tmp_path):
    """App. A.1 (and the authors' new_datasets/README.md, UnderstandingVisualTextModels da44432): R2's
    predicate is one neither s nor o was ever annotated with, R3's subject an object never annotated with
    r, in either role. The old rule (only the exact (s, o) / (r, o) unseen) allowed "man sitting on a
    horse" and "girl riding a horse"."""
    (tmp_path / "relationships.json").write_text(json.dumps(SWAP_VG))
    for i in range(1, 8):
        _img(tmp_path / "images" / f"{i}.jpg")
    preds_with, objects_with = {}, {}
    for e in SWAP_VG:
        for r in e["relationships"]:
            s, p, o = r["subject"]["name"], r["predicate"], r["object"]["names"][0]
            for x in (s, o):
                preds_with.setdefault(x, set()).add(p)
            objects_with.setdefault(p, set()).update((s, o))
    r2s, s3s = set(), set()
    for seed in range(60):
        for rec in pb.build_probe_r(tmp_path / "relationships.json", tmp_path / "images", tmp_path / "o", seed=seed):
            s, r, o = rec["relation"]
            assert rec["predicate_swap"] not in preds_with[s] | preds_with[o]
            assert rec["subject_swap"] not in objects_with[r]
            if rec["image_id"] == 1:
                r2s.add(rec["predicate_swap"])
                s3s.add(rec["subject_swap"])
    assert r2s == {"holding", "under", "eating"}  # every allowed predicate drawn, no other
    assert s3s == {"bench", "dog", "woman", "umbrella", "cat", "table", "boy", "apple"}  # any object not seen with "riding"


def _runs(mask: np.ndarray) -> list[int]:
    """COCO's uncompressed RLE counts (column-major, starting with a run of zeros), as crowd regions have."""
    flat, counts, cur, n = mask.flatten(order="F"), [], 0, 0
    for v in flat:
        if v != cur:
            counts.append(n)
            cur, n = v, 0
        n += 1
    return counts + [n]


def test_probe_b_r_patch_is_the_photo_with_a_filler_patch(coco_inst):
    """The authors' co-occurrence script reads R's x0~ from the same folder as split MR's
    (eval_cooccurence_understanding.py: --root_image_patch_dir val2014_random_patch_dataset/<fill>, file
    COCO_val2014_<id>.jpg; README.md "Probe-B ... by Object Co-Occurence", da44432): the photo with a
    patch of the filler. With black and gray fillers a patch drawn on the objects-only image was invisible,
    so x0~ was pixel-identical to x0; Table 9 shows them differing."""
    out = coco_inst / "data" / "probe_b"
    recs = list(pb.build_probe_b(coco_inst / "inst.json", coco_inst / "img", out, fillers=("black", "gray"), min_object=0.01))
    photo = np.asarray(Image.open(coco_inst / "img" / "a.jpg").convert("RGB")).astype(int)
    for filler, value in (("black", 0), ("gray", 128)):
        r = next(x for x in recs if x["split"] == "R" and x["filler"] == filler)
        mr = next(x for x in recs if x["split"] == "MR" and x["filler"] == filler and x["image_id"] == r["image_id"])
        x0, x0_patch = (np.asarray(Image.open(out / r["images"][v])).astype(int) for v in ("x0", "x0_patch"))
        assert (x0 != x0_patch).any()
        assert r["images"]["x0_patch"] == mr["images"]["x0_patch"] and r["images"]["x0"] == mr["images"]["x1"]
        changed = (x0_patch != photo).any(axis=2)
        assert changed.sum() == 8 * 8 and (x0_patch[changed] == value).all()  # the photo, but for one filler patch


def test_probe_b_crowd_regions_are_present_never_absent(tmp_path):
    """A class annotated only as a crowd region (iscrowd 1, uncompressed RLE) is in the image: it is among
    the labels (so split R never prompts it as an absent class), kept on the objects-only image, avoided by
    the patch, and never R's target. Before, crowd regions were dropped and became absent prompts."""
    from mosaictool.bench import probe_b as bench_b

    h, w = 40, 60
    crowd = np.zeros((h, w), np.uint8)
    crowd[25:35, 40:55] = 1
    inst = {"images": [{"id": 1, "file_name": "a.jpg", "width": w, "height": h}],
            "categories": [{"id": 1, "name": "dog"}, {"id": 2, "name": "person"}, {"id": 3, "name": "car"}],
            "annotations": [
                {"id": 1, "image_id": 1, "category_id": 1, "segmentation": _square(2, 2, 12),
                 "bbox": [2, 2, 12, 12], "iscrowd": 0},
                {"id": 2, "image_id": 1, "category_id": 2, "segmentation": {"counts": _runs(crowd), "size": [h, w]},
                 "bbox": [40, 25, 15, 10], "iscrowd": 1}]}
    (tmp_path / "inst.json").write_text(json.dumps(inst))
    _img(tmp_path / "img" / "a.jpg", (w, h), (250, 250, 250))
    out = tmp_path / "data" / "probe_b"
    for seed in range(8):
        recs = list(pb.build_probe_b(tmp_path / "inst.json", tmp_path / "img", out, fillers=("black",),
                                     min_object=0.01, seed=seed))
        assert {r["split"] for r in recs} == {"MR", "R"}
        for r in recs:
            assert r["labels"] == ["dog", "person"] and r["target"] in (None, "dog")
            patched = np.asarray(Image.open(out / r["images"]["x0_patch"])).astype(int)
            assert (patched[25:35, 40:55] > 200).all() and (patched[2:14, 2:14] > 200).all()  # patch hides neither
        mr = next(r for r in recs if r["split"] == "MR")
        nobg = np.asarray(Image.open(out / mr["images"]["x1"])).astype(int)
        assert (nobg[25:35, 40:55] > 200).all() and (nobg[20, 30] == 0).all()  # the crowd region is kept, background gone
    pb.write_jsonl(recs, out / "probe_b.jsonl")
    r_item = next(it for it in bench_b.load_records(out, "probe_b") if it.meta["split"] == "R")
    assert r_item.texts == ["a photo of a dog.", "a photo of a car."]  # person is present: no absent prompt


# Table 5 of Schiappa et al. 2023 (App. A.2), transcribed: category -> attributes, in the paper's order and spelling.
TABLE_5 = {
    "age": "young old new",
    "color": "greyscale coloured sepia reddish bronze greenish green turquoise blue tan red white silver purple gold pink navy "
             "brown teal gray black yellow grey golden camo pinkish beige orange blonde",
    "expression": "happy unhappy smiling laughing smiley sad",
    "gender": "male female",
    "material": "tin aluminum cloth gravel unpaved wooden stainless marble metallic metal grassy porcelain wooded pebbled",
    "pattern": "checkered patterned striped spotted plaid stripped checkerboard",
    "shape": "triangular flat circular triangle oval round dotted rectangular square",
    "size": "bulky long thin large big tall short small huge tiny giant little chubby pudgy",
    "texture": "smooth fluffy fuzzy dry wet rusty bald hairy stony",
    "visibility": "shiny unclear sun nightime blurry shadowy lit shady light darkened hazy dark barren cloudy clear sunlit "
                  "bright foggy rainy sparkling",
}


def test_antonym_map_holds_every_table_5_attribute_in_its_category():
    """Every attribute of Table 5 has an antonym and the paper's category ("shiny": visibility, not
    texture); the attributes outside Table 5 are the antonyms the map's header names; and the bench's
    reading of the categories (Probe-C per-category scores) agrees with the builder's."""
    from mosaictool.bench import probe_c as bench_c

    ant, cat = pb.load_antonyms()
    table = {a: c for c, names in TABLE_5.items() for a in names.split()}
    assert len(table) == 113
    assert {a: cat.get(a) for a in table} == table
    assert all(ant.get(a) for a in table)
    assert set(ant) - set(table) == {"plain", "solid", "paved", "dull", "lush"}
    assert {a: bench_c.categories().get(a) for a in table} == table


def test_probe_r_subject_swap_is_never_an_object_of_the_anchor_image(tmp_path):
    """R1 vs R3 asks whether the model recognises that an object is NOT present (the authors'
    new_datasets/README.md): s~ is never in the anchor image, by its relationships or (with --vg-objects)
    its objects.json; every other object never seen with r stays drawable."""
    vg = [
        {"image_id": 1, "relationships": [_rel("man", "riding", "horse", 10), _rel("dog", "on", "grass", 11)]},
        {"image_id": 2, "relationships": [_rel("cat", "under", "table", 20)]},
        {"image_id": 3, "relationships": [_rel("boy", "eating", "apple", 30)]},
    ]
    objects = [{"image_id": 1, "objects": [{"names": ["table"]}]}]
    (tmp_path / "relationships.json").write_text(json.dumps(vg))
    (tmp_path / "objects.json").write_text(json.dumps(objects))
    for i in range(1, 4):
        _img(tmp_path / "images" / f"{i}.jpg")
    for extra, in_image in (({}, {"man", "horse", "dog", "grass"}),
                            ({"objects": tmp_path / "objects.json"}, {"man", "horse", "dog", "grass", "table"})):
        drawn = set()
        for seed in range(80):
            for rec in pb.build_probe_r(tmp_path / "relationships.json", tmp_path / "images", tmp_path / "o", seed=seed, **extra):
                if rec["image_id"] == 1 and rec["relation"][1] == "riding":
                    drawn.add(rec["subject_swap"])
        assert drawn == {"cat", "table", "boy", "apple"} - in_image, extra


def test_probe_b_refuses_an_image_linked_out_of_images_unless_allowed(coco_inst, tmp_path_factory):
    from mosaictool.errors import MosaicError

    outside = tmp_path_factory.mktemp("elsewhere") / "a.jpg"
    (coco_inst / "img" / "a.jpg").rename(outside)
    (coco_inst / "img" / "a.jpg").symlink_to(outside)
    with pytest.raises(MosaicError, match=r"image id 1: image 'a.jpg' leads outside --images .*--allow-outside-root"):
        list(pb.build_probe_b(coco_inst / "inst.json", coco_inst / "img", coco_inst / "d1", fillers=("black",), min_object=0.01))
    recs = list(pb.build_probe_b(coco_inst / "inst.json", coco_inst / "img", coco_inst / "d2", fillers=("black",), min_object=0.01,
                                 allow_outside_root=True))
    assert {r["image_id"] for r in recs} == {1, 2}


def test_probe_c_refuses_an_image_linked_out_of_images_unless_allowed(coco_caps, tmp_path_factory):
    from mosaictool.errors import MosaicError

    outside = tmp_path_factory.mktemp("elsewhere") / "2.jpg"
    (coco_caps / "val" / "000000000002.jpg").rename(outside)
    (coco_caps / "val" / "000000000002.jpg").symlink_to(outside)
    with pytest.raises(MosaicError, match=r"image id 2: image '000000000002.jpg' leads outside --images .*--allow-outside-root"):
        list(pb.build_probe_c(coco_caps / "captions.json", coco_caps / "val", coco_caps / "o1", parsed=PARSED))
    recs = list(pb.build_probe_c(coco_caps / "captions.json", coco_caps / "val", coco_caps / "o2", parsed=PARSED,
                                 allow_outside_root=True))
    assert [r["image_ids"] for r in recs if r["split"] == "composition"] == [[2, 1]]


# --- bad input (moved from test_bad_inputs_more.py) ---

SUBJ, OBJ = {"name": "dog"}, {"name": "table"}


PROBE_R_CASES = {
    "image_id a list": ([{"image_id": [1], "relationships": [{"predicate": "on", "subject": SUBJ, "object": OBJ}]}], "entry 0: image_id"),
    "image_id null": ([{"image_id": None, "relationships": []}], "entry 0: image_id"),
    "subject a string": ([{"image_id": 1, "relationships": [{"predicate": "on", "subject": "dog", "object": OBJ}]}], "subject"),
    "predicate a number": ([{"image_id": 1, "relationships": [{"predicate": 5, "subject": SUBJ, "object": OBJ}]}], "predicate"),
    "name a list": ([{"image_id": 1, "relationships": [{"predicate": "on", "subject": {"name": ["dog"]}, "object": OBJ}]}],
                    "subject.name"),
}


@pytest.mark.parametrize("case", PROBE_R_CASES)
def test_probe_r_bad_relationships(tmp_path, case):
    data, needle = PROBE_R_CASES[case]
    rel = tmp_path / "rel.json"
    rel.write_text(json.dumps(data))
    (tmp_path / "imgs").mkdir()
    refused_leaving_files(tmp_path, ["probe", "build", "r", "--vg-relationships", rel, "--images", tmp_path / "imgs",
                           "--out", tmp_path / "out"],
            rel, needle)


def coco(bbox=(1, 1, 10, 10), iid=1, width=64, seg=None, file_name="a.jpg"):
    return {"images": [{"id": iid, "file_name": file_name, "width": width, "height": 48}],
            "categories": [{"id": 1, "name": "dog"}],
            "annotations": [{"image_id": iid, "category_id": 1, "bbox": list(bbox) if isinstance(bbox, tuple) else bbox,
                             "segmentation": seg if seg is not None else [[1, 1, 10, 1, 10, 10, 1, 10]]}]}


PROBE_B_CASES = {
    "bbox negative width": (coco(bbox=(1, 1, -10, 10)), "annotations[0]: bbox"),
    "bbox a string": (coco(bbox="1,1,10,10"), "annotations[0]: bbox"),
    "bbox 3 numbers": (coco(bbox=(1, 1, 10)), "annotations[0]: bbox"),
    "bbox of strings": (coco(bbox=("1", "1", "10", "10")), "annotations[0]: bbox[0]"),
    "width a string": (coco(width="64"), "images[0]: width"),
    "width negative": (coco(width=-1), "images[0]: width"),
    "segmentation a string": (coco(seg="x"), "annotations[0]: segmentation"),
    "polygon of an odd count": (coco(seg=[[1, 1, 10]]), "annotations[0]: segmentation"),
    "file_name a number": (coco(file_name=5), "images[0]: file_name"),
}


@pytest.mark.parametrize("case", PROBE_B_CASES)
def test_probe_b_bad_instances(tmp_path, case):
    pytest.importorskip("pycocotools")
    from PIL import Image

    data, needle = PROBE_B_CASES[case]
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps(data))
    (tmp_path / "imgs").mkdir()
    Image.new("RGB", (64, 48), "white").save(tmp_path / "imgs" / "a.jpg")
    refused_leaving_files(tmp_path, ["probe", "build", "b", "--coco-instances", inst, "--images", tmp_path / "imgs",
                           "--out", tmp_path / "out"],
            inst, needle)


def test_probe_b_nan_side_refused(tmp_path):
    """A Python-written NaN (not JSON) in a box: mosaictool.io's JSON reader reads it as Python does, and
    the annotation schema refuses it naming the value."""
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps(coco()).replace('"bbox": [1, 1, 10, 10]', '"bbox": [1, 1, NaN, 10]'))
    (tmp_path / "imgs").mkdir()
    refused_leaving_files(tmp_path, ["probe", "build", "b", "--coco-instances", inst, "--images", tmp_path / "imgs",
                           "--out", tmp_path / "out"],
            inst, "annotations[0]: bbox[2]: expected a finite number")

