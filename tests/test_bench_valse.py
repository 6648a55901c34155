"""VALSE: the loader on the real 11 files (their valid-record counts), image folders, the
mturk filter, strict acc_r with ties, the 7-group headline, and one end-to-end engine run."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mosaictool.bench import get
from mosaictool.bench.base import HEADLINE, ImageRef, Item
from mosaictool.bench.valse import BENCHMARK, GROUPS, INSTRUMENTS
from mosaictool.errors import MosaicError

# valid (mturk.caption >= 2) / total, as counted on the real files (mosaictool/bench/valse.py)
DOCUMENTED = {
    "existence": (505, 534),
    "plurals": (851, 1000),
    "counting-hard": (868, 1000),
    "counting-small-quant": (900, 1000),
    "counting-adversarial": (691, 756),
    "relations": (535, 614),
    "action-replacement": (648, 779),
    "actant-swap": (949, 1042),
    "coreference-standard": (708, 916),
    "coreference-hard": (104, 141),
    "foil-it": (943, 1000),
}


@pytest.fixture(scope="module")
def root(real_benchmarks, tmp_path_factory) -> Path:
    r = tmp_path_factory.mktemp("valse_root")
    (r / "valse" / "data").mkdir(parents=True)
    for f in (real_benchmarks / "valse" / "data").glob("*.json"):
        (r / "valse" / "data" / f.name).symlink_to(f)  # files only: placeholder images go beside them
    return r


@pytest.fixture(scope="module")
def tiny_bundle():
    from mosaictool.model.openclip import create

    return create("mosaic-tiny", None, seed=0)


@pytest.fixture(scope="module")
def items(root) -> list[Item]:
    return BENCHMARK.load(root)


def test_registered():
    assert get("valse") is BENCHMARK
    assert BENCHMARK.subtasks == list(DOCUMENTED)


def test_valid_counts_match_the_documented_ones(items, real_benchmarks):
    counts = Counter(it.meta["subtask"] for it in items)
    assert counts == {k: v for k, (v, _) in DOCUMENTED.items()}
    assert len(items) == 7702
    for inst, (_, total) in DOCUMENTED.items():
        assert len(json.loads((real_benchmarks / "valse" / "data" / f"{inst}.json").read_text())) == total


def test_items_are_caption_then_foil_with_the_config_image_folders(items, root):
    first = items[0]
    assert first.meta == {"subtask": "existence", "id": "existence_visual7w_2371044"}
    assert first.texts == ["There are no people in the picture.", "There are people in the picture."]
    assert first.images == [ImageRef(str(root / "valse/data/visual7w/images/v7w_2371044.jpg"))]
    seen = {}
    for it in items:
        seen.setdefault(it.meta["subtask"], Path(it.images[0].path).parent)
    assert seen["foil-it"] == root / "coco" / "val2014"
    assert seen["actant-swap"] == root / "valse/data/actions/images_512"
    assert seen["coreference-hard"] == root / "valse/data/coref/release_v18/test_images"
    assert {k: str(v.relative_to(root)) for k, v in seen.items()} == INSTRUMENTS


def test_mturk_filter_keeps_two_or_more_votes(tmp_path):
    data = tmp_path / "valse" / "data"
    data.mkdir(parents=True)
    recs = {
        f"r{v}": {"image_file": f"{v}.jpg", "caption": f"c{v}", "foil": f"f{v}", "mturk": {"caption": v, "foil": 0, "other": 0}}
        for v in range(4)
    }
    (data / "existence.json").write_text(json.dumps(recs))
    got = BENCHMARK.load(tmp_path, subtasks=["existence"])
    assert [it.meta["id"] for it in got] == ["r2", "r3"]
    assert [it.meta["id"] for it in BENCHMARK.load(tmp_path, subtasks=["existence"], limit=1)] == ["r2"]


def test_missing_annotation_files_are_named(tmp_path):
    with pytest.raises(MosaicError, match=r"(?s)11 annotation file\(s\) missing.*existence\.json"):
        BENCHMARK.load(tmp_path)


def test_limit_is_per_instrument(root):
    got = BENCHMARK.load(root, limit=3)
    assert Counter(it.meta["subtask"] for it in got) == {k: 3 for k in DOCUMENTED}


def _item(sub: str) -> Item:
    return Item([ImageRef("x.jpg")], ["caption", "foil"], {"subtask": sub})


def test_strict_acc_r_counts_a_tie_wrong():
    items = [_item("existence")] * 4
    sims = [np.array([[0.3, 0.2]]), np.array([[0.2, 0.2]]), np.array([[0.1, 0.2]]), np.array([[0.5, 0.49]])]
    rows = {(r["subtask"], r["metric"]): r for r in BENCHMARK.score(items, sims)}
    assert rows[("existence", "accuracy")]["value"] == 0.5
    assert rows[("existence", "accuracy")]["n"] == 4
    assert 0 < rows[("existence", "mu_c")]["value"] < 1
    assert ("headline", "accuracy") not in rows  # only one instrument scored


def test_headline_is_the_mean_of_the_seven_groups():
    # instrument i scores accuracy acc[i]: 4 cases each, k of them right
    right = {inst: k % 5 for k, inst in enumerate(DOCUMENTED)}
    items, sims = [], []
    for inst, k in right.items():
        for j in range(4):
            items.append(_item(inst))
            sims.append(np.array([[0.9, 0.1]]) if j < k else np.array([[0.1, 0.9]]))
    rows = {(r["subtask"], r["metric"]): r["value"] for r in BENCHMARK.score(items, sims)}
    acc = {inst: min(k, 4) / 4 for inst, k in right.items()}
    groups = {g: np.mean([acc[m] for m in members]) for g, members in GROUPS.items()}
    assert rows[("counting", "accuracy")] == pytest.approx(groups["counting"])
    assert rows[("actions", "accuracy")] == pytest.approx(groups["actions"])
    assert rows[(HEADLINE, "accuracy")] == pytest.approx(np.mean(list(groups.values())))


@pytest.mark.slow
def test_end_to_end_with_placeholder_images(root, tiny_bundle, tmp_path):
    from PIL import Image

    from mosaictool.bench.engine import EngineOptions, evaluate

    items = BENCHMARK.load(root, limit=1)
    for it in items:
        path = Path(it.images[0].path)
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 8), (len(it.texts[0]) % 255, 0, 0)).save(path)
    rows = list(evaluate([(BENCHMARK, None)], [("tiny", tiny_bundle)], root, EngineOptions(limit=1, quiet=True)))
    by_key = {(r["subtask"], r["metric"]): r for r in rows}
    assert by_key[(HEADLINE, "accuracy")]["n"] == 11
    assert all(r["benchmark"] == "valse" and r["model"] == "tiny" for r in rows)


def test_headline_reproduces_vl_compo_results(real_benchmarks):
    """vl_compo's per-instrument values are exactly k / valid count (so it used the mturk filter);
    cases with those k right must give its published VALSE meta-average."""
    import csv

    ref = real_benchmarks / "reference-results"
    individual = list(csv.DictReader(open(ref / "individual_results.csv")))
    summary = {(r["arch"], r["pretrained"]): float(r["valse"]) for r in csv.DictReader(open(ref / "results.csv"))}
    checked = 0
    for model in individual:
        key = (model["arch"], model["pretrained"])
        if key not in summary or checked == 5:
            continue
        items, sims = [], []
        for inst, (n, _) in DOCUMENTED.items():
            k = float(model[f"valse::{inst}"]) * n / 100
            assert abs(k - round(k)) < 1e-6, (key, inst)
            for j in range(n):
                items.append(_item(inst))
                sims.append(np.array([[0.9, 0.1]]) if j < round(k) else np.array([[0.1, 0.9]]))
        rows = {(r["subtask"], r["metric"]): r for r in BENCHMARK.score(items, sims)}
        assert 100 * rows[(HEADLINE, "accuracy")]["value"] == pytest.approx(summary[key], abs=1e-4)
        checked += 1
    assert checked == 5
