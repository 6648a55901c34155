"""The shipped vocabulary, its loader, and `mosaictool vocab show / build / import-vg`."""

import json
import os
import random
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers import CAP, GRAPH, invoke, jsonl, refused_leaving_files
from helpers import refused as assert_refused
from mosaictool.cli import app
from mosaictool.errors import MosaicError
from mosaictool.stages.vocab_tools import build_from_graphs, import_vg, iter_json_array
from mosaictool.vocab import DEFAULT_DIR, Vocab, load, save

runner = CliRunner()


def test_default_vocabulary_meets_its_sizes():
    v = load()
    assert len(v.objects) >= 1000
    assert len(v.attributes) >= 300
    assert len(v.relations) >= 50
    assert len(v.antonym_pairs) >= 50
    assert {"colour", "size", "material", "shape", "texture", "state"} <= set(v.attributes_by_category)
    assert {"spatial", "motion", "pose", "handling"} <= set(v.relations_by_type)
    # the synthetic world's shapes and attributes
    for shape in ("circle", "square", "triangle", "star", "heart", "ring", "cross", "diamond"):
        assert v.group(shape) == "shape", shape
    assert v.category("red") == "colour" and v.category("wooden") == "material" and v.category("small") == "size"
    assert v.category("striped") == "pattern" and v.category("fluffy") == "texture"
    assert v.relation_type("to the left of") == "spatial" and v.relation_type("riding") == "motion"


def test_every_antonym_is_in_the_vocabulary_and_symmetric():
    v = load()
    names = set(v.objects) | set(v.attributes) | set(v.relations)
    for a, b in v.antonym_pairs:
        assert a in names and b in names
        assert b in v.antonyms[a] and a in v.antonyms[b]
    assert "big" in v.antonyms["small"] and "below" in v.antonyms["above"]


@pytest.mark.parametrize(
    "noun, plural",
    [("dog", "dogs"), ("bus", "buses"), ("berry", "berries"), ("key", "keys"), ("man", "men"),
     ("hot dog", "hot dogs"), ("police officer", "police officers"), ("sheep", "sheep"),
     ("leaf", "leaves"), ("glasses", "glasses"), ("box", "boxes")],
)
def test_plural(noun, plural):
    assert load().plural(noun) == plural


def test_save_and_load_round_trip(tmp_path):
    v = Vocab(
        objects={"dog": "mammal", "cat": "mammal"}, attributes={"red": "colour"}, relations={"on": "spatial"},
        antonym_pairs=[("on", "under")], plurals={"mouse": "mice"}, counts={"objects": {"dog": 3, "cat": 5}},
    )
    save(v, tmp_path / "v")
    back = load(tmp_path / "v")
    assert back.objects == v.objects and back.attributes == v.attributes and back.relations == v.relations
    assert back.counts["objects"] == {"dog": 3, "cat": 5}
    assert back.plural("mouse") == "mice"
    assert (tmp_path / "v" / "objects.tsv").read_text().splitlines()[:2] == ["name\tgroup\tcount", "cat\tmammal\t5"]


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(MosaicError, match="no such vocabulary folder"):
        load(tmp_path / "nope")
    (tmp_path / "objects.tsv").write_text("noun\tgroup\ndog\tmammal\n")
    with pytest.raises(MosaicError, match="objects.tsv: the first line must be the header"):
        load(tmp_path)


def _graph_record(i, heads, attributes=(), relations=()):
    entities = [{"head": h, "lemma_head": h, "attributes": list(attributes), "modifiers": []} for h in heads]
    return {"id": i, "graph": {"entities": entities,
                               "relations": [{"subject": 0, "object": 1, "relation": r} for r in relations]}}


def test_build_keeps_names_seen_min_count_times():
    records = [_graph_record(i, ["dog", "frisbee"], ["red"], ["catching"]) for i in range(3)]
    records.append(_graph_record(9, ["zorblax", "dog"], ["blue"]))
    v = build_from_graphs(records, min_count=3)  # blue: 2 (both entities of one record)
    assert v.objects == {"dog": "mammal", "frisbee": "sports"}
    assert v.attributes == {"red": "colour"}
    assert v.relations == {"catching": "handling"}
    assert v.counts["objects"]["dog"] == 4


def _write_vg(folder, n_images=40):
    objects = [{"image_id": i, "objects": [{"object_id": 1, "names": ["Tree"]}, {"object_id": 2, "names": ["man"]}]}
               for i in range(n_images)]
    objects.append({"image_id": 99, "objects": [{"object_id": 3, "names": ["rare thing"]}]})
    attributes = [{"image_id": i, "attributes": [{"object_id": 1, "names": ["tree"], "attributes": ["green ", "tall"]}]}
                  for i in range(n_images)]
    relationships = [{"image_id": i, "relationships": [
        {"predicate": "ON", "subject": {"name": "man"}, "object": {"names": ["tree"]}},
        {"predicate": "next to", "subject": {"name": "man"}, "object": {"name": "tree"}}]} for i in range(n_images)]
    folder.mkdir(exist_ok=True)
    for name, data in (("objects", objects), ("attributes", attributes), ("relationships", relationships)):
        (folder / f"{name}.json").write_text(json.dumps(data, indent=1))


def test_import_vg_counts_instances(tmp_path):
    _write_vg(tmp_path / "vg")
    v = import_vg(tmp_path / "vg", min_count=30, top_relations=1)
    assert v.objects == {"man": "person", "tree": "plant"}
    assert v.attributes == {"green": "colour", "tall": "size"}
    assert len(v.relations) == 1 and set(v.relations) <= {"on", "next to"}
    assert v.counts["objects"]["tree"] == 40


def test_iter_json_array_streams_across_chunks(tmp_path):
    data = [{"k": "x" * (i % 7), "i": i} for i in range(200)]
    (tmp_path / "a.json").write_text(json.dumps(data))
    assert list(iter_json_array(tmp_path / "a.json", chunk_chars=13)) == data
    (tmp_path / "b.json").write_text(json.dumps(data)[:-5])
    with pytest.raises(MosaicError):
        list(iter_json_array(tmp_path / "b.json", chunk_chars=64))


def test_cli_show():
    result = runner.invoke(app, ["vocab", "show"])
    assert result.exit_code == 0
    assert f"objects: {len(load().objects)}" in result.stdout and "colour" in result.stdout and "antonym pairs:" in result.stdout
    listed = runner.invoke(app, ["vocab", "show", "--list", "relations"])
    assert "next to\tspatial" in listed.stdout.splitlines()
    bad = runner.invoke(app, ["vocab", "show", "--list", "nouns"])
    assert bad.exit_code == 1 and "--list must be one of" in bad.stderr


def test_cli_build_and_import_then_negate_with_it(tmp_path):
    graphs = tmp_path / "graphs.jsonl"
    graphs.write_text("".join(json.dumps(_graph_record(i, ["dog", "frisbee"], ["red"], ["catching"])) + "\n" for i in range(3)))
    result = runner.invoke(app, ["vocab", "build", str(graphs), "--min-count", "2", "-o", str(tmp_path / "mine")])
    assert result.exit_code == 0, result.stderr
    assert "2 objects, 1 attributes, 1 relations" in result.stderr
    assert load(tmp_path / "mine").objects == {"dog": "mammal", "frisbee": "sports"}

    _write_vg(tmp_path / "vg")
    result = runner.invoke(app, ["vocab", "import-vg", str(tmp_path / "vg"), "-o", str(tmp_path / "vgv")])
    assert result.exit_code == 0, result.stderr
    assert load(tmp_path / "vgv").objects == {"man": "person", "tree": "plant"}

    # negate draws its replacements from the vocabulary it is given
    sub = tmp_path / "sub.jsonl"
    runner.invoke(app, ["decompose", "--no-caption", str(graphs), "-o", str(sub)])
    result = runner.invoke(app, ["negate", "--vocab", str(tmp_path / "mine"), "--max", "20", str(sub)])
    assert result.exit_code == 0, result.stderr
    for line in result.stdout.splitlines():
        for neg in json.loads(line)["negatives"]:
            for node in neg["graph"]["objects"]:
                assert node["lemma"] in {"dog", "frisbee"}


def test_cli_build_bad_line_and_missing_vg(tmp_path):
    graphs = tmp_path / "graphs.jsonl"
    graphs.write_text(json.dumps(_graph_record(1, ["dog"])) + "\n" + '{"id": 2}\n')
    result = runner.invoke(app, ["vocab", "build", str(graphs), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert f"{graphs}:2: missing 'graph'" in result.stderr
    assert not (tmp_path / "out").exists()
    result = runner.invoke(app, ["vocab", "import-vg", str(tmp_path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and "missing objects.json, attributes.json, relationships.json" in result.stderr


def _world_captions(n: int) -> list[dict]:
    from mosaictool.world.captions import plan_caption, render_caption
    from mosaictool.world.scene import sample_scene

    rng = random.Random(0)
    out = []
    for i in range(n):
        scene = sample_scene(rng, rng.choice((2, 3, 4)), 64, train=True)
        out.append({"id": str(i), "caption": render_caption(plan_caption(rng, scene), scene, rng)[0]})
    return out


def test_build_leaves_out_what_decompose_drops():
    def entity(head, attributes=(), lemma=None):
        return {"head": head, "lemma_head": lemma or head, "attributes": list(attributes), "span": head, "modifiers": []}

    # "a square right of a red star" read as a place noun "right" with the adjective "square", "an
    # orange cross" as one noun, "a little purple" with no noun, "left of" as a bare "of"
    graphs = [{"graph": {"entities": [entity("right", ["square"]), entity("star", ["red"]), entity("orange cross"),
                                      entity("purple", ["little"]), entity("stripy cross")],
                         "relations": [{"subject": 0, "object": 1, "relation": "of"},
                                       {"subject": 1, "object": 2, "relation": "above"},
                                       {"subject": 2, "object": 3, "relation": "to"}]}}]
    from mosaictool.world.vocab import base_vocab

    for base in (None, base_vocab()):
        built = build_from_graphs(graphs, min_count=1, base=base)
        assert set(built.objects) == {"star", "cross"} and set(built.relations) == {"above"}
        assert set(built.attributes) == {"red", "orange", "stripy"}  # not the lost object's "little"
    raw = build_from_graphs(graphs, min_count=1, keep_debris=True)
    assert {"right", "purple", "orange cross"} <= set(raw.objects) and {"of", "to"} <= set(raw.relations)


@pytest.mark.slow  # spaCy: ~10 s
def test_build_keeps_parser_debris_out_on_the_worlds_captions():
    from mosaictool.stages.parse import parse
    from mosaictool.stages.subgraph import BARE_PREPOSITIONS, SPATIAL_NOUNS
    from mosaictool.world.vocab import COLOURS, base_vocab, word_meanings

    graphs = list(parse(_world_captions(100), spatial_compounds=False))
    meanings = word_meanings()
    raw = build_from_graphs(graphs, min_count=1, keep_debris=True)
    # SceneGraphParser's own graphs (parse's repairs off) make debris of these captions: place nouns,
    # colour words and fused compounds as objects, bare prepositions as relations
    assert set(raw.objects) & SPATIAL_NOUNS and set(raw.relations) & BARE_PREPOSITIONS
    assert any(o in COLOURS or o.split()[0] in COLOURS for o in raw.objects)
    for base in (None, base_vocab()):
        built = build_from_graphs(graphs, min_count=1, base=base)
        assert set(built.objects) <= set(meanings["objects"]), set(built.objects) - set(meanings["objects"])
        assert set(built.attributes) <= set(meanings["attributes"]), set(built.attributes) - set(meanings["attributes"])
        assert not set(built.relations) & BARE_PREPOSITIONS
    world = build_from_graphs(graphs, min_count=1, base=base_vocab())
    assert world.head("objects", "rhombus") == "diamond" and world.head("relations", "over") == "above"
    assert "shape" in world.broader("objects", "star") and world.attributes["stripy"] == "texture"
    # a name the base lacks takes its synonym head's label
    assert build_from_graphs(graphs, min_count=1).attributes.get("stripy") == load().attributes["striped"]


def test_build_counts_co_occurrences_and_keeps_the_base_rules(tmp_path):
    # "a brown dog catching a red frisbee", three times
    records = [_graph_record(i, ["dog", "frisbee"], ["brown"], ["catching"]) for i in range(3)]
    v = build_from_graphs(records, min_count=1)
    assert v.attribute_count("dog", "brown") == 3 and v.attribute_count("dog", "red") == 0
    assert v.relation_count("dog", "catching", "frisbee") == 3 and v.relation_count("frisbee", "catching", "dog") == 0
    assert v.categories == load().categories and v.kinds == load().kinds
    save(v, tmp_path / "v")
    assert (tmp_path / "v" / "object_attributes.tsv").read_text().splitlines() == [
        "object\tattribute\tcount", "dog\tbrown\t3", "frisbee\tbrown\t3"]
    assert (tmp_path / "v" / "relation_triples.tsv").read_text().splitlines() == [
        "subject\trelation\tobject\tcount", "dog\tcatching\tfrisbee\t3"]
    back = load(tmp_path / "v")
    assert back.attribute_count("dog", "brown") == 3 and back.relation_count("dog", "catching", "frisbee") == 3
    assert back.seen_relations("dog") == (("catching", "frisbee"),) and back.seen_attributes("dog") == ("brown",)
    assert back.applies("brown", "dog") and back.is_exclusive("colour") and not back.is_exclusive("size")


def test_symmetric_relations_survive_a_round_trip(tmp_path):
    v = load()
    assert v.is_symmetric("next to") and v.is_symmetric("beside") and v.is_symmetric("near")
    assert v.is_symmetric("with") and v.is_symmetric("walking with", "man", "dog")
    assert not v.is_symmetric("walking with", "man", "surfboard")
    assert not v.is_symmetric("on") and not v.is_symmetric("to the left of")
    save(v, tmp_path / "v")
    back = load(tmp_path / "v")
    assert back.symmetric == v.symmetric and back.symmetric_between == v.symmetric_between
    assert back.applies_to == v.applies_to and back.categories == v.categories


def test_categories_say_what_contradicts_and_what_fits():
    v = load()
    # "state" no longer mixes tastes, cooking and wear
    assert v.category("delicious") == "taste" and v.category("boiled") == "cooking" and v.category("worn") == "state"
    assert v.is_exclusive("colour") and v.is_exclusive("material") and not v.is_exclusive("size")
    assert not v.is_exclusive("taste") and not v.is_exclusive("person")
    # a pose words a scene loosely ("a cat sits on his lap" / "lying on"; a toy "sitting" on a plate):
    # only its antonyms contradict (sitting / standing)
    assert not v.is_exclusive("pose")
    # "brand new" is no age of a kid; "burgundy" no colour of a dog; "black" is
    assert not v.applies("brand new", "kid") and v.applies("young", "kid") and not v.applies("young", "door")
    assert not v.applies("burgundy", "dog") and v.applies("black", "dog") and v.applies("burgundy", "shirt")
    assert v.object_kind("baseball player") == "person" and v.object_kind("chalkboard") == "thing"


def test_known_undoes_inflection_and_refuses_unknown_words():
    v = load()
    for word, name in (("holds", "holding"), ("sits on", "sitting on"), ("rides", "riding"), ("cuts", "cutting"),
                       ("outside of", "outside"), ("older", "old"), ("bigger", "big"), ("happier", "happy")):
        assert v.known("relations" if " " in word or word in ("holds", "rides", "cuts") else "attributes", word) == name, word
    assert v.known("attributes", "fashioned") is None and v.known("relations", "prohibiting") is None


def test_a_category_listed_twice_is_refused(tmp_path):
    save(load(), tmp_path)
    (tmp_path / "categories.tsv").write_text("category\texclusive\tapplies_to\ncolour\tyes\t*\ncolour\tno\t*\n")
    with pytest.raises(MosaicError, match="categories.tsv: 'colour' is listed twice"):
        load(tmp_path)


def test_build_with_debris_counts_co_occurrences_too():
    records = [_graph_record(i, ["dog", "frisbee"], ["brown"], ["catching"]) for i in range(2)]
    v = build_from_graphs(records, min_count=1, keep_debris=True)
    assert v.attribute_count("dog", "brown") == 2 and v.relation_count("dog", "catching", "frisbee") == 2


# --- bad input (moved from test_bad_input.py) ---

@pytest.fixture
def vocab_copy(case):
    folder = case.src / "vocab"
    shutil.copytree(Path(__file__).resolve().parent.parent / "vocab", folder,
                    ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return folder


@pytest.mark.parametrize(
    "kind, content, message",
    [
        ("short-row", "name\tgroup\nperson\tperson\nman\n", "objects.tsv:3: expected 2 tab-separated columns, got 1"),
        ("not-utf8", b"name\tgroup\nperson\tperson\n\xff\xfe\tx\n", "objects.tsv: not UTF-8 text"),
        ("no-header", "", "objects.tsv: the first line must be the header"),
    ],
    ids=["short-row", "not-utf8", "no-header"],
)
def test_broken_vocabulary_file(case, vocab_copy, kind, content, message):
    (vocab_copy / "objects.tsv").write_bytes(content if isinstance(content, bytes) else content.encode())
    case.freeze()
    assert_refused(invoke(["vocab", "show", "--vocab", vocab_copy]), message)
    graphs = case.file("sub.jsonl", invoke(["decompose", "-q"], input=jsonl({"id": 1, "caption": "a dog",
                                                                             "graph": GRAPH})).stdout)
    case.freeze()
    assert_refused(invoke(["negate", graphs, "--vocab", vocab_copy, "-o", case.dst / "n.jsonl", "-q"]), message)
    case.untouched()


def test_missing_vocabulary_folder_and_file(case, vocab_copy):
    os.unlink(vocab_copy / "relations.tsv")
    case.freeze()
    assert_refused(invoke(["vocab", "show", "--vocab", case.src / "nope"]), "nope: no such vocabulary folder", "vocab build")
    assert_refused(invoke(["vocab", "show", "--vocab", vocab_copy]), "relations.tsv: missing")
    case.untouched()


def test_vocab_build_bad_records_and_nothing_to_keep(case):
    src = case.file("graphs.jsonl", jsonl({"id": 1, "caption": "a dog", "graph": GRAPH}, {"id": 2, "caption": CAP}))
    case.freeze()
    assert_refused(invoke(["vocab", "build", src, "-o", case.dst / "v", "--min-count", "1"]), f"{src}:2:",
                   "missing 'graph'", "mosaictool parse")
    ok = case.file("ok.jsonl", jsonl({"id": 1, "caption": "a dog", "graph": GRAPH}))
    case.freeze()
    assert_refused(invoke(["vocab", "build", ok, "-o", case.dst / "v", "--min-count", "5"]), f"{ok}:",
                   "--min-count 5", "nothing written")
    case.untouched()


# --- bad input (moved from test_bad_inputs_more.py) ---

VOCAB_CASES = {
    "enormous entry": ("objects", "name\tgroup\n" + "x" * 200_000 + "\tanimal\n", ("objects.tsv:2:", "field")),
    "conflicting duplicate": ("objects", "name\tgroup\ndog\tanimal\ndog\tvehicle\n", ("objects.tsv", "'dog'", "twice")),
    "negative count": ("relations", "name\ttype\tcount\non\tspatial\t-5\n", ("relations.tsv", "negative")),
    "folder": ("attributes", "DIR", ("attributes.tsv", "not a regular file")),
    "FIFO": ("antonyms", "FIFO", ("antonyms.tsv", "not a regular file")),
}


@pytest.mark.parametrize("case", VOCAB_CASES, ids=list(VOCAB_CASES))
@pytest.mark.parametrize("stage", ["show", "decompose", "negate", "template"])
def test_bad_vocabulary_folder(tmp_path, case, stage):
    folder = tmp_path / "vocab"
    shutil.copytree(DEFAULT_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    kind, content, needles = VOCAB_CASES[case]
    path = folder / f"{kind}.tsv"
    path.unlink()
    if content == "DIR":
        path.mkdir()
    elif content == "FIFO":
        os.mkfifo(path)
    else:
        path.write_text(content)
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "caption": "a dog"}) + "\n")
    args = (["vocab", "show", "--vocab", folder] if stage == "show"
            else [stage, src, "--vocab", folder, "-o", tmp_path / "out.jsonl", "-q"])
    if stage == "template":
        args.remove("-q")
    refused_leaving_files(tmp_path, args, *needles)


GOOD_VG = {
    "objects": [{"image_id": 1, "objects": [{"names": ["dog"]}]}],
    "attributes": [{"image_id": 1, "attributes": [{"attributes": ["red"]}]}],
    "relationships": [{"image_id": 1, "relationships": [{"predicate": "on"}]}],
}


IMPORT_VG_CASES = {
    "attributes a string": ("attributes", [{"image_id": 1, "attributes": [{"attributes": "red"}]}], "entry 0: attributes[0].attributes"),
    "entry a string": ("objects", ["dog"], "entry 0: expected an object"),
    "objects a string": ("objects", [{"image_id": 1, "objects": "dog"}], "entry 0: objects"),
    "names numbers": ("objects", [{"image_id": 1, "objects": [{"names": [1, 2]}]}], "objects[0].names[0]"),
    "not UTF-8": ("objects", b'[{"image_id": 1, "objects": [{"names": ["\xff"]}]}]', "not UTF-8"),
    "predicate a list": ("relationships", [{"image_id": 1, "relationships": [{"predicate": ["on"]}]}], "relationships[0].predicate"),
}


@pytest.mark.parametrize("case", IMPORT_VG_CASES)
def test_import_vg_bad_files(tmp_path, case):
    kind, content, needle = IMPORT_VG_CASES[case]
    vg = tmp_path / "vg"
    vg.mkdir()
    for name, data in {**GOOD_VG, kind: content}.items():
        (vg / f"{name}.json").write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    refused_leaving_files(tmp_path, ["vocab", "import-vg", vg, "-o", tmp_path / "v", "--min-count", "1"], f"{kind}.json", needle)



def test_cooccurrences_are_counted_under_the_vocabulary_s_names(tmp_path):
    """perf/vocab_counts.py's counts: objects by their lemma, attributes and relations by the name the base lists
    ("sits on" -> "sitting on", negate's lookup), words the base lacks left out; written as the loader reads them."""
    from mosaictool.stages.vocab_tools import cooccurrences
    from mosaictool.vocab import save_cooccurrences

    graph = {"entities": [{"head": "cat", "lemma_head": "cat", "span": "a black cat", "attributes": ["black", "zorbly"]},
                          {"head": "bench", "lemma_head": "bench", "span": "a bench", "attributes": []}],
             "relations": [{"subject": 0, "object": 1, "relation": "sits on"}]}
    pairs, triples = cooccurrences([{"graph": graph}, {"graph": graph}], load())
    assert pairs == {("cat", "black"): 2} and triples == {("cat", "sitting on", "bench"): 2}
    save_cooccurrences(tmp_path, pairs, triples)
    for name in ("objects.tsv", "attributes.tsv", "relations.tsv"):
        shutil.copy(DEFAULT_DIR / name, tmp_path / name)
    loaded = load(tmp_path)
    assert loaded.attribute_count("cat", "black") == 2 and loaded.relation_count("cat", "sitting on", "bench") == 2
    assert not loaded.reference_counts  # counts of one's own corpus: joins and no backoff


def test_the_shipped_counts_match_their_script():
    """vocab/ ships counts of a few thousand benchmark captions (perf/vocab_counts.py), never SugarCrepe's."""
    shipped = load()
    assert len(shipped.object_attributes) > 1000 and len(shipped.relation_triples) > 5000 and shipped.reference_counts
    assert all(n > 0 for n in shipped.relation_triples.values())
    assert all(shipped.known("relations", r) == r for _, r, _ in shipped.relation_triples)  # as negate looks them up


def test_a_vocabularys_derived_tables_are_its_own_and_go_with_it():
    import gc
    import weakref

    from mosaictool.stages.subgraph import graph_nodes

    def small():
        return Vocab(objects={"dog": "mammal", "cat": "mammal"}, attributes={"red": "colour", "teal": "colour"},
                     relations={"on": "spatial"}, synonyms={"objects": {"puppy": "dog"}})

    a, b = small(), small()
    built = []
    assert a.derived(lambda v: built.append(v) or len(built)) == 1
    table = a.derived(lambda v: built.append(v) or len(built))  # another function: another table
    assert table == 2 and built == [a, a]
    b.attributes["mauve"] = "colour"  # b's tables are b's own: built from b, never a's
    graph = {"entities": [{"head": "dog", "lemma_head": "dog", "span": "a mauve dog", "modifiers": [{"dep": "amod", "span": "mauve"}]}],
             "relations": []}
    graph_nodes(graph, a), graph_nodes(graph, b)
    colours_of = [v.derived(_word_sets_of) for v in (a, b)]
    assert "mauve" not in colours_of[0] and "mauve" in colours_of[1]
    assert a.head("objects", "puppy") == "dog"  # a memoized lookup, kept in the instance
    gone = weakref.ref(a)
    built.clear()  # it held `a` too
    del a, table
    gc.collect()
    assert gone() is None, "a module or class cache still holds the vocabulary"


def _word_sets_of(vocab):
    from mosaictool.stages import subgraph
    return subgraph._word_sets(vocab)[0]


def test_what_an_outfit_or_a_road_holds_never_replaces_it():
    """Blind reviews: "two girls in uniforms" -> "in jackets" and "people walk alongside the road" -> "the roundabout"
    are not false (a uniform may include a jacket; a roundabout is part of a road), nor "a beach" -> "an island", nor
    "leaning against a bed" -> "against a mattress", nor "high leaves on a tree" -> "high branches" (r19)."""
    v = load()
    for part, whole in (("jacket", "uniform"), ("hat", "costume"), ("trousers", "suit"), ("roundabout", "road"),
                        ("median", "highway"), ("beach", "island"), ("mattress", "bed"), ("leaves", "branch"), ("branch", "tree"),
                        ("pier", "harbor")):
        assert whole in v.unsafe("objects", part) and part in v.unsafe("objects", whole), (part, whole)
    assert "dress" not in v.unsafe("objects", "suit")  # a suit's pieces only
    # review r19: "a dense cake" -> "dense dessert" holds; a cake is a dessert, so a dessert is no contradiction of it
    assert "dessert" in v.unsafe("objects", "cake") and v.is_general("objects", "dessert")
    # a beach is contradicted by a pier or a dock, places on the coast ("people on the beach" -> "people on the dock")
    assert {v.group(n) for n in ("beach", "pier", "dock", "harbor")} == {"coast"}
    # review r23: "a plate" -> "a dish", "a hot dog" -> "a sandwich" (or its sausage), "in a neighborhood" -> "in a city"
    # were not false: a plate is a dish, a hot dog a sandwich with a sausage in it, a neighborhood part of a town
    for name, other in (("plate", "dish"), ("hot dog", "sandwich"), ("hot dog", "sausage"), ("neighborhood", "city"),
                        ("neighborhood", "town")):
        assert other in v.unsafe("objects", name) and name in v.unsafe("objects", other), (name, other)


def test_kinds_of_a_name_are_what_may_name_it_never_what_it_may_name():
    """A caption's "child" may be a girl (a hyponym), "people" a man; a "girl" it names is no child it names
    too (hypernyms are left out), and WordNet's overlaps count ("a desk" may be the caption's "table")."""
    v = load()
    assert {"child", "kid", "girl", "boy"} <= v.kinds_of("objects", "child") and "person" not in v.kinds_of("objects", "child")
    assert {"man", "woman"} <= v.kinds_of("objects", "people")
    assert "child" not in v.kinds_of("objects", "girl") and "person" not in v.kinds_of("objects", "girl")
    assert "desk" in v.kinds_of("objects", "table")
    assert v.kinds_of("objects", "no such thing") == frozenset({"no such thing"})
