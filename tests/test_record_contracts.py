"""The record contracts (mosaictool.records): every field decompose, negate and template read, given a
value of the wrong type, is refused with one line naming file:line and the field, or skipped with
--skip-bad; never a traceback, never a silent accept. Unknown keys pass through untouched."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers import CAP, GRAPH, invoke, jsonl
from helpers import refused as assert_refused
from mosaictool import records
from mosaictool.cli import app
from mosaictool.errors import RecordError

DATA = Path(__file__).parent / "data"
runner = CliRunner()


def first_record(stage: str) -> dict:
    return json.loads((DATA / stage / "input.jsonl").read_text().splitlines()[0])


DECOMPOSE, NEGATE, TEMPLATE = first_record("decompose"), first_record("negate"), first_record("template")
TEXT_NEGATIVE = next(i for i, n in enumerate(TEMPLATE["negatives"]) if n["kind"] == "text")
GRAPH_NEGATIVE = next(i for i, n in enumerate(TEMPLATE["negatives"]) if n["kind"] == "graph")
RELATION = next(i for i, s in enumerate(NEGATE["subgraphs"]) if s["kind"] == "relation")
assert TEMPLATE["negatives"][GRAPH_NEGATIVE]["graph"]["objects"], "the fixture's graph negative has objects"

# Wrong values per declared type: each is a type error the stage would otherwise have iterated,
# indexed or compared (a string where a list belongs is iterated as characters).
LIST_OF_STR = ["red", {"a": "b"}, 7, [3]]
STR = [7, ["a"], {"a": 1}, True]
OPT_STR = [7, ["a"], False]
INDEX = ["0", 1.5, True, -1, 99]
BOOL = ["true", 1, None]
OBJECT = ["x", [], 3]
LIST_OF_OBJECT = ["x", {"a": 1}, [5]]

ENTITY = ("graph", "entities", 0)
GRAPH_REL = ("graph", "relations", 0)
NODE = ("subgraphs", RELATION, "objects", 0)
SUB_REL = ("subgraphs", RELATION, "relations", 0)
NEG = ("negatives", GRAPH_NEGATIVE)
TNEG = ("negatives", TEXT_NEGATIVE)

FIELDS = {
    "decompose": [
        (("graph",), OBJECT), (("graph", "entities"), LIST_OF_OBJECT), (ENTITY, ["dog", 4]),
        ((*ENTITY, "head"), STR), ((*ENTITY, "lemma_head"), OPT_STR), ((*ENTITY, "span"), OPT_STR),
        ((*ENTITY, "modifiers"), LIST_OF_OBJECT), ((*ENTITY, "modifiers", 0, "dep"), OPT_STR),
        ((*ENTITY, "modifiers", 0, "span"), [5]), ((*ENTITY, "attributes"), LIST_OF_STR),
        (("graph", "relations"), LIST_OF_OBJECT), ((*GRAPH_REL, "subject"), INDEX), ((*GRAPH_REL, "object"), ["1", None]),
        ((*GRAPH_REL, "relation"), STR), (("caption",), [None, 5, ["a", "dog"]]),
    ],
    "negate": [
        (("subgraphs",), ["x", {"a": 1}, None]), (("subgraphs", RELATION), ["x", 1]), ((*NODE[:3],), LIST_OF_OBJECT),
        ((*NODE, "noun"), STR), ((*NODE, "lemma"), STR), ((*NODE, "plural"), BOOL), ((*NODE, "count"), [True, ["two"]]),
        ((*NODE, "attributes"), LIST_OF_STR), ((*NODE, "determiner"), OPT_STR), ((*SUB_REL, "subject"), INDEX),
        ((*SUB_REL, "relation"), STR), (("subgraphs", RELATION, "kind"), [3]), (("subgraphs", 0, "text"), [None, 3]),
        (("subgraph_keys",), ["a key", [1]]), ((*ENTITY, "attributes"), ["red"]),
    ],
    "template": [
        (("subgraphs", RELATION, "objects", 0, "noun"), [None, 3]),
        (("subgraphs", RELATION, "objects", 0, "attributes"), ["red"]),
        (("negatives",), ["x", {"a": 1}]), (NEG, ["x", 1]), ((*NEG, "kind"), ["image", None, 1]),
        ((*NEG, "subgraph"), INDEX), ((*NEG, "graph"), ["x", None, []]), ((*NEG, "graph", "objects"), ["x", [1]]),
        ((*NEG, "graph", "objects", 0, "attributes"), LIST_OF_STR), ((*NEG, "graph", "objects", 0, "plural"), ["yes"]),
        ((*NEG, "graph", "relations"), ["x"]), ((*TNEG, "text"), [None, ["a"]]),
        ((*NEG, "category"), [1]), ((*NEG, "transform"), [["f_obj"]]), ((*NEG, "from"), [3]), ((*NEG, "to"), [{"a": 1}]),
        ((*NEG, "key"), [1]), ((*ENTITY, "head"), [None]),
    ],
}
BASE = {"decompose": DECOMPOSE, "negate": NEGATE, "template": TEMPLATE}
CASES = [(stage, path, value) for stage, fields in FIELDS.items() for path, values in fields for value in values]


def field_path(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def mutated(record: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(record)
    out["id"] = "bad"
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return out


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_table_is_large_enough():
    assert len(CASES) >= 48 and {s for s, _, _ in CASES} == {"decompose", "negate", "template"}


@pytest.mark.parametrize("stage, path, value", CASES, ids=[f"{s}-{field_path(p)}={json.dumps(v)}" for s, p, v in CASES])
def test_wrong_type_is_refused_or_skipped(tmp_path, stage, path, value):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(BASE[stage]) + "\n" + json.dumps(mutated(BASE[stage], path, value)) + "\n")
    before = digest(src)
    out = tmp_path / "out.jsonl"

    refused = runner.invoke(app, [stage, str(src), "-o", str(out), "-q"])
    assert refused.exit_code == 1, (refused.exit_code, refused.stderr, repr(refused.exception))
    assert "Traceback" not in refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith(f"Error: {src}:2: ") and field_path(path) in lines[0], lines[0]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]

    skipped = runner.invoke(app, [stage, str(src), "-o", str(out), "-q", "--skip-bad"])
    assert skipped.exit_code == 0, skipped.stderr
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == [BASE[stage]["id"]]
    assert "skipped 1 bad record(s)" in skipped.stderr
    assert f"{src}:2: {field_path(path)}" in skipped.stderr.replace("missing '", "")
    assert digest(src) == before


def test_unknown_keys_pass_through_untouched(tmp_path):
    record = copy.deepcopy(DECOMPOSE)
    record["extra"] = {"nested": [1, "two", None]}
    record["graph"]["entities"][0]["extra"] = "kept"
    record["graph"]["relations"][0]["weight"] = 0.5
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(record) + "\n")
    result = runner.invoke(app, ["decompose", str(src), "-q"])
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["extra"] == record["extra"] and out["graph"] == record["graph"]


def test_messages_name_the_type_in_words():
    def message(contract, record) -> str:
        with pytest.raises(RecordError) as e:
            records.check(contract, record)
        return str(e.value)

    graph = {"entities": [{"head": "cup", "attributes": "red"}], "relations": []}
    assert message(records.DecomposeRecord, {"graph": graph}) == \
        "graph.entities[0].attributes: expected a list of strings or null, got str"
    assert message(records.DecomposeRecord, {"id": 1}) == "missing 'graph' (run `mosaictool parse` first)"
    assert message(records.TrainRecord, {"id": 1, "hard_images": [1.5]}) == \
        "hard_images[0]: expected a string or an integer, got float"
    assert message(records.TemplateRecord, {"subgraphs": [], "negatives": [{"kind": "image"}]}) == \
        "negatives[0].kind: expected one of 'graph', 'text', got 'image'"
    assert message(records.train_record("image"), {"id": 1, "image": ""}) == \
        "image: expected a non-empty string, got '' (a path relative to --image-root)"
    rel = {"entities": [{"head": "cup"}], "relations": [{"subject": 0, "object": 1, "relation": "on"}]}
    assert message(records.GraphRecord, {"graph": rel}) == \
        "graph.relations[0].object: 1 is not an index into the graph's 1 entities"


def test_strict_types_refuse_what_lax_parsing_would_convert():
    node = {"noun": "cup", "lemma": "cup", "plural": False, "attributes": []}
    sub = {"objects": [node], "relations": []}
    records.check(records.NegateRecord, {"subgraphs": [sub]})
    for field, value in (("plural", 0), ("plural", "false"), ("noun", b"cup"), ("attributes", ("red",))):
        with pytest.raises(RecordError):
            records.check(records.NegateRecord, {"subgraphs": [{**sub, "objects": [{**node, field: value}]}]})


# --- bad input (moved from test_bad_input.py) ---

@pytest.mark.parametrize(
    "stage, record, message, fix",
    [
        ("decompose", {"id": 2, "caption": CAP}, "missing 'graph'", "mosaictool parse"),
        ("decompose", {"id": 2, "caption": CAP, "graph": {"entities": [], "relations": [
            {"subject": 5, "object": 9, "relation": "on"}]}}, "graph.relations[0].subject: 5 is not an index", "--skip-bad"),
        ("negate", {"id": 2, "caption": CAP, "graph": GRAPH}, "missing 'subgraphs'", "mosaictool decompose"),
        ("template", {"id": 2, "caption": CAP, "graph": GRAPH, "subgraphs": [], "negatives": [{"text": 5}]},
         "missing 'negatives[0].kind'", "--skip-bad"),
    ],
    ids=["decompose-no-graph", "decompose-bad-relation", "negate-no-subgraphs", "template-bad-negative"],
)
def test_stage_input_of_the_wrong_shape(case, stage, record, message, fix):
    first = {"id": 1, "caption": "a dog", "graph": GRAPH}
    if stage != "decompose":  # a record the stage accepts, so that the bad one is line 2
        first = json.loads(invoke(["decompose", "-q"], input=jsonl(first)).stdout)
    src = case.file("in.jsonl", jsonl(first, record))
    case.freeze()
    assert_refused(invoke([stage, src, "-o", case.dst / "out.jsonl", "-q"]), f"{src}:2:", message, fix)
    case.untouched()

