"""VL-CheckList: the corpus table against the real yaml files and the loader on the real subset in
../shared/benchmarks/vl_checklist (not vendored: see tests/data/README.md), the MAX_NUM/2 cap, strict
POS[0] vs NEG[0], the category / Object-Attribute-Relation / headline aggregation, and missing images
never skipped silently."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mosaictool.bench import get
from mosaictool.bench.base import HEADLINE, ImageRef, Item
from mosaictool.bench.engine import drop_missing
from mosaictool.bench.vl_checklist import BENCHMARK, CATEGORIES, SOURCES
from mosaictool.errors import MosaicError

FULL, CAPPED = BENCHMARK

# the real files here (path below data/ -> record count); spatial is the first 50 records
REAL = {
    "Attribute/vg/color.json": ("Attribute_color_vg", 11569),
    "Attribute/vaw/material.json": ("Attribute_material_vaw", 11835),
    "Object/Location/vg_location/vg_obj_margin.json": ("Object_Location_margin_vg_obj", 8291),
    "Relation/vg/action.json": ("Relation_action_vg", 12733),
    "Relation/vg/spatial.json": ("Relation_spatial_vg", 50),
}


@pytest.fixture(scope="module")
def root(shared_vl_checklist, tmp_path_factory) -> Path:
    r = tmp_path_factory.mktemp("vlc_root")
    src = shared_vl_checklist / "data"
    for rel in REAL:
        real = src / rel if (src / rel).exists() else src / rel.replace(".json", ".first50.json")
        (r / "vl_checklist" / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        (r / "vl_checklist" / "data" / rel).symlink_to(real)
    return r


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory) -> Path:
    """Files of VL-CheckList's format at the paths of REAL, made up: the behaviour tests run without
    the real (unvendored) files. Relation_action_vg has more than MAX_NUM/2 = 1000 items; spatial 50,
    on 20 distinct images."""
    r = tmp_path_factory.mktemp("vlc_stand_in")
    counts = {"Relation/vg/action.json": 1200, "Relation/vg/spatial.json": 50}
    for rel in REAL:
        n = counts.get(rel, 3)
        items = [[f"VG_100K/{i % 20}.jpg", {"POS": [f"pos {rel} {i}"], "NEG": [f"neg {rel} {i}"]}] for i in range(n)]
        (r / "vl_checklist" / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        (r / "vl_checklist" / "data" / rel).write_text(json.dumps(items))
    return r


def test_registered_full_and_capped():
    assert get("vl_checklist") is FULL and get("vl_checklist-max1000") is CAPPED
    assert len(SOURCES) == 56 and len(CATEGORIES) == 13
    assert CATEGORIES[:2] == ["Attribute_action", "Attribute_color"]


def test_corpus_table_matches_the_real_yaml_files(shared_vl_checklist):
    corpus = shared_vl_checklist / "corpus" / "v1"
    found = {}
    for y in corpus.rglob("*.yaml"):
        fields = dict(line.split(": ", 1) for line in y.read_text().splitlines() if ": " in line)
        category = str(y.parent.relative_to(corpus)).replace("/", "_")
        found[f"{category}_{y.stem}"] = (category, fields["IMG_ROOT"].strip('"').rstrip("/"),
                                         fields["ANNO_PATH"].strip('"')[len("data/"):])
    assert found == SOURCES
    grouping = json.loads((shared_vl_checklist / "corpus.json").read_text())
    assert sorted(n for g in grouping.values() for names in g.values() for n in names) == sorted(SOURCES)


def test_real_files_load_with_their_record_counts(root):
    for rel, (source, count) in REAL.items():
        items = FULL.load_source(root, source)
        assert len(items) == count, source
        assert all(it.meta["source"] == source for it in items)
    first = FULL.load_source(root, "Attribute_color_vg")[0]
    assert first.texts == ["brown knob", "teal knob"]
    assert first.images == [ImageRef(str(root / "vl_checklist" / "vg" / "VG_100K" / "2376832.jpg"))]
    assert first.meta["subtask"] == "Attribute_color"


def test_max_num_cap_keeps_the_first_half_of_max_num(stand_in):
    capped = CAPPED.load_source(stand_in, "Relation_action_vg")
    assert len(capped) == 1000
    assert capped == FULL.load_source(stand_in, "Relation_action_vg")[:1000]
    assert len(CAPPED.load_source(stand_in, "Relation_action_vg", limit=7)) == 7
    assert len(CAPPED.load_source(stand_in, "Relation_spatial_vg")) == 50


def test_missing_annotation_files_are_listed(stand_in):
    with pytest.raises(MosaicError, match=r"51 annotation file\(s\) missing"):
        FULL.load(stand_in)
    with pytest.raises(MosaicError, match=r"swig_action\.json"):
        FULL.load(stand_in, subtasks=["Relation_action"])
    assert len(FULL.load(stand_in, subtasks=["Relation_spatial"])) == 50


def test_bad_record_names_the_file_and_item(tmp_path):
    path = tmp_path / "vl_checklist" / "data" / "Relation" / "vg" / "spatial.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps([["a.jpg", {"POS": ["x"], "NEG": ["y"]}], ["b.jpg", {"POS": ["x"], "NEG": []}]]))
    with pytest.raises(MosaicError, match=r"spatial\.json: item 1"):
        FULL.load(tmp_path, subtasks=["Relation_spatial"])


def test_missing_images_stop_the_run_or_are_counted(stand_in):
    items = FULL.load(stand_in, subtasks=["Relation_spatial"])
    unique = len({it.images[0].path for it in items})
    assert unique == 20
    with pytest.raises(MosaicError, match=rf"{unique} image file\(s\) missing"):
        drop_missing(items, skip=False, where="vl_checklist")
    kept, report = drop_missing(items, skip=True, where="vl_checklist")
    assert kept == [] and report.items_skipped == 50


def _case(source: str, right: bool | None) -> tuple[Item, np.ndarray]:
    """right=None is a tie."""
    s = {True: [0.4, 0.1], False: [0.1, 0.4], None: [0.3, 0.3]}[right]
    return Item([ImageRef("x.jpg")], ["pos", "neg"], {"subtask": SOURCES[source][0], "source": source}), np.array([s])


def test_strict_comparison_counts_a_tie_wrong():
    cases = [_case("Relation_spatial_vg", r) for r in (True, None, False, True)]
    rows = {(r["subtask"], r["metric"]): r for r in FULL.score(*map(list, zip(*cases)))}
    assert rows[("Relation_spatial_vg", "accuracy")]["value"] == 0.5
    assert rows[("Relation_spatial", "accuracy")]["value"] == 0.5  # a one-source category
    assert rows[("Relation_spatial_vg", "accuracy")]["detail"] and "detail" not in rows[("Relation_spatial", "accuracy")]
    assert ("Relation", "accuracy") not in rows and (HEADLINE, "accuracy") not in rows


def test_categories_kinds_and_headline_are_plain_means():
    rng = np.random.default_rng(0)
    cases, acc = [], {}
    for source in SOURCES:
        hits = rng.integers(0, 2, size=4).astype(bool)
        acc[source] = hits.mean()
        cases += [_case(source, bool(h)) for h in hits]
    rows = {(r["subtask"], r["metric"]): r for r in FULL.score(*map(list, zip(*cases)))}
    cat = {c: np.mean([acc[s] for s, (sc, _, _) in SOURCES.items() if sc == c]) for c in CATEGORIES}
    for c in CATEGORIES:
        assert rows[(c, "accuracy")]["value"] == pytest.approx(cat[c])
    kinds = {k: np.mean([v for c, v in cat.items() if c.startswith(k)]) for k in ("Object", "Attribute", "Relation")}
    assert rows[("Object", "accuracy")]["value"] == pytest.approx(kinds["Object"])
    assert rows[(HEADLINE, "accuracy")]["value"] == pytest.approx(np.mean(list(kinds.values())))
    assert rows[(HEADLINE, "accuracy")]["n"] == 4 * 56
    assert Counter(m for _, m in rows)["mu_c"] == 56


@pytest.mark.slow
def test_end_to_end_with_placeholder_images(stand_in, tmp_path):
    from PIL import Image

    from mosaictool.bench.engine import EngineOptions, evaluate
    from mosaictool.model.openclip import create

    # the stand-in files plus a one-record one for every other file
    for source, (_, _, anno) in SOURCES.items():
        path = tmp_path / "vl_checklist" / "data" / anno
        path.parent.mkdir(parents=True, exist_ok=True)
        made = stand_in / "vl_checklist" / "data" / anno
        if made.exists():
            path.symlink_to(made)
        else:
            path.write_text(json.dumps([[f"{source}.jpg", {"POS": [f"pos {source}"], "NEG": [f"neg {source}"]}]]))
    items = FULL.load(tmp_path, limit=1)
    assert len(items) == 56
    for it in items:
        Path(it.images[0].path).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 8), "gray").save(it.images[0].path)
    bundle = create("mosaic-tiny", None, seed=0)
    rows = list(evaluate([(FULL, None)], [("tiny", bundle)], tmp_path, EngineOptions(limit=1, quiet=True)))
    heads = [r for r in rows if r["subtask"] == HEADLINE]
    assert len(heads) == 1 and heads[0]["n"] == 56
