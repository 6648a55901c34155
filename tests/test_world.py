"""The synthetic world: determinism, counts, the benchmark formats, held-out compounds, twins, captions."""

from __future__ import annotations

import ast
import csv
import json
import random
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from clirun import refused_run, run
from helpers import CAP, file_bytes, invoke, jsonl
from helpers import refused as assert_refused
from mosaictool.cli import app
from mosaictool.errors import MosaicError
from mosaictool.world import generate_world
from mosaictool.world.captions import holds, plan_caption, render_caption, twin_pair
from mosaictool.world.scene import sample_scene, twin
from mosaictool.world.vocab import (
    COLOURS,
    HELD_OUT_OBJECTS,
    RELATION_WORDS,
    SHAPE_WORDS,
    SIZE_WORDS,
    TEXTURE_WORDS,
    held_out_relation_facts,
)

SMALL = dict(train=120, twins=True, binding_twins=True, shape_twins=True, eval_scale=0.04)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("w") / "world"
    generate_world(out, seed=0, **SMALL)
    return out


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def train_records(world: Path) -> list[dict]:
    return [json.loads(line) for line in (world / "train" / "captions.jsonl").read_text().splitlines()]


def test_same_seed_same_bytes_whatever_the_workers(world, tmp_path):
    again = tmp_path / "again"
    generate_world(again, seed=0, workers=2, **SMALL)
    assert tree(world) == tree(again)


def test_other_seed_other_world(world, tmp_path):
    other = tmp_path / "other"
    generate_world(other, seed=1, **SMALL)
    assert (other / "train" / "captions.jsonl").read_bytes() != (world / "train" / "captions.jsonl").read_bytes()
    assert (other / "train" / "images" / "000000.png").read_bytes() != (world / "train" / "images" / "000000.png").read_bytes()


def test_twins_only_add_records(world, tmp_path):
    plain = tmp_path / "plain"
    generate_world(plain, seed=0, train=SMALL["train"], eval_scale=SMALL["eval_scale"])
    with_twins = {r["id"]: r for r in train_records(world) if r["twin_of"] is None}
    for r in train_records(plain):
        assert r["hard_images"] is None
        assert {**with_twins[r["id"]], "hard_images": None} == r
        assert (plain / "train" / r["image"]).read_bytes() == (world / "train" / r["image"]).read_bytes()


def test_manifest_counts_match_files(world):
    info = json.loads((world / "manifest.json").read_text())
    recs = train_records(world)
    assert info["generator"] and info["seed"] == 0
    assert info["counts"]["train"]["scenes"] == SMALL["train"]
    c = info["counts"]["train"]
    assert c["records"] == len(recs) == SMALL["train"] + c["twins"] + c["binding_twins"] + c["shape_twins"]
    assert c["binding_twins"] > 0 and c["shape_twins"] > 0
    assert info["counts"]["train"]["twins"] > SMALL["train"] // 2
    assert len({r["id"] for r in recs}) == len(recs)
    for r in recs:
        assert (world / "train" / r["image"]).is_file()
    for split in ("val", "test"):
        c = info["counts"][split]
        assert c["aro_relation"] == len(json.loads((world / split / "aro" / "visual_genome_relation.json").read_text()))
        assert c["aro_attribution"] == len(json.loads((world / split / "aro" / "visual_genome_attribution.json").read_text()))
    assert info["held_out"]["object_compounds"] and info["held_out"]["relation_compounds"]
    assert set(info["vocab"]) >= {"shapes", "colours", "sizes", "textures", "relations"}


def test_val_and_test_differ(world):
    a = (world / "val" / "aro" / "visual_genome_relation.json").read_text()
    b = (world / "test" / "aro" / "visual_genome_relation.json").read_text()
    assert a != b


def _image(path: Path, size: int = 64) -> None:
    with Image.open(path) as im:
        assert im.size == (size, size)


def test_aro_files_parse_back(world):
    from mosaictool.bench.aro import excluded_relations

    excluded = excluded_relations()  # ARO's list, shipped with the package
    assert len(excluded) == 157
    aro = world / "val" / "aro"
    for item in json.loads((aro / "visual_genome_relation.json").read_text()):
        assert {"image_path", "bbox_x", "bbox_y", "bbox_w", "bbox_h", "true_caption", "false_caption",
                "relation_name"} <= set(item)
        assert item["relation_name"] not in excluded
        assert item["true_caption"] != item["false_caption"]
        assert sorted(item["true_caption"].split()) == sorted(item["false_caption"].split())
        _image(aro / "images" / item["image_path"])
    groups = {}
    for item in json.loads((aro / "visual_genome_attribution.json").read_text()):
        assert len(item["attributes"]) == 2 and item["true_caption"] != item["false_caption"]
        assert sorted(item["true_caption"].split()) == sorted(item["false_caption"].split())
        groups[tuple(item["attributes"])] = groups.get(tuple(item["attributes"]), 0) + 1
        _image(aro / "images" / item["image_path"])
    assert len(groups) == 25
    order = json.loads((aro / "coco_karpathy_test.json").read_text())
    for item in order:
        assert isinstance(item["caption"], list) and len(item["caption"]) == 2
        _image(world / "val" / "coco" / item["image"])


def test_aro_full_size_keeps_25_per_group(tmp_path):
    from mosaictool.world.generate import eval_sizes

    assert eval_sizes(1.0)["attribution_per_group"] >= 25


def test_aro_captions_true_and_false(world):
    for item in json.loads((world / "test" / "aro" / "visual_genome_relation.json").read_text()):
        scene = item["scene"]
        by_name = {f"the {o['colour']} {o['shape']}": k for k, o in enumerate(scene["objects"])}
        subj, rest = item["true_caption"].split(" is ", 1)
        obj = rest[len(item["relation_name"]) + 1:]
        fact = {"subject": by_name[subj], "relation": item["relation_name"], "object": by_name[obj]}
        back = {"subject": by_name[obj], "relation": item["relation_name"], "object": by_name[subj]}
        assert fact in scene["relations"] and back not in scene["relations"]


def test_crepe_files_parse_back(world):
    crepe = world / "val" / "crepe"
    for which in ("seen", "unseen"):
        with open(crepe / f"syst_vg_hard_negs_{which}_compounds_in_laion.csv") as f:
            rows = list(csv.DictReader(f))
        assert rows
        for row in rows:
            for col in ("valid_hard_negs_atom", "valid_hard_negs_comp", "valid_hard_negs_combined"):
                negs = ast.literal_eval(row[col])
                assert negs and row["caption"] not in negs
            _image(crepe / "VG_100K" / f"{row['image_id']}.jpg")
            assert (int(row["width"]), int(row["height"])) == (64, 64)
    for kind in ("atom", "swap", "negate"):
        for c in range(4, 13):
            with open(crepe / "prod_hard_negatives" / kind / f"prod_vg_hard_negs_{kind}_complexity_{c}.csv") as f:
                rows = list(csv.DictReader(f))
            assert rows
            for row in rows:
                negs = ast.literal_eval(row["hard_negs"])
                assert negs and row["caption"] not in negs
                assert (crepe / "VG_100K" / f"{row['image_id']}.jpg").is_file()


def test_unseen_crepe_captions_name_held_out_compounds(world):
    held_objects = [f"{c} {s}" for c, s in HELD_OUT_OBJECTS]
    held_rel = held_out_relation_facts()
    with open(world / "test" / "crepe" / "syst_vg_hard_negs_unseen_compounds_in_laion.csv") as f:
        for row in csv.DictReader(f):
            cap = row["caption"]
            has_obj = any(h in cap for h in held_objects)
            has_rel = any(f"{s} is {r} " in cap and cap.endswith(o) for s, r, o in held_rel)
            assert has_obj or has_rel, cap
    with open(world / "test" / "crepe" / "syst_vg_hard_negs_seen_compounds_in_laion.csv") as f:
        for row in csv.DictReader(f):
            assert not any(h in row["caption"] for h in held_objects)


def test_zeroshot_folders(world):
    for task in ("shape", "colour", "object"):
        folder = world / "val" / "zeroshot" / task
        classes = (folder / "classnames.txt").read_text().splitlines()
        assert all("{c}" in t for t in (folder / "templates.txt").read_text().splitlines())
        labels = sorted(int(p.name) for p in (folder / "test").iterdir())
        assert labels == list(range(len(classes)))


def test_held_out_compounds_never_in_train(world):
    facts = held_out_relation_facts()
    for r in train_records(world):
        objs = r["scene"]["objects"]
        assert not any((o["colour"], o["shape"]) in HELD_OUT_OBJECTS for o in objs)
        for rel in r["scene"]["relations"]:
            assert (objs[rel["subject"]]["shape"], rel["relation"], objs[rel["object"]]["shape"]) not in facts


def twin_pairs(world, kind: str) -> list[tuple[dict, dict]]:
    """(original, twin) records for every twin of `kind`, each checked to be linked both ways."""
    recs = {r["id"]: r for r in train_records(world)}
    pairs = [(recs[t["twin_of"]], t) for t in recs.values() if t["twin_kind"] == kind]
    assert pairs
    for orig, t in pairs:
        assert t["id"] in orig["hard_images"] and t["hard_images"] == [orig["id"]]
    return pairs


def test_twins_are_counterfactuals(world):
    for orig, t in twin_pairs(world, "arrangement"):
        key = lambda o: (o["shape"], o["colour"], o["size"], o["texture"])  # noqa: E731
        a, b = orig["scene"]["objects"], t["scene"]["objects"]
        assert [key(o) for o in a] == [key(o) for o in b]
        moved = [k for k in range(len(a)) if a[k]["cell"] != b[k]["cell"]]
        assert len(moved) == 2 and a[moved[0]]["cell"] == b[moved[1]]["cell"] and a[moved[1]]["cell"] == b[moved[0]]["cell"]
        assert orig["caption"] != t["caption"]
        assert (world / "train" / orig["image"]).read_bytes() != (world / "train" / t["image"]).read_bytes()
        # the first relation the original caption states is false of the twin, and vice versa
        rel = orig["mentions"]["relations"][0]
        m = orig["mentions"]["mentions"]
        fact = {"subject": m[rel["subject"]]["object"], "relation": rel["relation"], "object": m[rel["object"]]["object"]}
        assert fact in orig["scene"]["relations"] and fact not in t["scene"]["relations"]


def test_binding_twins_trade_colours(world):
    for orig, t in twin_pairs(world, "binding"):
        a, b = orig["scene"]["objects"], t["scene"]["objects"]
        assert [(o["shape"], o["size"], o["texture"], o["cell"], o["bbox"]) for o in a] == \
            [(o["shape"], o["size"], o["texture"], o["cell"], o["bbox"]) for o in b]
        changed = [k for k in range(len(a)) if a[k]["colour"] != b[k]["colour"]]
        assert len(changed) == 2 and a[changed[0]]["colour"] == b[changed[1]]["colour"]
        assert sorted(o["colour"] for o in a) == sorted(o["colour"] for o in b)
        x, y = orig["caption"].split(), t["caption"].split()
        assert x != y and len(x) == len(y)
        assert all(u == v or {u, v} <= set(COLOURS) | {"a", "an"} for u, v in zip(x, y))  # only colour words differ
        assert orig["scene"]["relations"] == t["scene"]["relations"]


def test_shape_twins_change_one_shape(world):
    for orig, t in twin_pairs(world, "shape"):
        a, b = orig["scene"]["objects"], t["scene"]["objects"]
        changed = [k for k in range(len(a)) if a[k] != b[k]]
        assert len(changed) == 1 and a[changed[0]]["shape"] != b[changed[0]]["shape"]
        assert {**a[changed[0]], "shape": None} == {**b[changed[0]], "shape": None}
        assert orig["caption"] != t["caption"]


def test_plain_captions_are_true_and_follow_their_twins(world):
    for r in train_records(world):
        clauses = r["plain_caption"].split(" and ")
        if r["mentions"]["relations"]:  # "the C S is <relation> the C S", true of the scene
            words = r["plain_caption"].split()
            assert words[0] == words[-3] == "the" and words[3] == "is", r["plain_caption"]
            subj = {"colour": words[1], "shape": words[2]}
            obj = {"colour": words[-2], "shape": words[-1]}
            pred = " ".join(words[4:-3])
            assert pred in RELATION_WORDS and holds([subj, obj], [(0, pred, 1)], r["scene"]), r["plain_caption"]
        else:  # "a C S and a C S ...": each names an object of the scene
            for c in clauses:
                _, colour, shape = c.split()
                assert holds([{"colour": colour, "shape": shape}], [], r["scene"]), r["plain_caption"]
    for orig, t in twin_pairs(world, "arrangement"):  # the same words but the relation's
        a, b = orig["plain_caption"].split(), t["plain_caption"].split()
        assert a != b and a[:4] == b[:4] and a[-3:] == b[-3:]


WORDS = {**{w: ("shape", s) for s, ws in SHAPE_WORDS.items() for w in ws},
         **{w: ("size", s) for s, ws in SIZE_WORDS.items() for w in ws},
         **{w: ("texture", s) for s, ws in TEXTURE_WORDS.items() for w in ws}}


def test_captions_state_true_attributes_and_relations(world):
    for r in train_records(world):
        objs = r["scene"]["objects"]
        cap = r["caption"]
        for m in r["mentions"]["mentions"]:
            assert m["noun"] in cap or m["count"] is not None
            if m["object"] is None:
                continue
            obj = objs[m["object"]]
            for word in m["attributes"] + [m["noun"]]:
                kind, value = WORDS.get(word, ("colour", word))
                if word in ("shape", "object"):
                    continue
                assert obj[kind] == value, (cap, word)
        for rel in r["mentions"]["relations"]:
            subj, obj = r["mentions"]["mentions"][rel["subject"]]["object"], r["mentions"]["mentions"][rel["object"]]["object"]
            assert {"subject": subj, "relation": rel["relation"], "object": obj} in r["scene"]["relations"]
            assert rel["text"] in RELATION_WORDS[rel["relation"]] and rel["text"] in cap


def test_counts_in_captions_are_exact(world):
    numbers = {"two": 2, "three": 3, "four": 4}
    for r in train_records(world):
        for m in r["mentions"]["mentions"]:
            if m["count"] is not None:
                desc = {"colour": m["attributes"][0]} if m["attributes"] else {}
                if m["noun"] not in ("shape", "object"):
                    desc["shape"] = m["noun"]
                assert sum(all(o[k] == v for k, v in desc.items()) for o in r["scene"]["objects"]) == m["count"]
                assert any(f"{w} " in r["caption"] for w, n in numbers.items() if n == m["count"])


def test_twin_function_swaps_two_objects():
    rng = random.Random(3)
    for _ in range(50):
        scene = sample_scene(rng, 3, 64, train=False)
        plan = plan_caption(rng, scene)
        pair = twin_pair(plan)
        if pair is None:
            continue
        t = twin(scene, *pair)
        text, _ = render_caption(plan, scene, random.Random(1))
        text_t, _ = render_caption(plan, t, random.Random(1))
        assert text != text_t
        for o in t["objects"]:  # boxes stay inside the canvas
            assert 0 <= o["bbox"][0] < o["bbox"][2] <= 64 and 0 <= o["bbox"][1] < o["bbox"][3] <= 64


def test_holds_reads_captions_existentially():
    scene = {"objects": [{"shape": "circle", "colour": "red", "size": "big", "texture": "solid", "cell": [0, 0]},
                         {"shape": "square", "colour": "blue", "size": "small", "texture": "dotted", "cell": [0, 2]}]}
    from mosaictool.world.scene import relations_of

    scene["relations"] = relations_of(scene["objects"])
    red, blue = {"colour": "red", "shape": "circle"}, {"colour": "blue"}
    assert holds([red, blue], [(0, "to the left of", 1)], scene)
    assert not holds([red, blue], [(1, "to the left of", 0)], scene)
    assert holds([red, blue], [(0, "above", 1, True)], scene)
    assert not holds([{"colour": "blue", "shape": "circle"}], [], scene)


def test_refuses_to_overwrite(world, tmp_path):
    with pytest.raises(MosaicError, match="exists"):
        generate_world(world, train=1, eval_scale=0.01)
    other = tmp_path / "notaworld"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(MosaicError, match="not a world"):
        generate_world(other, train=1, eval_scale=0.01, overwrite=True)
    assert (other / "keep.txt").read_text() == "x"


def test_cli(tmp_path):
    out = tmp_path / "cli_world"
    result = CliRunner().invoke(app, ["world", "--out", str(out), "--train", "20", "--eval-scale", "0.01", "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "manifest.json").read_text())["counts"]["train"]["records"] == 20
    again = CliRunner().invoke(app, ["world", "--out", str(out), "--train", "20", "-q"])
    assert again.exit_code == 1 and "Error:" in again.stderr and "--overwrite" in again.stderr
    bad = CliRunner().invoke(app, ["world", "--out", str(tmp_path / "x"), "--image-size", "8"])
    assert bad.exit_code == 1 and "--image-size" in bad.stderr


def test_relation_prior_accuracy_reads_the_priors_and_the_world_has_them(tmp_path):
    from mosaictool.world.audit import relation_prior_accuracy
    from mosaictool.world.generate import generate_world

    def item(caption, pred):
        return {"true_caption": caption, "relation_name": pred}

    usual = item("the red star is above the blue square", "above")  # stars sit high, squares low
    unusual = item("the blue square is above the red star", "above")
    tie = item("the red star is to the left of the green star", "to the left of")
    left = item("the red circle is to the left of the blue diamond", "to the left of")  # circles sit left
    assert relation_prior_accuracy([usual, unusual, tie]) == 0.5
    assert relation_prior_accuracy([left, usual]) == 1.0 and relation_prior_accuracy([unusual]) == 0.0
    world = tmp_path / "world"
    generate_world(world, train=0, seed=0, eval_scale=0.1)
    items = json.loads((world / "val" / "aro" / "visual_genome_relation.json").read_text())
    assert len(items) == 480 and 0.6 < relation_prior_accuracy(items) < 0.85  # a prior for most pairs, not all


# --- one writer per world folder, and nothing deleted that a world did not write ----------------------


TINY = dict(train=2, eval_scale=0.01)


def _while_generating(monkeypatch, action) -> None:
    """Run `action` once the world's images are made, before it is moved into --out (the window in
    which another process may write into the folder)."""
    from mosaictool.world import generate

    original = generate.manifest

    def manifest(*args, **kwargs):
        action()
        return original(*args, **kwargs)

    monkeypatch.setattr(generate, "manifest", manifest)


def test_a_file_put_into_out_while_the_world_is_made_is_kept(tmp_path, monkeypatch):
    out = tmp_path / "w2"
    _while_generating(monkeypatch, lambda: (out.mkdir(exist_ok=True), (out / "notes.txt").write_text("mine")))
    with pytest.raises(MosaicError, match=r"w2 exists and is not empty.*--overwrite"):
        generate_world(out, **TINY)
    assert (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # no staging folder, no lock file left


def test_overwrite_rechecks_the_folder_before_replacing_it(tmp_path, monkeypatch):
    out = tmp_path / "w2"
    generate_world(out, **TINY)
    _while_generating(monkeypatch, lambda: (out / "train" / "notes.txt").write_text("mine"))
    with pytest.raises(MosaicError, match=r"train/notes.txt, which no world writes"):
        generate_world(out, overwrite=True, **TINY)
    assert (out / "train" / "notes.txt").read_text() == "mine"
    assert (out / "manifest.json").is_file()  # the old world stays whole


def test_a_second_world_into_the_same_folder_is_refused_while_the_first_writes(tmp_path):
    from mosaictool.locks import folder_lock

    out = tmp_path / "w2"
    with folder_lock(out, "a test holder"):
        with pytest.raises(MosaicError, match=r"--out .*w2: another writer is using it: a test holder"):
            generate_world(out, **TINY)
        with pytest.raises(MosaicError, match="another writer is using it"):
            generate_world(out, overwrite=True, **TINY)
    assert not out.exists()


def test_overwrite_keeps_the_folder_and_what_a_killed_run_left_is_taken_over(tmp_path):
    from mosaictool.locks import LOCK_NAME

    out = tmp_path / "w2"
    out.mkdir()
    (out / LOCK_NAME).write_text("{}")  # a killed run's: no longer locked by anyone
    (out / ".world-partial-x1").mkdir()
    (out / ".world-partial-x1" / "manifest.json").write_text("{}")
    generate_world(out, **TINY)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "test", "train", "val"]
    inode = out.stat().st_ino
    generate_world(out, seed=1, overwrite=True, **TINY)
    assert out.stat().st_ino == inode and json.loads((out / "manifest.json").read_text())["seed"] == 1
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "test", "train", "val"]


def test_a_file_put_into_the_old_world_after_the_last_check_is_kept(tmp_path, monkeypatch):
    from mosaictool.world import generate

    out = tmp_path / "w2"
    generate_world(out, **TINY)
    original, calls = generate._check_target, []

    def check(folder, overwrite):
        original(folder, overwrite)
        calls.append(folder)
        if len(calls) == 2:  # the check right before the swap: the file comes just after it
            (out / "train" / "notes.txt").write_text("mine")

    monkeypatch.setattr(generate, "_check_target", check)
    generate_world(out, seed=1, overwrite=True, **TINY)
    (kept,) = out.glob(".world-kept-*")
    assert (kept / "old" / "train" / "notes.txt").read_text() == "mine"
    assert sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*") if p.is_file()) == ["old/train/notes.txt"]
    assert json.loads((out / "manifest.json").read_text())["seed"] == 1


# --- bad input (moved from test_bad_folders.py) ---

WORLD = ["--train", "2", "--eval-scale", "0.01", "-q"]


@pytest.fixture(scope="module")
def cli_world(tmp_path_factory):
    w = tmp_path_factory.mktemp("w") / "world"
    assert run("world", "--out", w, *WORLD).returncode == 0
    return w


@pytest.mark.parametrize("where", ["train/notes.txt", "val/aro/mine/a.png", "test/zeroshot/colour/test/00/holiday.png"])
def test_world_overwrite_keeps_user_files_anywhere_in_the_world(cli_world, tmp_path, where):
    import shutil

    w = tmp_path / "w"
    shutil.copytree(cli_world, w)
    (w / where).parent.mkdir(parents=True, exist_ok=True)
    (w / where).write_text("mine")
    before = file_bytes(w)
    refused_run(["world", "--out", w, "--overwrite", *WORLD], where, "no world writes")
    assert file_bytes(w) == before


def test_world_overwrite_of_a_world_still_works(cli_world, tmp_path):
    import shutil

    w = tmp_path / "w"
    shutil.copytree(cli_world, w)
    assert run("world", "--out", w, "--overwrite", "--seed", "1", *WORLD).returncode == 0


def test_every_file_of_a_world_with_every_option_is_one_overwrite_may_replace(tmp_path):
    from mosaictool.world.generate import _not_written_by_a_world

    w = tmp_path / "w"
    assert run("world", "--out", w, "--twins", "--binding-twins", "--shape-twins", "--caption-noise", "0.5", "--train", "4",
               "--eval-scale", "0.02", "-q").returncode == 0
    assert _not_written_by_a_world(w) == []


def test_world_out_under_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    refused_run(["world", "--out", tmp_path / "f" / "sub", *WORLD], "--out", "is a file, not a folder")
    assert (tmp_path / "f").read_text() == "x"


@pytest.mark.parametrize("overwrite", [False, True])
def test_world_out_a_link_to_a_folder_writes_where_it_points(cli_world, tmp_path, overwrite):
    import shutil

    real = tmp_path / "real"
    shutil.copytree(cli_world, real) if overwrite else real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    r = run("world", "--out", tmp_path / "link", *(["--overwrite"] if overwrite else []), *WORLD)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "link").is_symlink() and (real / "manifest.json").is_file()


# --- bad input (moved from test_bad_input.py) ---

def test_world_out_is_a_file_or_not_empty(case):
    f = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    assert_refused(invoke(["world", "--out", f, "--train", "2"]), f"{f}: is a file", "--out")
    assert_refused(invoke(["world", "--out", case.src, "--train", "2"]), "exists and is not empty", "--out",
                   "--overwrite")
    case.untouched()

