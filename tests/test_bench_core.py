"""Shared metrics (tie rules on hand-built score matrices), the registry, and the engine."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from mosaictool.bench import get, metrics, registry
from mosaictool.bench.base import ImageRef, Item, xywh_box
from mosaictool.bench.engine import Encoder, EngineOptions, drop_missing, evaluate, parse_bench_spec, similarities
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
