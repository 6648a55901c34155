"""texts-report: per-transform figures, the "n/a" of a vocabulary without counts, the seeded stratified
review sample, the Markdown / HTML page, and bad input (one line naming file and record, nothing
written). Real texts: tests/data/decompose/real.jsonl (parsed SugarCrepe/COCO captions) and
tests/data/texts_report/real_swap.jsonl (one more, "a car in front of a train on train tracks", whose role
swap is plausible) through decompose, negate and template; tests/data/template/expected.jsonl (template
output of 16 more)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mosaictool
from mosaictool.cli import app
from mosaictool.stages.decompose import decompose
from mosaictool.stages.negate import NegateStats, negate
from mosaictool.stages.subgraph import canonical_key
from mosaictool.stages.template import template
from mosaictool.stages.texts_report import NO_COUNTS, parse_key, report, summary_markdown
from mosaictool.vocab import Vocab, load

DATA = Path(__file__).parent / "data"


class CountingVocab(Vocab):
    """A vocabulary with co-occurrence counts (the tables `vocab build` writes) and, here, only "next
    to" symmetric."""

    def is_symmetric(self, rel: str, subj: str | None = None, obj: str | None = None) -> bool:
        return rel == "next to"


def counting_vocab() -> CountingVocab:
    return CountingVocab(objects={"dog": "animal", "ball": "toy", "cat": "animal"},
                         attributes={"brown": "colour", "red": "colour", "blue": "colour"},
                         relations={"next to": "spatial", "chasing": "action", "on": "spatial"},
                         object_attributes={("dog", "brown"): 7, ("ball", "red"): 7},
                         relation_triples={("dog", "next to", "ball"): 3, ("dog", "chasing", "ball"): 3})


def record(rid, negatives, caption_key="dog[brown] >next to> ball[red]"):
    positives = [
        {"text": "A brown dog next to a red ball.", "kind": "caption", "key": caption_key},
        {"text": "a brown dog next to a red ball", "kind": "relation", "key": "dog[brown] >next to> ball[red]"},
        {"text": "a brown dog", "kind": "object", "key": "dog[brown]"},
    ]
    return {"id": rid, "caption": "A brown dog next to a red ball.", "texts": {"positives": positives, "negatives": negatives}}


SWAP = {"text": "a red ball next to a brown dog", "positive": 1, "kind": "graph", "transform": "f_rel:swap", "slot": "objects",
        "from": "dog|ball", "to": "ball|dog", "key": "ball[red] >next to> dog[brown]"}
BLUE = {"text": "a brown dog next to a blue ball", "positive": 1, "kind": "graph", "transform": "f_attr:replace",
        "slot": "objects[1].attributes[0]", "from": "red", "to": "blue", "key": "dog[brown] >next to> ball[blue]"}
ZEBRA = {"text": "a brown zebra", "positive": 2, "kind": "graph", "transform": "f_rel:replace_object", "slot": "objects[0].noun",
         "from": "dog", "to": "zebra", "key": "zebra[brown]"}
TEXT_CAT = {"text": "A brown cat next to a red ball.", "positive": 0, "kind": "text", "transform": "replace:obj", "slot": "obj",
            "from": "dog", "to": "cat", "key": None}
SHUFFLE = {"text": "next to a red A brown dog ball.", "positive": 0, "kind": "text", "transform": "shuffle:bigram", "key": None}


def test_parse_key_reads_canonical_keys():
    vocab = load()
    sg = {"objects": [{"lemma": "dog", "count": "two", "attributes": ["brown", "small"]}, {"lemma": "ball", "attributes": []}],
          "relations": [{"subject": 0, "object": 1, "relation": "next to"}]}
    assert parse_key(canonical_key(sg, vocab)) == ([("dog", ("brown", "small")), ("ball", ())], [("dog", "next to", "ball")])
    assert parse_key("star[red] & cross") == ([("star", ("red",)), ("cross", ())], [])


def test_figures_per_transform_with_counts():
    records = [record(1, [SWAP, BLUE, ZEBRA, TEXT_CAT, SHUFFLE]), record(2, [dict(BLUE), SHUFFLE]),
               record(3, [], caption_key="dog & ball"), record(4, [TEXT_CAT])]
    result = report(records, counting_vocab(), sample=5, seed=0)
    rows = {r["transform"]: r for r in result["rows"]}
    # the swap of "next to" (symmetric) is still true; "ball next to dog" is a triple the counts never saw
    assert rows["f_rel:swap"]["symmetric"] == 1.0 and rows["f_rel:swap"]["unseen"] == 1.0
    assert rows["f_attr:replace"] == {"transform": "f_attr:replace", "n": 2, "oov": 0.0, "unseen": 1.0, "symmetric": None,
                                      "object_swaps": 0}
    assert rows["f_rel:replace_object"]["oov"] == 1.0  # "zebra" is not in this vocabulary
    assert rows["replace:obj"]["oov"] == 0.0 and rows["replace:obj"]["unseen"] is None
    assert rows["shuffle:bigram"]["oov"] is None  # a shuffle brings no new word
    assert rows["positive:caption"]["n"] == 4 and rows["positive:caption"]["unseen"] == 0.0
    # records 3 and 4 have no graph negative: 3's graph has no attribute or relation, 4's has
    assert result["zero_graph_negatives"] == {"captions": 4, "had": 3, "zero_had": 1, "zero_none": 1, "parse_had": 0, "zero_parse_had": 0}
    text = summary_markdown(result)
    assert "| f_rel:swap | 1 | 0.0% | 100.0% | 100.0% |" in text
    assert "zero graph negatives: 2 of 4 (50.0%)" in text and "had none: 1 of 1 (100.0%)" in text
    assert "zebra (1)" in text


def test_without_counts_the_columns_say_so():
    import dataclasses

    bare = dataclasses.replace(load(), object_attributes={}, relation_triples={})  # the shipped tables without their counts
    result = report([record(1, [SWAP, BLUE])], bare, sample=1)
    assert result["rows"][0]["unseen"] is None and not result["has_counts"]
    text = summary_markdown(result)
    assert f"| f_rel:swap | 1 | 0.0% | {NO_COUNTS} | 100.0% |" in text  # the shipped vocabulary marks "next to" symmetric
    assert f"| f_attr:replace | 1 | 0.0% | {NO_COUNTS} | – |" in text


def test_the_shipped_vocabulary_has_counts():
    """vocab/ ships co-occurrence counts (perf/vocab_counts.py): the report gives the unseen shares, not n/a."""
    result = report([record(1, [SWAP, BLUE])], load(), sample=1)
    assert result["has_counts"] and result["rows"][0]["unseen"] is not None
    # the methods without the tables behind them (a folder without count files) are no counts either
    empty = counting_vocab()
    empty.object_attributes, empty.relation_triples = {}, {}
    assert not report([record(1, [BLUE])], empty)["has_counts"]


def test_symmetry_by_the_kinds_of_both_ends():
    """A vocabulary whose is_symmetric takes the two ends ("with" between people only) is asked with them."""

    class KindsVocab(CountingVocab):
        def is_symmetric(self, rel, subj=None, obj=None):
            return rel == "next to" and subj == "dog"

    vocab = KindsVocab(**{f: getattr(counting_vocab(), f) for f in ("objects", "attributes", "relations")})
    rows = {r["transform"]: r for r in report([record(1, [SWAP])], vocab)["rows"]}
    assert rows["f_rel:swap"]["symmetric"] == 0.0  # the swap's subject is the ball


def real_texts() -> list[dict]:
    graphs = [json.loads(line) for name in ("decompose/real.jsonl", "texts_report/real_swap.jsonl")
              for line in (DATA / name).read_text().splitlines()]
    vocab = load()
    return list(template(negate(decompose(graphs, vocab=vocab), seed=0), vocab=vocab))


def test_review_sample_is_stratified_and_seeded():
    texts = real_texts() + [json.loads(x) for x in (DATA / "template" / "expected.jsonl").read_text().splitlines()]
    first = report(texts, load(), sample=2, seed=0)
    again = report(texts, load(), sample=2, seed=0)
    other = report(texts, load(), sample=2, seed=1)
    assert first["sample"] == again["sample"] and first["sample"] != other["sample"]
    per = {}
    for item in first["sample"]:
        per[item["transform"]] = per.get(item["transform"], 0) + 1
    rows = {r["transform"]: r["n"] for r in first["rows"]}
    assert per == {t: min(2, n) for t, n in rows.items()}
    swap = next(i for i in first["sample"] if i["transform"] == "f_rel:swap")
    assert swap["caption"] and swap["text"] != swap["caption"] and swap["changed"].startswith("objects: ")
    assert swap["positive"] != swap["text"] and sorted(swap["positive"].split()) == sorted(swap["text"].split())
    # a stratum's draw depends on (seed, stratum) alone: fewer other records, same swap sample
    alone = [dict(r, texts={"positives": r["texts"]["positives"], "negatives": [
        n for n in r["texts"]["negatives"] if n["transform"] == "f_rel:swap"]}) for r in texts]
    swaps = [i for i in report(alone, load(), sample=2, seed=0)["sample"] if i["transform"] == "f_rel:swap"]
    assert swaps == [i for i in first["sample"] if i["transform"] == "f_rel:swap"]


def test_zero_graph_negatives_counted_against_the_parse_too():
    # decompose dropped the parse's relation (the caption key has none), so the kept-sub-graph base
    # does not count this caption; the parse base does, and the line says both
    relation = {"entities": [{"head": "dog", "attributes": []}, {"head": "ball", "attributes": []}],
                "relations": [{"subject": 0, "object": 1, "relation": "of"}]}
    bare = {"entities": [{"head": "dog", "attributes": []}], "relations": []}
    records = [dict(record(1, [], caption_key="dog & ball"), graph=relation), dict(record(2, [], caption_key="dog"), graph=bare),
               dict(record(3, [dict(BLUE)]), graph=relation)]
    z = report(records, counting_vocab(), sample=0, seed=0)["zero_graph_negatives"]
    assert (z["had"], z.get("zero_had", 0), z["parse_had"], z["zero_parse_had"]) == (1, 0, 2, 1)
    assert summary_markdown(report(records, counting_vocab(), sample=0, seed=0)).count(
        "of those whose parse had an attribute or relation: 1 of 2 (50.0%)") == 1


def test_negate_summary_uses_the_same_parse_base():
    stats = NegateStats()
    stats.add({"graph": {"entities": [{"head": "dog", "attributes": ["brown"]}], "relations": []}, "negatives": []})
    stats.add({"graph": {"entities": [{"head": "dog", "attributes": []}], "relations": []}, "negatives": []})
    stats.add({"graph": "not a graph", "negatives": []})
    assert stats.line().endswith("no graph negative: 3 (100.0%), 1 of them with an attribute or relation in their parse")


def test_cli_prints_the_table_and_writes_markdown_or_html(runner, tmp_path):
    texts = tmp_path / "texts.jsonl"
    mosaictool.write(real_texts(), texts)
    result = runner.invoke(app, ["texts-report", str(texts), "--sample", "3", "-o", str(tmp_path / "r.md")])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("| transform | texts | out-of-vocabulary |") and "| positive:relation |" in result.stdout
    # "The bathroom door is open with the light on." is parsed with no relation or attribute: no graph negative;
    # "An beautifully designed clock tower" has one, but negate leaves its unknown attribute alone;
    # "An image of a clock on a building." has one relation, but it may hang off the clock (decompose drops it)
    assert "zero graph negatives: 3 of 12 (25.0%); of those whose kept graph had an attribute or relation: 2 of 11" in result.stdout
    page = (tmp_path / "r.md").read_text()
    assert page.startswith(f"# Texts report: {texts}") and "### f_rel:swap (" in page
    assert "| id | caption | positive it changed | text |" in page
    result = runner.invoke(app, ["texts-report", str(texts), "-o", str(tmp_path / "r.html"), "--seed", "3"])
    assert result.exit_code == 0
    html = (tmp_path / "r.html").read_text()
    assert html.startswith("<!doctype html>") and "<h3>f_rel:swap (" in html
    api = mosaictool.texts_report(texts, sample=3)
    assert api.summary_text() == runner.invoke(app, ["texts-report", str(texts)]).stdout


@pytest.mark.parametrize("line, message", [
    ('{"id": 2, "caption": "no texts"}', "missing 'texts' (run `mosaictool template` first)"),
    ('{"id": 2, "texts": {"positives": [{"kind": "caption"}]}}', "texts.positives[0]"),
    ('{"id": 2, "texts": ', ""),
])
def test_bad_input_is_one_line_and_writes_nothing(runner, tmp_path, line, message):
    bad = tmp_path / "bad.jsonl"
    good = json.dumps(record(1, [SWAP]))
    bad.write_text(good + "\n" + line + "\n")
    out = tmp_path / "r.md"
    result = runner.invoke(app, ["texts-report", str(bad), "-o", str(out)])
    assert result.exit_code == 1 and not out.exists()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {bad}:2: ") and message in lines[0]
    result = runner.invoke(app, ["texts-report", str(bad), "--skip-bad"])
    assert result.exit_code == 0 and "skipped 1 bad record" in result.stderr


def test_bad_flags(runner, tmp_path):
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps(record(1, [SWAP])) + "\n")
    for args, message in [(["-o", str(tmp_path / "r.json")], "the page is Markdown (.md) or HTML (.html)"),
                          (["-o", str(tmp_path)], "is a directory"), (["--sample", "-1"], "--sample must be at least 0")]:
        result = runner.invoke(app, ["texts-report", str(texts), *args])
        assert result.exit_code == 1 and message in result.stderr, result.stderr


def test_reservoir_is_uniform_and_keeps_input_order():
    from mosaictool.stages.texts_report import Reservoir

    hits = [0] * 10
    for seed in range(3000):
        reservoir = Reservoir(3, seed, "f_obj")
        for i in range(10):
            reservoir.add({"i": i})
        kept = [item["i"] for item in reservoir.items()]
        assert len(kept) == 3 and kept == sorted(kept) and reservoir.items()[0]["of"] == 10
        for i in kept:
            hits[i] += 1
    assert all(abs(h / 3000 - 0.3) < 0.04 for h in hits), hits
