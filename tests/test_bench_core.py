"""Shared metrics (tie rules on hand-built score matrices), the registry, and the engine."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from helpers import invoke, jsonl, refused, snapshot
from helpers import refused as assert_refused
from mosaictool.bench import get, metrics, registry
from mosaictool.bench.base import ImageRef, Item, xywh_box
from mosaictool.bench.engine import Encoder, EngineOptions, drop_missing, evaluate, parse_bench_spec, similarities
from mosaictool.cli import app
from mosaictool.errors import MosaicError

# ---------------------------------------------------------------- metrics


def test_choice_strict_counts_a_tie_wrong():
    s = [[0.3, 0.3], [0.5, 0.2], [0.1, 0.4]]
    assert metrics.choice_correct(s, 0, "strict").tolist() == [False, True, False]
    assert metrics.choice_accuracy(s, 0, "strict") == pytest.approx(1 / 3)


def test_argmax_first_tie_goes_to_lowest_index():
    s = [[0.3, 0.3], [0.5, 0.2], [0.1, 0.4]]
    # ARO VG: options [false, true], correct index 1 -> a tie is wrong
    assert metrics.choice_correct(s, 1, "argmax-first").tolist() == [False, False, True]
    # ARO Order: correct index 0 -> a tie is right
    assert metrics.choice_correct(s, 0, "argmax-first").tolist() == [True, True, False]


def test_multiway_choice_and_per_row_correct_index():
    s = [[0.1, 0.9, 0.9], [0.2, 0.1, 0.3]]
    assert metrics.choice_correct(s, [1, 2], "strict").tolist() == [False, True]
    assert metrics.choice_correct(s, [1, 2], "argmax-first").tolist() == [True, True]
    with pytest.raises(ValueError):
        metrics.choice_correct(s, 0, "random")


def test_mean_confidence_is_softmax_over_scaled_cosines():
    s = np.array([[0.30, 0.28], [0.25, 0.25]])
    expected = 1 / (1 + np.exp(-100 * 0.02))
    conf = metrics.confidence(s, 0, logit_scale=100)
    assert conf[0] == pytest.approx(expected)
    assert conf[1] == pytest.approx(0.5)
    assert metrics.mean_confidence(s, 0, logit_scale=100) == pytest.approx((expected + 0.5) / 2)
    assert metrics.mean_confidence(s, 1, logit_scale=1.0) < 0.5


def test_rank_of_breaks_ties_by_position():
    assert metrics.rank_of([0.5, 0.5, 0.6], 0) == 2
    assert metrics.rank_of([0.5, 0.5, 0.6], 1) == 3
    assert metrics.rank_of([0.9, 0.1], 0) == 1
    m = metrics.rank_metrics([1, 2, 4, 11], ks=(1, 3, 5, 10))
    assert m["R@1"] == 0.25 and m["R@3"] == 0.5 and m["R@5"] == 0.75 and m["R@10"] == 0.75
    assert m["mean_rank"] == 4.5 and m["median_rank"] == 3.0


def test_winoground_scores_are_strict():
    good = [[0.9, 0.1], [0.2, 0.8]]  # s[image, caption]
    assert metrics.winoground_scores(good) == {"text": True, "image": True, "group": True}
    text_only = [[0.5, 0.4], [0.6, 0.7]]  # image 1 prefers caption 1, but caption 0 prefers image 1
    assert metrics.winoground_scores(text_only) == {"text": True, "image": False, "group": False}
    tie = [[0.5, 0.5], [0.1, 0.9]]
    assert metrics.winoground_scores(tie)["text"] is False
    acc = metrics.winoground_accuracy([good, text_only, tie])
    assert acc["group"] == pytest.approx(1 / 3) and acc["text"] == pytest.approx(2 / 3)


def test_retrieval_recalls_with_several_captions_per_image_and_ties():
    # 3 images; texts 0,1 -> image 0; 2 -> image 1; 3 -> image 2
    sims = np.array(
        [
            [0.1, 0.9, 0.2, 0.3],  # image 0: its best caption (1) is first
            [0.8, 0.1, 0.5, 0.4],  # image 1: caption 2 ranks 2nd (after text 0)
            [0.4, 0.4, 0.4, 0.4],  # image 2: all tied -> pessimistic rank 4
        ]
    )
    i2t, t2i = metrics.retrieval_ranks(sims, [0, 0, 1, 2])
    assert i2t.tolist() == [1, 2, 4]
    # text 0: image 1 (0.8) and image 2 (0.4) beat image 0 (0.1); text 3: image 1 ties image 2 -> rank 2
    assert t2i.tolist() == [3, 1, 1, 2]
    r = metrics.retrieval_recalls(sims, [0, 0, 1, 2], ks=(1, 5))
    assert r["image_to_text_R@1"] == pytest.approx(1 / 3) and r["text_to_image_R@1"] == pytest.approx(0.5)
    assert r["image_to_text_R@5"] == 1.0


def test_constant_model_does_not_get_perfect_retrieval():
    sims = np.zeros((4, 4))
    assert metrics.retrieval_recalls(sims, [0, 1, 2, 3], ks=(1,))["text_to_image_R@1"] == 0.0


def test_micro_and_macro_means():
    assert metrics.micro_mean([0.5, 1.0], [1, 3]) == pytest.approx(0.875)
    assert metrics.macro_mean([0.5, 1.0]) == 0.75


# ---------------------------------------------------------------- registry and spec


def test_registry_finds_my_benchmarks():
    reg = registry()
    for name in ("aro", "sugarcrepe", "crepe", "zeroshot", "retrieval", "world", "world-val"):
        assert name in reg
        b = reg[name]
        assert isinstance(b.layout, str) and b.layout and callable(b.load) and callable(b.score)
    with pytest.raises(MosaicError, match="unknown benchmark 'nope'"):
        get("nope")


def test_parse_bench_spec():
    assert parse_bench_spec("aro:VG-Relation+COCO-Order, sugarcrepe") == [("aro", ["VG-Relation", "COCO-Order"]),
                                                                          ("sugarcrepe", None)]
    with pytest.raises(MosaicError):
        parse_bench_spec(" , ")


def test_xywh_box_is_pil_crop():
    assert xywh_box(10, 20, 30, 40) == (10.0, 20.0, 40.0, 60.0)


# ---------------------------------------------------------------- engine with a counting fake model


class CountingModel(torch.nn.Module):
    """Image embedding = mean colour; text embedding = a fixed vector per token id. Counts inputs."""

    def __init__(self):
        super().__init__()
        self.logit_scale = torch.nn.Parameter(torch.tensor(np.log(50.0), dtype=torch.float32))
        self.table = torch.nn.Parameter(torch.randn(64, 3, generator=torch.Generator().manual_seed(0)))
        self.images_seen = 0
        self.texts_seen = 0

    def encode_image(self, x, normalize=False):
        self.images_seen += len(x)
        f = x.mean(dim=(2, 3)) + 1e-3
        return torch.nn.functional.normalize(f, dim=-1) if normalize else f

    def encode_text(self, tokens, normalize=False):
        self.texts_seen += len(tokens)
        f = self.table[tokens].sum(dim=1)
        return torch.nn.functional.normalize(f, dim=-1) if normalize else f


class FakeBundle:
    def __init__(self):
        self.model = CountingModel()
        self.meta = {"model_name": "fake", "quick_gelu": False, "model_cfg": {"embed_dim": 3}}

    @staticmethod
    def preprocess_val(img):
        return torch.from_numpy(np.asarray(img.resize((4, 4)), dtype=np.float32) / 255).permute(2, 0, 1)

    @staticmethod
    def tokenizer(texts):
        return torch.tensor([[sum(map(ord, w)) % 64 for w in (t.split() + ["<pad>"] * 4)[:4]] for t in texts])


@pytest.fixture
def images(tmp_path):
    colours = {"red.png": (250, 10, 10), "green.png": (10, 250, 10), "blue.jpg": (10, 10, 250)}
    for name, c in colours.items():
        Image.new("RGB", (20, 20), c).save(tmp_path / name)
    return tmp_path


def _items(root):
    red, green = ImageRef(str(root / "red.png")), ImageRef(str(root / "green.png"))
    return [
        Item([red], ["a red square", "a green square"], {"subtask": "s"}),
        Item([red], ["a red square", "a blue square"], {"subtask": "s"}),
        Item([green], ["a green square", "a red square"], {"subtask": "s"}),
        Item([ImageRef(str(root / "red.png"), (0, 0, 10, 10))], ["a red square"], {"subtask": "s"}),
    ]


def test_engine_encodes_each_unique_image_and_text_once(images):
    bundle = FakeBundle()
    enc = Encoder(bundle, EngineOptions(batch_size=2, quiet=True))
    sims = similarities(_items(images), enc, "t")
    assert bundle.model.images_seen == 3  # red, green, red cropped
    assert bundle.model.texts_seen == 3
    assert [s.shape for s in sims] == [(1, 2), (1, 2), (1, 2), (1, 1)]
    assert enc.logit_scale == pytest.approx(50.0)
    # cosines of normalised embeddings
    assert all(np.all(np.abs(s) <= 1 + 1e-6) for s in sims)


def test_engine_results_do_not_depend_on_batch_size(images):
    out = []
    for bs in (1, 3):
        enc = Encoder(FakeBundle(), EngineOptions(batch_size=bs, text_batch_size=bs, quiet=True))
        out.append([s.copy() for s in similarities(_items(images), enc, "t")])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_embedding_cache_is_reused_and_keyed_by_weights(images, tmp_path):
    cache = tmp_path / "cache"
    first = FakeBundle()
    s1 = similarities(_items(images), Encoder(first, EngineOptions(cache_dir=str(cache), quiet=True)), "t")
    again = FakeBundle()
    s2 = similarities(_items(images), Encoder(again, EngineOptions(cache_dir=str(cache), quiet=True)), "t")
    assert again.model.images_seen == 0 and again.model.texts_seen == 0
    np.testing.assert_allclose(s1[0], s2[0])
    other = FakeBundle()
    with torch.no_grad():
        other.model.table.add_(1.0)
    similarities(_items(images), Encoder(other, EngineOptions(cache_dir=str(cache), quiet=True)), "t")
    assert other.model.texts_seen == 3  # different weights, different cache


def test_missing_images_error_names_count_and_paths(images):
    items = _items(images) + [Item([ImageRef(str(images / "gone1.jpg"))], ["x"], {"subtask": "s"}),
                              Item([ImageRef(str(images / "gone2.jpg"))], ["y"], {"subtask": "s"})]
    with pytest.raises(MosaicError, match=r"2 image file\(s\) missing") as e:
        drop_missing(items, skip=False, where="bench")
    assert "gone1.jpg" in str(e.value) and "--skip-missing" in str(e.value)
    kept, report = drop_missing(items, skip=True, where="bench")
    assert len(kept) == 4 and report.items_skipped == 2 and len(report.paths) == 2


class TinyBench:
    name = "tiny"
    subtasks = ["s"]
    layout = "  red.png, green.png"

    def __init__(self, root):
        self.root = root

    def load(self, root, *, limit=None):
        return _items(self.root)[:limit] if limit else _items(self.root)

    def score(self, items, sims, *, logit_scale=100.0):
        acc = metrics.choice_accuracy(np.stack([sims[i][0] for i in range(3)]), 0, "strict")
        return [{"subtask": "s", "metric": "accuracy", "value": acc, "n": 3},
                {"subtask": "s", "metric": "scale", "value": logit_scale, "n": 3}]


def test_evaluate_rows_and_logit_scale(images):
    rows = list(evaluate([(TinyBench(images), None)], [("m", FakeBundle())], images, EngineOptions(quiet=True)))
    assert [(r["model"], r["benchmark"], r["subtask"], r["metric"], r["detail"]) for r in rows] == [
        ("m", "tiny", "s", "accuracy", False),
        ("m", "tiny", "s", "scale", False),
    ]
    assert rows[1]["value"] == pytest.approx(50.0)


def test_memo_decodes_and_tokenizes_once_for_every_model(images, monkeypatch):
    from mosaictool.bench import engine

    opened, tokenized = [], []
    real_open = engine.open_image
    monkeypatch.setattr(engine, "open_image", lambda ref: opened.append(ref) or real_open(ref))
    memo: dict = {}
    first, second = FakeBundle(), FakeBundle()
    with torch.no_grad():
        second.model.table.add_(0.5)  # another model: other similarities from the same decoded inputs
    for b in (first, second):
        b.tokenizer = lambda texts, real=b.tokenizer: tokenized.extend(texts) or real(texts)
    fresh = [[s.copy() for s in similarities(_items(images), Encoder(b, EngineOptions(quiet=True)), "t")]
             for b in (first, second)]
    assert len(opened) == 6 and len(tokenized) == 6  # without a memo: 3 images and 3 texts per model
    opened.clear(), tokenized.clear()
    kept = [[s.copy() for s in similarities(_items(images), Encoder(b, EngineOptions(quiet=True)), "t", memo)]
            for b in (first, second)]
    assert len(opened) == 3 and sorted(tokenized) == ["a blue square", "a green square", "a red square"]
    assert not np.allclose(kept[0][0], kept[1][0])
    for a, b in zip(fresh, kept):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, atol=1e-6)


def test_memo_decodes_per_model_when_the_images_would_not_fit(images, monkeypatch):
    from mosaictool.bench import engine

    opened = []
    real_open = engine.open_image
    monkeypatch.setattr(engine, "open_image", lambda ref: opened.append(ref) or real_open(ref))
    bundle = FakeBundle()
    bundle.meta["model_cfg"]["vision_cfg"] = {"image_size": 4}  # 192 bytes an image
    memo: dict = {}
    monkeypatch.setattr(engine, "PIXEL_MEMO_BYTES", 3 * 192)  # room for the 3 images
    for _ in range(2):
        similarities(_items(images), Encoder(bundle, EngineOptions(quiet=True)), "t", memo)
    assert len(opened) == 3
    opened.clear()
    monkeypatch.setattr(engine, "PIXEL_MEMO_BYTES", 2 * 192)
    for _ in range(2):
        similarities(_items(images), Encoder(bundle, EngineOptions(quiet=True)), "t", {})
    assert len(opened) == 6


# --- bad input (moved from test_bad_benchmarks.py) ---

runner = CliRunner()


SC = {"filename": "a.jpg", "caption": "a red cup", "negative_caption": "a blue cup"}


VALSE = {"image_file": "v.jpg", "caption": "There are no people.", "foil": "There are people.", "mturk": {"caption": 3}}


VLC = ["VG_100K/1.jpg", {"POS": ["brown knob"], "NEG": ["teal knob"]}]


EQ = {"image0": "a.png", "caption0": "a cat left of a dog", "image1": "b.png", "caption1": "a dog left of a cat"}


WU = {"image_path": "data/controlled_images/cup_on_table.jpeg", "caption_options": ["a", "b", "c", "d"]}


WINO = {"id": 0, "image_0": "ex_0_img_0", "image_1": "ex_0_img_1", "caption_0": "an old man", "caption_1": "a man old",
        "collapsed_tag": "Object"}


ORDER = {"image": "val2014/a.jpg", "caption": ["a cup on a table"]}


VG = {"image_path": "1.jpg", "bbox_x": 5, "bbox_y": 6, "bbox_w": 20, "bbox_h": 10, "true_caption": "the cup is on the table",
      "false_caption": "the table is on the cup", "relation_name": "on"}


PC = {"id": 1, "split": "composition", "images": ["a.png", "b.png"], "texts": ["a red cup", "a blue cup"]}


PB = {"id": 1, "split": "R", "filler": "black", "images": {"x0": "a.png", "x0_patch": "b.png", "x1": "c.png"},
      "labels": ["cup"], "target": "dog"}


PR = {"id": 1, "image": "a.png", "subject_images": ["b.png"],
      "texts": {"R1": "a cup on a table", "R2": "a cup under a table", "R3": "a dog on a table", "O1": "a cup", "O3": "a dog"}}


SVO_HEAD = "sentence,pos_image_id,neg_image_id,subj_neg,verb_neg,obj_neg\n"


CREPE_HEAD = "image_id,x,y,width,height,caption,hard_negs\n"


CREPE = "crepe/prod_hard_negatives/atom/prod_vg_hard_negs_atom_complexity_4.csv"


VLC_FILE = "vl_checklist/data/Relation/vg/spatial.json"


def js(*entries) -> str:
    return json.dumps(list(entries))


def obj(**entries) -> str:
    return json.dumps(entries)


def drop(record: dict, key: str) -> dict:
    return {k: v for k, v in record.items() if k != key}


LATIN1 = "caf\u00e9".encode("latin-1")  # b'caf\xe9': not UTF-8


# (case id, --bench, {file: content}, file the error names, words the error holds)
CASES = [
    # SugarCrepe: {key: case}
    ("sugarcrepe-escape", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": obj(**{"0": {**SC, "filename": "../../../etc/passwd"}})},
     "sugarcrepe/add_att.json", "case '0': filename: expected a relative path inside --data-root, got '../../../etc/passwd'"),
    ("sugarcrepe-absolute", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": obj(**{"0": {**SC, "filename": "/etc/passwd"}})},
     "sugarcrepe/add_att.json", "filename: expected a relative path inside --data-root, got '/etc/passwd'"),
    ("sugarcrepe-empty-caption", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": obj(**{"0": {**SC, "caption": ""}})},
     "sugarcrepe/add_att.json", "case '0': caption: expected a non-empty string, got ''"),
    ("sugarcrepe-list-top", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": js(SC)},
     "sugarcrepe/add_att.json", "the top: expected an object of cases by key, got list"),
    ("sugarcrepe-latin1", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": b'{"0": {"caption": "' + LATIN1 + b'"}}'},
     "sugarcrepe/add_att.json", "not UTF-8"),
    ("sugarcrepe-empty-file", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": ""},
     "sugarcrepe/add_att.json", "invalid JSON"),
    ("sugarcrepe-duplicate-key", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": '{"0": %s, "0": %s}' % (json.dumps(SC), json.dumps(SC))},
     "sugarcrepe/add_att.json", "key '0' appears twice"),
    # VALSE: {id: record}
    ("valse-missing-mturk", "valse:existence", {"valse/data/existence.json": obj(a=drop(VALSE, "mturk"))},
     "valse/data/existence.json", "record 'a': missing 'mturk'"),
    ("valse-votes-string", "valse:existence", {"valse/data/existence.json": obj(a={**VALSE, "mturk": {"caption": "3"}})},
     "valse/data/existence.json", "record 'a': mturk.caption: expected an integer, got str"),
    ("valse-votes-nan", "valse:existence",
     {"valse/data/existence.json": '{"a": %s}' % json.dumps({**VALSE, "mturk": {"caption": float("nan")}})},
     "valse/data/existence.json", "record 'a': mturk.caption: expected an integer, got float"),
    ("valse-foil-list", "valse:existence", {"valse/data/existence.json": obj(a={**VALSE, "foil": ["x", "y"]})},
     "valse/data/existence.json", "record 'a': foil: expected a non-empty string, got list"),
    ("valse-image-null", "valse:existence", {"valse/data/existence.json": obj(a={**VALSE, "image_file": None})},
     "valse/data/existence.json", "record 'a': image_file: expected a non-empty string, got null"),
    ("valse-escape", "valse:existence", {"valse/data/existence.json": obj(a={**VALSE, "image_file": "../../../../etc/passwd"})},
     "valse/data/existence.json", "record 'a': image_file: expected a relative path inside --data-root"),
    ("valse-record-list", "valse:existence", {"valse/data/existence.json": obj(a=["v.jpg"])},
     "valse/data/existence.json", "record 'a': expected an object, got list"),
    ("valse-empty-caption", "valse:existence", {"valse/data/existence.json": obj(a={**VALSE, "caption": ""})},
     "valse/data/existence.json", "record 'a': caption: expected a non-empty string, got ''"),
    ("valse-latin1", "valse:existence", {"valse/data/existence.json": b'{"a": "' + LATIN1 + b'"}'},
     "valse/data/existence.json", "not UTF-8"),
    # VL-CheckList: [[image, {POS, NEG}], ...]
    ("vl_checklist-pos-string", "vl_checklist:Relation_spatial", {VLC_FILE: js([VLC[0], {"POS": "brown knob", "NEG": ["x"]}])},
     VLC_FILE, "item 0: POS: expected a non-empty list of non-empty strings, got str"),
    ("vl_checklist-neg-empty", "vl_checklist:Relation_spatial", {VLC_FILE: js([VLC[0], {"POS": ["a"], "NEG": []}])},
     VLC_FILE, "item 0: NEG: expected a non-empty list of non-empty strings, got []"),
    ("vl_checklist-image-number", "vl_checklist:Relation_spatial", {VLC_FILE: js([7, VLC[1]])},
     VLC_FILE, "item 0: image: expected a non-empty string, got int"),
    ("vl_checklist-escape", "vl_checklist:Relation_spatial", {VLC_FILE: js(["/etc/passwd", VLC[1]])},
     VLC_FILE, "item 0: image: expected a relative path inside --data-root, got '/etc/passwd'"),
    ("vl_checklist-object-item", "vl_checklist:Relation_spatial", {VLC_FILE: js({"image": "a.jpg"})},
     VLC_FILE, "item 0: expected a list [image, {POS, NEG}], got object"),
    ("vl_checklist-null-caption", "vl_checklist:Relation_spatial", {VLC_FILE: js([VLC[0], {"POS": [None], "NEG": ["x"]}])},
     VLC_FILE, "item 0: POS[0]: expected a non-empty string, got null"),
    # EqBen: nests of {image0, caption0, image1, caption1}
    ("eqben-caption-number", "eqben:eqbensd", {"eqben/annotations/eqbensd.json": js({**EQ, "caption1": 3})},
     "eqben/annotations/eqbensd.json", "[0]: caption1: expected a non-empty string or a non-empty list of non-empty strings, got int"),
    ("eqben-caption-empty-list", "eqben:eqbensd", {"eqben/annotations/eqbensd.json": js({**EQ, "caption0": []})},
     "eqben/annotations/eqbensd.json", "[0]: caption0: expected a non-empty string or a non-empty list of non-empty strings, got []"),
    ("eqben-image-null", "eqben:eqbensd", {"eqben/annotations/eqbensd.json": js({**EQ, "image1": None})},
     "eqben/annotations/eqbensd.json", "[0]: image1: expected a non-empty string, got null"),
    ("eqben-escape", "eqben:eqbensd", {"eqben/annotations/eqbensd.json": js({**EQ, "image0": "../../x.png"})},
     "eqben/annotations/eqbensd.json", "[0]: image0: expected a relative path inside --data-root, got '../../x.png'"),
    ("eqben-empty-caption", "eqben:eqbensd", {"eqben/annotations/eqbensd.json": js({**EQ, "caption0": ""})},
     "eqben/annotations/eqbensd.json", "[0]: caption0: expected a non-empty string"),
    # WhatsUp: controlled [{image_path, caption_options}] and QA [[id, right, wrong]]
    ("whatsup-options-string", "whatsup:WhatsUp_A", {"whatsup/controlled_images_dataset.json": js({**WU, "caption_options": "abcd"})},
     "whatsup/controlled_images_dataset.json", "item 0: caption_options: expected a list of 4 non-empty strings, got str"),
    ("whatsup-option-null", "whatsup:WhatsUp_A",
     {"whatsup/controlled_images_dataset.json": js({**WU, "caption_options": ["a", None, "c", "d"]})},
     "whatsup/controlled_images_dataset.json", "item 0: caption_options[1]: expected a non-empty string, got null"),
    ("whatsup-image-number", "whatsup:WhatsUp_A", {"whatsup/controlled_images_dataset.json": js({**WU, "image_path": 5})},
     "whatsup/controlled_images_dataset.json", "item 0: image_path: expected a non-empty string, got int"),
    ("whatsup-escape", "whatsup:WhatsUp_A", {"whatsup/controlled_images_dataset.json": js({**WU, "image_path": "../../etc/x_on_y.jpeg"})},
     "whatsup/controlled_images_dataset.json", "item 0: image_path: expected a relative path inside --data-root"),
    ("whatsup-qa-caption-list", "whatsup:COCO_QA_ONE", {"whatsup/coco_qa_one_obj.json": js([1, ["a cup on the left"], "x"])},
     "whatsup/coco_qa_one_obj.json", "item 0: right: expected a non-empty string, got list"),
    ("whatsup-qa-id-escape", "whatsup:COCO_QA_ONE", {"whatsup/coco_qa_one_obj.json": js(["../../../../etc/passwd", "a left", "a right"])},
     "whatsup/coco_qa_one_obj.json", "item 0: image_id: expected"),
    ("whatsup-qa-object", "whatsup:COCO_QA_ONE", {"whatsup/coco_qa_one_obj.json": js({"a": 1})},
     "whatsup/coco_qa_one_obj.json", "item 0: expected a list [image_id, right caption, wrong caption], got object"),
    # Winoground: examples.jsonl
    ("winoground-caption-null", "winoground", {"winoground/data/examples.jsonl": jsonl({**WINO, "caption_1": None})},
     "winoground/data/examples.jsonl", "line 1: caption_1: expected a non-empty string, got null"),
    ("winoground-image-list", "winoground", {"winoground/data/examples.jsonl": jsonl({**WINO, "image_0": ["a"]})},
     "winoground/data/examples.jsonl", "line 1: image_0: expected a non-empty string, got list"),
    ("winoground-escape", "winoground", {"winoground/data/examples.jsonl": jsonl({**WINO, "image_0": "../../../../etc/passwd"})},
     "winoground/data/examples.jsonl", "line 1: image_0: expected a relative path inside --data-root"),
    ("winoground-tag-list", "winoground", {"winoground/data/examples.jsonl": jsonl({**WINO, "collapsed_tag": ["Object"]})},
     "winoground/data/examples.jsonl", "line 1: collapsed_tag: expected one of 'Object', 'Relation', 'Both', got ['Object']"),
    ("winoground-line-list", "winoground", {"winoground/data/examples.jsonl": "[1, 2]\n"},
     "winoground/data/examples.jsonl", "line 1: expected an object, got list"),
    ("winoground-duplicate-id", "winoground", {"winoground/data/examples.jsonl": jsonl(WINO, WINO)},
     "winoground/data/examples.jsonl", "line 2: id 0 repeats line 1"),
    ("winoground-latin1", "winoground", {"winoground/data/examples.jsonl": b'{"caption_0": "' + LATIN1 + b'"}\n'},
     "winoground/data/examples.jsonl", "not UTF-8"),
    # ImageCoDe: {set dir: {index: description}}
    ("imagecode-description-list", "imagecode", {"imagecode/data/valid_data.json": obj(**{"open-images-1_a": {"3": ["a deer"]}})},
     "imagecode/data/valid_data.json", "set 'open-images-1_a': 3: expected a non-empty string, got list"),
    ("imagecode-descriptions-string", "imagecode", {"imagecode/data/valid_data.json": obj(**{"open-images-1_a": "a deer"})},
     "imagecode/data/valid_data.json", "set 'open-images-1_a': expected an object, got str"),
    ("imagecode-empty-description", "imagecode", {"imagecode/data/valid_data.json": obj(**{"open-images-1_a": {"3": " "}})},
     "imagecode/data/valid_data.json", "set 'open-images-1_a': 3: expected a non-empty string"),
    ("imagecode-escape", "imagecode", {"imagecode/data/valid_data.json": obj(**{"../../../etc": {"3": "a deer"}})},
     "imagecode/data/valid_data.json", "set '../../../etc': expected an image set folder inside --data-root"),
    # SVO-Probes: CSV
    ("svo-escape", "svo_probes",
     {"svo_probes/svo_probes.csv": SVO_HEAD + "a man rides a horse,../../../../etc/passwd,b,True,False,False\n"},
     "svo_probes/svo_probes.csv", "line 2: pos_image_id: expected an image id inside --data-root"),
    ("svo-empty-sentence", "svo_probes", {"svo_probes/svo_probes.csv": SVO_HEAD + ",a,b,True,False,False\n"},
     "svo_probes/svo_probes.csv", "line 2: sentence: expected a non-empty string"),
    ("svo-latin1", "svo_probes", {"svo_probes/svo_probes.csv": SVO_HEAD.encode() + LATIN1 + b",a,b,True,False,False\n"},
     "svo_probes/svo_probes.csv", "not UTF-8"),
    # CREPE: CSV
    ("crepe-latin1", "crepe:productivity", {CREPE: CREPE_HEAD.encode() + b'1,5,6,20,10,' + LATIN1 + b',"[\'a\']"\n'},
     CREPE, "not UTF-8"),
    ("crepe-negative-empty", "crepe:productivity", {CREPE: CREPE_HEAD + "1,5,6,20,10,a cup,\"['']\"\n"},
     CREPE, "line 2: hard_negs: expected a list of non-empty strings"),
    ("crepe-escape", "crepe:productivity", {CREPE: CREPE_HEAD + "../../../../etc/passwd,5,6,20,10,a cup,\"['a mug']\"\n"},
     CREPE, "line 2: image_id: expected an image id inside --data-root"),
    # Karpathy retrieval and ARO's order / VG files
    ("retrieval-escape", "retrieval:coco", {"aro/coco_karpathy_test.json": js({**ORDER, "image": "../../../etc/passwd"})},
     "aro/coco_karpathy_test.json", "entry 0: image: expected a relative path inside --data-root"),
    ("retrieval-empty-caption", "retrieval:coco", {"aro/coco_karpathy_test.json": js({**ORDER, "caption": [""]})},
     "aro/coco_karpathy_test.json", "entry 0: caption: expected"),
    ("retrieval-latin1", "retrieval:coco", {"aro/coco_karpathy_test.json": b'[{"image": "' + LATIN1 + b'"}]'},
     "aro/coco_karpathy_test.json", "not UTF-8"),
    ("aro-escape", "aro:VG-Relation", {"aro/visual_genome_relation.json": js({**VG, "image_path": "/etc/passwd"})},
     "aro/visual_genome_relation.json", "entry 0: image_path: expected a relative path inside --data-root, got '/etc/passwd'"),
    ("aro-empty-caption", "aro:VG-Relation", {"aro/visual_genome_relation.json": js({**VG, "true_caption": ""})},
     "aro/visual_genome_relation.json", "entry 0: true_caption: expected a non-empty string, got ''"),
    ("aro-empty-list", "aro:VG-Relation", {"aro/visual_genome_relation.json": "[]"},
     "", "aro: no test cases found under"),
    # Probe-C / Probe-B / Probe-R: our JSONL
    ("probe_c-image-null", "probe_c", {"probe_c/probe_c.jsonl": jsonl({**PC, "images": ["a.png", None]})},
     "probe_c/probe_c.jsonl", "line 1: images[1]: expected a non-empty string, got null"),
    ("probe_c-empty-text", "probe_c", {"probe_c/probe_c.jsonl": jsonl({**PC, "texts": ["a red cup", ""]})},
     "probe_c/probe_c.jsonl", "line 1: texts[1]: expected a non-empty string, got ''"),
    ("probe_c-duplicate-id", "probe_c", {"probe_c/probe_c.jsonl": jsonl(PC, PC)},
     "probe_c/probe_c.jsonl", "line 2: id 1 repeats line 1"),
    ("probe_c-latin1", "probe_c", {"probe_c/probe_c.jsonl": b'{"id": "' + LATIN1 + b'"}\n'},
     "probe_c/probe_c.jsonl", "not UTF-8"),
    ("probe_b-image-empty", "probe_b", {"probe_b/classes.txt": "cup\ndog\n",
                                        "probe_b/probe_b.jsonl": jsonl({**PB, "images": {**PB["images"], "x1": ""}})},
     "probe_b/probe_b.jsonl", "line 1: images.x1: expected a non-empty string, got ''"),
    ("probe_b-duplicate-id", "probe_b", {"probe_b/classes.txt": "cup\ndog\n", "probe_b/probe_b.jsonl": jsonl(PB, PB)},
     "probe_b/probe_b.jsonl", "line 2: id 1 repeats line 1"),
    ("probe_b-labels-string", "probe_b", {"probe_b/classes.txt": "cup\ndog\n", "probe_b/probe_b.jsonl": jsonl({**PB, "labels": "cup"})},
     "probe_b/probe_b.jsonl", "line 1: labels: expected a list of strings, got str"),
    ("probe_b-classes-latin1", "probe_b", {"probe_b/classes.txt": LATIN1 + b"\n", "probe_b/probe_b.jsonl": jsonl(PB)},
     "probe_b/classes.txt", "not UTF-8"),
    ("probe_r-texts-list", "probe_r", {"probe_r/probe_r.jsonl": jsonl({**PR, "texts": ["a", "b"]})},
     "probe_r/probe_r.jsonl", "line 1: texts: expected an object, got list"),
    ("probe_r-subject-string", "probe_r", {"probe_r/probe_r.jsonl": jsonl({**PR, "subject_images": "b.png"})},
     "probe_r/probe_r.jsonl", "line 1: subject_images: expected a list of non-empty strings, got str"),
    ("probe_r-prompt-null", "probe_r", {"probe_r/probe_r.jsonl": jsonl({**PR, "texts": {**PR["texts"], "R2": None}})},
     "probe_r/probe_r.jsonl", "line 1: texts.R2: expected a non-empty string, got null"),
    ("probe_r-texts-missing", "probe_r", {"probe_r/probe_r.jsonl": jsonl({**PR, "texts": drop(PR["texts"], "O3")})},
     "probe_r/probe_r.jsonl", "line 1: missing 'texts.O3'"),
    # zero-shot: text files
    ("zeroshot-classnames-latin1", "zeroshot:t", {"zeroshot/t/classnames.txt": LATIN1 + b"\n", "zeroshot/t/templates.txt": "a {c}.\n",
                                                  "zeroshot/t/test/0/a.png": b""},
     "zeroshot/t/classnames.txt", "not UTF-8"),
]


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory) -> Path:
    from train_fixtures import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("model"))


@pytest.mark.parametrize("bench, files, named, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_malformed_annotation_file_is_one_line(tmp_path, tiny_config, bench, files, named, words):
    root = tmp_path / "data"
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content if isinstance(content, bytes) else content.encode())
    out = tmp_path / "r.jsonl"
    result = runner.invoke(app, ["evaluate", "-b", bench, "-d", str(root), "--model-config", str(tiny_config), "-o", str(out),
                                 "--device", "cpu", "-q"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1, (result.exit_code, result.stderr[-1500:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr[-1500:]
    assert str(root / named) in lines[0], lines[0]
    assert words in lines[0], lines[0]
    assert not out.exists()


# --- bad input (moved from test_bad_input.py) ---

def test_benchmark_folder_missing_one_annotation_file(case, ckpts, bench_root):
    root = case.src / "bench"
    shutil.copytree(bench_root, root)
    os.unlink(root / "sugarcrepe" / "swap_obj.json")
    (root / "aro").mkdir()
    case.freeze()
    assert_refused(invoke(["evaluate", "-b", "sugarcrepe:add_att+swap_obj+replace_rel", "-c", ckpts["tiny"], "-d", root,
                           "-o", case.dst / "r.jsonl"]), "sugarcrepe", "swap_obj.json not found", "--data-root")
    assert_refused(invoke(["evaluate", "-b", "aro:VG-Relation", "-c", ckpts["tiny"], "-d", root, "-o", case.dst / "r.jsonl"]),
                   "visual_genome_relation.json not found", "--data-root")
    case.untouched()


@pytest.mark.parametrize(
    "content, words",
    [('{"0": {"filename": "red.jpg", "capt', "invalid JSON"),
     ('{"0": {"filename": "red.jpg"}}', "case '0': missing 'caption'")],
    ids=["truncated-annotation", "annotation-missing-fields"],
)
def test_broken_annotation_file(case, ckpts, bench_root, content, words):
    root = case.src / "bench"
    shutil.copytree(bench_root, root)
    (root / "sugarcrepe" / "swap_obj.json").write_text(content)
    case.freeze()
    assert_refused(invoke(["evaluate", "-b", "sugarcrepe:swap_obj", "-c", ckpts["tiny"], "-d", root, "-o",
                           case.dst / "r.jsonl"]), str(root / "sugarcrepe" / "swap_obj.json"), words)
    case.untouched()


def test_benchmark_image_missing(case, ckpts, bench_root):
    root = case.src / "bench"
    shutil.copytree(bench_root, root)
    os.unlink(root / "coco" / "val2017" / "green.jpg")
    case.freeze()
    assert_refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "-c", ckpts["tiny"], "-d", root, "-o",
                           case.dst / "r.jsonl"]), "1 image file(s) missing", "green.jpg", "--data-root",
                   "--skip-missing")
    case.untouched()


# --- bad input (moved from test_bad_values.py) ---

VG_ENTRY = {"image_path": "1.jpg", "bbox_x": 5, "bbox_y": 6, "bbox_w": 20, "bbox_h": 10, "true_caption": "the cup is on the table",
      "false_caption": "the table is on the cup", "relation_name": "on"}


VGA = {**{k: v for k, v in VG_ENTRY.items() if k != "relation_name"}, "attributes": ["red", "blue"]}


ORDER_ENTRY = {"image": "val2014/a.jpg", "caption": ["a cup on a table", "a table under a cup"]}


SC_ENTRY = {"filename": "a.jpg", "caption": "a red cup", "negative_caption": "a blue cup"}


CREPE_HEADER = "image_id,x,y,width,height,caption,hard_negs\n"


CREPE_ROW = {"image_id": "1", "x": "5", "y": "6", "width": "20", "height": "10", "caption": "a cup", "hard_negs": "['a mug']"}


PROBE_C_GROUP = {"id": 1, "split": "composition", "images": ["a.png", "b.png"], "texts": ["a red cup", "a blue cup"],
                 "category": "colour"}


def aro_file(name: str, entry) -> tuple[str, str, str]:
    files = {"VG-Relation": "visual_genome_relation.json", "VG-Attribution": "visual_genome_attribution.json",
             "COCO-Order": "coco_karpathy_test.json", "Flickr30k-Order": "flickr30k_test.json"}
    good = {"VG-Relation": VG_ENTRY, "VG-Attribution": VGA}.get(name, ORDER_ENTRY)
    return f"aro:{name}", f"aro/{files[name]}", json.dumps([good, entry])


def crepe_file(row: dict) -> tuple[str, str, str]:
    def line(r):
        return ",".join(f'"{r[c]}"' for c in CREPE_HEADER.strip().split(",")) + "\n"

    return "crepe:productivity", "crepe/prod_hard_negatives/atom/prod_vg_hard_negs_atom_complexity_4.csv", \
        CREPE_HEADER + line(CREPE_ROW) + line({**CREPE_ROW, **row})


ANNOTATIONS = [
    (*aro_file("VG-Relation", {**VG_ENTRY, "bbox_w": -20}), "entry 1: bbox_w: expected a finite number > 0, got -20"),
    (*aro_file("VG-Relation", {**VG_ENTRY, "bbox_h": 0}), "entry 1: bbox_h: expected a finite number > 0, got 0"),
    (*aro_file("VG-Relation", {**VG_ENTRY, "bbox_x": "5"}), "entry 1: bbox_x: expected a finite number, got str"),
    (*aro_file("VG-Relation", {**VG_ENTRY, "bbox_y": True}), "entry 1: bbox_y: expected a finite number, got bool"),
    (*aro_file("VG-Relation", {**VG_ENTRY, "image_path": None}), "entry 1: image_path: expected a non-empty string, got null"),
    (*aro_file("VG-Relation", {k: v for k, v in VG_ENTRY.items() if k != "false_caption"}), "entry 1: missing 'false_caption'"),
    (*aro_file("VG-Relation", {**VG_ENTRY, "true_caption": ["a", "b"]}), "entry 1: true_caption: expected a non-empty string, got list"),
    (*aro_file("VG-Relation", ["1.jpg", 5, 6]), "entry 1: expected an object, got list"),
    ("aro:VG-Relation", "aro/visual_genome_relation.json", '{"0": {}}', "the top: expected a list of entries, got object"),
    ("aro:VG-Relation", "aro/visual_genome_relation.json", json.dumps([VG_ENTRY, {**VG_ENTRY, "bbox_x": float("nan")}]),
     "entry 1: bbox_x: expected a finite number, got nan"),
    (*aro_file("VG-Attribution", {**VGA, "attributes": ["red"]}),
     "entry 1: attributes: expected a list of 2 strings, got ['red']"),
    (*aro_file("VG-Attribution", {**VGA, "attributes": "red blue"}),
     "entry 1: attributes: expected a list of 2 strings, got str"),
    (*aro_file("VG-Attribution", {**VGA, "bbox_w": -1.5}), "entry 1: bbox_w: expected a finite number > 0, got -1.5"),
    (*aro_file("COCO-Order", {**ORDER_ENTRY, "image": None}), "entry 1: image: expected a non-empty string, got null"),
    (*aro_file("COCO-Order", {**ORDER_ENTRY, "caption": []}),
     "entry 1: caption: expected a non-empty string or a non-empty list of non-empty strings, got []"),
    (*aro_file("Flickr30k-Order", {**ORDER_ENTRY, "caption": 3}),
     "entry 1: caption: expected a non-empty string or a non-empty list of non-empty strings, got int"),
    (*aro_file("Flickr30k-Order", {"image": "a.jpg"}), "entry 1: missing 'caption'"),
    ("sugarcrepe:add_att", "sugarcrepe/add_att.json", json.dumps({"0": SC_ENTRY, "1": {**SC_ENTRY, "filename": None}}),
     "case '1': filename: expected a non-empty string, got null"),
    ("sugarcrepe:add_att", "sugarcrepe/add_att.json", json.dumps({"0": SC_ENTRY, "1": {**SC_ENTRY, "negative_caption": ["x"]}}),
     "case '1': negative_caption: expected a non-empty string, got list"),
    ("sugarcrepe:add_att", "sugarcrepe/add_att.json", json.dumps({"0": SC_ENTRY, "1": "a.jpg"}),
     "case '1': expected an object, got str"),
    (*crepe_file({"x": "abc"}), "line 3: x: expected a number, got 'abc'"),
    (*crepe_file({"width": "-3"}), "line 3: width: expected a finite number > 0, got -3.0"),
    (*crepe_file({"height": "inf"}), "line 3: height: expected a finite number, got 'inf'"),
    (*crepe_file({"image_id": ""}), "line 3: image_id: expected a non-empty string, got ''"),
    ("retrieval:coco", "aro/coco_karpathy_test.json", json.dumps([ORDER_ENTRY, {**ORDER_ENTRY, "image": 7}]),
     "entry 1: image: expected a non-empty string, got int"),
    ("probe_c", "probe_c/probe_c.jsonl",
     json.dumps(PROBE_C_GROUP) + "\n" + json.dumps({**PROBE_C_GROUP, "images": ["a.png"]}) + "\n",
     "line 2: images: expected a list of 2 non-empty strings, got ['a.png']"),
    ("probe_c", "probe_c/probe_c.jsonl", json.dumps({**PROBE_C_GROUP, "texts": "a red cup"}) + "\n",
     "line 1: texts: expected a list of 2 non-empty strings, got str"),
]


@pytest.mark.parametrize("bench, file, content, message", ANNOTATIONS,
                         ids=[f"{a[0]}-{a[3].split(':')[1].strip()}" for a in ANNOTATIONS])
def test_malformed_annotation_entries(run_folder, tmp_path, bench, file, content, message):
    root = tmp_path / "bench"
    (root / Path(file)).parent.mkdir(parents=True)
    (root / file).write_text(content)
    before = snapshot(tmp_path)
    line = refused(invoke(["evaluate", "-b", bench, "-d", root, "-c", run_folder[1], "-o", tmp_path / "r.jsonl"]),
                   str(root / file), message)
    assert line.count(str(root / file)) == 1
    assert snapshot(tmp_path) == before

