"""SugarCrepe on the real annotation files (placeholder images) and its strict scoring."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mosaictool.bench import sugarcrepe
from mosaictool.bench.base import HEADLINE
from mosaictool.bench.engine import drop_missing
from mosaictool.errors import MosaicError

COUNTS = {"add_att": 692, "add_obj": 2062, "replace_att": 788, "replace_obj": 1652, "replace_rel": 1406,
          "swap_att": 666, "swap_obj": 245}


@pytest.fixture(scope="module")
def real(real_benchmarks) -> Path:
    return real_benchmarks / "sugarcrepe" / "data"


@pytest.fixture(scope="module")
def root(real, tmp_path_factory):
    root = tmp_path_factory.mktemp("sc")
    (root / "sugarcrepe").mkdir()
    names = set()
    for f in real.glob("*.json"):
        shutil.copy(f, root / "sugarcrepe" / f.name)
        names |= {r["filename"] for r in json.loads(f.read_text()).values()}
    (root / "coco" / "val2017").mkdir(parents=True)
    tiny = Image.new("RGB", (4, 4), "gray")
    for n in names:
        tiny.save(root / "coco" / "val2017" / n)
    return root


def test_real_files_load_with_documented_counts(root):
    items = sugarcrepe.SugarCrepe().load(root)
    got = {s: sum(it.meta["subtask"] == s for it in items) for s in COUNTS}
    assert got == COUNTS
    kept, missing = drop_missing(items, skip=False, where="sugarcrepe")
    assert len(kept) == sum(COUNTS.values()) and not missing.paths


def test_swap_obj_keys_are_not_contiguous(root):
    items = sugarcrepe.load_subset(root, "swap_obj")
    keys = [it.meta["key"] for it in items]
    assert "108" not in keys and "107" in keys and "109" in keys and len(keys) == 245
    first = items[0]
    assert first.texts == ["A cat sits on its hind legs, and swats at the plant.",
                           "A cat sits on the plant, and swats at its hind legs."]
    assert first.images[0].path == str(root / "coco" / "val2017" / "000000222235.jpg")


def test_repo_layout_is_accepted_too(real, tmp_path):
    (tmp_path / "sugarcrepe" / "data").mkdir(parents=True)
    shutil.copy(real / "swap_obj.json", tmp_path / "sugarcrepe" / "data" / "swap_obj.json")
    assert len(sugarcrepe.SugarCrepe().load(tmp_path, subtasks=["swap_obj"], limit=10)) == 10
    with pytest.raises(MosaicError, match="add_att.json not found"):
        sugarcrepe.SugarCrepe().load(tmp_path)


def test_strict_tie_rule_and_count_weighted_headline(root):
    items = sugarcrepe.SugarCrepe().load(root)
    sims = []
    for i, it in enumerate(items):
        sub = it.meta["subtask"]
        if sub.startswith("replace"):
            sims.append(np.array([[0.3, 0.1]]))  # all right
        elif sub == "swap_obj":
            sims.append(np.array([[0.2, 0.2]]))  # ties: wrong under the strict rule
        elif sub == "swap_att":
            sims.append(np.array([[0.3, 0.1]]))
        else:
            sims.append(np.array([[0.3, 0.1]] if i % 2 else [[0.1, 0.3]]))
    rows = {(r["subtask"], r["metric"]): r for r in sugarcrepe.SugarCrepe().score(items, sims, logit_scale=100)}
    assert rows[("swap_obj", "accuracy")]["value"] == 0.0 and rows[("swap_obj", "accuracy")]["n"] == 245
    assert rows[("swap_obj", "mu_c")]["value"] == pytest.approx(0.5)
    assert rows[("replace", "accuracy")]["value"] == 1.0
    swap = 666 / (666 + 245)
    assert rows[("swap", "accuracy")]["value"] == pytest.approx(swap)
    add = rows[("add", "accuracy")]["value"]
    assert rows[(HEADLINE, "accuracy")]["value"] == pytest.approx((1.0 + swap + add) / 3)
    assert rows[("overall", "accuracy")]["n"] == sum(COUNTS.values())
