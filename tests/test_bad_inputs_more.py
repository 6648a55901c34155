"""Bad input, more kinds: vocabulary folders (vocab show and every --vocab stage read them through
`mosaictool.vocab.load`), Visual Genome files of `vocab import-vg`, and the VG / COCO annotation
files of `probe build r` / `b`. Each refused case: exit 1, one `Error:` line naming the file and the
entry or field, no traceback, inputs unchanged, nothing written."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from mosaictool.vocab import DEFAULT_DIR
from test_bad_values import refused_leaving_files as refused

# ---- vocabulary folders ---------------------------------------------------------------------------------


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
    refused(tmp_path, args, *needles)


# ---- vocab import-vg ------------------------------------------------------------------------------------

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
    refused(tmp_path, ["vocab", "import-vg", vg, "-o", tmp_path / "v", "--min-count", "1"], f"{kind}.json", needle)


# ---- probe build r / b ----------------------------------------------------------------------------------

SUBJ, OBJ = {"name": "dog"}, {"name": "table"}
PROBE_R_CASES = {
    "image_id a list": ([{"image_id": [1], "relationships": [{"predicate": "on", "subject": SUBJ, "object": OBJ}]}], "entry 0: image_id"),
    "image_id null": ([{"image_id": None, "relationships": []}], "entry 0: image_id"),
    "subject a string": ([{"image_id": 1, "relationships": [{"predicate": "on", "subject": "dog", "object": OBJ}]}], "subject"),
    "predicate a number": ([{"image_id": 1, "relationships": [{"predicate": 5, "subject": SUBJ, "object": OBJ}]}], "predicate"),
    "name a list": ([{"image_id": 1, "relationships": [{"predicate": "on", "subject": {"name": ["dog"]}, "object": OBJ}]}],
                    "subject.name"),
}


@pytest.mark.parametrize("case", PROBE_R_CASES)
def test_probe_r_bad_relationships(tmp_path, case):
    data, needle = PROBE_R_CASES[case]
    rel = tmp_path / "rel.json"
    rel.write_text(json.dumps(data))
    (tmp_path / "imgs").mkdir()
    refused(tmp_path, ["probe", "build", "r", "--vg-relationships", rel, "--images", tmp_path / "imgs", "--out", tmp_path / "out"],
            rel, needle)


def coco(bbox=(1, 1, 10, 10), iid=1, width=64, seg=None, file_name="a.jpg"):
    return {"images": [{"id": iid, "file_name": file_name, "width": width, "height": 48}],
            "categories": [{"id": 1, "name": "dog"}],
            "annotations": [{"image_id": iid, "category_id": 1, "bbox": list(bbox) if isinstance(bbox, tuple) else bbox,
                             "segmentation": seg if seg is not None else [[1, 1, 10, 1, 10, 10, 1, 10]]}]}


PROBE_B_CASES = {
    "bbox negative width": (coco(bbox=(1, 1, -10, 10)), "annotations[0]: bbox"),
    "bbox a string": (coco(bbox="1,1,10,10"), "annotations[0]: bbox"),
    "bbox 3 numbers": (coco(bbox=(1, 1, 10)), "annotations[0]: bbox"),
    "bbox of strings": (coco(bbox=("1", "1", "10", "10")), "annotations[0]: bbox[0]"),
    "width a string": (coco(width="64"), "images[0]: width"),
    "width negative": (coco(width=-1), "images[0]: width"),
    "segmentation a string": (coco(seg="x"), "annotations[0]: segmentation"),
    "polygon of an odd count": (coco(seg=[[1, 1, 10]]), "annotations[0]: segmentation"),
    "file_name a number": (coco(file_name=5), "images[0]: file_name"),
}


@pytest.mark.parametrize("case", PROBE_B_CASES)
def test_probe_b_bad_instances(tmp_path, case):
    pytest.importorskip("pycocotools")
    from PIL import Image

    data, needle = PROBE_B_CASES[case]
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps(data))
    (tmp_path / "imgs").mkdir()
    Image.new("RGB", (64, 48), "white").save(tmp_path / "imgs" / "a.jpg")
    refused(tmp_path, ["probe", "build", "b", "--coco-instances", inst, "--images", tmp_path / "imgs", "--out", tmp_path / "out"],
            inst, needle)


def test_probe_b_nan_side_refused(tmp_path):
    """A Python-written NaN (not JSON) in a box: mosaictool.io's JSON reader reads it as Python does, and
    the annotation schema refuses it naming the value."""
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps(coco()).replace('"bbox": [1, 1, 10, 10]', '"bbox": [1, 1, NaN, 10]'))
    (tmp_path / "imgs").mkdir()
    refused(tmp_path, ["probe", "build", "b", "--coco-instances", inst, "--images", tmp_path / "imgs", "--out", tmp_path / "out"],
            inst, "annotations[0]: bbox[2]: expected a finite number")
