"""Values checked at the boundary: flags (negative, zero, NaN, inf where meaningless), a run
folder's config.json, checkpoints holding NaN weights, benchmark annotation files, images (size
limits, special files) and Parquet output types. Each refused case: exit 1, one `Error:` line naming
the flag / file and field, no traceback, the inputs byte-identical, nothing half-written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import invoke, refused, snapshot

sys.path.insert(0, str(Path(__file__).parent))


def refused_leaving_files(folder: Path, args, *needles) -> str:
    """`args` refused (one line holding `needles`) with every file under `folder` byte-identical and none
    added: inputs untouched, no output written."""
    def files() -> dict:
        return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    before = files()
    line = refused(invoke(args), *map(str, needles))
    assert files() == before
    return line


# ---- flags ------------------------------------------------------------------------------------------

TRAIN = ["train", "--data", "data.jsonl", "--out", "run"]
FLAGS = [
    (TRAIN + ["--grad-clip", "-1"], "--grad-clip -1.0", "finite number > 0"),
    (TRAIN + ["--grad-clip", "nan"], "--grad-clip nan", "finite"),
    (TRAIN + ["--grad-clip", "inf"], "--grad-clip inf", "finite"),
    (TRAIN + ["--lr", "nan"], "--lr nan", "finite number > 0"),
    (TRAIN + ["--lr", "-1e-4"], "--lr", "> 0"),
    (TRAIN + ["--wd", "inf"], "--wd inf", "finite number >= 0"),
    (TRAIN + ["--steps", "0"], "--steps 0", ">= 1"),
    (TRAIN + ["--epochs", "-1"], "--epochs -1", ">= 1"),
    (TRAIN + ["--batch-size", "0"], "--batch-size 0", ">= 1"),
    (TRAIN + ["--warmup", "-1"], "--warmup -1", ">= 0"),
    (TRAIN + ["--accum-freq", "0"], "--accum-freq 0", ">= 1"),
    (TRAIN + ["--momentum", "nan"], "--momentum nan", "< 1"),
    (TRAIN + ["--momentum", "1"], "--momentum 1.0", "< 1"),
    (TRAIN + ["--hard-images", "-2"], "--hard-images -2", ">= 0"),
    (TRAIN + ["--save-every", "-5"], "--save-every -5", ">= 0"),
    (TRAIN + ["--log-every", "0"], "--log-every 0", ">= 1"),
    (TRAIN + ["--num-workers", "-1"], "--num-workers -1", ">= 0"),
    (TRAIN + ["--lora", "-4"], "--lora -4", ">= 0"),
    (TRAIN + ["--seed", "-1"], "--seed -1", ">= 0"),
    (TRAIN + ["--seed", str(2**40)], "--seed", "< 2147483648"),
    (TRAIN + ["--crop-scale", "nan,1"], "--crop-scale", ""),
    (TRAIN + ["--method", "mosaiclip", "--category-probs", "obj=nan,attr=1,rel=1"], "--category-probs", ""),
    (TRAIN + ["--method", "mosaiclip", "--curriculum-split", "nan"], "--curriculum-split", ""),
    (TRAIN + ["--method", "fsc-clip", "--lambda-global", "nan"], "--lambda-global nan", "finite"),
    (TRAIN + ["--method", "fsc-clip", "--focal-gamma", "inf"], "--focal-gamma inf", "finite"),
    (TRAIN + ["--method", "probe-ft", "--itm-weight", "inf"], "--itm-weight inf", "finite"),
    (["wise-ft", "--zeroshot", "a.pt", "--finetuned", "b.pt", "--out", "w", "--alpha", "-0.5"], "--alpha", ""),
    (["wise-ft", "--zeroshot", "a.pt", "--finetuned", "b.pt", "--out", "w", "--alpha", "0.5,nan"], "--alpha", ""),
    (["wise-ft", "--zeroshot", "a.pt", "--finetuned", "b.pt", "--out", "w", "--alpha", "1.5"], "--alpha", ""),
    (["evaluate", "-b", "aro", "-c", "m.pt", "--batch-size", "0"], "--batch-size", ""),
    (["evaluate", "-b", "aro", "-c", "m.pt", "--limit", "-1"], "--limit", ""),
    (["shard", "data.jsonl", "--out", "shards", "--shard-size", "0"], "--shard-size", ""),
    (["parse", "data.jsonl", "--batch-size", "0"], "--batch-size", ""),
    (["negate", "data.jsonl", "--probs", "nan,1,1"], "--probs", ""),
    (["negate", "data.jsonl", "--probs", "inf,1,1"], "--probs", ""),
    (["world", "--out", "w", "--eval-scale", "nan"], "--eval-scale nan", "finite number > 0"),
    (["world", "--out", "w", "--eval-scale", "inf"], "--eval-scale inf", "finite number > 0"),
    (["demo", "--out", "d", "--cache-dir", "c", "--seeds", "0"], "--seeds 0", ">= 1"),
    (["demo", "--out", "d", "--cache-dir", "c", "--finetune-steps", "0"], "--finetune-steps 0", ">= 1"),
    (["demo", "--out", "d", "--cache-dir", "c", "--finetune-lr", "nan"], "--finetune-lr nan", "finite number > 0"),
    (["demo", "--out", "d", "--cache-dir", "c", "--world-train", "-1"], "--world-train -1", ">= 1"),
    (["demo", "--out", "d", "--cache-dir", "c", "--pretrain-steps", "0"], "--pretrain-steps 0", ">= 1"),
    (["demo", "--out", "d", "--cache-dir", "c", "--max-pos", "0"], "--max-pos 0", ">= 1"),
    (["demo", "--out", "d", "--cache-dir", "c", "--workers", "0"], "--workers 0", ">= 1"),
    (["demo", "--out", "d", "--cache-dir", "c", "--parallel-runs", "0"], "--parallel-runs 0", ">= 1"),
    (["demo", "--out", "d", "--cache-dir", "c", "--loader-workers", "-1"], "--loader-workers -1", ">= 0"),
]


@pytest.mark.parametrize("args, flag, rule", FLAGS,
                         ids=[" ".join(a[a.index(f.split()[0]) - 2 if a[0] == "train" else 0:]) for a, f, _ in FLAGS])
def test_meaningless_flag_values_are_refused(tmp_path, monkeypatch, args, flag, rule):
    monkeypatch.chdir(tmp_path)
    Path("data.jsonl").write_text('{"id": 1, "caption": "a red cube", "image": "x.png"}\n')
    before = snapshot(tmp_path)
    refused(invoke(args), flag, rule)
    assert snapshot(tmp_path) == before  # nothing written: no run folder, world, shards or demo output


# ---- a run folder's config.json, and checkpoints holding NaN weights ----------------------------------


class Stop(Exception):
    pass


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """A resumable run (last.pt at step 1 of 3, no final.pt) and a finished one (final.pt)."""
    from mosaictool.training import TrainConfig, train
    from train_fixtures import make_world, write_tiny_model

    root = tmp_path_factory.mktemp("runs")
    data, model_cfg = make_world(root / "world", n=8), write_tiny_model(root)
    base = {"data": str(data), "model_config": str(model_cfg), "batch_size": 4, "steps": 3, "warmup": 1, "quiet": True}

    def stop(step, metrics, model):
        raise Stop()

    with pytest.raises(Stop):
        train(TrainConfig(out=str(root / "resumable"), save_every=1, **base), on_step=stop)
    final = train(TrainConfig(out=str(root / "finished"), **base))
    return root / "resumable", final, data, model_cfg


def edited_run(run_folder, tmp_path, edit) -> Path:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_folder[0], run)
    config = json.loads((run / "config.json").read_text())
    text = edit(config)
    (run / "config.json").write_text(text if isinstance(text, str) else json.dumps(config, indent=1))
    return run


def _set(**values):
    def edit(config):
        config.update(values)
    return edit


def _drop(name):
    def edit(config):
        del config[name]
    return edit


CONFIG_EDITS = [
    ("truncated", lambda c: json.dumps(c)[:200], "config.json: not a readable JSON file"),
    ("not-an-object", lambda c: "[1, 2]", "config.json: expected a JSON object of the run's settings, got list"),
    ("wrong-type", _set(batch_size="4"), "config.json: batch_size: expected a whole number >= 1, got '4'"),
    ("float-for-int", _set(steps=3.5), "config.json: steps: expected a whole number >= 1"),
    ("negative", _set(grad_clip=-1), "config.json: grad_clip: expected a finite number > 0"),
    ("bool-for-int", _set(lora=True), "config.json: lora: expected a whole number >= 0, got True"),
    ("list-for-str", _set(model=["test-tiny"]), "config.json: model: expected text"),
    ("bad-pair", _set(crop_scale=[0.8]), "config.json: crop_scale:"),
    ("unknown", _set(bogus=1), "config.json: unknown field 'bogus'"),
    ("missing", _drop("data"), "config.json: missing field 'data'"),
    ("unknown-method", _set(method="fancy"), "config.json: --method"),
    ("another-run", _set(seed=7), "config.json: seed is 7, but"),
    ("another-optimizer", _set(optimizer="sgd"), "config.json: optimizer is 'sgd', but"),
    ("locked-tower", _set(lock_image=True), "config.json: lock_image is True, but"),
    ("another-model", _set(model="mosaic-micro"), "config.json: model is 'mosaic-micro', but"),
]


@pytest.mark.parametrize("name, edit, message", CONFIG_EDITS, ids=[c[0] for c in CONFIG_EDITS])
def test_resume_refuses_a_broken_or_foreign_config(run_folder, tmp_path, name, edit, message):
    run = edited_run(run_folder, tmp_path, edit)
    before = snapshot(run)
    refused(invoke(["train", "--resume", run]), message)
    assert snapshot(run) == before


def test_resume_refuses_weights_of_another_architecture(run_folder, tmp_path):
    """The model config file edited in place (its path unchanged): last.pt's tensors no longer fit;
    one line naming the first mismatch and the count, not torch's size-mismatch list."""
    run = edited_run(run_folder, tmp_path, lambda c: None)
    config = json.loads((run / "config.json").read_text())
    wider = tmp_path / "test-tiny.json"
    model = json.loads(Path(run_folder[3]).read_text())
    model["vision_cfg"]["width"] = 48
    wider.write_text(json.dumps(model))
    config["model_config"] = str(wider)
    (run / "config.json").write_text(json.dumps(config, indent=1))
    before = snapshot(run)
    line = refused(invoke(["train", "--resume", run]), "last.pt: its weights do not fit the test-tiny that",
                   "config.json describes", "visual.", "more)")
    assert len(line) < 400
    assert snapshot(run) == before


def nan_copy(src: Path, dst: Path, key_part: str = "visual") -> Path:
    import torch

    ckpt = torch.load(src, weights_only=True)
    key = next(k for k, v in ckpt["state_dict"].items() if key_part in k and v.is_floating_point())
    ckpt["state_dict"][key] = ckpt["state_dict"][key].clone().fill_(float("nan"))
    torch.save(ckpt, dst)
    return dst


def test_resume_refuses_nan_weights_in_last_pt(run_folder, tmp_path):
    run = edited_run(run_folder, tmp_path, lambda c: None)
    nan_copy(run / "last.pt", run / "last.pt")
    before = snapshot(run)
    refused(invoke(["train", "--resume", run]), "last.pt: its weights hold NaN or inf")
    assert snapshot(run) == before


def test_nan_checkpoints_are_refused_where_they_are_read(run_folder, tmp_path):
    _, final, data, model_cfg = run_folder
    bad = nan_copy(final, tmp_path / "nan.pt")
    caps = tmp_path / "caps.jsonl"
    caps.write_text('{"id": 1, "caption": "a red circle left of a blue square"}\n')
    # a one-case SugarCrepe for evaluate
    root = tmp_path / "bench"
    (root / "sugarcrepe").mkdir(parents=True)
    (root / "coco" / "val2017").mkdir(parents=True)
    import shutil

    shutil.copy(Path(data).parent / "images" / "000.png", root / "coco" / "val2017" / "a.png")
    (root / "sugarcrepe" / "add_att.json").write_text(json.dumps({"0": {"filename": "a.png", "caption": "a red circle",
                                                                          "negative_caption": "a blue circle"}}))
    out = tmp_path / "o"
    out.mkdir()
    before = snapshot(tmp_path)
    for args in (
        ["evaluate", "-b", "sugarcrepe:add_att", "-d", root, "-c", bad, "-o", out / "r.jsonl"],
        ["tree-score", caps, "--checkpoint", bad, "-o", out / "t.jsonl"],
        ["wise-ft", "--zeroshot", final, "--finetuned", bad, "--out", out / "w"],
        ["wise-ft", "--zeroshot", bad, "--finetuned", final, "--out", out / "w"],
        ["train", "--data", data, "--out", out / "t", "--model-config", model_cfg, "--pretrained", bad, "--steps", "1"],
    ):
        refused(invoke(args), f"{bad}: its weights hold NaN or inf")
        assert snapshot(tmp_path) == before


# ---- benchmark annotation files ------------------------------------------------------------------------

VG = {"image_path": "1.jpg", "bbox_x": 5, "bbox_y": 6, "bbox_w": 20, "bbox_h": 10, "true_caption": "the cup is on the table",
      "false_caption": "the table is on the cup", "relation_name": "on"}
VGA = {**{k: v for k, v in VG.items() if k != "relation_name"}, "attributes": ["red", "blue"]}
ORDER = {"image": "val2014/a.jpg", "caption": ["a cup on a table", "a table under a cup"]}
SC = {"filename": "a.jpg", "caption": "a red cup", "negative_caption": "a blue cup"}
CREPE_HEADER = "image_id,x,y,width,height,caption,hard_negs\n"
CREPE_ROW = {"image_id": "1", "x": "5", "y": "6", "width": "20", "height": "10", "caption": "a cup", "hard_negs": "['a mug']"}
PROBE_C_GROUP = {"id": 1, "split": "composition", "images": ["a.png", "b.png"], "texts": ["a red cup", "a blue cup"],
                 "category": "colour"}


def aro_file(name: str, entry) -> tuple[str, str, str]:
    files = {"VG-Relation": "visual_genome_relation.json", "VG-Attribution": "visual_genome_attribution.json",
             "COCO-Order": "coco_karpathy_test.json", "Flickr30k-Order": "flickr30k_test.json"}
    good = {"VG-Relation": VG, "VG-Attribution": VGA}.get(name, ORDER)
    return f"aro:{name}", f"aro/{files[name]}", json.dumps([good, entry])


def crepe_file(row: dict) -> tuple[str, str, str]:
    def line(r):
        return ",".join(f'"{r[c]}"' for c in CREPE_HEADER.strip().split(",")) + "\n"

    return "crepe:productivity", "crepe/prod_hard_negatives/atom/prod_vg_hard_negs_atom_complexity_4.csv", \
        CREPE_HEADER + line(CREPE_ROW) + line({**CREPE_ROW, **row})


ANNOTATIONS = [
    (*aro_file("VG-Relation", {**VG, "bbox_w": -20}), "entry 1: bbox_w: expected a finite number > 0, got -20"),
    (*aro_file("VG-Relation", {**VG, "bbox_h": 0}), "entry 1: bbox_h: expected a finite number > 0, got 0"),
    (*aro_file("VG-Relation", {**VG, "bbox_x": "5"}), "entry 1: bbox_x: expected a finite number, got str"),
    (*aro_file("VG-Relation", {**VG, "bbox_y": True}), "entry 1: bbox_y: expected a finite number, got bool"),
    (*aro_file("VG-Relation", {**VG, "image_path": None}), "entry 1: image_path: expected a non-empty string, got null"),
    (*aro_file("VG-Relation", {k: v for k, v in VG.items() if k != "false_caption"}), "entry 1: missing 'false_caption'"),
    (*aro_file("VG-Relation", {**VG, "true_caption": ["a", "b"]}), "entry 1: true_caption: expected a non-empty string, got list"),
    (*aro_file("VG-Relation", ["1.jpg", 5, 6]), "entry 1: expected an object, got list"),
    ("aro:VG-Relation", "aro/visual_genome_relation.json", '{"0": {}}', "the top: expected a list of entries, got object"),
    ("aro:VG-Relation", "aro/visual_genome_relation.json", json.dumps([VG, {**VG, "bbox_x": float("nan")}]),
     "entry 1: bbox_x: expected a finite number, got nan"),
    (*aro_file("VG-Attribution", {**VGA, "attributes": ["red"]}),
     "entry 1: attributes: expected a list of 2 strings, got ['red']"),
    (*aro_file("VG-Attribution", {**VGA, "attributes": "red blue"}),
     "entry 1: attributes: expected a list of 2 strings, got str"),
    (*aro_file("VG-Attribution", {**VGA, "bbox_w": -1.5}), "entry 1: bbox_w: expected a finite number > 0, got -1.5"),
    (*aro_file("COCO-Order", {**ORDER, "image": None}), "entry 1: image: expected a non-empty string, got null"),
    (*aro_file("COCO-Order", {**ORDER, "caption": []}),
     "entry 1: caption: expected a non-empty string or a non-empty list of non-empty strings, got []"),
    (*aro_file("Flickr30k-Order", {**ORDER, "caption": 3}),
     "entry 1: caption: expected a non-empty string or a non-empty list of non-empty strings, got int"),
    (*aro_file("Flickr30k-Order", {"image": "a.jpg"}), "entry 1: missing 'caption'"),
    ("sugarcrepe:add_att", "sugarcrepe/add_att.json", json.dumps({"0": SC, "1": {**SC, "filename": None}}),
     "case '1': filename: expected a non-empty string, got null"),
    ("sugarcrepe:add_att", "sugarcrepe/add_att.json", json.dumps({"0": SC, "1": {**SC, "negative_caption": ["x"]}}),
     "case '1': negative_caption: expected a non-empty string, got list"),
    ("sugarcrepe:add_att", "sugarcrepe/add_att.json", json.dumps({"0": SC, "1": "a.jpg"}),
     "case '1': expected an object, got str"),
    (*crepe_file({"x": "abc"}), "line 3: x: expected a number, got 'abc'"),
    (*crepe_file({"width": "-3"}), "line 3: width: expected a finite number > 0, got -3.0"),
    (*crepe_file({"height": "inf"}), "line 3: height: expected a finite number, got 'inf'"),
    (*crepe_file({"image_id": ""}), "line 3: image_id: expected a non-empty string, got ''"),
    ("retrieval:coco", "aro/coco_karpathy_test.json", json.dumps([ORDER, {**ORDER, "image": 7}]),
     "entry 1: image: expected a non-empty string, got int"),
    ("probe_c", "probe_c/probe_c.jsonl",
     json.dumps(PROBE_C_GROUP) + "\n" + json.dumps({**PROBE_C_GROUP, "images": ["a.png"]}) + "\n",
     "line 2: images: expected a list of 2 non-empty strings, got ['a.png']"),
    ("probe_c", "probe_c/probe_c.jsonl", json.dumps({**PROBE_C_GROUP, "texts": "a red cup"}) + "\n",
     "line 1: texts: expected a list of 2 non-empty strings, got str"),
]


@pytest.mark.parametrize("bench, file, content, message", ANNOTATIONS,
                         ids=[f"{a[0]}-{a[3].split(':')[1].strip()}" for a in ANNOTATIONS])
def test_malformed_annotation_entries(run_folder, tmp_path, bench, file, content, message):
    root = tmp_path / "bench"
    (root / Path(file)).parent.mkdir(parents=True)
    (root / file).write_text(content)
    before = snapshot(tmp_path)
    line = refused(invoke(["evaluate", "-b", bench, "-d", root, "-c", run_folder[1], "-o", tmp_path / "r.jsonl"]),
                   str(root / file), message)
    assert line.count(str(root / file)) == 1
    assert snapshot(tmp_path) == before


# ---- images: size limits before decoding, special files never opened -------------------------------------


def bomb_png(width: int = 30000, height: int = 30000) -> bytes:
    """A PNG of a few dozen bytes that declares width x height pixels (a decompression bomb)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def special_image(kind: str, path: Path) -> tuple[Path, str]:
    """Make `path` a bad image of `kind`; -> (the path the record names, words the error holds)."""
    import os

    if kind == "bomb":
        path.write_bytes(bomb_png())
        return path, "declares more than 89478485 pixels"
    if kind == "bomb-1.5x":  # between Pillow's warning and its error
        path.write_bytes(bomb_png(12000, 11000))
        return path, "declares more than 89478485 pixels"
    if kind == "fifo":
        os.mkfifo(path)
        return path, "is a named pipe (FIFO), not an image file"
    if kind == "folder":
        path.mkdir()
        return path, "is a folder, not an image file"
    if kind == "device":
        return Path("/dev/zero"), "/dev/zero is a character device, not an image file"
    raise ValueError(kind)


IMAGE_KINDS = ["bomb", "bomb-1.5x", "fifo", "folder", "device"]


@pytest.fixture
def world_copy(tmp_path):
    from train_fixtures import make_world

    data = make_world(tmp_path / "in", n=8)
    return data, tmp_path / "out"


def with_bad_image(data: Path, kind: str) -> tuple[Path, str]:
    path, words = special_image(kind, data.parent / "images" / "bad.png")
    records = [json.loads(x) for x in data.read_text().splitlines()]
    records[3]["image"] = str(path) if kind == "device" else "images/bad.png"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    return data, words


def refuses_then_skips(args, made: Path, data: Path, *words: str, run=invoke) -> None:
    """`args` (a command reading `data`, whose record img-3 has a bad image) stop with one line naming
    the record and `words`, having made nothing at `made`; with --skip-bad they skip it and say so.
    `data`'s folder is unchanged."""
    before = snapshot(data.parent)
    refused(run(args), "record 'img-3'", *words, "--skip-bad")
    assert not made.exists()
    skipped = run(args + ["--skip-bad"])
    assert skipped.exit_code == 0, skipped.stderr
    assert "skipped 1 bad record(s)" in skipped.stderr and words[-1] in skipped.stderr
    assert snapshot(data.parent) == before


def invoke_within(args, seconds: float, fifo: Path | None = None):
    """`invoke` in a thread that must finish within `seconds`: a command that opened a FIFO for
    reading blocks forever (the FIFO is then opened for writing and closed, which releases it)."""
    import os
    import threading

    box = []
    thread = threading.Thread(target=lambda: box.append(invoke(args)), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None and fifo.exists():
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail(f"{' '.join(map(str, args))} hung")
    return box[0]


@pytest.mark.parametrize("kind", IMAGE_KINDS)
def test_shard_refuses_or_skips_special_and_huge_images(world_copy, kind):
    data, out = world_copy
    data, words = with_bad_image(data, kind)
    fifo = data.parent / "images" / "bad.png" if kind == "fifo" else None
    shard = ["shard", data, "--image-root", data.parent, "--out", out / "shards", "-q"]
    shard += ["--allow-outside-root"] * (kind == "device")  # /dev/zero lies outside the root: refused for that first
    refuses_then_skips(shard, out / "shards", data, words, run=lambda args: invoke_within(args, 60, fifo))
    assert json.loads((out / "shards" / "sizes.json").read_text()) == {"000000.tar": 7}


@pytest.mark.parametrize("kind", IMAGE_KINDS)
def test_train_refuses_or_skips_special_and_huge_images(world_copy, kind):
    data, out = world_copy
    data, words = with_bad_image(data, kind)
    args = ["train", "--data", data, "--out", out / "run", "--batch-size", "4", "--steps", "1", "--model", "mosaic-micro",
            "--device", "cpu", "-q", *["--allow-outside-root"] * (kind == "device")]
    refuses_then_skips(args, out / "run", data, words)


def test_image_transform_refuses_a_bomb_inside_a_shard():
    """Images read from a shard (written by other tools) are size-checked before decoding too."""
    import random

    from mosaictool.images import ImageError
    from mosaictool.training.transform import ImageTransform

    with pytest.raises(ImageError, match="declares more than"):
        ImageTransform(32, augment=False)(bomb_png(), random.Random(0))


@pytest.mark.parametrize("kind", ["bomb", "folder"])
def test_evaluate_refuses_a_bomb_or_a_folder_as_a_benchmark_image(run_folder, tmp_path, kind):
    root = tmp_path / "bench"
    (root / "sugarcrepe").mkdir(parents=True)
    (root / "coco" / "val2017").mkdir(parents=True)
    _, words = special_image(kind, root / "coco" / "val2017" / "a.png")
    (root / "sugarcrepe" / "add_att.json").write_text(json.dumps({"0": SC, "1": {**SC, "filename": "a.png"}}))
    import shutil

    shutil.copy(Path(run_folder[2]).parent / "images" / "000.png", root / "coco" / "val2017" / "a.jpg")
    before = snapshot(tmp_path)
    if kind == "folder":  # not a file: counted with the missing images, which --skip-missing skips
        refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "-d", root, "-c", run_folder[1], "-o", tmp_path / "r.jsonl"]),
                "1 image file(s) missing", "a.png")
    else:
        refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "-d", root, "-c", run_folder[1], "-o", tmp_path / "r.jsonl"]),
                "a.png", words)
    assert snapshot(tmp_path) == before


# ---- Parquet output: one type per column -------------------------------------------------------------------


def decompose_input(*extras: dict, ids=None) -> str:
    graph = json.loads((Path(__file__).parent / "data" / "decompose" / "input.jsonl").read_text().splitlines()[0])
    ids = ids or list(range(1, len(extras) + 1))
    return "".join(json.dumps({**graph, "id": i, **extra}) + "\n" for i, extra in zip(ids, extras))


def test_parquet_keeps_integer_ids_and_equals_jsonl(tmp_path):
    from mosaictool.io import read_records

    src = tmp_path / "in.jsonl"
    src.write_text(decompose_input({}, {}, {}, ids=[7, 12, 3]))
    assert invoke(["decompose", src, "-o", tmp_path / "o.parquet", "-q"]).exit_code == 0
    assert invoke(["decompose", src, "-o", tmp_path / "o.jsonl", "-q"]).exit_code == 0
    parquet, jsonl = list(read_records(tmp_path / "o.parquet")), list(read_records(tmp_path / "o.jsonl"))
    assert [r["id"] for r in parquet] == [7, 12, 3] and all(type(r["id"]) is int for r in parquet)
    assert [r["subgraph_keys"] for r in parquet] == [r["subgraph_keys"] for r in jsonl]


PARQUET_CONFLICTS = [
    (({"meta": 1}, {"meta": "a"}), None, "meta is an integer in output record 1 but a string in output record 2"),
    (({}, {}), [1, "b"], "id is an integer in output record 1 but a string in output record 2"),
    (({"meta": {"a": 1}}, {"meta": {"a": "s"}}), None, "meta.a is an integer in output record 1 but a string in output record 2"),
    (({"meta": {"a": 1}}, {"meta": "s"}), None, "meta is an object in output record 1 but a string in output record 2"),
    (({"meta": [1]}, {"meta": ["x"]}), None, "meta[] is an integer in output record 1 but a string in output record 2"),
    (({"meta": True}, {"meta": 3}), None, "meta is true/false in output record 1 but an integer in output record 2"),
    (({"meta": [1]}, {"meta": {"a": 1}}), None, "meta is a list in output record 1 but an object in output record 2"),
]


@pytest.mark.parametrize("extras, ids, message", PARQUET_CONFLICTS,
                         ids=[m.split(" is ")[0] + "-" + m.split(" but ")[1].split(" in ")[0] for _, _, m in PARQUET_CONFLICTS])
def test_parquet_refuses_a_field_whose_type_changes(tmp_path, extras, ids, message):
    src = tmp_path / "in.jsonl"
    src.write_text(decompose_input(*extras, ids=ids))
    out = tmp_path / "out"
    out.mkdir()
    before = snapshot(tmp_path)
    refused(invoke(["decompose", src, "-o", out / "o.parquet", "-q"]), f"{out / 'o.parquet'}: cannot write Parquet", message)
    assert snapshot(tmp_path) == before  # no output, no temp file


def test_parquet_integers_among_floats_become_floats(tmp_path):
    from mosaictool.io import read_records

    src = tmp_path / "in.jsonl"
    src.write_text(decompose_input({"score": 1}, {"score": 2.5}, {"score": None}))
    assert invoke(["decompose", src, "-o", tmp_path / "o.parquet", "-q"]).exit_code == 0
    assert [r["score"] for r in read_records(tmp_path / "o.parquet")] == [1.0, 2.5, None]


# ---- more of the same: model config files, a run folder's other files, audit input, slimmed records ------

TINY_TEXT = {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}
TINY_VISION = {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 8}
MODEL_CONFIGS = [
    ({"embed_dim": "32", "vision_cfg": TINY_VISION, "text_cfg": TINY_TEXT},
     "model config: embed_dim: expected an integer > 0, got str"),
    ({"embed_dim": 32, "vision_cfg": "big", "text_cfg": TINY_TEXT}, "model config: vision_cfg: expected an object, got str"),
    ({"embed_dim": 32, "vision_cfg": {**TINY_VISION, "width": -32}, "text_cfg": TINY_TEXT},
     "vision_cfg.width: expected an integer > 0, got -32"),
    ({"embed_dim": 32, "vision_cfg": {**TINY_VISION, "image_size": [32]}, "text_cfg": TINY_TEXT},
     "vision_cfg.image_size: expected"),
    ({"embed_dim": 32, "vision_cfg": TINY_VISION, "text_cfg": {**TINY_TEXT, "heads": 0}},
     "text_cfg.heads: expected an integer > 0, got 0"),
    ({"embed_dim": 32, "vision_cfg": {k: v for k, v in TINY_VISION.items() if k != "head_width"}, "text_cfg": TINY_TEXT},
     "cannot build the model tiny: embed_dim and num_heads must be greater than 0"),  # 32 wide, heads of 64
]


@pytest.mark.parametrize("config, message", MODEL_CONFIGS, ids=[m.split(": ")[-2] if ": " in m else m for _, m in MODEL_CONFIGS])
def test_bad_model_config_file(tmp_path, config, message):
    (tmp_path / "tiny.json").write_text(json.dumps(config))
    (tmp_path / "caps.jsonl").write_text('{"id": 1, "caption": "a red circle"}\n')
    before = snapshot(tmp_path)
    refused(invoke(["tree-score", tmp_path / "caps.jsonl", "--model-config", tmp_path / "tiny.json", "-o", tmp_path / "t.jsonl"]),
            "tiny.json", message)
    assert snapshot(tmp_path) == before


def test_resume_after_a_torn_metrics_line_and_a_broken_one(run_folder, tmp_path):
    run = edited_run(run_folder, tmp_path, lambda c: None)
    metrics = run / "metrics.jsonl"
    good = metrics.read_text()
    metrics.write_text(good + '{"step": 2, "loss": 1.')  # the line a kill -9 cut
    result = invoke(["train", "--resume", run, "-q"])
    assert result.exit_code == 0, result.stderr
    assert [json.loads(x)["step"] for x in metrics.read_text().splitlines()] == [1, 2, 3]

    run = edited_run(run_folder, tmp_path / "again", lambda c: None)
    (run / "metrics.jsonl").write_text("not json\n" + good)
    before = snapshot(run)
    refused(invoke(["train", "--resume", run]), "metrics.jsonl:1: not a metrics line")
    assert snapshot(run) == before


@pytest.mark.parametrize("content, message", [
    ("[[1, 2], [0", "not readable JSON"),
    ('[[1, "x"]]', "[0][1]: expected an integer >= 0, got str"),
    ("[[1]]", "holds 1 rows for 8 records"),
], ids=["truncated", "wrong-type", "other-data"])
def test_resume_refuses_a_broken_mined_hard_images_file(run_folder, tmp_path, content, message):
    run = edited_run(run_folder, tmp_path, _set(hard_images=2))
    # a run that mined hard images: its config and last.pt say so (the copy's last.pt was written without)
    import torch

    state = torch.load(run / "last.pt", weights_only=True)
    state["config"]["hard_images"] = 2
    torch.save(state, run / "last.pt")
    (run / "mined_hard_images.json").write_text(content)
    before = snapshot(run)
    refused(invoke(["train", "--resume", run]), "mined_hard_images.json: ", message, "delete it")
    assert snapshot(run) == before


def test_world_audit_checks_the_texts_it_reads(tmp_path):
    src = tmp_path / "texts.jsonl"
    src.write_text('{"id": 1, "caption": "a", "texts": {"positives": "a red cube"}}\n')
    refused(invoke(["world", "audit", src]), f"{src}:1: texts.positives: expected a list of objects or null, got str")


def test_probe_ft_reads_the_swapped_attribute_of_a_slimmed_record(tmp_path):
    """Training keeps a slim copy of each record: the negative's `from` (the attribute an attribute
    swap replaced), which probe-ft's synonym positives read, must survive it."""
    from PIL import Image

    from mosaictool import methods
    from mosaictool.training.traindata import TrainData

    Image.new("RGB", (8, 8), "red").save(tmp_path / "a.png")
    negative = {"text": "a tiny bed", "kind": "graph", "positive": 1, "transform": "f_attr:replace", "from": "large",
                "to": "tiny"}
    record = {"id": 1, "image": "a.png", "caption": "a large bed", "texts": {
        "positives": [{"text": "a large bed", "kind": "caption"}, {"text": "a large bed", "kind": "object"}],
        "negatives": [negative]}}
    (tmp_path / "r.jsonl").write_text(json.dumps(record) + "\n")
    data = TrainData.load(str(tmp_path / "r.jsonl"), method=methods.create("probe-ft", {}))
    assert data.records[0]["texts"]["negatives"][0]["from"] == "large"


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.pop("model_name"), "missing 'model_name'"),
    (lambda c: c.update(model_cfg="mosaic-tiny"), "model_cfg: expected"),
    (lambda c: c.update(quick_gelu=0), "quick_gelu: expected true or false, got int"),
], ids=["no-model-name", "model-cfg-a-string", "quick-gelu-an-int"])
def test_an_edited_checkpoint_header_is_one_line(run_folder, tmp_path, edit, message):
    import torch

    ckpt = torch.load(run_folder[1], weights_only=True)
    edit(ckpt)
    torch.save(ckpt, tmp_path / "m.pt")
    (tmp_path / "caps.jsonl").write_text('{"id": 1, "caption": "a red circle"}\n')
    refused(invoke(["tree-score", tmp_path / "caps.jsonl", "--checkpoint", tmp_path / "m.pt", "-o", tmp_path / "t.jsonl"]),
            f"{tmp_path / 'm.pt'}: {message}")
    assert not (tmp_path / "t.jsonl").exists()


def test_resume_refuses_a_last_pt_without_its_step(run_folder, tmp_path):
    import torch

    run = edited_run(run_folder, tmp_path, lambda c: None)
    state = torch.load(run / "last.pt", weights_only=True)
    state["step"] = "1"
    torch.save(state, run / "last.pt")
    before = snapshot(run)
    refused(invoke(["train", "--resume", run]), "last.pt: step: expected an integer >= 0, got str")
    assert snapshot(run) == before
