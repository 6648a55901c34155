"""decompose: sub-graph enumeration, the --max sample, the caption positive, CLI behaviour.

Golden files: tests/data/decompose/input.jsonl is `mosaictool parse` of 16 SugarCrepe (COCO)
captions; expected.jsonl is `mosaictool decompose input.jsonl` (regenerate both the same way).
tests/data/decompose/real.jsonl is `mosaictool parse` of 11 other SugarCrepe (COCO) captions: ones whose
--max sample once held only bare objects, and ones with "someone" and "light" as nouns.
"""

import functools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from helpers import parsed_and_decomposed, read_jsonl
from mosaictool.cli import app
from mosaictool.stages.decompose import SAMPLE_WEIGHTS, candidate_subgraphs, decompose, decompose_record, sample_subgraphs
from mosaictool.stages.subgraph import canonical_key, graph_key, object_node
from mosaictool.vocab import load

DATA = Path(__file__).parent / "data" / "decompose"
runner = CliRunner()


def entity(head, lemma=None, attributes=(), det="a", num=None, span=None):
    modifiers = ([{"dep": "det", "span": det, "lemma_span": det}] if det else [])
    if num:
        modifiers.append({"dep": "nummod", "span": num, "lemma_span": num})
    modifiers += [{"dep": "amod", "span": a, "lemma_span": a} for a in attributes]
    words = [w for w in (det, num, *attributes, head) if w]
    return {"span": span or " ".join(words), "head": head, "lemma_head": lemma or head, "modifiers": modifiers,
            "attributes": list(attributes)}


def record(rid, entities, relations, caption="a caption"):
    rels = [{"subject": s, "object": o, "relation": r, "lemma_relation": r} for s, o, r in relations]
    return {"id": rid, "caption": caption, "graph": {"entities": entities, "relations": rels}}


def informative(subgraph):
    """A sub-graph f_obj, f_attr or f_rel can perturb (MosaiCLIP App. B)."""
    return bool(subgraph["relations"]) or any(o["attributes"] for o in subgraph["objects"])


def test_object_node_reads_number_determiner_and_quantifiers():
    node = object_node(entity("poles", "pole", ["tall", "wooden"], det=None, num="two"), 3)
    assert node == {"noun": "poles", "lemma": "pole", "plural": True, "count": "two",
                    "attributes": ["tall", "wooden"], "determiner": "a", "entity": 3}
    cars = object_node(entity("cars", "car", ["several", "other", "red"], det=None), 0)
    assert cars["count"] == "several other" and cars["attributes"] == ["red"]
    assert object_node(entity("water", det=None), 0)["determiner"] is None
    assert object_node(entity("dog", det=None, span="their dog"), 0)["determiner"] == "the"
    assert object_node(entity("people", det=None), 0)["plural"] is True


def test_a_compound_is_singular_by_its_last_word():
    """"A black stuffed animal ...": spaCy lemmatises "stuffed" to "stuff", which read as a plural
    (no article: "black stuffed animal leaning against a bathroom stall")."""
    node = object_node(entity("stuffed animal", "stuff animal", ["black"]), 0)
    assert node["plural"] is False and node["lemma"] == "stuffed animal"
    assert object_node(entity("teddy bears", "teddy bear", det=None, num="three"), 0)["plural"] is True


def with_bounds(ent, start, end):
    return {**ent, "span_bounds": [start, end]}


def test_an_ambiguously_attached_relation_is_no_positive():
    """"A wooden table with miniature bananas next to a Malaysian coin": the coin may be next to the
    bananas, so "a table next to a coin" is not emitted; "the table with bananas" is."""
    ents = [with_bounds(entity("table", attributes=["wooden"]), 0, 3),
            with_bounds(entity("bananas", "banana", ["miniature"], det=None), 4, 6),
            with_bounds(entity("coin", attributes=["malaysian"]), 8, 11)]
    rec = record(0, ents, [(0, 1, "with"), (0, 2, "next to")],
                 caption="A wooden table with miniature bananas next to a Malaysian coin from 2009.")
    rels = [(sg["objects"][0]["noun"], sg["relations"][0]["relation"], sg["objects"][1]["noun"])
            for sg in candidate_subgraphs(rec["graph"]) if sg["relations"]]
    assert rels == [("table", "with", "bananas")]
    # coordination gives the phrase to both: "a table with plates and a bottle"
    rec = record(0, ents, [(0, 1, "with"), (0, 2, "with")], caption="A wooden table with miniature bananas and a Malaysian coin.")
    assert len([sg for sg in candidate_subgraphs(rec["graph"]) if sg["relations"]]) == 2
    # a verb's phrase belongs to its subject: "a man with a hat riding a horse"
    rec = record(0, ents, [(0, 1, "with"), (0, 2, "riding")])
    assert len([sg for sg in candidate_subgraphs(rec["graph"]) if sg["relations"]]) == 2
    # the key stays: a negative equal to it is still dropped
    (done,) = decompose([record(0, ents, [(0, 1, "with"), (0, 2, "next to")])])
    keys = set(done["subgraph_keys"])
    assert canonical_key({"objects": [object_node(ents[0], 0), object_node(ents[2], 2)],
                          "relations": [{"subject": 0, "object": 1, "relation": "next to"}]}, load()) in keys
    # "An image of a clock on a building.": the clock is on the building, not the image
    (clock,) = [r for r in read_jsonl(DATA / "real.jsonl") if r["id"] == 84]
    assert not [sg for sg in candidate_subgraphs(clock["graph"], load()) if sg["relations"]]


def relation_triples(rec) -> list[tuple[str, str, str]]:
    return [(sg["objects"][0]["noun"], sg["relations"][0]["relation"], sg["objects"][1]["noun"])
            for sg in candidate_subgraphs(rec["graph"]) if sg["relations"]]


def test_a_phrase_after_the_verbs_object_is_no_positive_of_the_subject():
    """"The man is flying his kite in the sky": the kite is in the sky, not the man (r5 of
    docs/text_quality.md, "the man in the sky"); "a stoplight that is flashing green lights at cars":
    not "a stoplight at cars". The verb's own relation stays a positive."""
    ents = [with_bounds(entity("man", det="the"), 0, 2), with_bounds(entity("kite", det="his"), 4, 6),
            with_bounds(entity("sky", det="the"), 7, 9)]
    rec = record(0, ents, [(0, 1, "flying"), (0, 2, "in"), (1, 0, "of")], caption="The man is flying his kite in the sky.")
    assert relation_triples(rec) == [("man", "flying", "kite")]
    ents = [with_bounds(entity("stoplight"), 0, 2), with_bounds(entity("lights", attributes=["green"], det=None), 5, 7),
            with_bounds(entity("cars", det=None), 8, 9)]
    rec = record(0, ents, [(0, 1, "flashing"), (0, 2, "at")], caption="A stoplight that is flashing green lights at cars.")
    assert relation_triples(rec) == [("stoplight", "flashing", "lights")]
    # with nothing between, the phrase is the subject's: "a man in a field flying a kite"
    ents = [with_bounds(entity("man"), 0, 2), with_bounds(entity("field"), 3, 5), with_bounds(entity("kite"), 6, 8)]
    rec = record(0, ents, [(0, 1, "in"), (0, 2, "flying")])
    assert relation_triples(rec) == [("man", "in", "field"), ("man", "flying", "kite")]


def test_a_participle_or_place_phrase_that_may_hang_off_a_nearer_noun_is_no_positive():
    """Blind review r8's not-entailed positives: "a baby tabby cat leaning against a wall" (the bicycle
    leans), "a freeway surrounded by several cars" (the bus is), "a street between buses" (the pedestrians
    are); the relation of the verb itself stays a positive."""
    ents = [with_bounds(entity("cat", attributes=["baby tabby"]), 0, 4), with_bounds(entity("bicycle"), 5, 8),
            with_bounds(entity("wall"), 9, 12)]
    rec = record(0, ents, [(0, 1, "walking behind"), (0, 2, "leaning against")],
                 caption="A baby tabby cat walking behind a bicycle leaning against a wall")
    assert relation_triples(rec) == [("cat", "walking behind", "bicycle")]
    # an agent's verb past the nearer noun stays: "a man sitting on a bench holding an umbrella"
    rec = record(0, ents, [(0, 1, "sitting on"), (0, 2, "holding")])
    assert ("cat", "holding", "wall") in relation_triples(rec)
    # with the caption's words (parse's tokens), only a participle right after the nearer noun is in doubt
    words = "A baby tabby cat walking behind a bicycle leaning against a wall".split()
    ents = [with_bounds(entity("cat", attributes=["baby tabby"]), 0, 4), with_bounds(entity("bicycle"), 6, 8),
            with_bounds(entity("wall"), 10, 12)]
    rec = record(0, ents, [(0, 1, "walking behind"), (0, 2, "leaning against")])
    relations = [sg["relations"][0]["relation"] for sg in candidate_subgraphs(rec["graph"], words=words) if sg["relations"]]
    assert relations == ["walking behind"]
    words = "A young child holding onto a kite while standing on a green field".split()
    ents = [with_bounds(entity("child", attributes=["young"]), 0, 3), with_bounds(entity("kite"), 5, 7),
            with_bounds(entity("field", attributes=["green"]), 10, 13)]
    rec = record(0, ents, [(0, 1, "holding onto"), (0, 2, "standing on")])
    assert len([sg for sg in candidate_subgraphs(rec["graph"], words=words) if sg["relations"]]) == 2
    ents = [with_bounds(entity("bus"), 0, 6), with_bounds(entity("freeway"), 12, 14),
            with_bounds(entity("cars", "car", det=None), 16, 19)]
    rec = record(0, ents, [(0, 1, "on"), (1, 2, "surrounded by")],
                 caption="A white with red striped bus drives down the slow lane on a freeway surrounded by several other cars.")
    assert relation_triples(rec) == [("bus", "on", "freeway")]
    ents = [with_bounds(entity("pedestrians", "pedestrian", det=None), 0, 1), with_bounds(entity("street"), 2, 4),
            with_bounds(entity("buses", "bus", det=None), 5, 6)]
    rec = record(0, ents, [(0, 1, "crossing"), (1, 2, "between")], caption="Pedestrians crossing a street between buses and cars.")
    assert relation_triples(rec) == [("pedestrians", "crossing", "street")]
    # who holds or carries the object is where it is: "a man holding a dog next to a car"
    rec = record(0, ents, [(0, 1, "holding"), (1, 2, "next to")])
    assert ("street", "next to", "buses") in relation_triples(rec)


def test_a_with_phrase_whose_noun_is_placed_elsewhere_is_no_positive():
    """Blind review r9's not-entailed "a sidewalk with cars": in "a metal bench resting on a sidewalk with cars
    on a street in the background" the cars are the scene's, on the street; a with-phrase on a noun no earlier
    phrase holds ("a room with a painting on the wall"), or only "of" ("a painting of a vase with a sunflower on a
    table"), stays."""
    from mosaictool.stages.parse import parse

    def positives(caption):
        (rec,) = parse([{"id": 0, "caption": caption}])
        return [(sg["objects"][0]["noun"], sg["relations"][0]["relation"], sg["objects"][1]["noun"])
                for sg in candidate_subgraphs(rec["graph"], words=rec["tokens"]["words"]) if sg["relations"]]

    got = positives("a metal bench resting on a sidewalk with cars on a street in the background")
    assert ("bench", "resting on", "sidewalk") in got and ("cars", "on", "street") in got
    assert ("sidewalk", "with", "cars") not in got
    assert ("room", "with", "painting") in positives("a room with a painting on the wall")
    # what "of" frames keeps its with-phrase; a with-phrase is no place
    assert ("vase", "with", "sunflower") in positives("A painting of a vase with a sunflower on a table.")
    assert ("cows", "with", "tags") in positives("A heard of cows with yellow tags on their ears in a field of grass.")


def test_a_phrase_true_of_the_subject_whichever_noun_it_hangs_off_stays_a_positive():
    """Real COCO captions where either attachment entails the positive: nearness through what the subject sits
    on, a place shared with what it holds, a container where its content is."""
    ents = [with_bounds(entity("people", "person", det=None, num="two"), 0, 2), with_bounds(entity("bench"), 2, 5),
            with_bounds(entity("water", det="the"), 6, 8)]
    rec = record(0, ents, [(0, 1, "on"), (0, 2, "near")], caption="Two people on a bench near the water.")
    assert ("people", "near", "water") in relation_triples(rec)
    ents = [with_bounds(entity("person"), 0, 2), with_bounds(entity("food", det="some"), 5, 7),
            with_bounds(entity("kitchen"), 8, 10)]
    rec = record(0, ents, [(0, 1, "cooking"), (0, 2, "in")], caption="A person that is cooking some food in a kitchen.")
    assert ("person", "in", "kitchen") in relation_triples(rec)
    rec = record(0, ents, [(0, 1, "riding"), (0, 2, "on")], caption="a person riding skis on a snowy slope")
    assert ("person", "on", "kitchen") in relation_triples(rec)
    # ... but not what the held thing rests on: "a person is holding two apples on a plate"
    rec = record(0, ents, [(0, 1, "holding"), (0, 2, "on")])
    assert ("person", "on", "kitchen") not in relation_triples(rec)
    ents = [with_bounds(entity("vase"), 0, 2), with_bounds(entity("flowers", "flower", det=None), 3, 4),
            with_bounds(entity("dining table"), 5, 8)]
    rec = record(0, ents, [(0, 1, "of"), (0, 2, "on")], caption="A vase of flowers on a dining table.")
    assert ("vase", "on", "dining table") in relation_triples(rec)


def test_a_subject_in_its_own_body_part_is_no_positive():
    """"A person holding a smart device in their left hand": the device is in the hand, not the person."""
    ents = [with_bounds(entity("person"), 0, 2), with_bounds(entity("device", attributes=["smart"]), 3, 6),
            with_bounds(entity("hand", attributes=["left"], det="their"), 7, 10)]
    rec = record(0, ents, [(0, 1, "holding"), (0, 2, "in"), (2, 0, "of")], caption="A person holding a smart device in their left hand.")
    assert ("person", "in", "hand") not in relation_triples(rec)
    assert ("person", "holding", "device") in relation_triples(rec)


def test_a_verb_read_again_past_its_object_is_no_positive():
    """"A cat sleeps on a bed with a plaid bedspread": the bedspread is the bed's; "a cat sleeps with a
    plaid bedspread" (r5) is not emitted, "a cat sleeps on a bed" is; nor "a bedspread in front of a bookshelf",
    a phrase after the object of the bed's with-phrase, which may hang off the bed."""
    ents = [with_bounds(entity("cat"), 0, 2), with_bounds(entity("bed"), 4, 6),
            with_bounds(entity("bedspread", attributes=["plaid"]), 7, 10), with_bounds(entity("bookshelf"), 13, 15)]
    rec = record(0, ents, [(0, 1, "sleeps on"), (0, 2, "sleeps with"), (2, 3, "in front of")],
                 caption="A cat sleeps on a bed with a plaid bedspread in front of a bookshelf.")
    assert relation_triples(rec) == [("cat", "sleeps on", "bed")]


def test_a_participle_after_a_prepositional_object_is_no_positive():
    """"A man on a skateboard riding by food vendors": the rider is the man, so "a skateboard riding by
    food vendors" (r5) is not emitted; a participle of the first noun is ("a man riding a skateboard")."""
    ents = [with_bounds(entity("man"), 0, 2), with_bounds(entity("skateboard"), 3, 5),
            with_bounds(entity("food vendors", det=None), 7, 9)]
    rec = record(0, ents, [(0, 1, "on"), (1, 2, "riding by")], caption="A man on a skateboard riding by food vendors.")
    assert relation_triples(rec) == [("man", "on", "skateboard")]
    rec = record(0, ents, [(0, 1, "riding"), (0, 2, "riding by")])
    assert ("man", "riding", "skateboard") in relation_triples(rec)


def test_all_one_and_two_object_subgraphs_in_graph_order():
    rec = record(1, [entity("man"), entity("horse", attributes=["brown"]), entity("beach", det="the")],
                 [(0, 1, "riding"), (0, 2, "on")])
    subs = candidate_subgraphs(rec["graph"])
    assert [s["kind"] for s in subs] == ["object", "object", "object", "relation", "relation"]
    assert [o["noun"] for o in subs[3]["objects"]] == ["man", "horse"]
    assert subs[3]["relations"] == [{"subject": 0, "object": 1, "relation": "riding"}]
    assert subs[1]["objects"][0]["attributes"] == ["brown"]


def test_duplicates_pronouns_and_self_loops_are_left_out():
    rec = record(1, [entity("dog"), entity("dog"), entity("it", det=None), entity("ball")],
                 [(0, 3, "with"), (1, 3, "with"), (0, 2, "near"), (3, 3, "on")])
    subs = candidate_subgraphs(rec["graph"])
    assert [(s["kind"], [o["noun"] for o in s["objects"]]) for s in subs] == [
        ("object", ["dog"]), ("object", ["ball"]), ("relation", ["dog", "ball"])]


def test_a_determiner_left_as_an_entity_is_no_object():
    # "A view from the inside of a train": the framing noun taken out, "the" stayed as a head
    rec = record(1, [entity("the", det=None), entity("train")], [(0, 1, "of")])
    assert [[o["noun"] for o in s["objects"]] for s in candidate_subgraphs(rec["graph"])] == [["train"]]


def test_caption_first_and_max_sample_is_deterministic_and_ordered():
    ents = [entity(h) for h in ("cat", "dog", "ball", "mat", "sofa")]
    rec = record("x", ents, [(0, 2, "near"), (1, 3, "on")], caption="A cat near a ball, a dog on a mat, a sofa.")
    full = candidate_subgraphs(rec["graph"])
    out = decompose_record(rec, max_subgraphs=3, seed=5)
    assert out["subgraphs"][0] == {
        "kind": "caption", "text": rec["caption"], "objects": [], "relations": [],
        "key": "cat >near> ball & dog >on> mat & couch"}
    chosen = [{k: v for k, v in s.items() if k != "key"} for s in out["subgraphs"][1:]]
    assert len(chosen) == 3
    positions = [full.index(s) for s in chosen]
    assert positions == sorted(positions)
    assert decompose_record(rec, max_subgraphs=3, seed=5) == out
    # the sample depends on (seed, id): other seeds pick other subsets
    picks = {tuple(graph_key(s) for s in decompose_record(rec, max_subgraphs=3, seed=s)["subgraphs"][1:]) for s in range(20)}
    assert len(picks) > 1
    assert decompose_record(rec, max_subgraphs=3, keep_caption=False)["subgraphs"][0]["kind"] != "caption"


def test_golden():
    out = list(decompose(read_jsonl(DATA / "input.jsonl")))
    assert out == read_jsonl(DATA / "expected.jsonl")


heads = st.sampled_from(["dog", "cat", "man", "ball", "tree", "car", "it"])
attrs = st.lists(st.sampled_from(["red", "big", "old", "wooden", "shiny"]), max_size=2)


@st.composite
def graphs(draw):
    n = draw(st.integers(0, 5))
    ents = [entity(draw(heads), attributes=draw(attrs)) for _ in range(n)]
    rels = [(draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)), draw(st.sampled_from(["on", "near", "holding"])))
            for _ in range(draw(st.integers(0, 4)))] if n else []
    return record(draw(st.integers(0, 10**6)), ents, rels)


@functools.cache
def _shipped_vocab():
    return load()


@settings(max_examples=60, deadline=None)
@given(graphs(), st.integers(1, 6))
def test_properties(rec, m):
    vocab = _shipped_vocab()
    out = decompose_record(rec, max_subgraphs=m, vocab=vocab)
    subs = out["subgraphs"]
    assert subs[0]["kind"] == "caption" and len(subs) - 1 <= m
    keys = [graph_key(s) for s in subs[1:]]
    assert len(keys) == len(set(keys))
    for s in subs[1:]:
        assert len(s["objects"]) in (1, 2) and len(s["relations"]) == len(s["objects"]) - 1
        assert all(o["noun"] != "it" for o in s["objects"])
    assert out["id"] == rec["id"] and out["graph"] == rec["graph"]
    # a sub-graph that can make a negative is sampled whenever the graph has one (under the same vocabulary: it refuses
    # some relations, "a ball holding a dog" after a dog)
    assert any(informative(s) for s in subs[1:]) == any(informative(s) for s in candidate_subgraphs(rec["graph"], vocab))


def test_cli_pipes_and_reports_bad_lines(tmp_path):
    src = DATA / "input.jsonl"
    result = runner.invoke(app, ["decompose", "--max", "3", str(src)])
    assert result.exit_code == 0
    assert [json.loads(x) for x in result.stdout.splitlines()] == read_jsonl(DATA / "expected.jsonl")

    bad = tmp_path / "bad.jsonl"
    lines = src.read_text().splitlines()[:2] + ['{"id": "z", "caption": "no graph"}']
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["decompose", str(bad), "-o", str(out)])
    assert result.exit_code == 1
    assert f"Error: {bad}:3: missing 'graph' (run `mosaictool parse` first)" in result.stderr
    assert not out.exists()
    result = runner.invoke(app, ["decompose", "--skip-bad", str(bad), "-o", str(out)])
    assert result.exit_code == 0 and "skipped 1 bad record" in result.stderr
    assert len(read_jsonl(out)) == 2

    result = runner.invoke(app, ["decompose", "--max", "0", str(src)])
    assert result.exit_code == 1 and "--max must be at least 1" in result.stderr
    nocap = tmp_path / "nocap.jsonl"
    nocap.write_text(json.dumps(record(1, [entity("dog")], [], caption=None)) + "\n")
    result = runner.invoke(app, ["decompose", str(nocap)])
    assert result.exit_code == 1 and "--no-caption" in result.stderr
    assert runner.invoke(app, ["decompose", "--no-caption", str(nocap)]).exit_code == 0


def test_parser_debris_makes_no_subgraph():
    from mosaictool.world.vocab import base_vocab

    world = base_vocab()
    rec = record("d", [entity("star", attributes=["red"]), entity("right", attributes=["square"]),
                       entity("orange cross", lemma="orange cross"), entity("purple", attributes=["little"]),
                       entity("stripy cross", lemma="stripy cross")],
                 [(0, 1, "of"), (0, 2, "above"), (2, 4, "to the left of")])
    out = decompose_record(rec, vocab=world, max_subgraphs=20)
    objects = [(o["lemma"], tuple(sorted(o["attributes"]))) for sg in out["subgraphs"][1:] for o in sg["objects"]]
    assert set(objects) == {("star", ("red",)), ("cross", ("orange",)), ("cross", ("stripy",))}
    relations = {sg["relations"][0]["relation"] for sg in out["subgraphs"][1:] if sg["relations"]}
    assert relations == {"above", "to the left of"}  # not the bare "of" to the place noun "right"
    assert "cross[striped]" in out["subgraph_keys"] and not any("right" in k or "square" in k for k in out["subgraph_keys"])
    # a compound the vocabulary knows as an object stays one
    hot_dog = decompose_record(record("h", [entity("hot dog", lemma="hot dog")], []), max_subgraphs=5)
    assert hot_dog["subgraphs"][1]["objects"][0]["lemma"] == "hot dog"


def test_real_captions_sample_a_relation_or_attribute_subgraph():
    """On real COCO captions whose --max 3 sample once held only bare objects ("man", "bench",
    "laptop" of "The man is sitting on the park bench using his laptop."), every seed's sample holds
    a relation or attributed sub-graph, and relations come first (the paper's p_attr + p_rel)."""
    records = [r for r in read_jsonl(DATA / "real.jsonl") if r["id"] in (3, 7, 72, 95, 237)]  # 84: its one relation is ambiguous
    for rec in records:
        assert len(candidate_subgraphs(rec["graph"], load())) > 3
        for seed in range(10):
            subs = decompose_record(rec, max_subgraphs=3, seed=seed)["subgraphs"][1:]
            assert any(informative(sg) for sg in subs), (rec["caption"], seed)
    bench = next(r for r in records if r["caption"].startswith("The man is sitting on the park bench"))
    subs = decompose_record(bench, max_subgraphs=1)["subgraphs"][1:]
    assert [sg["kind"] for sg in subs] == ["relation"]
    assert {sg["relations"][0]["relation"] for sg in decompose_record(bench, max_subgraphs=3)["subgraphs"][1:] if sg["relations"]} \
        == {"sitting on"}


def test_sample_draws_kinds_by_category_weight():
    import random

    def obj(lemma, attributes=()):
        return {"lemma": lemma, "attributes": list(attributes)}

    relation = {"kind": "relation", "objects": [obj("man"), obj("horse")], "relations": [{"subject": 0, "object": 1, "relation": "on"}]}
    attributed = {"kind": "object", "objects": [obj("horse", ["brown"])], "relations": []}
    bare = {"kind": "object", "objects": [obj("hat")], "relations": []}
    firsts = [sample_subgraphs([bare, attributed, relation, bare], 1, random.Random(seed))[0]["kind"] for seed in range(2000)]
    share = firsts.count("relation") / len(firsts)
    expected = SAMPLE_WEIGHTS["relation"] / sum(SAMPLE_WEIGHTS.values())
    assert abs(share - expected) < 0.04 and "object" in firsts
    assert all(sg is not bare for sg in firsts)
    # bare objects fill what is left; the sample keeps graph order
    other = {**bare, "objects": [obj("cap")]}
    samples = [sample_subgraphs([bare, attributed, relation, other], 3, random.Random(seed)) for seed in range(20)]
    assert {tuple(map(id, s)) for s in samples} == {(id(bare), id(attributed), id(relation)), (id(attributed), id(relation), id(other))}


def test_real_objects_are_kept():
    """"someone" names a person; "light" is a noun in "a red light", "the light", "lights"; a bare
    colour word ("with gold and blue") stays no object."""
    vocab = load()
    records = {r["caption"].split()[1]: r for r in read_jsonl(DATA / "real.jsonl")}

    def lemmas(rec):
        return {o["lemma"] for sg in candidate_subgraphs(rec["graph"], vocab) for o in sg["objects"]}

    assert "someone" in lemmas(records["camera"])
    assert {("someone", "touching", "cupcake")} <= {
        (sg["objects"][0]["lemma"], sg["relations"][0]["relation"], sg["objects"][1]["lemma"])
        for sg in candidate_subgraphs(records["camera"]["graph"], vocab) if sg["relations"]}
    assert "light" in lemmas(records["motorcycles"]) and "light" in lemmas(records["bathroom"]) and "light" in lemmas(records["train"])
    motorcycles = candidate_subgraphs(records["motorcycles"]["graph"], vocab)
    red_light = next(o for sg in motorcycles for o in sg["objects"] if o["lemma"] == "light")
    assert red_light["attributes"] == ["red"]
    assert "gold" not in lemmas(records["beautifully"]) and "blue" not in lemmas(records["beautifully"])


def _entity(span: str, head: str, det: str) -> dict:
    return {"span": span, "lemma_span": span, "head": head, "lemma_head": head, "attributes": [],
            "modifiers": [{"dep": "det", "span": det, "lemma_span": det}]}


def test_what_the_caption_says_is_absent_is_shown_nowhere():
    # A blind review read "a bathroom with toilets" from "A bathroom with no toilets and a red and
    # green bucket." as a positive: an entity under "no" is in no sub-graph, alone or related; the
    # object of "without" is in its relation ("a man without a shirt") but not alone ("a shirt").
    bathroom = {"entities": [_entity("A bathroom", "bathroom", "a"), _entity("no toilets", "toilets", "no"),
                             _entity("a bucket", "bucket", "a")],
                "relations": [{"subject": 0, "object": 1, "relation": "with"}, {"subject": 0, "object": 2, "relation": "with"}]}
    shown = [[o["noun"] for o in s["objects"]] for s in candidate_subgraphs(bathroom, load())]
    assert shown == [["bathroom"], ["bucket"], ["bathroom", "bucket"]]
    shirtless = {"entities": [_entity("A man", "man", "a"), _entity("a shirt", "shirt", "a")],
                 "relations": [{"subject": 0, "object": 1, "relation": "without"}]}
    shown = [[o["noun"] for o in s["objects"]] for s in candidate_subgraphs(shirtless, load())]
    assert shown == [["man"], ["man", "shirt"]]


def test_a_number_after_a_is_a_modifier_not_the_count():
    # "a person riding a two thick wheeled bike on sand": blind review r7 read "two thin wheeled bike"
    entity = {"span": "a two thick wheeled bike", "head": "bike", "lemma_head": "bike", "attributes": ["thick", "wheeled"],
              "modifiers": [{"dep": "det", "span": "a"}, {"dep": "nummod", "span": "two"},
                            {"dep": "amod", "span": "thick"}, {"dep": "amod", "span": "wheeled"}]}
    node = object_node(entity, 0)
    assert (node["count"], node["plural"], node["attributes"], node["determiner"]) == (None, False, ["two", "thick", "wheeled"], "a")
    two = object_node({**entity, "span": "two thick bikes", "head": "bikes", "modifiers": entity["modifiers"][1:]}, 0)
    assert (two["count"], two["plural"]) == ("two", True)


def _parsed_positives(caption):
    from mosaictool.stages.parse import parse

    (rec,) = parse([{"id": 0, "caption": caption}])
    return [([o["noun"] for o in sg["objects"]], [list(o["attributes"]) for o in sg["objects"]],
             [r["relation"] for r in sg["relations"]]) for sg in candidate_subgraphs(rec["graph"], words=rec["tokens"]["words"])]


def test_what_an_or_coordinates_is_no_positive():
    """Blind review r10's not-entailed "two large fighting bears playing in water": the caption says fighting or
    playing, neither; a relation or noun next to an "or" makes no sub-graph, an attribute is left out."""
    got = _parsed_positives("Two large bears fighting or playing in water.")
    assert not any(rels for _, _, rels in got)
    assert (["bears"], [["large"]], []) in got and (["water"], [[]], []) in got
    got = _parsed_positives("The basketball game is played by teams in white or blue uniforms.")
    assert (["teams", "uniforms"], [[], []], ["in"]) in got
    assert not any(attrs for _, attr_lists, _ in got for attrs in attr_lists)
    assert not any("dog" in nouns for nouns, _, _ in _parsed_positives("A dog or bear in a controlled area doing something with balls."))


def test_a_place_phrase_after_a_copulas_object_is_no_positive():
    """Blind review r10's "a kitchen counter by a dog": in "a man is at a kitchen counter by a dog" the man is by
    the dog; the counter may not be. The copula's own phrase stays."""
    got = _parsed_positives("A man is at a kitchen counter by a dog.")
    assert (["kitchen counter", "dog"], [[], []], ["by"]) not in got
    assert (["man", "kitchen counter"], [[], []], ["at"]) in got


def test_a_relation_must_be_the_captions_words_and_a_placing_verb_needs_its_place():
    """Blind review r10's "a man standing to a white flatbed truck cab" (the parse lost "next") and "a girl puts a
    flower" (put needs its place): neither is a positive."""
    got = _parsed_positives("Man in red shirt and black pants standing next to white flatbed truck cab next to a set of new tires.")
    assert not any("standing to" in rels for _, _, rels in got)
    assert (["man", "shirt"], [[], ["red"]], ["in"]) in got
    got = _parsed_positives("A girl puts a flower on the lapel of a boys coat.")
    assert not any("puts" in rels for _, _, rels in got)


def _relation_positives(caption):
    return [(nouns[0], rels[0], nouns[1]) for nouns, _, rels in _parsed_positives(caption) if rels]


def test_a_phrase_after_a_noun_inside_another_nouns_phrase_is_no_positive():
    """Blind review r11's "cheese on a flat brown surface" and the gold set's "a table with lit candles", "a
    cake holding a baby", "a sink on the counter": a phrase after a noun that is itself the object of an earlier
    noun's phrase or verb may hang off that noun, so it makes no positive; unless it holds either way (a place of a
    thing on or near another, what is carried goes along), the noun is the last of a list, or a relative clause
    follows it."""
    assert _relation_positives("A pizza with lots of cheese on a flat brown surface.") == [("pizza", "with", "cheese")]
    assert ("table", "with", "candles") not in _relation_positives("A sheet cake sitting on top of a table with lit candles.")
    got = _relation_positives("Woman carrying cake near man holding baby at outdoor celebration.")
    assert ("cake", "holding", "baby") not in got and ("cake", "near", "man") in got  # the carried cake is near him
    got = _relation_positives("A kitchen with a sink, dishwasher and boxes on the counter.")
    assert not {("sink", "on", "counter"), ("dishwasher", "on", "counter")} & set(got) and ("kitchen", "with", "sink") in got
    got = _relation_positives("A table with five red cups, a pineapple and some oranges on a plate")
    assert ("oranges", "on", "plate") in got and ("pineapple", "on", "plate") not in got
    assert ("car", "near", "house") in _relation_positives("A cat on a car near a house.")
    # r6's "one ways except a street"
    got = _relation_positives("A street pole with one ways, except deliveries, street and no walking signs.")
    assert not any(r == "except" for _, r, _ in got)
    assert ("surfboard", "on", "water") in _relation_positives("A man in a red shirt rides a yellow surfboard on light blue water.")
    # a held thing's place is its holder's (parse gives it to him): no "a bat on the field", the bat is in his hands
    assert ("bat", "on", "field") not in _relation_positives("a baseball player with a bat on the field")


def test_a_spewing_right_after_a_nearer_thing_is_no_positive_of_an_earlier_noun():
    """Audit: "A man opening a fire hydrant spewing out rusty water into a street." gave "a man spewing out rusty
    water": the hydrant, right before the participle, spews (things spew as well as people)."""
    got = _relation_positives("A man opening a fire hydrant spewing out rusty water into a street.")
    assert ("man", "opening", "fire hydrant") in got and not [t for t in got if t[1].startswith("spewing")]


def test_a_verb_right_after_a_nearer_noun_is_no_positive_of_an_earlier_one():
    """Blind reviews r9-r11's "a plate topped with fruit" and "a man resembling a bicycle": English reads the noun
    right before a participle or a verb things do as its subject (the waffle is topped, the equipment resembles);
    not a noun coordinated with the subject, nor one it wears; an action verb keeps its first noun."""
    assert _relation_positives("A plate with a big tasty looking waffle topped with fruit.") == [("plate", "with", "waffle")]
    got = _relation_positives("A man on a piece of equipment resembling a bicycle that has very large wheels.")
    assert ("man", "resembling", "bicycle") not in got and ("man", "on", "equipment") in got
    assert ("man", "holding", "baby") in _relation_positives("A man in a red shirt holding a baby.")
    assert ("person", "looking at", "ocean") in _relation_positives("A person with a rainbow umbrella looking at the ocean")
    got = _relation_positives("A man and a woman holding umbrellas on a street.")
    assert ("man", "holding", "umbrellas") in got and ("woman", "holding", "umbrellas") in got
    got = _relation_positives("An assortment of crackers, dip and veggies sitting on a white counter.")
    assert ("crackers", "sitting on", "counter") in got


def test_a_relation_the_captions_words_say_otherwise_is_no_positive():
    """The gold set's and blind review r11's: a phrase said before its subject ("a car on the road"), a written
    word as a thing ("pub sits on a wall"), what is "as if", a pronoun's antecedent of the other number ("row on
    computers" from "on it"), a caption in capitals ("a motor crosses a rider"), and "none" as an object."""
    assert _relation_positives("A herd of sheep on the road and a car") == [("sheep", "on", "road")]
    assert not any(s == "pub" for s, _, _ in _relation_positives("A sign with the word pub sits on a wall."))
    assert not _relation_positives("The two pieces of lettuce are held as if they form a V.")
    assert ("row", "on", "computers") not in _relation_positives("A desk with five computers in a row on it.")
    assert ("umbrella", "on top of", "chair") in _relation_positives("A brown chair with a blue umbrella on top of it.")
    assert not _relation_positives("MOTOR CROSS BIKE AND RIDER IN THE AIR DOING TRICKS")
    assert _relation_positives("THERE IS A BUS PARKED ON THE SIDE OF THE STREET")
    got = _parsed_positives("A man is looking down with none of his hands visible.")
    assert not any("none" in nouns for nouns, _, _ in got)


def _real_relation_positives(captions: list[str]) -> dict[str, list[tuple[str, str, str]]]:
    from mosaictool.stages.parse import parse

    vocab = load()
    return {rec["caption"]: [(sg["objects"][0]["noun"], sg["relations"][0]["relation"], sg["objects"][1]["noun"])
                             for sg in candidate_subgraphs(rec["graph"], vocab, words=rec["tokens"]["words"]) if sg["relations"]]
            for rec in parse([{"id": i, "caption": c} for i, c in enumerate(captions)])}


def test_a_verb_whose_doer_is_another_noun_is_no_positive():
    """Blind review r13: "the front holding up food" (someone holds it) and "a white shirt jumping a skateboard" (the
    man in the shirt jumps): a verb after a nearer person or animal, or whose subject is listed in an earlier noun's
    phrase, is no positive; the subject's own phrase stays, and a "while" clause keeps the sentence's subject."""
    got = _real_relation_positives([
        "The front of a restaurant with someone holding up food",
        "A man in a black hat, white shirt and black pants jumping a skateboard off a bench.",
        "An adult standing behind a little girl while holding an umbrella.",
    ])
    front = got["The front of a restaurant with someone holding up food"]
    assert ("front", "holding up", "food") not in front and ("restaurant", "with", "someone") in front
    man = got["A man in a black hat, white shirt and black pants jumping a skateboard off a bench."]
    assert [t for t in man if t[1] != "in"] == [] and ("man", "in", "hat") in man
    assert ("adult", "holding", "umbrella") in got["An adult standing behind a little girl while holding an umbrella."]


def test_a_path_phrase_after_a_verbs_object_keeps_its_verb_or_is_no_positive():
    """Blind review r13: "a man down a snow covered slope" and "a zebra bending down off the ground" lost their verb.
    A verb of going gives it back ("riding down", as the gold graphs read it); any other is no positive."""
    got = _real_relation_positives([
        "A man riding a snowboard down a snow covered slope.",
        "a zebra bending down eating something off the ground",
        "A woman carries a box of bananas down a crowded street.",
    ])
    assert got["A man riding a snowboard down a snow covered slope."] == [("man", "riding", "snowboard"), ("man", "riding down", "slope")]
    # the indefinite object names nothing, so the verb keeps its phrase (parse): the zebra eats off the ground
    assert got["a zebra bending down eating something off the ground"] == [("zebra", "eating off", "ground")]
    assert not [t for t in got["A woman carries a box of bananas down a crowded street."] if t[2] == "street"]


def test_a_verb_reached_through_to_after_a_word_of_intent_keeps_its_intent():
    """Blind reviews r14 and r15: "is learning to use Wii Fit" is no "uses wii fit", "reaching up to grab a Frisbee" no
    "grabs a frisbee": the relation keeps the words of intent the caption says ("learning to use"); a verb said
    outright stays as it is, and a noun phrase's word is no verb."""
    got = _real_relation_positives([
        "The blonde woman in the red checked shirt is learning to use Wii Fit.",
        "A dog is reaching up to grab a Frisbee in his mouth.",
        "Skiers wait to take a lift up a snowy hill.",
        "A male tennis player stands on court and prepares to hit the ball.",
        "A man is catching a frisbee.",
        "A yellow dog runs to grab a yellow frisbee in the grass",  # review r18: a motion toward it is no grab yet
    ])
    assert not [t for t in got["A yellow dog runs to grab a yellow frisbee in the grass"] if t[1] == "grab"]
    assert ("dog", "runs to grab", "frisbee") in got["A yellow dog runs to grab a yellow frisbee in the grass"]
    assert got["The blonde woman in the red checked shirt is learning to use Wii Fit."] == [
        ("woman", "in", "shirt"), ("woman", "learning to use", "wii fit")]
    assert ("dog", "reaching up to grab", "frisbee") in got["A dog is reaching up to grab a Frisbee in his mouth."]
    assert ("skiers", "wait to take", "lift") in got["Skiers wait to take a lift up a snowy hill."]
    assert ("tennis player", "prepares to hit", "ball") in got["A male tennis player stands on court and prepares to hit the ball."]
    assert got["A man is catching a frisbee."] == [("man", "catching", "frisbee")]


def test_a_place_phrase_of_a_verb_of_looking_keeps_the_verb_or_is_no_positive():
    """Blind reviews r14 and r15: "a brown dog outside of the car window" (it looks out) and "a car through a town"
    (it makes its way through) lost the verb whose complement the phrase is: a verb of looking is given back, "make their
    way" and a verb of another clause ("as he looks") refuse the phrase; a phrase of the subject, and a plural noun that
    looks like a verb ("red heads"), stay as they are."""
    got = _real_relation_positives(["A brown dog is looking outside of the car window.",
                                    "A tram and a car make their way through town.",
                                    "A man stands with his arms crossed as he looks at a clock.",
                                    "A dog in a car is looking at the camera.",
                                    "Two game birds with red heads on the sidewalk."])
    assert got["A brown dog is looking outside of the car window."] == [("dog", "looking outside of", "car window")]
    assert got["A tram and a car make their way through town."] == []
    assert not [t for t in got["A man stands with his arms crossed as he looks at a clock."] if t[2] == "clock"]
    assert ("dog", "in", "car") in got["A dog in a car is looking at the camera."]
    assert not [t for t in got["Two game birds with red heads on the sidewalk."] if "heads" in t[1]]


def test_a_singular_it_read_as_several_nouns_is_the_with_phrases_noun():
    """Blind review r14: in "a bed and dresser with a small monitor on top of it" the with-phrase, and so "it", is the
    dresser's: no "a small monitor on top of a bed"."""
    got = _real_relation_positives(["Small bedroom with a bed and dresser with a small monitor on top of it.",
                                     "A plate with a banana that is cut up, cookies and a spoon on it."])
    bedroom = got["Small bedroom with a bed and dresser with a small monitor on top of it."]
    assert ("monitor", "on top of", "dresser") in bedroom and ("monitor", "on top of", "bed") not in bedroom
    assert ("spoon", "on", "banana") not in got["A plate with a banana that is cut up, cookies and a spoon on it."]


def test_a_noun_made_of_a_verb_and_its_particle_is_one_object():
    """Blind review r15: "6 pizzas in take out boxes" gave "several women take out boxes", "a red pick up truck" gave
    "a red pick drives down a snowy suburban road": the compound is one noun, with no relation of its verb; a verb after
    a subject or "to" stays one."""
    got = _real_relation_positives([
        "Several women gathered together posing with 6 pizzas in take out boxes.",
        "A red pick up truck with a plow blade drives down a snowy suburban road.",
        "A woman stands at the check out counter in a store.",
        "People pick up trash on the beach.",
    ])
    assert got["Several women gathered together posing with 6 pizzas in take out boxes."] == [("women", "posing with", "pizzas")]
    truck = got["A red pick up truck with a plow blade drives down a snowy suburban road."]
    assert ("pick up truck", "drives down", "road") in truck and all(t[0] == "pick up truck" for t in truck)
    assert ("woman", "stands at", "check out counter") in got["A woman stands at the check out counter in a store."]
    assert ("people", "pick up", "trash") in got["People pick up trash on the beach."]


def _positives(captions: list[str]) -> dict[str, list[str]]:
    from helpers import parsed_and_decomposed
    from mosaictool.stages.template import template

    records = parsed_and_decomposed(captions)
    return {c: [p["text"] for p in out["texts"]["positives"][1:]] for c, out in zip(records, template(records.values(), vocab=load()))}


@pytest.mark.parametrize("caption, wrong, right", [
    # blind review r17: a phrase given to the wrong member of a list, or to a nested noun instead of the first one
    ("a kitchen with two pineapples on the counter and a wok pot on the burner.",
     ["two pineapples on the burner", "a wok pot on the counter"],
     ["two pineapples on the counter", "a wok pot on the burner", "a kitchen with a wok pot"]),
    ("Bikes are lined up in the store on the floor", ["the store on the floor"], ["bikes lined up in the store"]),
    # a path phrase with a place noun is a path still: it goes with the verb the relation lacks
    ("A man riding a skateboard up the side of a cement ramp.", ["a man up the side of a cement ramp"], ["a man riding a skateboard"]),
    # a room or an open place "next to" a thing: the thing in it is ("a field next to a bush"; a room has its windows)
    ("A fire hydrant in a grassy field next to a bush", ["a grassy field next to a bush"], ["a fire hydrant"]),
    ("a man and woman standing side by side in a kitchen next to a window", ["a kitchen next to a window"],
     ["a man standing in a kitchen"]),
    ("A man holding a frisbee in a parking lot near water.", [], ["a parking lot near water"]),
    # blind review r19: a list's next member read as a second object of its previous member's phrase
    ("a bright kitchen with tulips on the table and plants by the window", ["tulips on plants"],
     ["tulips on the table", "a bright kitchen with tulips"]),
    ("A series of photos of two plates with different desserts and another plate with a cup of coffee.",
     ["two plates with a cup", "two plates with a plate"], ["two plates with different desserts"]),
    # objects the caption does not show: a purpose clause, a place's proper name, a noun phrase run over a verb or a list
    ("A parking meter on the side of the street with a ring for attaching bicycles.", ["bicycles"], ["a ring"]),
    ("School class photo from the boys school of Standard South Carolina", ["standard south carolina"], ["the boys school"]),
    ("Many people standing in a field flying kites.", ["field flying kites"], ["many people standing in a field"]),
    ("Several vehicles providing ground transportation are shown in the photo: streetcar, tourbus, classic car and family cars",
     ["classic streetcar tourbus car family cars"], ["family cars"]),
    ("A man holding matches and a cigarette in his mouth.", ["a man in the mouth"], []),
    # one member's attribute is not all members'
    ("two people playing video game while standing one in purple is smiling", ["two smiling people playing video game"], []),
    # fluency: a list read as one noun, an article before a plural in capitals, "has X" cut before its complement
    ("a woman in a dress and pale makeup sitting by a table", ["a woman in a pale dress makeup"], ["a woman in pale makeup"]),
    ("LOTS OF BROKEN TOILETS SITTING OUT ON A LAWN", ["a broken toilets"], ["broken toilets"]),
    ("A cat has its front paws on a toilet seat.", ["a cat has its front paws"], ["a cat"]),
    ("The polar bear has his chin up as he lies on his chest", ["the polar bear has his chin"], []),
    ("A bathroom has yellow walls, brown floors, and a closet in it.", [], ["a bathroom has a closet in it"]),
    # a lower-case noun the tagger calls a name, and a list with a shared head, are kept
    ("A plate of macaroni and cheese with broccoli.", [], ["macaroni"]),
    ("A pineapple and ham pizza in a pizza tin", [], ["a pizza in a pizza tin"]),
])
def test_r17_positives_are_entailed_by_their_caption(caption, wrong, right):
    """Blind review r17's sub-graph positives its caption did not entail (MosaiCLIP's positives are entailed, Singh et al.
    2023, Sec. 3.3), and their near kin that are."""
    texts = _positives([caption])[caption]
    assert not set(wrong) & set(texts), texts
    assert set(right) <= set(texts), texts


def test_the_place_noun_of_a_relation_is_no_object():
    """Blind review r18: "Young man on top of a snowboard wearing maroon jacket" gave "a top wearing a maroon jacket":
    the parser keeps "top" of "on top of" as an entity beside the relation that already says it."""
    caption = "Young man on top of a snowboard wearing maroon jacket."
    keys = [sg["key"] for sg in parsed_and_decomposed([caption], max_subgraphs=10)[caption]["subgraphs"][1:]]
    assert "man[young] >on> snowboard" in keys and not [k for k in keys if k.startswith("top")]
    caption = "A man standing on top of a hill."  # the relation itself stays whole
    keys = [sg["key"] for sg in parsed_and_decomposed([caption], max_subgraphs=10)[caption]["subgraphs"][1:]]
    assert "man >standing on top of> hill" in keys


@pytest.mark.parametrize("caption, wrong, right", [
    # blind review r18: a compound noun cut to its first word is the whole compound, or nothing ("a horse stand together")
    ("Fish eye angle view of small kitchen with fire extinguisher at far end.", ["a fire", "a small kitchen with a fire"],
     ["a small kitchen with a fire extinguisher"]),
    ("a man in the air with a skateboard above a half pipe", ["a half"], ["a half pipe"]),
    ("A dog and a horse stand together in a field.", ["a horse", "a horse stand"], []),
    ("Someone holding a hot dog cut in half on some bread.", ["someone holding a hot dog cut"], ["someone holding a hot dog"]),
    # the participle of a compound adjective is no attribute, its first words no thing
    ("An old time looking clock surrounded by greenery.", ["a looking clock", "an old time"], ["a clock surrounded by greenery"]),
    ("three strange looking birds walking on the grass", ["three strange looking birds"], ["three birds walking on the grass"]),
    # a noun of a list run together, read as the verb
    ("An elephant walks alone past some big rocks boulders in an open field", ["an elephant boulders in an open field"],
     ["an elephant walks past big rocks"]),
    ("A commercial airplane with propellers flying through the air.", [], ["a commercial airplane flying through the air"]),
    # a counting word stands for a noun said before
    ("Two men are on a bicycle and a third is on a scooter.", ["a third on a scooter", "a third"], ["two men on a bicycle"]),
    ("Man flying a kite on the beach while others run along the sand.", ["others run along the sand", "others"], []),
    # a finite verb the noun phrase ran over: its phrase is the other relation's subject's, or the noun's own
    ("A delicious sandwich layered with meat and dressed with avocado lies on a cutting board.",
     ["a delicious sandwich dressed with avocado lies", "avocado lies", "avocado on a cutting board"],
     ["a delicious sandwich layered with meat"]),
    ("A zebra grazes in a field adjacent to trees.", ["a zebra grazes"], ["a zebra in a field"]),
])
def test_r18_positives_are_entailed_and_fluent(caption, wrong, right):
    """Blind review r18's sub-graph positives that were debris or not entailed (Singh et al. 2023, Sec. 3.3), and their near
    kin that are."""
    texts = _positives([caption])[caption]
    assert not set(wrong) & set(texts), texts
    assert set(right) <= set(texts), texts


@pytest.mark.parametrize("caption, wrong, right", [
    # blind reviews r19/r20: "it's" is the possessive "its" before a noun: the frisbee is in the mouth, not in the dog
    ("A dog catching a purple Frisbee in it's mouth on a green grass covered field.",
     ["a purple frisbee in a dog", "a mouth on a green grass covered grass field"], ["a dog catching a purple frisbee"]),
    # a part noun cut from its "of" phrase names nothing ("the end sits on a table")
    ("The end of a computer keyboard and a blue-illuminated black wireless mouse sit on a table.", ["the end sits on a table", "the end"],
     ["a blue-illuminated black wireless mouse sits on a table"]),
    # "with NOUN V-ing" is an absolute clause about the scene, no "with" of the verb before it
    ("Small child getting her hair dried with a man standing behind her.", ["the hair dried with a man", "a man behind the hair"],
     ["a man"]),
    # "who" is a person's: the clause is not the snowboard's
    ("A person on a snowboard who is performing a trick.", ["a snowboard performing a trick"], ["a person on a snowboard"]),
    # a bare food after a verb of containing stays bare ("a chicken" is the live bird)
    ("Plate of food that includes chicken, beans and a pickle.", ["food includes a chicken", "a chicken"], ["food includes chicken"]),
    ("A toddler eats cake with his hands in his high chair.", ["a toddler eats a cake"], ["a toddler eats cake"]),
    # a list of adjectives read as a noun and a verb: no "a box ridged donuts", no "a box full of a matching"
    ("A box full of matching, ridged donuts with glaze.", ["a box ridged donuts", "a box full of a matching"], ["donuts"]),
    # "his" is a person's: the sheep looks at the child's face, not its own
    ("A child places his hands on the head and neck of a sheep while another sheep looks at his face.",
     ["a sheep looks at his face", "a sheep looks at the face"], ["a child"]),
])
def test_r20_positives_are_entailed(caption, wrong, right):
    """Blind reviews r19 and r20's sub-graph positives that were not entailed by their captions (Singh et al. 2023,
    Sec. 3.3), and what of them stays."""
    texts = _positives([caption])[caption]
    assert not set(wrong) & set(texts), texts
    assert set(right) <= set(texts), texts


def test_what_a_sign_says_is_no_thing_in_the_scene():
    """A sign's or a shirt's words name nothing there ("a sign stating a tree", "a street sign reads sparta"); a person
    who reads, reads a thing."""
    got = _positives(["A sign stating tree trimming is on a tree by a parking meter.",
                      "A street sign that reads Sparta sitting next to a tall building.",
                      "An old man reads a book on a bench."])
    assert not [t for t in got["A sign stating tree trimming is on a tree by a parking meter."] if "stating" in t]
    assert not [t for t in got["A street sign that reads Sparta sitting next to a tall building."] if "sparta" in t]
    assert "an old man reads a book" in got["An old man reads a book on a bench."]
@pytest.mark.parametrize("caption, wrong, right", [
    # a noun the tagger read as a verb after "and" ("tie") is no attribute of the subject
    ("Two men standing on the street wearing a suit and tie", ["two tie men", "two tie men wearing a suit"],
     ["two men", "two men wearing a suit"]),
    # a phrase of the held thing, read through "one hand" or "his hand" to its holder
    ("A man holding a microphone in one hand while he holds a skateboard in the other.", ["a man in one hand"],
     ["a man holding a microphone"]),
    ("A man walking with a goat on his shoulders", [], ["a goat on the shoulders"]),
    # what is in the background or the distance is not the scene's: no with-relation to it
    ("A brick structure with a clock tower in the background.", ["a brick structure with a clock tower"], ["a clock tower"]),
    ("A truck is shown with another car in the back of it.", [], ["a truck with a car"]),
    # "in half" is how a thing is cut, no object "half"
    ("A sausage on italian roll sandwich, cut in half, is on a white plate, with a garnish.", ["a sausage cuts in a half", "a half"],
     ["a sausage on an italian roll sandwich"]),
    # an adjective with a "to" clause after a copula is no prenominal attribute
    ("A baseball player in a red shirt is ready to hit the ball.", ["a ready baseball player", "a ready baseball player in a red shirt"],
     ["a baseball player in a red shirt"]),
    ("The skier is happy to have won the race.", [], ["the happy skier"]),
    # a copula's state adverb stays with its phrase ("is up on": not the plain "on"); "way up in" keeps its place adverb
    ("The lid is up on the toilet bowl.", ["the lid on the toilet bowl"], ["the lid up on the toilet bowl"]),
    ("A cat is way up in a tree", [], ["a cat up in a tree"]),
    # an adjective after a with-phrase is that phrase's noun's ("its mouth open"), not the subject's
    ("A sheep with its mouth open in a pen.", ["an open sheep", "a sheep open in a pen"], ["a sheep with its mouth"]),
    ("Outdoor show with sheep prominent on grass field.", [], ["an outdoor show with a sheep"]),
])
def test_r20_positives_second_round(caption, wrong, right):
    """Blind reviews r19 and r20's further sub-graph positives that were not entailed by their captions or not fluent
    (Singh et al. 2023, Sec. 3.3), and their near kin that stay."""
    texts = _positives([caption])[caption]
    assert not set(wrong) & set(texts), texts
    assert set(right) <= set(texts), texts


def test_a_container_of_several_contents_is_no_container_of_one():
    """Blind review r21: "A bowl of banana's, sprinkels, chocolate chips, and marshmellows." gave "a bowl of
    marshmellows", which the caption does not say; a content the parser also gives a later container ("a bowl of rice
    and a jar of oil": a jar of rice) is the earlier one's."""
    got = _positives(["A bowl of banana's, sprinkels, chocolate chips, and marshmellows.",
                      "A close up of a bowl of uncooked rice and a jar of oil."])
    assert not [t for t in got["A bowl of banana's, sprinkels, chocolate chips, and marshmellows."] if t.startswith("a bowl of")]
    jar = got["A close up of a bowl of uncooked rice and a jar of oil."]
    assert "a jar of oil" in jar and "a bowl of uncooked rice" in jar and not [t for t in jar if t.startswith("a jar of uncooked")]


def _real_candidates(captions: list[str]) -> dict[str, list[tuple]]:
    """{caption: its candidates as (nouns, attribute lists, relations)}, parsed and read with the vocabulary and tags."""
    from mosaictool.stages.parse import parse

    vocab = load()
    return {rec["caption"]: [([o["noun"] for o in sg["objects"]], [sorted(o["attributes"]) for o in sg["objects"]],
                              [r["relation"] for r in sg["relations"]])
                             for sg in candidate_subgraphs(rec["graph"], vocab, words=rec["tokens"]["words"], tags=rec["tokens"]["tags"])]
            for rec in parse([{"id": i, "caption": c} for i, c in enumerate(captions)])}


def _alone(got: dict[str, list[tuple]]) -> dict[str, set[str]]:
    """{caption: the lower-cased nouns of its one-object candidates}, of `_real_candidates`' output."""
    return {caption: {ns[0].lower() for ns, _, rels in cands if not rels} for caption, cands in got.items()}


def test_a_word_the_tagger_made_a_noun_is_no_object():
    """Blind review r21's debris: a gerund run on from a place noun ("a man at a posing"), an adjective or participle
    as a head ("the shirtless", "a sliced"); a bare "a lot" (a quantity) and "the shade" of a tree (a place by it) only
    in their relation."""
    got = _real_candidates([
        "A man at home posing with a cake",
        "The shirtless men are riding horses through the lake.",
        "A sliced of pizza is served on a white plate.",
        "A couple of cars parked in a lot.",
        "TWO GIRAFFES STANDING IN THE SHADE OF A TREE.",
    ])
    nouns = {caption: {n.lower() for ns, _, _ in cands for n in ns} for caption, cands in got.items()}
    assert "posing" not in nouns["A man at home posing with a cake"] and "cake" in nouns["A man at home posing with a cake"]
    assert "shirtless" not in nouns["The shirtless men are riding horses through the lake."]
    assert "sliced" not in nouns["A sliced of pizza is served on a white plate."]
    assert (["lot"], [[]], []) not in got["A couple of cars parked in a lot."]
    assert (["cars", "lot"], [[], []], ["parked in"]) in got["A couple of cars parked in a lot."]
    shade = got["TWO GIRAFFES STANDING IN THE SHADE OF A TREE."]
    assert not any([n.lower() for n in ns] == ["shade"] for ns, _, _ in shade)
    assert any([n.lower() for n in ns] == ["giraffes", "shade"] for ns, _, _ in shade)


def test_a_noun_of_no_thing_in_view_is_no_object():
    """Blind reviews r23, r24: a medium, a time, a manner, an activity or a property named no thing in view ("the
    air", "a sunny day", "the wrong way", "the holiday", "a project", "a bit", "various shapes"; "the sun" of "in the
    sun" is sunlight); each stays in its relation. The sun in view ("as the sun rises") and shapes that are things
    ("toy wooden shapes") are objects still."""
    got = _real_candidates([
        "A male skater jumps in the air at a skate park.",
        "A woman taking a picture on a sunny day.",
        "A white umbrella that has been blown up the wrong way.",
        "A living room with two televisions decorated for the holiday.",
        "Man works on laptop as three others work on a project.",
        "The black and white photograph of a classroom of schoolchildren is a bit out of focus on the right side of the picture.",
        "Three Jack-O-Laturns of various shapes, one of which has flowers in it.",
        "Two dogs running and playing in the sun.",
        "A woman is standing in the middle of the snow with ski sticks as the sun rises in the background.",
        "A teddy bear sitting in front of toy wooden shapes.",
    ])
    alone = _alone(got)
    for caption, noun in [("A male skater jumps in the air at a skate park.", "air"), ("A woman taking a picture on a sunny day.", "day"),
                          ("A white umbrella that has been blown up the wrong way.", "way"),
                          ("A living room with two televisions decorated for the holiday.", "holiday"),
                          ("Man works on laptop as three others work on a project.", "project"),
                          ("The black and white photograph of a classroom of schoolchildren is a bit out of focus on the right side of the "
                           "picture.", "bit"),
                          ("Three Jack-O-Laturns of various shapes, one of which has flowers in it.", "shapes"),
                          ("Two dogs running and playing in the sun.", "sun")]:
        assert noun not in alone[caption], caption
    assert "skater" in alone["A male skater jumps in the air at a skate park."]
    assert any([n.lower() for n in ns] == ["skater", "air"] for ns, _, _ in got["A male skater jumps in the air at a skate park."])
    assert "sun" in alone["A woman is standing in the middle of the snow with ski sticks as the sun rises in the background."]
    assert "shapes" in alone["A teddy bear sitting in front of toy wooden shapes."]


def test_a_property_the_caption_does_not_give_is_no_attribute():
    """Blind review r25: "a nearly empty bowl" is no empty bowl, sheep "preparing to be sheered" are not sheared,
    and "a child is bent over" is no "bent child" (a phrasal verb's participle without its particle); "a lit up street
    sign", the particle inside the phrase, stays lit."""
    got = _real_candidates([
        "A banana and a nearly empty bowl of food resting on top of a table.",
        "The banana is laying next to an almost empty bowl.",
        "the seven sheep are preparing to be sheered.",
        "A child is bent over on skis in the snow.",
        "Street lights and a lit up street sign at an intersection.",
    ])
    attributes = {caption: {(ns[0].lower(), tuple(ats[0])) for ns, ats, rels in cands if not rels} for caption, cands in got.items()}
    # the hedge stays with its adjective ("a nearly empty bowl", parse) or the adjective goes: never a bare "empty"
    for caption, hedged in (("A banana and a nearly empty bowl of food resting on top of a table.", "nearly empty"),
                            ("The banana is laying next to an almost empty bowl.", "almost empty")):
        bowls = {a for n, a in attributes[caption] if n == "bowl"}
        assert bowls and bowls <= {(), (hedged,)} and not any("empty" in a for a in bowls - {(hedged,)}), bowls
    assert ("sheep", ()) in attributes["the seven sheep are preparing to be sheered."]
    assert ("child", ()) in attributes["A child is bent over on skis in the snow."]
    assert ("street sign", ("lit",)) in attributes["Street lights and a lit up street sign at an intersection."]


def test_a_likeness_or_a_cut_part_is_no_object():
    """Blind review r23: "the patriotic flag" of "painted exactly as the patriotic flag" and "an elephant" of "a sign
    shaped like an elephant" are what a thing is likened to, not things in view (their relation stays); "the passenger
    side" of "sitting in the passenger side of a car" is a part before its whole, a place in its relation only. "as"
    of a clause keeps its noun ("walk by as a homeless man begs")."""
    got = _real_candidates([
        "A fire hydrant painted exactly as the patriotic flag",
        "An eyecatching sign shaped like an elephant holding a billboard.",
        "A grey and white dog sitting in the passenger side of a car.",
        "City dwellers walk by as a homeless man begs for cash.",
    ])
    alone = _alone(got)
    assert "flag" not in alone["A fire hydrant painted exactly as the patriotic flag"]
    assert "fire hydrant" in alone["A fire hydrant painted exactly as the patriotic flag"]
    assert "elephant" not in alone["An eyecatching sign shaped like an elephant holding a billboard."]
    assert "passenger side" not in alone["A grey and white dog sitting in the passenger side of a car."]
    dog = got["A grey and white dog sitting in the passenger side of a car."]
    assert any([n.lower() for n in ns] == ["dog", "passenger side"] for ns, _, rels in dog if rels)
    assert "man" in alone["City dwellers walk by as a homeless man begs for cash."]


def test_a_verb_read_as_a_plural_noun_is_no_part_of_an_object():
    """Blind review r25: "A computer user types one handed on a keyboard" gave the object "a computer user types"
    (the verb read as a plural noun after "a"); alone the object is "a computer user", and a relation keeps its words
    ("a giraffe stares into the camera" reads well). A plural the vocabulary knows stays ("his tip toes")."""
    got = _real_candidates([
        "A computer user types one handed on a keyboard.",
        "A baseball player holding a bat as a ball approaches.",
        "A giraffe stares into the camera while standing on green grass in front of a shade tree.",
        "A man holding a pink umbrella standing on his tip toes.",
    ])
    alone = _alone(got)
    assert "computer user" in alone["A computer user types one handed on a keyboard."]
    assert "computer user types" not in alone["A computer user types one handed on a keyboard."]
    assert "ball" in alone["A baseball player holding a bat as a ball approaches."]
    giraffe = "A giraffe stares into the camera while standing on green grass in front of a shade tree."
    assert "giraffe" in alone[giraffe]
    assert any([n.lower() for n in ns] == ["giraffe stares", "camera"] for ns, _, rels in got[giraffe] if rels)
    assert "tip toes" in alone["A man holding a pink umbrella standing on his tip toes."]


def test_a_share_of_the_colours_is_no_positive():
    """Blind review r21: "a blue airplane" of "a red yellow and blue airplane" (a thing of several colours is no thing
    of one: it takes them all), and "a black and white sheep" of "black and white sheep" (maybe black ones and white
    ones); one thing of two colours keeps both, and so does a plural that shows its number ("two brown and white dogs"
    says what the caption says, whichever way it is read)."""
    got = _real_candidates([
        "A red yellow and blue airplane is sitting on the runway.",
        "Black and white sheep in hay next to wooden fence.",
        "Two brown and white dogs running in a park.",
        "The black and white photo shows a truck tilting a large cargo crate.",
    ])
    plane = got["A red yellow and blue airplane is sitting on the runway."]
    assert (["airplane", "runway"], [["blue", "red", "yellow"], []], ["sitting on"]) in plane
    assert not any(attrs == [["blue"]] for _, attrs, _ in plane)
    sheep = got["Black and white sheep in hay next to wooden fence."]
    assert (["sheep", "hay"], [[], []], ["in"]) in sheep and (["sheep"], [["black", "white"]], []) not in sheep
    assert (["dogs"], [["brown", "white"]], []) in got["Two brown and white dogs running in a park."]
    photo = got["The black and white photo shows a truck tilting a large cargo crate."]
    assert any(attrs == [["black", "white"]] for _, attrs, _ in photo)


def test_a_phrase_that_may_place_another_is_no_positive():
    """A non-blind read of relation positives: "on top of" after "in an open suitcase" may place the cat, "turned"
    after "with the backs" is the backs'; "a One Way sign" keeps "one" (its name)."""
    got = _real_candidates([
        "A cat is laying in an open suitcase on top of some clothes.",
        "Two giraffes with the backs turned to the camera next to a wall.",
        "A One Way sign is located on the traffic light.",
        "a woman with a tattoo is sitting on the train tracks",
    ])
    cat = got["A cat is laying in an open suitcase on top of some clothes."]
    assert not any(ns == ["suitcase", "clothes"] for ns, _, _ in cat) and any(rels == ["laying in"] for _, _, rels in cat)
    assert not any(rels for _, _, rels in got["Two giraffes with the backs turned to the camera next to a wall."] if "turned to" in rels)
    sign = got["A One Way sign is located on the traffic light."]
    assert (["one way sign", "traffic light"], [[], []], ["located on"]) in sign
    assert any(rels == ["sitting on"] for _, _, rels in got["a woman with a tattoo is sitting on the train tracks"])


def test_a_thing_is_no_doer_of_an_act_beside_a_person():
    """Blind review r22: "A woman wearing a pink hair towel working in a factory." gave "a pink hair towel working in a
    factory": the participle is the woman's. What things do as well stays ("trees lining shore")."""
    got = _positives(["A woman wearing a pink hair towel working in a factory.",
                      "A man puckering his lips holding an orange",
                      "Large canoe with many people on lake with trees lining shore."])
    assert not [t for t in got["A woman wearing a pink hair towel working in a factory."] if "towel working" in t]
    assert not [t for t in got["A man puckering his lips holding an orange"] if "lips holding" in t]
    assert [t for t in got["Large canoe with many people on lake with trees lining shore."] if "lining" in t]


def test_a_number_that_counts_a_compounds_first_word_stays_in_the_noun():
    """Blind review: "a newly married couple standing next to a four layer wedding cake" gave "a layer wedding cake", a
    cake the caption does not name; the number counts the layers, so it stays with the compound ("an eighteen wheeler
    truck", "a four way intersection"). A number that counts the thing stays its count ("a two layer cake", "the three
    teddy bears")."""
    got = _positives(["A newly married couple standing next to a four layer wedding cake.",
                      "An eighteen wheeler truck is parked in a lot.",
                      "A two layer cake sitting on top of a table.",
                      "The three teddy bears sit with their arms around each other."])
    cake = got["A newly married couple standing next to a four layer wedding cake."]
    # (the relation, "a newly married couple" with its adverb, reads as the caption itself and is not said again)
    assert "a four layer wedding cake" in cake and not [t for t in cake if "a layer" in t]
    assert "an eighteen wheeler truck parked in a lot" in got["An eighteen wheeler truck is parked in a lot."]
    assert "a two layer cake" in got["A two layer cake sitting on top of a table."]
    assert "three teddy bears sit with their arms" in got["The three teddy bears sit with their arms around each other."]


def test_coordinated_nouns_before_a_couple_name_its_members():
    """Blind review: "a bride and groom couple cuts the wedding cake" gave "a groom couple cuts the wedding cake": spaCy
    reads "a bride" and "groom couple" apart; the couple is the bride and groom's."""
    captions = ["a bride and groom couple cuts the wedding cake", "A calculator and cell phone lay on a desk in front of a keyboard"]
    cake = _real_candidates(captions[:1])[captions[0]]
    assert (["bride and groom couple", "wedding cake"], [[], []], ["cuts"]) in cake
    assert not [ns for ns, _, _ in cake if "bride" in ns or "groom couple" in ns]
    got = _positives(captions)
    assert not [t for t in got[captions[0]] if t.startswith(("a groom", "a bride cuts"))]
    assert [t for t in got[captions[1]] if t.startswith("a calculator")]  # a list of things stays one


def test_what_a_thing_is_for_is_no_positive():
    """Blind review: "Display for bananas with a euro money sign" gave the positive "bananas": a display for bananas
    may be empty; nor are "books for young children" the children, nor "displayed for people to enjoy" the people."""
    got = _positives(["Display for bananas with a euro money sign", "A bathroom with toys and books for young children.",
                      "A variety of desserts are being displayed for people to enjoy.",
                      "A surfer is on the water and is waiting for a wave."])
    assert not [t for t in got["Display for bananas with a euro money sign"] if "bananas" in t]
    assert "young children" not in got["A bathroom with toys and books for young children."]
    assert "people" not in got["A variety of desserts are being displayed for people to enjoy."]
    assert "a surfer waiting for a wave" in got["A surfer is on the water and is waiting for a wave."]  # a verb's "for" stays


def test_the_photograph_itself_is_no_thing_in_view():
    """Blind review: "Multi-colored umbrellas in a black and white picture near the water" gave "a black and white picture
    near the water": the picture is the photograph, the umbrellas are near the water; "kids posing for a picture on a
    tennis court" is no picture on the court. A picture in the scene keeps its place ("toy animals near a picture")."""
    got = _positives(["Multi-colored umbrellas in a black and white picture near the water",
                      "A group of kids posing for a picture on a tennis court.",
                      "Some toy animals on the ground near a picture"])
    assert not [t for t in got["Multi-colored umbrellas in a black and white picture near the water"] if t.startswith("a black")]
    kids = got["A group of kids posing for a picture on a tennis court."]
    assert "a picture on a tennis court" not in kids and "a picture" not in kids and "kids posing for a picture" in kids
    assert "toy animals near a picture" in got["Some toy animals on the ground near a picture"]


def test_a_noun_that_says_what_a_thing_is_like_is_no_thing():
    """Blind review: "a rock like table with a notebook and pen on it" gave "a notebook on a rock": the thing is a table
    that looks like rock. A verb's "like" keeps its nouns ("cakes shaped like hearts")."""
    got = _positives(["a rock like table with a notebook and pen on it", "Large collection of cakes shaped like hearts on a display."])
    assert not [t for t in got["a rock like table with a notebook and pen on it"] if "rock" in t]
    assert "cakes shaped like hearts" in got["Large collection of cakes shaped like hearts on a display."]


def test_what_a_modal_says_may_be_is_no_positive():
    """Blind review: "A very clean and cozy looking kitchen that could be in a home magazine." gave "a cozy clean kitchen
    in a home magazine": "could" says it might be, not that it is ("Those zebras may have lost their parents")."""
    got = _positives(["A very clean and cozy looking kitchen that could be in a home magazine.",
                      "Those zebras may have lost their parents and they could be nearby."])
    assert not [t for t in got["A very clean and cozy looking kitchen that could be in a home magazine."] if "kitchen in" in t]
    assert "the zebras lost their parents" not in got["Those zebras may have lost their parents and they could be nearby."]


def test_one_of_two_things_between_is_no_positive():
    """"A baby sitting between a lady and a man" gave "a baby sitting between a man": "between" relates to both at
    once; a plural object ("between two dogs") is both and stays."""
    from mosaictool.stages.parse import parse

    def positives(caption):
        (rec,) = parse([{"id": 0, "caption": caption}])
        return [(sg["objects"][0]["noun"], sg["relations"][0]["relation"], sg["objects"][1]["noun"])
                for sg in candidate_subgraphs(rec["graph"], words=rec["tokens"]["words"]) if sg["relations"]]

    got = positives("A baby sitting between a lady and a man on a bench under a tree.")
    assert not [p for p in got if p[1].endswith("between")]
    assert ("person", "stands between", "dogs") in positives("A person stands between two dogs on a beach.")


def test_a_with_phrase_after_a_later_noun_of_a_list_is_not_the_first_nouns():
    """"A cup and a plate with food on it on a table next to a toilet." gave "a cup with food": the with-phrase hangs
    on the nearest noun, the plate. A with-phrase after the first noun stays ("a table with plates and a bottle")."""
    got = _positives(["A cup and a plate with food on it on a table next to a toilet.",
                      "A table with plates and a bottle on it."])
    cup = got["A cup and a plate with food on it on a table next to a toilet."]
    assert "a cup with food" not in cup and "a plate with food" in cup
    assert "a table with plates" in got["A table with plates and a bottle on it."]


def test_a_with_phrase_on_the_noun_of_a_with_phrase_is_no_positive():
    """"A street lined with cones with people up and down the sidewalk." gave "cones with people": the second with-phrase
    may be the street's as well. The first stays a positive."""
    got = _positives(["A street lined with cones with people up and down the sidewalk."])
    street = got["A street lined with cones with people up and down the sidewalk."]
    assert "cones with people" not in street and "a street lined with cones" in street


def test_a_verbs_on_again_past_its_object_is_no_positive():
    """"A woman is typing on a laptop on a wooden table." gave "a woman typing on a wooden table": the second "on"
    is the laptop's. In a place one is where what one is on is ("riding on a surf board on an ocean wave")."""
    got = _positives(["A woman is typing on a laptop on a wooden table.", "A knit item sitting on a laptop on a desk.",
                      "A young man riding on a surf board on an ocean wave."])
    assert "a woman typing on a wooden table" not in got["A woman is typing on a laptop on a wooden table."]
    assert "a knit item sitting on a desk" not in got["A knit item sitting on a laptop on a desk."]
    assert "a young man riding on an ocean wave" in got["A young man riding on a surf board on an ocean wave."]
    # but one leans on a thing beside one, not on the place under it
    lean = _positives(["A woman leaning on ski spikes on a snowy mountain."])["A woman leaning on ski spikes on a snowy mountain."]
    assert "a woman leaning on a snowy mountain" not in lean and "a woman leaning on ski spikes" in lean


def test_a_list_member_the_tagger_read_as_an_adjective_ends_it():
    """"A white plate with a donut and napkin sculpture." gave "a white plate with a donut napkin sculpture": the
    tagger read "donut" an adjective, so the list's last member was not cut out ("a beard, vest and colorful tie")."""
    got = _positives(["A white plate with a donut and napkin sculpture."])
    plate = got["A white plate with a donut and napkin sculpture."]
    assert "a white plate with a donut napkin sculpture" not in plate and "a white plate with a napkin sculpture" in plate


def test_a_noun_whose_plural_is_its_singular_is_plural_after_a_word_of_many():
    """"Several sheep standing around in the grass." gave "a sheep standing in the grass", and "business people in
    office" "a business people in an office"; the caption's own "a dog pants" stays one dog."""
    got = _positives(["Several sheep standing around in the grass.",
                      "Woman playing Nintendo Wii in font of business people in office",
                      "A dog pants next to a bowl of water on the ground"])
    assert "several sheep standing in the grass" in got["Several sheep standing around in the grass."]
    assert "business people in an office" in got["Woman playing Nintendo Wii in font of business people in office"]
    assert "a dog pants next to a bowl" in got["A dog pants next to a bowl of water on the ground"]
