"""The world audit (mosaictool.world.audit, `mosaictool world audit`): descriptions checked against
hand-made scenes, each count of the audit on hand-made records, and the CLI on a small world's texts
(graphs from the world's own mentions, so no spaCy)."""

from __future__ import annotations

import json
import random

import pytest

from helpers import invoke, refused
from mosaictool.cli import app
from mosaictool.io import read_records, write_records
from mosaictool.world.audit import _Debris, audit, audit_markdown, caption_mentions, describe, is_said, is_true, said_scene
from mosaictool.world.scene import make_scene


def obj(shape, colour, cell, size="big", texture="solid"):
    return {"shape": shape, "colour": colour, "size": size, "texture": texture, "cell": list(cell), "bbox": [0, 0, 1, 1]}


# a red circle top left, a blue square top right (same row: only x relations), a green star below the circle
SCENE = make_scene([obj("circle", "red", (0, 0)), obj("square", "blue", (0, 2), size="small", texture="striped"),
                    obj("star", "green", (2, 0), texture="dotted")], 64)


def node(lemma, *attributes, count=None, plural=False):
    return {"lemma": lemma, "noun": lemma, "attributes": list(attributes), "count": count, "plural": plural}


def graph(*objects, relations=()):
    return {"objects": list(objects), "relations": [{"subject": s, "relation": r, "object": o} for s, r, o in relations]}


def true(*objects, relations=(), scene=SCENE):
    return is_true(describe(graph(*objects, relations=relations)), scene)


def test_is_true_attributes_synonyms_and_hypernyms():
    assert true(node("circle", "red")) and not true(node("circle", "blue"))
    assert true(node("disc", "red", "large", "plain"))  # the world's synonyms
    assert true(node("box", "little", "stripy")) and not true(node("box", "big"))
    assert true(node("shape", "green")) and true(node("object", "dotted"))  # hypernyms: any shape
    assert not true(node("rhombus"))
    assert describe(graph(node("star", "red", "blue"))) is None and not true(node("star", "red", "blue"))


def test_is_true_relations_on_both_axes():
    circle, square, star = node("circle"), node("square", "blue"), node("star")
    assert true(circle, square, relations=[(0, "to the left of", 1)])
    assert true(circle, square, relations=[(0, "left of", 1)]) and true(square, circle, relations=[(0, "on the right of", 1)])
    assert not true(circle, square, relations=[(0, "to the right of", 1)])
    assert not true(circle, square, relations=[(0, "above", 1)]) and not true(circle, square,
                                                                              relations=[(0, "below", 1)])  # one row
    assert true(circle, star, relations=[(0, "above", 1)]) and true(circle, star, relations=[(0, "over", 1)])
    assert true(star, circle, relations=[(0, "sits under", 1)]) and not true(circle, star, relations=[(0, "below", 1)])
    assert true(square, star, relations=[(0, "above", 1)]) and true(square, star, relations=[(0, "to the right of", 1)])


def test_is_true_counts():
    assert true(node("shape", count="three", plural=True)) and not true(node("shape", count="two", plural=True))
    assert true(node("shape", count="3", plural=True))
    assert true(node("circle", count="one")) and not true(node("circle", plural=True))  # a plural: at least two
    assert true(node("shape", plural=True)) and true(node("shape", "big", count="two", plural=True))


def test_words_the_world_has_no_meaning_for_are_debris():
    for bad in (graph(node("right")), graph(node("orange cross")), graph(node("star", "square")),
                graph(node("star"), node("cross"), relations=[(0, "of", 1)])):
        with pytest.raises(_Debris):
            describe(bad)


# ---- the audit's counts on hand-made records ----------------------------------------------------


def record(rid, scene, positives=(), negatives=(), keys=(), mentions=None, caption="c"):
    """A texts record: positives are (graph, key), negatives (transform, graph, key)."""
    rec = {
        "id": rid, "image": f"{rid}.png", "caption": caption, "scene": scene, "subgraph_keys": list(keys),
        "subgraphs": [{"kind": "object", **g} for g, _ in positives],
        "negatives": [{"kind": "graph", "transform": t, "slot": None, "from": None, "to": str(k), "graph": g}
                      for k, (t, g, _) in enumerate(negatives)],
        "texts": {
            "positives": [{"kind": "object", "subgraph": i, "key": key} for i, (_, key) in enumerate(positives)],
            "negatives": [{"kind": "graph", "transform": t, "slot": None, "from": None, "to": str(k), "key": key}
                          for k, (t, _, key) in enumerate(negatives)]
                         + [{"kind": "text", "transform": "negclip:ADJ", "key": None}],
        },
    }
    if mentions is not None:
        rec["mentions"] = mentions
    return rec


def test_negatives_true_of_their_own_image_and_false_positives_are_counted():
    rec = record("a", SCENE,
                 positives=[(graph(node("circle", "red")), "circle[red]"), (graph(node("circle", "blue")), "circle[blue]")],
                 negatives=[("f_obj", graph(node("square", "blue")), "square[blue]"),  # true: a wrong negative
                            ("f_obj", graph(node("square", "red")), "square[red]"),
                            ("f_rel:replace_relation", graph(node("circle"), node("star"), relations=[(0, "above", 1)]), None),
                            ("f_rel:replace_relation", graph(node("circle"), node("star"), relations=[(0, "below", 1)]), None)])
    result = audit([rec], batches=0)
    own = result["own"]
    assert own["positive:object"]["checked"] == 2 and own["positive:object"]["wrong"] == 1  # "a blue circle" is false
    assert own["f_obj"]["wrong"] == 1 and own["f_rel:replace_relation"]["wrong"] == 1
    assert own["negclip:ADJ"] == {"n": 1, "graph": 0, "debris": 0, "checked": 0, "wrong": 0, "said": 0}
    summary = result["summary"]
    assert summary["negatives_true"] == 0.5 and summary["positives_false"] == 0.5 and summary["text_negatives_unchecked"] == 1
    table = audit_markdown(result)
    assert "| f_obj | 2 | 0.0% | 50.0% |" in table and "| positive:object | 2 | 0.0% | 50.0% | – |" in table


def test_debris_is_counted_not_checked():
    rec = record("a", SCENE, negatives=[("f_rel:join", graph(node("circle"), node("right"), relations=[(0, "of", 1)]), None),
                                        ("f_obj", graph(node("circle", "blue")), None)])
    result = audit([rec], batches=0)
    assert result["own"]["f_rel:join"] == {"n": 1, "graph": 1, "debris": 1, "checked": 0, "wrong": 0, "said": 0}
    assert result["summary"]["negatives_debris"] == 0.5 and result["summary"]["negatives_true"] == 0.0


def test_true_negatives_split_into_said_by_the_caption_and_never_mentioned():
    mentions = {"mentions": [{"object": 0, "noun": "disc", "attributes": ["red"], "count": None},
                             {"object": 2, "noun": "star", "attributes": [], "count": None}],
                "relations": [{"subject": 0, "object": 1, "relation": "above", "text": "over"}]}
    said = said_scene(mentions)
    assert said["objects"][0] == {"shape": "circle", "colour": "red", "size": None, "texture": None}
    assert {"subject": 1, "relation": "below", "object": 0} in said["relations"]
    rec = record("a", SCENE, mentions=mentions, negatives=[
        ("f_obj", graph(node("shape", "red")), None),  # the caption says it ("a red disc")
        ("f_obj", graph(node("square", "blue")), None),  # true, but the caption never mentions the square
        ("f_obj", graph(node("star", "dotted")), None),  # true; the caption never says the star is dotted
    ])
    row = audit([rec], batches=0)["own"]["f_obj"]
    assert row["wrong"] == 3 and row["said"] == 1
    # true of the two objects the caption names, but it never says there are only two
    two = describe(graph(node("shape", count="two", plural=True)))
    assert is_true(two, said) and not is_said(two, said)


def test_a_plain_caption_is_audited_with_its_own_mentions():
    mentions = {"mentions": [{"object": 0, "noun": "disc", "attributes": ["little"], "count": None},
                             {"object": 2, "noun": "star", "attributes": [], "count": None},
                             {"object": 1, "noun": "box", "attributes": ["blue"], "count": None}],
                "relations": [{"subject": 0, "object": 1, "relation": "above", "text": "over"}]}
    rec = {"caption": "a red circle above a green star", "plain_caption": "a red circle above a green star",
           "mentions": mentions, "scene": SCENE}
    plain = caption_mentions(rec)
    assert [(m["noun"], m["attributes"]) for m in plain["mentions"]] == [("circle", ["red"]), ("star", ["green"])]
    assert caption_mentions({**rec, "caption": "a little disc over a star. a blue box"}) is mentions


def test_cross_image_truths_are_counted_and_caught_by_subgraph_keys():
    other = make_scene([obj("circle", "red", (1, 1))], 64)
    a = record("a", SCENE, positives=[(graph(node("square", "blue")), "square[blue]")], keys=["circle[red]", "circle"])
    b = record("b", other, positives=[(graph(node("circle", "red")), "circle[red]")],
               negatives=[("f_obj", graph(node("star", "green")), "star[green]")], keys=["circle[red]"])
    result = audit([a, b], batch_size=2, batches=3, seed=0)
    cross = result["cross"]
    # each batch: b's two texts against a (both true, the positive's key is in a's keys), a's one against b (false)
    assert cross["positive:object"] == {"pairs": 6, "true": 3, "caught": 3}
    assert cross["f_obj"] == {"pairs": 3, "true": 3, "caught": 0}
    assert audit([a, b], batch_size=2, batches=3, seed=0) == result
    # the same picture under another caption is no other image
    same = audit([a, {**b, "scene": SCENE, "image": a["image"]}], batch_size=2, batches=3)
    assert same["cross"] == {}


# ---- the CLI on a small world's texts --------------------------------------------------------


def parsed_graph(mentions: dict) -> dict:
    """The `parse` graph a perfect parser would return for a world caption (its `mentions`)."""
    entities = []
    for m in mentions["mentions"]:
        count = m.get("count")
        plural = count is not None and count != 1
        from mosaictool.world.vocab import NUMBERS, SHAPE_PLURALS

        head = SHAPE_PLURALS[m["noun"]] if plural else m["noun"]
        modifiers = [{"dep": "nummod", "span": NUMBERS[count]}] if count is not None else [{"dep": "det", "span": "a"}]
        entities.append({"span": head, "head": head, "lemma_head": m["noun"], "attributes": list(m["attributes"]),
                         "modifiers": modifiers})
    relations = [{"subject": r["subject"], "object": r["object"], "relation": r["text"]} for r in mentions["relations"]]
    return {"entities": entities, "relations": relations}


@pytest.fixture(scope="module")
def world_texts(tmp_path_factory):
    """~40 world scenes with captions, through decompose -> negate -> template with the world's vocabulary."""
    from mosaictool.stages.decompose import decompose
    from mosaictool.stages.negate import negate
    from mosaictool.stages.template import template
    from mosaictool.stages.vocab_tools import build_from_graphs
    from mosaictool.vocab import save
    from mosaictool.world.captions import plain_caption, plan_caption, render_caption
    from mosaictool.world.scene import sample_scene
    from mosaictool.world.vocab import base_vocab

    root = tmp_path_factory.mktemp("audit")
    rng = random.Random(0)
    records = []
    for i in range(40):
        scene = sample_scene(rng, rng.choice((2, 3, 4)), 64, train=True)
        caption, mentions = render_caption(plan_caption(rng, scene), scene, rng)
        records.append({"id": f"s{i}", "image": f"images/{i}.png", "caption": caption, "scene": scene, "mentions": mentions,
                        "plain_caption": plain_caption(mentions, scene), "graph": parsed_graph(mentions)})
    vocab = build_from_graphs(records, min_count=1, base=base_vocab())
    save(vocab, root / "vocab")
    texts = list(template(negate(decompose(records, vocab=vocab), vocab=str(root / "vocab"), max_negatives=6), vocab=vocab))
    write_records(root / "texts.jsonl", texts)
    (root / "world" / "train").mkdir(parents=True)
    write_records(root / "world" / "train" / "captions.jsonl",
                  [{k: r[k] for k in ("id", "image", "caption", "scene", "mentions", "plain_caption")} for r in records])
    return root


def test_cli_prints_the_table_and_writes_json(runner, world_texts):
    out = world_texts / "audit.json"
    result = runner.invoke(app, ["world", "audit", str(world_texts / "texts.jsonl"), "--batch-size", "8", "--batches", "5",
                                 "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "| texts | n | debris |" in result.stdout and "| f_rel:swap |" in result.stdout
    saved = json.loads(out.read_text())
    assert saved["records"] == 40 and saved["batch_size"] == 8 and saved["batches"] == 5
    assert saved["summary"]["positives_false"] == 0.0 and saved["summary"]["negatives_debris"] == 0.0
    assert saved["own"]["positive:caption"]["checked"] == 40
    assert sum(r["checked"] for g, r in saved["own"].items() if not g.startswith("positive:")) > 100
    assert saved == audit(read_records(str(world_texts / "texts.jsonl")), batch_size=8, batches=5)


def test_cli_fills_scenes_from_world_and_names_the_flag_for_non_world_input(runner, world_texts):
    bare = world_texts / "bare.jsonl"
    write_records(bare, [{k: v for k, v in r.items() if k not in ("scene", "mentions", "plain_caption")}
                         for r in read_records(str(world_texts / "texts.jsonl"))])
    result = runner.invoke(app, ["world", "audit", str(bare), "--batches", "0"])
    assert result.exit_code == 1 and str(bare) in result.stderr and "--world" in result.stderr
    with_world = runner.invoke(app, ["world", "audit", str(bare), "--world", str(world_texts / "world"), "--batches", "0"])
    assert with_world.exit_code == 0, with_world.output
    plain = runner.invoke(app, ["world", "audit", str(world_texts / "texts.jsonl"), "--batches", "0"])
    assert with_world.stdout == plain.stdout
    missing = runner.invoke(app, ["world", "audit", str(bare), "--world", str(world_texts)])
    assert missing.exit_code == 1 and "--world" in missing.stderr
    no_texts = world_texts / "captions.jsonl"
    write_records(no_texts, [{"id": "x", "caption": "a red star"}])
    result = runner.invoke(app, ["world", "audit", str(no_texts)])
    assert result.exit_code == 1 and "template" in result.stderr and str(no_texts) in result.stderr
    bad = runner.invoke(app, ["world", "audit", str(bare), "--batch-size", "1"])
    assert bad.exit_code == 1 and "--batch-size" in bad.stderr


# ---- a noisy world: the texts split by the caption they come from ---------------------------


def world_audit(root, caption_noise: float) -> dict:
    """A 150-scene world's captions (and, as the demo trains on, its plain captions) through decompose
    -> negate -> template with a perfect parser (the mentions of the caption as written), audited."""
    from mosaictool.stages.decompose import decompose
    from mosaictool.stages.negate import negate
    from mosaictool.stages.template import template
    from mosaictool.stages.vocab_tools import build_from_graphs
    from mosaictool.vocab import save
    from mosaictool.world import generate_world
    from mosaictool.world.vocab import base_vocab

    world = root / f"world-{caption_noise}"
    generate_world(world, seed=0, train=150, eval_scale=0.01, caption_noise=caption_noise)
    records = []
    for rec in read_records(str(world / "train" / "captions.jsonl")):
        records.append({**rec, "graph": parsed_graph(rec["mentions"])})
        plain = caption_mentions({**rec, "caption": rec["plain_caption"]})
        records.append({**rec, "id": f"{rec['id']}-plain", "caption": rec["plain_caption"], "graph": parsed_graph(plain)})
    vocab = build_from_graphs(records, min_count=1, base=base_vocab())
    save(vocab, root / f"vocab-{caption_noise}")
    texts = template(negate(decompose(records, vocab=vocab), vocab=str(root / f"vocab-{caption_noise}"), max_negatives=6),
                     vocab=vocab)
    return audit(texts, batches=0)


def noisy_records(world) -> int:
    return sum(bool(r["noise"]) for r in read_records(str(world / "train" / "captions.jsonl")))


def test_noisy_captions_make_false_subgraph_positives_by_kind(tmp_path):
    clean, noisy = world_audit(tmp_path, 0.0), world_audit(tmp_path, 0.5)
    assert "noise" not in clean and clean["summary"]["positives_false"] == 0.0  # a clean world audits as before
    assert noisy["summary"]["positives_false"] > clean["summary"]["positives_false"]
    rows = noisy["noise"]
    # every text made from a plain caption (the demo's second caption, and a varied one that reads the same) or a clean
    # one is clean
    assert rows["plain"]["records"] + rows["clean"]["records"] + rows["noisy"]["records"] == 300
    assert rows["noisy"]["records"] == noisy_records(tmp_path / "world-0.5") > 0
    for group in ("plain", "clean", "dropped_mention", "unrelated_words"):  # true words: no false positive
        assert rows[group]["subgraph_checked"] > 0 and rows[group]["subgraph_false"] == 0, group
    wrong = rows["wrong_attribute"]
    assert wrong["caption_false"] == wrong["caption_checked"] > 0  # the caption says what the image does not show
    assert wrong["subgraph_false"] > 0 and rows["noisy"]["subgraph_false"] >= wrong["subgraph_false"]
    assert sum(rows[g]["records"] for g in rows if g not in ("plain", "clean", "noisy")) == rows["noisy"]["records"]
    markdown = audit_markdown(noisy)
    assert "| wrong_attribute |" in markdown and "sub-graph positives" in markdown and "| caption |" not in audit_markdown(clean)


# --- bad input (moved from test_bad_values.py) ---

def test_world_audit_checks_the_texts_it_reads(tmp_path):
    src = tmp_path / "texts.jsonl"
    src.write_text('{"id": 1, "caption": "a", "texts": {"positives": "a red cube"}}\n')
    refused(invoke(["world", "audit", src]), f"{src}:1: texts.positives: expected a list of objects or null, got str")

