"""Relation in several sentence forms (world relforms/, bench/relforms.py, the demo's rel columns): every
sentence true or false as the world says, the held-out forms absent from train, Winoground's scores
as their authors compute them, the placement prior's classes, and the columns in the report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from mosaictool.bench import relforms
from mosaictool.bench.base import ImageRef, Item
from mosaictool.world.captions import holds
from mosaictool.world.splits import HELD_OUT_FORMS, RELATION_FORMS, prior_class, relation_form
from mosaictool.world.vocab import RELATIONS

REL = "(" + "|".join(RELATIONS) + ")"
NP = r"(\w+) (\w+)"
# Each form read back into (subject colour, subject shape, relation, object colour, object shape), written
# here from the forms' definitions (docs/demo.md), not from the code that renders them.
READERS = {
    "copular": (re.compile(rf"^the {NP} is {REL} the {NP}$"), lambda g: (g[0], g[1], g[2], g[3], g[4])),
    "subgraph": (re.compile(rf"^an? {NP} {REL} an? {NP}$"), lambda g: (g[0], g[1], g[2], g[3], g[4])),
    "fronted": (re.compile(rf"^{REL} the {NP} is the {NP}$"), lambda g: (g[3], g[4], g[0], g[1], g[2])),
    "with": (re.compile(rf"^an? {NP} with an? {NP} {REL} it$"), lambda g: (g[2], g[3], g[4], g[0], g[1])),
}


def records(world: Path, split: str) -> list[dict]:
    return [json.loads(line) for line in (world / split / relforms.FILE).read_text().splitlines()]


def true_of(text: str, form: str, scene: dict) -> bool:
    """What the world says of the sentence, read back by the form's own reader."""
    rx, roles = READERS[form]
    m = rx.match(text)
    assert m, (form, text)
    sc, ss, pred, oc, os_ = roles(m.groups())
    return holds([{"colour": sc, "shape": ss}, {"colour": oc, "shape": os_}], [(0, pred, 1)], scene)


def test_every_caption_is_true_of_its_image_and_false_of_the_twin_in_every_form(relforms_world):
    for split in ("val", "test"):
        recs = records(relforms_world, split)
        assert len(recs) == 24 and {r["relation"] for r in recs} == set(RELATIONS)
        for rec in recs:
            assert list(rec["forms"]) == list(RELATION_FORMS) and rec["held_out"] == list(HELD_OUT_FORMS)
            image, twin = rec["scenes"]
            assert all((relforms_world / split / "relforms" / p).is_file() for p in rec["images"])
            # the twin is the image with the two named objects in each other's cells, nothing else moved
            a, b = rec["subject"], rec["object"]
            assert twin["objects"][a]["cell"] == image["objects"][b]["cell"] and twin["objects"][b]["cell"] == image["objects"][a]["cell"]
            assert [o for k, o in enumerate(twin["objects"]) if k not in (a, b)] == \
                [o for k, o in enumerate(image["objects"]) if k not in (a, b)]
            for form, (caption, swap) in rec["forms"].items():
                assert true_of(caption, form, image) and not true_of(swap, form, image), (form, caption)
                assert true_of(swap, form, twin) and not true_of(caption, form, twin), (form, swap)


def test_the_held_out_forms_are_in_no_train_caption(relforms_world):
    train = [json.loads(line) for line in (relforms_world / "train" / "captions.jsonl").read_text().splitlines()]
    texts = [t.lower() for r in train for t in (r["caption"], r["plain_caption"])]
    assert len(texts) > 60
    starts_with_relation = re.compile(rf"^{REL}\b")
    for text in texts:
        for sentence in re.split(r"[.;] ", text):
            assert not starts_with_relation.match(sentence), text
            assert not re.search(r"\bwith\b|\bit\b", sentence), text
    # MosaiCLIP's sub-graph texts: "{N1} {R} {N2}" in a frame; no frame starts with a relation or says "with"
    from mosaictool.stages.template import FRAMES

    assert all(not starts_with_relation.match(f.format("x", be="is")) and "with" not in f for f in FRAMES)
    # and the forms do read as their definitions say
    red, blue = {"colour": "red", "shape": "circle"}, {"colour": "blue", "shape": "square"}
    assert relation_form("fronted", red, "above", blue) == "above the blue square is the red circle"
    assert relation_form("with", red, "above", blue) == "a blue square with a red circle above it"


# Thrush et al. 2022 (Winoground), the scoring code of their dataset card and notebook, transcribed:
def text_correct(result):
    return result["c0_i0"] > result["c1_i0"] and result["c1_i1"] > result["c0_i1"]


def image_correct(result):
    return result["c0_i0"] > result["c0_i1"] and result["c1_i1"] > result["c1_i0"]


def group_correct(result):
    return image_correct(result) and text_correct(result)


def _items(n: int, held_out: bool = True, prior=("agree", "violate"), form: str = "fronted") -> list[Item]:
    images = [ImageRef("i0.png"), ImageRef("i1.png")]
    return [Item(images, ["c0", "c1"], {"subtask": form, "prior": list(prior), "id": k, "held_out": held_out}) for k in range(n)]


def test_the_trained_pool_is_the_copular_and_subgraph_forms_together():
    rng = np.random.default_rng(4)
    items = _items(30, held_out=False, form="copular") + _items(20, held_out=False, form="subgraph") + _items(10)
    sims = list(rng.integers(0, 3, size=(len(items), 2, 2)).astype(float))
    theirs = [{"c0_i0": s[0, 0], "c1_i0": s[0, 1], "c0_i1": s[1, 0], "c1_i1": s[1, 1]} for s in sims]
    rows = {(r["subtask"], r["metric"]): r["value"] for r in relforms.score_rows(items, sims)}
    hits = relforms.item_hits(items, sims)
    # pooled over cases (50 pairs), not the mean of the two forms' scores; the held-out form is not in it
    assert hits["trained-group"].tolist() == [group_correct(r) for r in theirs[:50]]
    assert rows["trained-group", "group"] == pytest.approx(np.mean([group_correct(r) for r in theirs[:50]]))
    assert hits["held-out-group"].tolist() == [group_correct(r) for r in theirs[50:]]
    assert len(hits["trained"]) == 100 and len(hits["trained-violate"]) == 50
    # with no held-out form there is no held-out pool (and no trained pool without a trained form)
    assert "held-out-group" not in relforms.item_hits(items[:50], sims[:50])
    assert "trained-group" not in relforms.item_hits(items[50:], sims[50:])


def test_group_score_is_winogrounds_including_ties():
    rng = np.random.default_rng(0)
    sims = rng.integers(0, 3, size=(2000, 2, 2)).astype(float)  # three levels: many ties
    theirs = [{"c0_i0": s[0, 0], "c1_i0": s[0, 1], "c0_i1": s[1, 0], "c1_i1": s[1, 1]} for s in sims]  # s[image, caption]
    rows = {(r["subtask"], r["metric"]): r["value"] for r in relforms.score_rows(_items(len(sims)), list(sims))}
    assert rows["fronted", "text"] == pytest.approx(np.mean([text_correct(r) for r in theirs]))
    assert rows["fronted", "image"] == pytest.approx(np.mean([image_correct(r) for r in theirs]))
    assert rows["fronted", "group"] == pytest.approx(np.mean([group_correct(r) for r in theirs]))
    assert rows["held-out-group", "group"] == rows["fronted", "group"]
    hits = relforms.item_hits(_items(len(sims)), list(sims))
    assert hits["held-out-group"].tolist() == [group_correct(r) for r in theirs]
    # accuracy: each image's own caption strictly above the other (a tie is wrong, as ARO's VG-Relation)
    per_image = [[r["c0_i0"] > r["c1_i0"], r["c1_i1"] > r["c0_i1"]] for r in theirs]
    assert hits["fronted"].tolist() == [h for pair in per_image for h in pair]
    assert rows["fronted", "accuracy"] == pytest.approx(np.mean(per_image))


def test_a_reader_blind_to_the_image_scores_zero_on_group_and_half_on_the_prior_split(relforms_world):
    from mosaictool.world.audit import relation_forms_prior_accuracy

    recs = records(relforms_world, "val")
    blind = relation_forms_prior_accuracy(recs)
    assert blind == {"accuracy": 0.5, "group": 0.0}
    # a scorer of texts alone, whatever its preference: the two images get the same scores
    rng = np.random.default_rng(1)
    text_only = [np.tile(rng.random(2), (2, 1)) for _ in range(200)]
    rows = {(r["subtask"], r["metric"]): r["value"] for r in relforms.score_rows(_items(200), text_only)}
    assert rows["fronted", "text"] == rows["fronted", "image"] == rows["fronted", "group"] == 0.0
    assert rows["fronted", "accuracy"] == 0.5
    # one that prefers the caption the prior favours: right on every agree image, wrong on every violate one
    prior_reader = [np.array([[1.0, 0.0], [1.0, 0.0]])] * 10  # image 0 agrees, the twin violates
    rows = {(r["subtask"], r["metric"]): r["value"] for r in relforms.score_rows(_items(10), prior_reader)}
    assert rows["held-out-agree", "accuracy"] == 1.0 and rows["held-out-violate", "accuracy"] == 0.0
    assert rows["held-out-group", "group"] == 0.0


def test_prior_classes_on_constructed_scenes(tmp_path):
    # HEIGHT_RANK: star highest, square lowest; LEFT_RANK: circle leftmost, diamond rightmost (world.scene)
    assert prior_class("star", "above", "square") == "agree"
    assert prior_class("square", "above", "star") == "violate"
    assert prior_class("star", "below", "square") == "violate"
    assert prior_class("circle", "to the left of", "diamond") == "agree"
    assert prior_class("circle", "to the right of", "diamond") == "violate"
    assert prior_class("diamond", "to the right of", "circle") == "agree"
    assert prior_class("cross", "above", "cross") == "neutral"
    from mosaictool.world.splits import relation_forms_item

    for k in range(8):
        rec = relation_forms_item(0, "val", k, 64, root=tmp_path)
        a, b = (rec["scenes"][0]["objects"][x]["shape"] for x in (rec["subject"], rec["object"]))
        assert rec["prior"] == [prior_class(a, rec["relation"], b), prior_class(b, rec["relation"], a)]
        assert sorted(rec["prior"]) in (["agree", "violate"], ["neutral", "neutral"])


def test_the_world_bench_scores_the_forms_with_every_case(relforms_world):
    from mosaictool.bench import get
    from mosaictool.demo.config import COLUMNS
    from mosaictool.demo.significance import CASE_COLUMNS

    bench = get("world-val")
    items = bench.load(relforms_world, subtasks=["relforms"])
    assert len(items) == 24 * len(RELATION_FORMS)
    rng = np.random.default_rng(2)
    sims = [rng.random((2, 2)) for _ in items]
    rows = bench.score(items, sims)
    hits = bench.item_hits(items, sims)
    got = {(r["subtask"], r["metric"]): r["value"] for r in rows}
    for col, sub, metric in COLUMNS:
        if sub.startswith("relforms/"):
            assert col in CASE_COLUMNS and (sub, metric) in got
            assert got[sub, metric] == pytest.approx(hits[sub].mean())  # the column is the mean of its cases
    assert len(hits["relforms/held-out-group"]) == 24 * len(HELD_OUT_FORMS)
    assert len(hits["relforms/trained-group"]) == 24 * (len(RELATION_FORMS) - len(HELD_OUT_FORMS))
    assert all(not r["subtask"].startswith("relforms") for r in rows if r["subtask"] == "headline")


def test_the_report_has_the_rel_columns_and_its_headline_is_the_group_score(relforms_world, tmp_path):
    from mosaictool.analysis.stats import format_p
    from mosaictool.demo.config import COLUMNS, DemoConfig
    from mosaictool.demo.report import build_report
    from mosaictool.demo.significance import CASE_COLUMNS, HEADLINE_COLUMN

    assert HEADLINE_COLUMN == "rel group trained"
    rng = np.random.default_rng(3)
    groups = {m: [f"{m}-s{s}" for s in range(3)] for m in ("CLIP", "NegCLIP", "MosaiCLIP")}
    rows = []
    for models in groups.values():
        for model in models:
            for col, sub, metric in COLUMNS:
                rows.append({"model": model, "subtask": sub, "metric": metric, "value": 0.6, "n": 100})
                if col in CASE_COLUMNS:
                    hits = rng.random(100) < (0.3 if "MosaiCLIP" in model and col == HEADLINE_COLUMN else 0.6)
                    rows.append({"model": model, "subtask": sub, "metric": "hits", "value": float(hits.mean()), "n": 100,
                                 "detail": True, "hits": "".join("1" if h else "0" for h in hits)})
    cfg = DemoConfig.preset(quick=True, split="val", seeds=3)
    report = build_report(cfg, rows, groups, runs={m: [] for m in groups}, curves={}, world=relforms_world, out=tmp_path, minutes=1.0)
    header = report.table.splitlines()[0]
    for col in ("rel copular", "rel sub-graph", "rel fronted", "rel with", "rel group", "rel group trained", "rel violate"):
        assert f"| {col} |" in header
    assert report.headline["verdict"].startswith("headline (confirmatory): MosaiCLIP − NegCLIP on rel group trained:")
    assert "MosaiCLIP behind" in report.headline["verdict"]
    # in the MosaiCLIP − NegCLIP table the headline's p is the confirmatory one, not Holm-adjusted with the rest
    versus = next(line for line in report.text.splitlines() if line.startswith("| MosaiCLIP |") and "MDE" in line
                  and report.text.index(line) > report.text.index("method − NegCLIP"))
    headline_cell = versus.split(" | ")[list(CASE_COLUMNS).index(HEADLINE_COLUMN) + 1]
    assert f"({format_p(report.headline['result'].p)};" in headline_cell
    assert "the same reader scores 50.0" in report.text and "confirmatory headline is on rel group trained" in report.text
