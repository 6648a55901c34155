"""`mosaictool evaluate` end to end with tiny random models, and the world splits (`world`, `world-val`)."""

from __future__ import annotations

import csv
import json
import os

import orjson
import pytest
from PIL import Image
from typer.testing import CliRunner

from helpers import refused_leaving_files
from mosaictool.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from mosaictool.model.openclip import create, save_checkpoint

    d = tmp_path_factory.mktemp("ckpt")
    paths = []
    for seed in (0, 1):
        path = d / f"tiny{seed}.pt"
        save_checkpoint(path, create("mosaic-tiny", seed=seed))
        paths.append(str(path))
    return paths


def _image(path, colour="red", size=(24, 24)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


@pytest.fixture
def data(tmp_path):
    """A SugarCrepe-format root with three subsets of a few cases."""
    (tmp_path / "sugarcrepe").mkdir()
    colours = ["red", "green", "blue"]
    for sub in ("add_att", "swap_obj", "replace_rel"):
        cases = {str(i): {"filename": f"{c}.jpg", "caption": f"a {c} square",
                          "negative_caption": f"a {colours[i - 1]} circle"} for i, c in enumerate(colours)}
        (tmp_path / "sugarcrepe" / f"{sub}.json").write_text(json.dumps(cases))
    for c in colours:
        _image(tmp_path / "coco" / "val2017" / f"{c}.jpg", c)
    return tmp_path


def _rows(path):
    return [orjson.loads(line) for line in path.read_text().splitlines()]


def test_list_shows_benchmarks_subtasks_and_layout():
    result = runner.invoke(app, ["evaluate", "--list"])
    assert result.exit_code == 0
    for text in ("aro\n", "VG-Relation, VG-Attribution, COCO-Order, Flickr30k-Order", "sugarcrepe", "coco/val2017/<filename>",
                 "crepe/VG_100K/<image_id>.jpg", "zeroshot/<task>/classnames.txt", "world-val", "retrieval"):
        assert text in result.stdout


def test_evaluate_two_models_jsonl_report_and_plot(data, checkpoints, tmp_path):
    out, report, png = tmp_path / "r.jsonl", tmp_path / "r.md", tmp_path / "cmp.png"
    args = ["evaluate", "--bench", "sugarcrepe:add_att+swap_obj", "-c", checkpoints[0], "-c", checkpoints[1],
            "--data-root", str(data),
            "-o", str(out), "--report", str(report), "--plot", str(png), "--batch-size", "2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    rows = _rows(out)
    assert {r["model"] for r in rows} == set(checkpoints)
    assert set(rows[0]) == {"model", "benchmark", "subtask", "metric", "value", "n", "detail"}
    acc = [r for r in rows if r["subtask"] == "add_att" and r["metric"] == "accuracy"]
    assert len(acc) == 2 and all(r["n"] == 3 and 0 <= r["value"] <= 1 for r in acc)
    assert not [r for r in rows if r["subtask"] == "headline"]  # only with all 7 subsets
    text = report.read_text()
    assert text.startswith("| benchmark | subtask | metric | n | " + " | ".join(checkpoints))
    assert "| sugarcrepe | swap_obj | mu_c (%) | 3 |" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_results_do_not_depend_on_batch_size_and_go_to_stdout(data, checkpoints):
    outs = []
    for bs in ("1", "3"):
        result = runner.invoke(app, ["evaluate", "-b", "sugarcrepe:add_att", "-c", checkpoints[0], "-d", str(data),
                                     "--batch-size", bs, "-q"])
        assert result.exit_code == 0, result.stderr
        outs.append([orjson.loads(line) for line in result.stdout.splitlines()])
        assert "| sugarcrepe | add_att | accuracy (%) | 3 |" in result.stderr
    for a, b in zip(*outs):
        assert a["value"] == pytest.approx(b["value"], abs=1e-6)


def test_missing_images_stop_with_count_or_are_skipped_and_reported(data, checkpoints, tmp_path):
    (data / "coco" / "val2017" / "green.jpg").unlink()
    out = tmp_path / "r.jsonl"
    args = ["evaluate", "-b", "sugarcrepe:add_att+swap_obj", "-c", checkpoints[0], "-d", str(data), "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert "Error: sugarcrepe: 1 image file(s) missing" in result.stderr
    assert "green.jpg" in result.stderr and "--skip-missing" in result.stderr
    assert not out.exists()
    result = runner.invoke(app, [*args, "--skip-missing"])
    assert result.exit_code == 0, result.stderr
    assert "sugarcrepe: skipped 2 of 6 test case(s): 1 image file(s) missing" in result.stderr
    rows = _rows(out)
    skipped = [r for r in rows if r["metric"] == "skipped_missing_images"]
    assert skipped == [{"model": checkpoints[0], "benchmark": "sugarcrepe", "subtask": "*", "metric": "skipped_missing_images",
                        "value": 2.0, "n": 6, "detail": False}]
    assert [r["n"] for r in rows if r["metric"] == "accuracy" and r["subtask"] == "add_att"] == [2]


@pytest.mark.parametrize(
    "args, message",
    [
        (["-c", "x.pt"], "choose benchmarks with --bench"),
        (["-b", "nope", "-c", "CKPT"], "unknown benchmark 'nope'"),
        (["-b", "sugarcrepe", "--pretrained", "openai"], "--pretrained needs --model"),
        (["-b", "sugarcrepe"], "give --checkpoint FILE"),
        (["-b", "sugarcrepe", "-c", "missing.pt"], "missing.pt: checkpoint not found"),
        (["-b", "sugarcrepe:nope", "-c", "CKPT"], "unknown subtask(s) nope"),
        (["-b", "aro", "-c", "CKPT"], "aro: missing under"),
        (["-b", "sugarcrepe", "-c", "CKPT", "--perturb"], "--perturb applies to the retrieval benchmark"),
    ],
)
def test_user_errors(args, message, data, checkpoints):
    args = [a.replace("CKPT", checkpoints[0]) for a in args]
    result = runner.invoke(app, ["evaluate", "-d", str(data), *args])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ") and message in result.stderr


# ---------------------------------------------------------------- the world (`world`, `world-val`)


def _world_split(split_dir, colour):
    aro = split_dir / "aro"
    _image(aro / "images" / "s0.png", colour, (32, 32))
    rel = [{"image_path": "s0.png", "bbox_x": 0, "bbox_y": 0, "bbox_w": 32, "bbox_h": 16,
            "true_caption": "a red cube left of a blue ball",
            "false_caption": "a blue ball left of a red cube", "relation_name": "left of"}] * 3
    attr = [{"image_path": "s0.png", "bbox_x": 0, "bbox_y": 0, "bbox_w": 32, "bbox_h": 32,
             "true_caption": "a red cube and a blue ball",
             "false_caption": "a blue cube and a red ball", "attributes": ["red", "blue"]}] * 25
    (aro / "visual_genome_relation.json").write_text(json.dumps(rel))
    (aro / "visual_genome_attribution.json").write_text(json.dumps(attr))
    (aro / "coco_karpathy_test.json").write_text(json.dumps([{"image": "scenes/s0.png",
                                                              "caption": ["a red cube to the left of a blue ball."]},
                                                             {"image": "scenes/s1.png",
                                                              "caption": ["a small green ball above a cube."]}]))
    _image(split_dir / "coco" / "scenes" / "s0.png", colour)
    _image(split_dir / "coco" / "scenes" / "s1.png", "green")
    _image(split_dir / "crepe" / "VG_100K" / "5.jpg", colour)
    prod = split_dir / "crepe" / "prod_hard_negatives" / "atom" / "prod_vg_hard_negs_atom_complexity_4.csv"
    prod.parent.mkdir(parents=True)
    with prod.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image_id", "x", "y", "width", "height", "caption", "hard_negs"])
        w.writerow(["5", "0", "0", "10", "10", "a red cube", str(["a blue cube", "a red ball"])])
    zs = split_dir / "zeroshot" / "colour"
    (zs / "classnames.txt").parent.mkdir(parents=True)
    (zs / "classnames.txt").write_text("red\nblue\n")
    (zs / "templates.txt").write_text("a {c} object.\n")
    _image(zs / "test" / "0" / "a.png", "red")
    _image(zs / "test" / "1" / "a.png", "blue")


@pytest.fixture
def world(tmp_path):
    w = tmp_path / "world"
    (w).mkdir()
    (w / "manifest.json").write_text(json.dumps({"seed": 0}))
    _world_split(w / "test", "red")
    _world_split(w / "val", "blue")
    return w


def test_world_and_world_val_end_to_end(world, checkpoints, tmp_path):
    out = tmp_path / "w.jsonl"
    result = runner.invoke(app, ["evaluate", "-b", "world,world-val", "-c", checkpoints[0], "-d",
                                 str(world), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.stderr
    rows = _rows(out)
    subtasks = {(r["benchmark"], r["subtask"]) for r in rows}
    for bench in ("world", "world-val"):
        for sub in ("aro/VG-Relation", "aro/VG-Attribution", "aro/COCO-Order", "crepe/atom", "zeroshot/colour",
                    "retrieval/coco", "headline"):
            assert (bench, sub) in subtasks
    head = [r for r in rows if r["subtask"] == "headline" and r["benchmark"] == "world"][0]
    parts = [r for r in rows if r["benchmark"] == "world" and (
        (r["subtask"] in ("aro/VG-Relation", "aro/VG-Attribution", "aro/COCO-Order") and r["metric"] == "accuracy")
        or (r["subtask"] == "crepe/atom" and r["metric"] == "R@1"))]
    assert len(parts) == 4
    assert head["value"] == pytest.approx(sum(p["value"] for p in parts) / 4)
    # the validation split is scored on its own images
    val = {(r["subtask"], r["metric"]): r["value"] for r in rows if r["benchmark"] == "world-val"}
    test = {(r["subtask"], r["metric"]): r["value"] for r in rows if r["benchmark"] == "world"}
    assert val[("aro/VG-Relation", "mu_c")] != test[("aro/VG-Relation", "mu_c")]


def test_world_errors(world, checkpoints, tmp_path):
    result = runner.invoke(app, ["evaluate", "-b", "world", "-c", checkpoints[0], "-d", str(world / "test")])
    assert result.exit_code == 1 and "--data-root is the world folder itself" in result.stderr
    empty = tmp_path / "empty"
    (empty / "test").mkdir(parents=True)
    result = runner.invoke(app, ["evaluate", "-b", "world", "-c", checkpoints[0], "-d", str(empty)])
    assert result.exit_code == 1 and "no benchmark files under" in result.stderr


def test_retrieval_with_perturbations(world, checkpoints):
    result = runner.invoke(app, ["evaluate", "-b", "retrieval", "--perturb", "-c", checkpoints[0], "-d",
                                 str(world / "test"), "-q"])
    assert result.exit_code == 0, result.stderr
    rows = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert sorted({r["subtask"] for r in rows}) == [
        "coco", "coco/shuffle_allbut_nouns_and_adj", "coco/shuffle_nouns_and_adj", "coco/shuffle_trigrams",
        "coco/shuffle_within_trigrams"]
    assert {r["metric"] for r in rows} == {f"{d}_R@{k}" for d in ("image_to_text", "text_to_image") for k in (1, 5, 10)}


def test_an_image_linked_out_of_the_data_root_is_refused_unless_allowed(tmp_path):
    from mosaictool.bench import get
    from mosaictool.bench.engine import EngineOptions, prepare
    from mosaictool.errors import MosaicError
    from mosaictool.world import generate_world

    world = tmp_path / "world"
    generate_world(world, train=1, eval_scale=0.01)
    for split in ("val", "test"):
        image = sorted((world / split / "aro" / "images").glob("relation_*.png"))[0]
        outside = tmp_path / f"outside-{split}.png"
        outside.write_bytes(image.read_bytes())
        image.unlink()
        image.symlink_to(outside)
    with pytest.raises(MosaicError, match=r"^world: image '.*relation_\d+\.png' leads outside --data-root .*--allow-outside-root"):
        prepare(get("world"), world, None, EngineOptions())
    assert prepare(get("world"), world, None, EngineOptions(allow_outside_root=True)).items


@pytest.mark.parametrize("damage", ["nan", "random", "width", "edited", "old-format"])
def test_a_damaged_embedding_cache_is_discarded_with_one_line_and_scores_stay(checkpoints, data, tmp_path, damage):
    import numpy as np

    cache = tmp_path / "cache"
    args = ["evaluate", "--bench", "sugarcrepe:add_att", "-c", checkpoints[0], "--data-root", str(data), "--cache-dir",
            str(cache), "-q", "-o"]
    first = CliRunner().invoke(app, [*args, str(tmp_path / "a.jsonl")])
    assert first.exit_code == 0, first.stderr
    (npz,) = cache.glob("*/image.npz")
    with np.load(npz) as z:
        keys, vectors = z["keys"], z["vectors"]
        kept = {} if damage == "old-format" or "checksum" not in z else {"checksum": z["checksum"]}
    if damage == "nan":
        vectors[0] = np.nan
    elif damage == "random":
        vectors = np.random.default_rng(0).normal(size=vectors.shape).astype(np.float32)
    elif damage == "width":
        vectors = vectors[:, :-1]
    elif damage == "edited":  # unit length and finite, but not what the model computed
        vectors = vectors[::-1].copy()
    np.savez(npz, keys=keys, vectors=vectors, **kept)
    again = CliRunner().invoke(app, [*args, str(tmp_path / "b.jsonl")])
    assert again.exit_code == 0, again.stderr
    notes = [line for line in again.stderr.splitlines() if line.startswith("cache:")]
    assert len(notes) == 1 and str(npz) in notes[0] and "discarded" in notes[0], again.stderr
    assert _rows(tmp_path / "b.jsonl") == _rows(tmp_path / "a.jsonl")


# --- bad input (moved from test_bad_flags_more.py) ---

BENCH = {
    "empty item": ("aro,,sugarcrepe", "empty item"),
    "trailing comma": ("aro,", "empty item"),
    "benchmark twice": ("sugarcrepe,sugarcrepe", "sugarcrepe is named twice"),
    "whole and subtask": ("aro,aro:VG-Relation", "aro is named twice"),
    "empty subtask list": ("aro:", "empty subtask"),
    "only a plus": ("aro:+", "empty subtask"),
    "empty subtask between plus": ("aro:VG-Relation++VG-Attribution", "empty subtask"),
    "subtask twice": ("aro:VG-Relation+VG-Relation", "named twice"),
}


@pytest.mark.parametrize("spec, needle", BENCH.values(), ids=list(BENCH))
def test_bad_bench_lists(tmp_path, spec, needle):
    (tmp_path / "root").mkdir()
    refused_leaving_files(tmp_path, ["evaluate", "-b", spec, "-c", tmp_path / "m.pt", "-d", tmp_path / "root", "-o", tmp_path / "r.jsonl"],
            "--bench", needle)


def test_bench_spec_keeps_spaces_and_subtasks():
    from mosaictool.bench.engine import parse_bench_spec

    assert parse_bench_spec(" aro : VG-Relation + COCO-Order , sugarcrepe") == [("aro", ["VG-Relation", "COCO-Order"]),
                                                                               ("sugarcrepe", None)]


@pytest.mark.parametrize("kind", ["folder", "FIFO"])
def test_evaluate_checkpoint_not_a_file(tmp_path, kind):
    (tmp_path / "root").mkdir()
    ckpt = tmp_path / "m.pt"
    ckpt.mkdir() if kind == "folder" else os.mkfifo(ckpt)
    words = "a folder" if kind == "folder" else "a FIFO"
    refused_leaving_files(tmp_path, ["evaluate", "-b", "sugarcrepe", "-c", ckpt, "-d", tmp_path / "root", "-o", tmp_path / "r.jsonl"],
            f"{ckpt}: not a weights file ({words}")

