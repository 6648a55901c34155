"""Output folders that are not what the command expects, and --category-probs values that mean nothing:
one `Error:` line naming the flag or folder, exit 1, and every file already there kept byte for byte."""

from __future__ import annotations

import pytest

from clirun import run
from mosaictool.errors import MosaicError
from mosaictool.methods.mosaiclip import parse_category_probs

WORLD = ["--train", "2", "--eval-scale", "0.01", "-q"]


def snapshot(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = tmp_path_factory.mktemp("w") / "world"
    assert run("world", "--out", w, *WORLD).returncode == 0
    return w


def refused(cmd, *needles):
    r = run(*cmd)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("Error:") == 1, r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr


@pytest.mark.parametrize("where", ["train/notes.txt", "val/aro/mine/a.png", "test/zeroshot/colour/test/00/holiday.png"])
def test_world_overwrite_keeps_user_files_anywhere_in_the_world(world, tmp_path, where):
    import shutil

    w = tmp_path / "w"
    shutil.copytree(world, w)
    (w / where).parent.mkdir(parents=True, exist_ok=True)
    (w / where).write_text("mine")
    before = snapshot(w)
    refused(["world", "--out", w, "--overwrite", *WORLD], where, "no world writes")
    assert snapshot(w) == before


def test_world_overwrite_of_a_world_still_works(world, tmp_path):
    import shutil

    w = tmp_path / "w"
    shutil.copytree(world, w)
    assert run("world", "--out", w, "--overwrite", "--seed", "1", *WORLD).returncode == 0


def test_every_file_of_a_world_with_every_option_is_one_overwrite_may_replace(tmp_path):
    from mosaictool.world.generate import _not_written_by_a_world

    w = tmp_path / "w"
    assert run("world", "--out", w, "--twins", "--binding-twins", "--shape-twins", "--caption-noise", "0.5", "--train", "4",
               "--eval-scale", "0.02", "-q").returncode == 0
    assert _not_written_by_a_world(w) == []


def test_world_out_under_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    refused(["world", "--out", tmp_path / "f" / "sub", *WORLD], "--out", "is a file, not a folder")
    assert (tmp_path / "f").read_text() == "x"


@pytest.mark.parametrize("overwrite", [False, True])
def test_world_out_a_link_to_a_folder_writes_where_it_points(world, tmp_path, overwrite):
    import shutil

    real = tmp_path / "real"
    shutil.copytree(world, real) if overwrite else real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    r = run("world", "--out", tmp_path / "link", *(["--overwrite"] if overwrite else []), *WORLD)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "link").is_symlink() and (real / "manifest.json").is_file()


@pytest.mark.parametrize("text, message", [
    ("obj=1,obj=2", "obj is given twice"),
    ("obj=1,,attr=1", "expected name=weight pairs"),
    ("obj=1,attr=1,", "expected name=weight pairs"),
    ("", "expected name=weight pairs"),
    ("obj=1,foo=1", "unknown category 'foo'"),
    ("obj=0,attr=0,rel=0", "sum to 0"),
    ("obj=nan,attr=1", "expected name=weight pairs"),
])
def test_category_probs_that_mean_nothing(text, message):
    with pytest.raises(MosaicError, match="--category-probs") as e:
        parse_category_probs(text)
    assert message in str(e.value)


def test_category_probs_that_stay_allowed():
    assert parse_category_probs("obj = 1, attr=2") == {"obj": 1.0, "attr": 2.0}
    assert parse_category_probs("obj=0.15,attr=0.425,rel=0.425")["rel"] == 0.425


def test_category_probs_on_the_command_line(tmp_path):
    refused(["train", "--data", tmp_path, "--out", tmp_path / "r", "--method", "mosaiclip", "--category-probs", "obj=1,obj=2"],
            "--category-probs", "given twice")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("cache", ["f", "f/sub"])
def test_demo_cache_dir_that_is_a_file_writes_nothing_in_out(tmp_path, cache):
    (tmp_path / "f").write_text("x")
    refused(["demo", "--quick", "--out", tmp_path / "d", "--cache-dir", tmp_path / cache], "--cache-dir", "is a file, not a folder")
    assert not (tmp_path / "d").exists() and (tmp_path / "f").read_text() == "x"


def test_only_other_settings_make_an_earlier_demos_report_stale(tmp_path):
    import dataclasses
    import json

    from mosaictool.demo.config import DemoConfig
    from mosaictool.demo.run import _settings_differ

    cfg, file = DemoConfig(quick=True), tmp_path / "demo_config.json"
    assert _settings_differ(file, cfg)  # none, or unreadable: nothing vouches for the files beside it
    file.write_text(json.dumps(dataclasses.asdict(dataclasses.replace(cfg, experiments=("ladder",)))))
    assert not _settings_differ(file, cfg)  # the ladder's report, at these settings, still holds
    file.write_text(json.dumps(dataclasses.asdict(dataclasses.replace(cfg, world_seed=1))))
    assert _settings_differ(file, cfg)


@pytest.mark.slow
def test_demo_again_leaves_no_report_file_of_an_earlier_demo(tmp_path):
    out = tmp_path / "d"
    out.mkdir()
    (out / "demo_config.json").write_text("{}")  # a demo folder, as an earlier run with other settings left it
    for name in ("claims.md", "selection.json", "ladder.png"):
        (out / name).write_text("from the earlier demo")
    r = run("demo", "--quick", "--out", out, "--cache-dir", tmp_path / "cache", timeout=1200)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (out / "report.md").is_file()
    assert not any((out / name).exists() for name in ("claims.md", "selection.json", "ladder.png"))


@pytest.mark.parametrize("command", ["decompose", "negate", "template"])
@pytest.mark.parametrize("seed", [-1, 2**32])
def test_seed_has_trains_bounds_in_every_text_stage(tmp_path, command, seed):
    """One rule for --seed: a whole number >= 0 and < 2**31, as train's (numpy's generators take no negative seed)."""
    (tmp_path / "in.jsonl").write_text('{"id": "a", "caption": "a red circle"}\n')
    before = snapshot(tmp_path)
    refused([command, tmp_path / "in.jsonl", "--seed", seed], f"--seed {seed}: must be a whole number >= 0 and < 2147483648")
    assert snapshot(tmp_path) == before
