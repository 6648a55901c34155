"""Malformed annotation files of every benchmark loader but ARO's schema cases (tests/test_bad_values.py):
a missing key, a wrong type (a string where a list belongs is never iterated as characters), null,
NaN, an empty list or caption, an object where a list belongs, non-UTF-8 bytes, a repeated key or id,
an image path that escapes --data-root (of a downloaded benchmark: our Probe JSONL's paths are written
relative to its folder by `mosaictool probe build` and may climb out of it). Each: exit 1, one `Error:` line naming the file and the
entry, no traceback, nothing written to -o. Loading fails before any model is built."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers import jsonl
from mosaictool.cli import app

sys.path.insert(0, str(Path(__file__).parent))

runner = CliRunner()

SC = {"filename": "a.jpg", "caption": "a red cup", "negative_caption": "a blue cup"}
VALSE = {"image_file": "v.jpg", "caption": "There are no people.", "foil": "There are people.", "mturk": {"caption": 3}}
VLC = ["VG_100K/1.jpg", {"POS": ["brown knob"], "NEG": ["teal knob"]}]
EQ = {"image0": "a.png", "caption0": "a cat left of a dog", "image1": "b.png", "caption1": "a dog left of a cat"}
WU = {"image_path": "data/controlled_images/cup_on_table.jpeg", "caption_options": ["a", "b", "c", "d"]}
WINO = {"id": 0, "image_0": "ex_0_img_0", "image_1": "ex_0_img_1", "caption_0": "an old man", "caption_1": "a man old",
        "collapsed_tag": "Object"}
ORDER = {"image": "val2014/a.jpg", "caption": ["a cup on a table"]}
VG = {"image_path": "1.jpg", "bbox_x": 5, "bbox_y": 6, "bbox_w": 20, "bbox_h": 10, "true_caption": "the cup is on the table",
      "false_caption": "the table is on the cup", "relation_name": "on"}
PC = {"id": 1, "split": "composition", "images": ["a.png", "b.png"], "texts": ["a red cup", "a blue cup"]}
PB = {"id": 1, "split": "R", "filler": "black", "images": {"x0": "a.png", "x0_patch": "b.png", "x1": "c.png"},
      "labels": ["cup"], "target": "dog"}
PR = {"id": 1, "image": "a.png", "subject_images": ["b.png"],
      "texts": {"R1": "a cup on a table", "R2": "a cup under a table", "R3": "a dog on a table", "O1": "a cup", "O3": "a dog"}}
SVO_HEAD = "sentence,pos_image_id,neg_image_id,subj_neg,verb_neg,obj_neg\n"
CREPE_HEAD = "image_id,x,y,width,height,caption,hard_negs\n"
CREPE = "crepe/prod_hard_negatives/atom/prod_vg_hard_negs_atom_complexity_4.csv"
VLC_FILE = "vl_checklist/data/Relation/vg/spatial.json"


def js(*entries) -> str:
    return json.dumps(list(entries))


def obj(**entries) -> str:
    return json.dumps(entries)


def drop(record: dict, key: str) -> dict:
    return {k: v for k, v in record.items() if k != key}


LATIN1 = "caf\u00e9".encode("latin-1")  # b'caf\xe9': not UTF-8

# (case id, --bench, {file: content}, file the error names, words the error holds)
CASES = [
    # SugarCrepe: {key: case}
    ("sugarcrepe-escape", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": obj(**{"0": {**SC, "filename": "../../../etc/passwd"}})},
     "sugarcrepe/add_att.json", "case '0': filename: expected a relative path inside --data-root, got '../../../etc/passwd'"),
    ("sugarcrepe-absolute", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": obj(**{"0": {**SC, "filename": "/etc/passwd"}})},
     "sugarcrepe/add_att.json", "filename: expected a relative path inside --data-root, got '/etc/passwd'"),
    ("sugarcrepe-empty-caption", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": obj(**{"0": {**SC, "caption": ""}})},
     "sugarcrepe/add_att.json", "case '0': caption: expected a non-empty string, got ''"),
    ("sugarcrepe-list-top", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": js(SC)},
     "sugarcrepe/add_att.json", "the top: expected an object of cases by key, got list"),
    ("sugarcrepe-latin1", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": b'{"0": {"caption": "' + LATIN1 + b'"}}'},
     "sugarcrepe/add_att.json", "not UTF-8"),
    ("sugarcrepe-empty-file", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": ""},
     "sugarcrepe/add_att.json", "invalid JSON"),
    ("sugarcrepe-duplicate-key", "sugarcrepe:add_att", {"sugarcrepe/add_att.json": '{"0": %s, "0": %s}' % (json.dumps(SC), json.dumps(SC))},
     "sugarcrepe/add_att.json", "key '0' appears twice"),
    # VALSE: {id: record}
    ("valse-missing-mturk", "valse:existence", {"valse/data/existence.json": obj(a=drop(VALSE, "mturk"))},
     "valse/data/existence.json", "record 'a': missing 'mturk'"),
    ("valse-votes-string", "valse:existence", {"valse/data/existence.json": obj(a={**VALSE, "mturk": {"caption": "3"}})},
     "valse/data/existence.json", "record 'a': mturk.caption: expected an integer, got str"),
    ("valse-votes-nan", "valse:existence",
     {"valse/data/existence.json": '{"a": %s}' % json.dumps({**VALSE, "mturk": {"caption": float("nan")}})},
     "valse/data/existence.json", "record 'a': mturk.caption: expected an integer, got float"),
    ("valse-foil-list", "valse:existence", {"valse/data/existence.json": obj(a={**VALSE, "foil": ["x", "y"]})},
     "valse/data/existence.json", "record 'a': foil: expected a non-empty string, got list"),
    ("valse-image-null", "valse:existence", {"valse/data/existence.json": obj(a={**VALSE, "image_file": None})},
     "valse/data/existence.json", "record 'a': image_file: expected a non-empty string, got null"),
    ("valse-escape", "valse:existence", {"valse/data/existence.json": obj(a={**VALSE, "image_file": "../../../../etc/passwd"})},
     "valse/data/existence.json", "record 'a': image_file: expected a relative path inside --data-root"),
    ("valse-record-list", "valse:existence", {"valse/data/existence.json": obj(a=["v.jpg"])},
     "valse/data/existence.json", "record 'a': expected an object, got list"),
    ("valse-empty-caption", "valse:existence", {"valse/data/existence.json": obj(a={**VALSE, "caption": ""})},
     "valse/data/existence.json", "record 'a': caption: expected a non-empty string, got ''"),
    ("valse-latin1", "valse:existence", {"valse/data/existence.json": b'{"a": "' + LATIN1 + b'"}'},
     "valse/data/existence.json", "not UTF-8"),
    # VL-CheckList: [[image, {POS, NEG}], ...]
    ("vl_checklist-pos-string", "vl_checklist:Relation_spatial", {VLC_FILE: js([VLC[0], {"POS": "brown knob", "NEG": ["x"]}])},
     VLC_FILE, "item 0: POS: expected a non-empty list of non-empty strings, got str"),
    ("vl_checklist-neg-empty", "vl_checklist:Relation_spatial", {VLC_FILE: js([VLC[0], {"POS": ["a"], "NEG": []}])},
     VLC_FILE, "item 0: NEG: expected a non-empty list of non-empty strings, got []"),
    ("vl_checklist-image-number", "vl_checklist:Relation_spatial", {VLC_FILE: js([7, VLC[1]])},
     VLC_FILE, "item 0: image: expected a non-empty string, got int"),
    ("vl_checklist-escape", "vl_checklist:Relation_spatial", {VLC_FILE: js(["/etc/passwd", VLC[1]])},
     VLC_FILE, "item 0: image: expected a relative path inside --data-root, got '/etc/passwd'"),
    ("vl_checklist-object-item", "vl_checklist:Relation_spatial", {VLC_FILE: js({"image": "a.jpg"})},
     VLC_FILE, "item 0: expected a list [image, {POS, NEG}], got object"),
    ("vl_checklist-null-caption", "vl_checklist:Relation_spatial", {VLC_FILE: js([VLC[0], {"POS": [None], "NEG": ["x"]}])},
     VLC_FILE, "item 0: POS[0]: expected a non-empty string, got null"),
    # EqBen: nests of {image0, caption0, image1, caption1}
    ("eqben-caption-number", "eqben:eqbensd", {"eqben/annotations/eqbensd.json": js({**EQ, "caption1": 3})},
     "eqben/annotations/eqbensd.json", "[0]: caption1: expected a non-empty string or a non-empty list of non-empty strings, got int"),
    ("eqben-caption-empty-list", "eqben:eqbensd", {"eqben/annotations/eqbensd.json": js({**EQ, "caption0": []})},
     "eqben/annotations/eqbensd.json", "[0]: caption0: expected a non-empty string or a non-empty list of non-empty strings, got []"),
    ("eqben-image-null", "eqben:eqbensd", {"eqben/annotations/eqbensd.json": js({**EQ, "image1": None})},
     "eqben/annotations/eqbensd.json", "[0]: image1: expected a non-empty string, got null"),
    ("eqben-escape", "eqben:eqbensd", {"eqben/annotations/eqbensd.json": js({**EQ, "image0": "../../x.png"})},
     "eqben/annotations/eqbensd.json", "[0]: image0: expected a relative path inside --data-root, got '../../x.png'"),
    ("eqben-empty-caption", "eqben:eqbensd", {"eqben/annotations/eqbensd.json": js({**EQ, "caption0": ""})},
     "eqben/annotations/eqbensd.json", "[0]: caption0: expected a non-empty string"),
    # WhatsUp: controlled [{image_path, caption_options}] and QA [[id, right, wrong]]
    ("whatsup-options-string", "whatsup:WhatsUp_A", {"whatsup/controlled_images_dataset.json": js({**WU, "caption_options": "abcd"})},
     "whatsup/controlled_images_dataset.json", "item 0: caption_options: expected a list of 4 non-empty strings, got str"),
    ("whatsup-option-null", "whatsup:WhatsUp_A",
     {"whatsup/controlled_images_dataset.json": js({**WU, "caption_options": ["a", None, "c", "d"]})},
     "whatsup/controlled_images_dataset.json", "item 0: caption_options[1]: expected a non-empty string, got null"),
    ("whatsup-image-number", "whatsup:WhatsUp_A", {"whatsup/controlled_images_dataset.json": js({**WU, "image_path": 5})},
     "whatsup/controlled_images_dataset.json", "item 0: image_path: expected a non-empty string, got int"),
    ("whatsup-escape", "whatsup:WhatsUp_A", {"whatsup/controlled_images_dataset.json": js({**WU, "image_path": "../../etc/x_on_y.jpeg"})},
     "whatsup/controlled_images_dataset.json", "item 0: image_path: expected a relative path inside --data-root"),
    ("whatsup-qa-caption-list", "whatsup:COCO_QA_ONE", {"whatsup/coco_qa_one_obj.json": js([1, ["a cup on the left"], "x"])},
     "whatsup/coco_qa_one_obj.json", "item 0: right: expected a non-empty string, got list"),
    ("whatsup-qa-id-escape", "whatsup:COCO_QA_ONE", {"whatsup/coco_qa_one_obj.json": js(["../../../../etc/passwd", "a left", "a right"])},
     "whatsup/coco_qa_one_obj.json", "item 0: image_id: expected"),
    ("whatsup-qa-object", "whatsup:COCO_QA_ONE", {"whatsup/coco_qa_one_obj.json": js({"a": 1})},
     "whatsup/coco_qa_one_obj.json", "item 0: expected a list [image_id, right caption, wrong caption], got object"),
    # Winoground: examples.jsonl
    ("winoground-caption-null", "winoground", {"winoground/data/examples.jsonl": jsonl({**WINO, "caption_1": None})},
     "winoground/data/examples.jsonl", "line 1: caption_1: expected a non-empty string, got null"),
    ("winoground-image-list", "winoground", {"winoground/data/examples.jsonl": jsonl({**WINO, "image_0": ["a"]})},
     "winoground/data/examples.jsonl", "line 1: image_0: expected a non-empty string, got list"),
    ("winoground-escape", "winoground", {"winoground/data/examples.jsonl": jsonl({**WINO, "image_0": "../../../../etc/passwd"})},
     "winoground/data/examples.jsonl", "line 1: image_0: expected a relative path inside --data-root"),
    ("winoground-tag-list", "winoground", {"winoground/data/examples.jsonl": jsonl({**WINO, "collapsed_tag": ["Object"]})},
     "winoground/data/examples.jsonl", "line 1: collapsed_tag: expected one of 'Object', 'Relation', 'Both', got ['Object']"),
    ("winoground-line-list", "winoground", {"winoground/data/examples.jsonl": "[1, 2]\n"},
     "winoground/data/examples.jsonl", "line 1: expected an object, got list"),
    ("winoground-duplicate-id", "winoground", {"winoground/data/examples.jsonl": jsonl(WINO, WINO)},
     "winoground/data/examples.jsonl", "line 2: id 0 repeats line 1"),
    ("winoground-latin1", "winoground", {"winoground/data/examples.jsonl": b'{"caption_0": "' + LATIN1 + b'"}\n'},
     "winoground/data/examples.jsonl", "not UTF-8"),
    # ImageCoDe: {set dir: {index: description}}
    ("imagecode-description-list", "imagecode", {"imagecode/data/valid_data.json": obj(**{"open-images-1_a": {"3": ["a deer"]}})},
     "imagecode/data/valid_data.json", "set 'open-images-1_a': 3: expected a non-empty string, got list"),
    ("imagecode-descriptions-string", "imagecode", {"imagecode/data/valid_data.json": obj(**{"open-images-1_a": "a deer"})},
     "imagecode/data/valid_data.json", "set 'open-images-1_a': expected an object, got str"),
    ("imagecode-empty-description", "imagecode", {"imagecode/data/valid_data.json": obj(**{"open-images-1_a": {"3": " "}})},
     "imagecode/data/valid_data.json", "set 'open-images-1_a': 3: expected a non-empty string"),
    ("imagecode-escape", "imagecode", {"imagecode/data/valid_data.json": obj(**{"../../../etc": {"3": "a deer"}})},
     "imagecode/data/valid_data.json", "set '../../../etc': expected an image set folder inside --data-root"),
    # SVO-Probes: CSV
    ("svo-escape", "svo_probes",
     {"svo_probes/svo_probes.csv": SVO_HEAD + "a man rides a horse,../../../../etc/passwd,b,True,False,False\n"},
     "svo_probes/svo_probes.csv", "line 2: pos_image_id: expected an image id inside --data-root"),
    ("svo-empty-sentence", "svo_probes", {"svo_probes/svo_probes.csv": SVO_HEAD + ",a,b,True,False,False\n"},
     "svo_probes/svo_probes.csv", "line 2: sentence: expected a non-empty string"),
    ("svo-latin1", "svo_probes", {"svo_probes/svo_probes.csv": SVO_HEAD.encode() + LATIN1 + b",a,b,True,False,False\n"},
     "svo_probes/svo_probes.csv", "not UTF-8"),
    # CREPE: CSV
    ("crepe-latin1", "crepe:productivity", {CREPE: CREPE_HEAD.encode() + b'1,5,6,20,10,' + LATIN1 + b',"[\'a\']"\n'},
     CREPE, "not UTF-8"),
    ("crepe-negative-empty", "crepe:productivity", {CREPE: CREPE_HEAD + "1,5,6,20,10,a cup,\"['']\"\n"},
     CREPE, "line 2: hard_negs: expected a list of non-empty strings"),
    ("crepe-escape", "crepe:productivity", {CREPE: CREPE_HEAD + "../../../../etc/passwd,5,6,20,10,a cup,\"['a mug']\"\n"},
     CREPE, "line 2: image_id: expected an image id inside --data-root"),
    # Karpathy retrieval and ARO's order / VG files
    ("retrieval-escape", "retrieval:coco", {"aro/coco_karpathy_test.json": js({**ORDER, "image": "../../../etc/passwd"})},
     "aro/coco_karpathy_test.json", "entry 0: image: expected a relative path inside --data-root"),
    ("retrieval-empty-caption", "retrieval:coco", {"aro/coco_karpathy_test.json": js({**ORDER, "caption": [""]})},
     "aro/coco_karpathy_test.json", "entry 0: caption: expected"),
    ("retrieval-latin1", "retrieval:coco", {"aro/coco_karpathy_test.json": b'[{"image": "' + LATIN1 + b'"}]'},
     "aro/coco_karpathy_test.json", "not UTF-8"),
    ("aro-escape", "aro:VG-Relation", {"aro/visual_genome_relation.json": js({**VG, "image_path": "/etc/passwd"})},
     "aro/visual_genome_relation.json", "entry 0: image_path: expected a relative path inside --data-root, got '/etc/passwd'"),
    ("aro-empty-caption", "aro:VG-Relation", {"aro/visual_genome_relation.json": js({**VG, "true_caption": ""})},
     "aro/visual_genome_relation.json", "entry 0: true_caption: expected a non-empty string, got ''"),
    ("aro-empty-list", "aro:VG-Relation", {"aro/visual_genome_relation.json": "[]"},
     "", "aro: no test cases found under"),
    # Probe-C / Probe-B / Probe-R: our JSONL
    ("probe_c-image-null", "probe_c", {"probe_c/probe_c.jsonl": jsonl({**PC, "images": ["a.png", None]})},
     "probe_c/probe_c.jsonl", "line 1: images[1]: expected a non-empty string, got null"),
    ("probe_c-empty-text", "probe_c", {"probe_c/probe_c.jsonl": jsonl({**PC, "texts": ["a red cup", ""]})},
     "probe_c/probe_c.jsonl", "line 1: texts[1]: expected a non-empty string, got ''"),
    ("probe_c-duplicate-id", "probe_c", {"probe_c/probe_c.jsonl": jsonl(PC, PC)},
     "probe_c/probe_c.jsonl", "line 2: id 1 repeats line 1"),
    ("probe_c-latin1", "probe_c", {"probe_c/probe_c.jsonl": b'{"id": "' + LATIN1 + b'"}\n'},
     "probe_c/probe_c.jsonl", "not UTF-8"),
    ("probe_b-image-empty", "probe_b", {"probe_b/classes.txt": "cup\ndog\n",
                                        "probe_b/probe_b.jsonl": jsonl({**PB, "images": {**PB["images"], "x1": ""}})},
     "probe_b/probe_b.jsonl", "line 1: images.x1: expected a non-empty string, got ''"),
    ("probe_b-duplicate-id", "probe_b", {"probe_b/classes.txt": "cup\ndog\n", "probe_b/probe_b.jsonl": jsonl(PB, PB)},
     "probe_b/probe_b.jsonl", "line 2: id 1 repeats line 1"),
    ("probe_b-labels-string", "probe_b", {"probe_b/classes.txt": "cup\ndog\n", "probe_b/probe_b.jsonl": jsonl({**PB, "labels": "cup"})},
     "probe_b/probe_b.jsonl", "line 1: labels: expected a list of strings, got str"),
    ("probe_b-classes-latin1", "probe_b", {"probe_b/classes.txt": LATIN1 + b"\n", "probe_b/probe_b.jsonl": jsonl(PB)},
     "probe_b/classes.txt", "not UTF-8"),
    ("probe_r-texts-list", "probe_r", {"probe_r/probe_r.jsonl": jsonl({**PR, "texts": ["a", "b"]})},
     "probe_r/probe_r.jsonl", "line 1: texts: expected an object, got list"),
    ("probe_r-subject-string", "probe_r", {"probe_r/probe_r.jsonl": jsonl({**PR, "subject_images": "b.png"})},
     "probe_r/probe_r.jsonl", "line 1: subject_images: expected a list of non-empty strings, got str"),
    ("probe_r-prompt-null", "probe_r", {"probe_r/probe_r.jsonl": jsonl({**PR, "texts": {**PR["texts"], "R2": None}})},
     "probe_r/probe_r.jsonl", "line 1: texts.R2: expected a non-empty string, got null"),
    ("probe_r-texts-missing", "probe_r", {"probe_r/probe_r.jsonl": jsonl({**PR, "texts": drop(PR["texts"], "O3")})},
     "probe_r/probe_r.jsonl", "line 1: missing 'texts.O3'"),
    # zero-shot: text files
    ("zeroshot-classnames-latin1", "zeroshot:t", {"zeroshot/t/classnames.txt": LATIN1 + b"\n", "zeroshot/t/templates.txt": "a {c}.\n",
                                                  "zeroshot/t/test/0/a.png": b""},
     "zeroshot/t/classnames.txt", "not UTF-8"),
]


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory) -> Path:
    from train_fixtures import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("model"))


@pytest.mark.parametrize("bench, files, named, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_malformed_annotation_file_is_one_line(tmp_path, tiny_config, bench, files, named, words):
    root = tmp_path / "data"
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content if isinstance(content, bytes) else content.encode())
    out = tmp_path / "r.jsonl"
    result = runner.invoke(app, ["evaluate", "-b", bench, "-d", str(root), "--model-config", str(tiny_config), "-o", str(out),
                                 "--device", "cpu", "-q"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1, (result.exit_code, result.stderr[-1500:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr[-1500:]
    assert str(root / named) in lines[0], lines[0]
    assert words in lines[0], lines[0]
    assert not out.exists()
