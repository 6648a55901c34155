"""The gold-graph scorer (mosaictool.analysis.graph_score) on hand-made cases, and `parse` on the
hand-annotated gold scene graphs of real captions (tests/data/gold_graphs; docs/parse_quality.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mosaictool.analysis.graph_score import (
    gold_tuples,
    lenient_matches,
    name_lemma,
    predicate_keys,
    predicate_lemma,
    predicted_tuples,
    prf,
    score,
)

GOLD_DIR = Path(__file__).parent / "data" / "gold_graphs"
GOLD_PARTS = ("coco.jsonl", "other.jsonl")


def entity(head: str, attributes=(), counts=()) -> dict:
    mods = [{"dep": "amod", "span": a, "lemma_span": a} for a in attributes]
    mods += [{"dep": "nummod", "span": c, "lemma_span": c} for c in counts]
    return {"head": head, "attributes": list(attributes), "modifiers": mods}


def relation(s: int, rel: str, o: int) -> dict:
    return {"subject": s, "object": o, "relation": rel, "lemma_relation": rel}


def gold(caption: str, objects: list, relations: list) -> dict:
    return {"caption": caption, "objects": [{"name": n, "attributes": list(a)} for n, a in objects],
            "relations": [{"subject": s, "predicate": p, "object": o} for s, p, o in relations]}


def test_names_are_lemmatised_and_people_is_person():
    assert name_lemma("Teddy Bears") == "teddy bear"
    assert name_lemma("men") == "man" and name_lemma("people") == "person" and name_lemma("children") == "child"
    assert name_lemma("bus") == "bus" and name_lemma("grass") == "grass"  # not cut to "bu", "gras"
    assert name_lemma("buses") == "bus"


def test_predicates_drop_articles_and_be_and_lemmatise_verbs():
    assert predicate_lemma("is sitting on top of") == "sit on top of"
    assert predicate_lemma("standing next to") == "stand next to"
    assert predicate_lemma("on the left of") == "on left of"
    assert predicate_lemma("parked in") == predicate_lemma("park in") == "park in"


def test_predicate_keys_are_the_verb_and_the_trailing_spatial_phrase():
    assert predicate_keys("sit on") == {"sit", "on"}
    assert predicate_keys("stand next to") == {"stand", "next to"}
    assert predicate_keys("in front of") == {"in front of"}
    assert predicate_keys("hold") == {"hold"}
    assert predicate_keys("") == frozenset()


def test_lenient_matching_is_one_to_one_and_needs_both_ends():
    g = [("cat", "sit on", "table"), ("dog", "on", "table")]
    assert lenient_matches([("cat", "on", "table")], g) == 1  # "on" ~ "sit on"
    assert lenient_matches([("cat", "on", "table"), ("cat", "sit on", "table")], g[:1]) == 1  # one gold, one match
    assert lenient_matches([("cat", "on", "bed")], g) == 0  # other object
    assert lenient_matches([("cat", "on top of", "table")], g) == 0  # "on top of" is not "on"
    assert lenient_matches([("cat", "hold", "table")], g) == 0
    # strict matches are taken first: the exact triple is not spent on a lenient pairing
    assert lenient_matches([("dog", "sit on", "table"), ("dog", "on", "table")],
                           [("dog", "on", "table"), ("dog", "stand on", "table")]) == 2


def test_score_counts_objects_attributes_and_relations_micro_averaged():
    graphs = [
        {"entities": [entity("woman", ["young"]), entity("cows", ["brown"], ["two"])],
         "relations": [relation(0, "standing next to", 1)]},
        {"entities": [entity("dog"), entity("sofa", ["red"]), entity("group")],
         "relations": [relation(0, "sleeping on", 1), relation(2, "of", 0)]},
    ]
    golds = [
        gold("a young woman standing next to two brown cows", [("woman", ["young"]), ("cow", ["brown", "two"])],
             [(0, "standing next to", 1)]),
        gold("a dog on a sofa", [("dog", []), ("sofa", ["red", "big"])], [(0, "on", 1)]),
    ]
    s = score(graphs, golds)
    assert s["objects"]["matched"] == 4 and s["objects"]["predicted"] == 5 and s["objects"]["gold"] == 4
    assert s["objects"]["precision"] == pytest.approx(4 / 5) and s["objects"]["recall"] == 1.0
    # attributes: young, brown, two (a count) and red match; big is missed
    assert (s["attributes"]["matched"], s["attributes"]["predicted"], s["attributes"]["gold"]) == (4, 4, 5)
    # relations: the first matches strictly; "sleeping on" ~ "on" only leniently; "group of dog" matches nothing
    assert (s["relations_strict"]["matched"], s["relations_strict"]["predicted"], s["relations_strict"]["gold"]) == (1, 3, 2)
    assert s["relations_lenient"]["matched"] == 2
    assert s["relations_lenient"]["f1"] == pytest.approx(2 * (2 / 3) * 1.0 / (2 / 3 + 1.0))


def test_prf_of_nothing_is_zero_and_pairs_must_line_up():
    assert prf(0, 0, 3)["f1"] == 0.0 and prf(0, 2, 0)["precision"] == 0.0
    with pytest.raises(ValueError):
        score([{"entities": [], "relations": []}], [])


def test_tuples_of_gold_and_prediction_read_alike():
    g = gold("two teddy bears on a bed", [("teddy bear", ["two"]), ("bed", [])], [(0, "on", 1)])
    p = {"entities": [entity("teddy bears", counts=["two"]), entity("bed")], "relations": [relation(0, "on", 1)]}
    assert gold_tuples(g) == predicted_tuples(p)


# --- parse on the gold set -------------------------------------------------------------------------

# Measured on the 340 gold captions (170 COCO + 170 other): objects 0.92, attributes 0.74, relations
# strict 0.69, lenient 0.75 (perf/parse_gold.py, docs/parse_quality.md); floors a little below, so a
# change that costs F1 fails here.
FLOORS = {"objects": 0.90, "attributes": 0.72, "relations_strict": 0.66, "relations_lenient": 0.72}
RAW_CEILING = {"relations_lenient": 0.55}  # SceneGraphParser alone is far below the repaired parse


def read_gold() -> list[dict]:
    missing = [p for p in GOLD_PARTS if not (GOLD_DIR / p).is_file()]
    if missing:
        pytest.skip(f"gold scene graphs not in this checkout: {', '.join(str(GOLD_DIR / p) for p in missing)} "
                    "(they come from the gold annotation branch)")
    out = []
    for part in GOLD_PARTS:
        out += [json.loads(line) for line in (GOLD_DIR / part).read_text().splitlines() if line.strip()]
    return out


@pytest.mark.slow  # parses ~340 captions twice: ~10 s
def test_parse_on_gold_graphs_keeps_its_measured_floors():
    from mosaictool.stages.parse import parse

    golds = read_gold()
    recs = [{"id": n, "caption": g["caption"]} for n, g in enumerate(golds)]
    repaired = score([r["graph"] for r in parse(recs)], golds)
    raw = score([r["graph"] for r in parse(recs, repairs=False)], golds)
    got = {k: round(repaired[k]["f1"], 3) for k in FLOORS}
    assert all(got[k] >= floor for k, floor in FLOORS.items()), got
    assert raw["relations_lenient"]["f1"] < RAW_CEILING["relations_lenient"] < repaired["relations_lenient"]["f1"]


# Measured on the 60 held-out gold captions (heldout.jsonl: annotated after the repairs were developed on the
# two parts above, docs/gold_graphs.md): objects 0.92, attributes 0.81, relations strict 0.72, lenient 0.76;
# SceneGraphParser alone 0.82 / 0.72 / 0.44 / 0.51. Floors a little below: the repairs must hold on unseen text.
HELDOUT_FLOORS = {"objects": 0.89, "attributes": 0.77, "relations_strict": 0.67, "relations_lenient": 0.71}


@pytest.mark.slow  # parses 60 captions twice: ~3 s
def test_parse_on_held_out_gold_graphs_keeps_its_measured_floors():
    from mosaictool.stages.parse import parse

    path = GOLD_DIR / "heldout.jsonl"
    if not path.is_file():
        pytest.skip(f"held-out gold scene graphs not in this checkout: {path}")
    golds = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    recs = [{"id": n, "caption": g["caption"]} for n, g in enumerate(golds)]
    repaired = score([r["graph"] for r in parse(recs)], golds)
    raw = score([r["graph"] for r in parse(recs, repairs=False)], golds)
    got = {k: round(repaired[k]["f1"], 3) for k in HELDOUT_FLOORS}
    assert all(got[k] >= floor for k, floor in HELDOUT_FLOORS.items()), got
    assert raw["relations_lenient"]["f1"] < repaired["relations_lenient"]["f1"]
