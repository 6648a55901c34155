"""CREPE loaders on small CSVs in the official columns, and rank scoring."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from PIL import Image

from mosaictool.bench import crepe
from mosaictool.bench.base import HEADLINE
from mosaictool.errors import MosaicError


def _write(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


@pytest.fixture
def root(tmp_path):
    (tmp_path / "crepe" / "VG_100K").mkdir(parents=True)
    (tmp_path / "crepe" / "VG_100K_2").mkdir(parents=True)
    Image.new("RGB", (60, 60), "white").save(tmp_path / "crepe" / "VG_100K" / "2.jpg")
    Image.new("RGB", (60, 60), "black").save(tmp_path / "crepe" / "VG_100K_2" / "7.jpg")
    header = ["image_id", "x", "y", "width", "height", "caption", "hard_negs"]
    for kind in crepe.PROD_TYPES:
        _write(
            crepe.prod_file(tmp_path, kind, 4),
            header,
            [
                ["2", "10", "20", "30", "15", "a red brick paved sidewalk",
                 str(["a brown brick paved sidewalk", "a red stone paved sidewalk"])],
                ["7.0", "0", "0", "60", "60", "a dog on a mat", str(["a mat on a dog"])],
            ],
        )
    _write(crepe.prod_file(tmp_path, "atom", 5), header, [["2", "1", "2", "3", "4", "a cat", "[]"]])
    syst_header = ["image_id", "region_id", "x", "y", "width", "height", "caption", "valid_hard_negs_atom",
                   "valid_hard_negs_comp", "valid_hard_negs_combined"]
    _write(
        crepe.syst_file(tmp_path, "unseen_compounds_in_laion"),
        syst_header,
        [["2", "374", "346", "329", "452", "269", "a red brick paved sidewalk", str(["a brown brick paved sidewalk"]),
          str(["a red brick paved road"]), str(["x", "y"])]],
    )
    return tmp_path


def test_productivity_loader_regions_fallback_and_lists(root):
    items = crepe.Crepe().load(root, subtasks=["productivity"])
    atom4 = [it for it in items if it.meta["subtask"] == "atom/complexity_4"]
    assert len(atom4) == 2
    assert atom4[0].images[0].box == (10.0, 20.0, 40.0, 35.0)
    assert atom4[0].texts == ["a red brick paved sidewalk", "a brown brick paved sidewalk", "a red stone paved sidewalk"]
    assert atom4[1].images[0].path == str(root / "crepe" / "VG_100K_2" / "7.jpg")  # fallback, "7.0" read as 7
    assert [it.meta.get("no_negatives") for it in items if it.meta["subtask"] == "atom/complexity_5"] == [True]


def test_systematicity_loader_one_item_per_negative_type(root):
    items = crepe.Crepe().load(root, subtasks=["systematicity"])
    assert [it.meta["subtask"] for it in items] == [f"syst/unseen_compounds_in_laion/{t}" for t in ("atom", "comp", "combined")]
    assert items[2].texts == ["a red brick paved sidewalk", "x", "y"]
    assert items[0].images[0].box == (346.0, 329.0, 798.0, 598.0)


def test_rank_scoring_and_headline(root):
    items = crepe.Crepe().load(root)
    sims = []
    for it in items:
        k = len(it.texts)
        if it.meta["subtask"].startswith("atom"):
            sims.append(np.linspace(1, 0, k)[None])  # caption first -> rank 1
        elif it.meta["subtask"].startswith("swap"):
            sims.append(np.full((1, k), 0.5))  # all tied -> caption (index 0) wins
        else:
            sims.append(np.linspace(0, 1, k)[None])  # caption last
    rows = {(r["subtask"], r["metric"]): r for r in crepe.Crepe().score(items, sims)}
    assert rows[("atom", "R@1")]["value"] == 1.0 and rows[("swap", "R@1")]["value"] == 1.0
    assert rows[("negate", "R@1")]["value"] == 0.0
    assert rows[("negate/complexity_4", "mean_rank")]["value"] == pytest.approx(2.5)  # ranks 3 and 2
    assert rows[("negate/complexity_4", "R@3")]["value"] == 1.0 and rows[("negate/complexity_4", "R@1")]["detail"]
    assert rows[(HEADLINE, "R@1")]["value"] == pytest.approx(2 / 3)
    assert rows[("*", "cases_without_negatives")]["value"] == 1
    assert not rows[("syst/unseen_compounds_in_laion/atom", "R@1")].get("detail")


def test_errors(root, tmp_path_factory):
    empty = tmp_path_factory.mktemp("empty")
    with pytest.raises(MosaicError, match="no CREPE files"):
        crepe.Crepe().load(empty)
    bad = crepe.prod_file(root, "swap", 6)
    _write(bad, ["image_id", "x", "y", "width", "height", "caption", "hard_negs"], [["2", "0", "0", "1", "1", "c", "[unclosed"]])
    with pytest.raises(MosaicError, match=r"complexity_6.csv: line 2: hard_negs: expected"):
        crepe.Crepe().load(root)
    _write(bad, ["image_id", "caption"], [["2", "c"]])
    with pytest.raises(MosaicError, match="missing column"):
        crepe.Crepe().load(root)
