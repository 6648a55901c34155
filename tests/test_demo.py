"""The main job end to end in its quick form, as CI and a new user run it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from clirun import refused_run
from clirun import run as run_cli
from mosaictool.analysis.stats import format_p
from mosaictool.cli import app
from mosaictool.demo import DemoConfig, config, finetune, run
from mosaictool.demo.config import COLUMNS, METHODS
from mosaictool.demo.evaluation import column_value
from mosaictool.demo.report import mean_ci, paired_diff, paired_markdown, table_markdown
from mosaictool.errors import MosaicError


def test_mean_ci_uses_the_t_interval():
    mean, half = mean_ci([0.5, 0.6, 0.7])
    assert mean == pytest.approx(0.6)
    assert half == pytest.approx(4.30265 * 0.1 / 3**0.5, rel=1e-5)  # t(0.975, 2 df)
    mean, half = mean_ci([i / 10 for i in range(12)])  # past any printed t-table: t(0.975, 11 df), not 1.96
    assert half == pytest.approx(2.20099 * (13 / 12) ** 0.5 / 10, rel=1e-5)
    mean, half = mean_ci([0.4])
    assert mean == 0.4 and half != half  # one seed: no interval


def test_paired_diff_is_the_paired_t_test():
    # differences 0.10, 0.20, 0.05: mean 0.1167, sd 0.07638, t = 2.6458 on 2 df
    diff, half, p = paired_diff([0.5, 0.6, 0.7], [0.6, 0.8, 0.75])
    assert diff == pytest.approx(0.116667, rel=1e-4)
    assert half == pytest.approx(4.30265 * 0.076376 / 3**0.5, rel=1e-4)
    assert p == pytest.approx(0.11808, rel=1e-3)
    assert all(v != v for v in paired_diff([0.5, float("nan")], [0.6, 0.7]))  # one pair left: no test


def test_paired_table_compares_each_method_with_clip_by_seed():
    # NegCLIP - CLIP by seed: 0.10, 0.11, 0.10 -> +10.3 ± 4.30265 * 0.00333 = 1.4 points, t = 31 on 2 df
    rows = [{"model": f"{m}-s{s}", "subtask": sub, "metric": metric, "value": v + 0.01 * s + (m == "NegCLIP") * 0.01 * (s == 1)}
            for m, v in (("CLIP", 0.5), ("NegCLIP", 0.6)) for s in range(3) for _, sub, metric in COLUMNS]
    table = paired_markdown(rows, {"CLIP": ["CLIP-s0", "CLIP-s1", "CLIP-s2"],
                                   "NegCLIP": ["NegCLIP-s0", "NegCLIP-s1", "NegCLIP-s2"]})
    # one p per column, all equal: Holm multiplies each by the number of columns (7 of them: 0.0073)
    raw = paired_diff([0.5, 0.51, 0.52], [0.6, 0.62, 0.62])[2]
    assert format_p(min(1.0, 7 * raw)) == "p = 0.0073"
    cell = f"+10.3 ± 1.4 ({format_p(min(1.0, len(COLUMNS) * raw))})"
    assert table.splitlines()[2] == "| NegCLIP | " + " | ".join([cell] * len(COLUMNS)) + " |"
    assert paired_markdown(rows, {"CLIP": ["CLIP-s0"], "NegCLIP": ["NegCLIP-s0"]}) == ""  # one seed: no table


def test_column_value_averages_a_family_and_skips_nan():
    rows = [
        {"model": "m", "subtask": "zeroshot/colour", "metric": "top1", "value": 0.5},
        {"model": "m", "subtask": "zeroshot/shape", "metric": "top1", "value": 0.7},
        {"model": "m", "subtask": "zeroshot/shape", "metric": "top5", "value": 1.0},
        {"model": "m", "subtask": "aro/VG-Attribution", "metric": "micro_accuracy", "value": float("nan")},
    ]
    assert column_value(rows, "m", "zeroshot/*", "top1") == pytest.approx(0.6)
    micro = column_value(rows, "m", "aro/VG-Attribution", "micro_accuracy")
    assert micro != micro


def test_table_has_a_row_per_method_and_a_column_per_split():
    summary = {"A": {c: (0.5, 0.01) for c, _, _ in COLUMNS}, "B": {c: (0.25, float("nan")) for c, _, _ in COLUMNS}}
    table = table_markdown(summary)
    assert table.splitlines()[0].count("|") == len(COLUMNS) + 2
    assert "| A | 50.0 ± 1.0 |" in table and "| B | 25.0 | 25.0 |" in table


def test_rows_come_from_the_registry():
    labels = [label for label, _, _ in METHODS]
    assert {"CLIP", "NegCLIP", "MosaiCLIP", "FSC-CLIP", "Probe-FT"} <= set(labels)
    assert set(config.WISE_ROWS) <= set(labels) and config.PATCH_ROW in labels
    assert config.slug(finetune.patch_label()) == "probe-ft-patched-a0.2"
    assert DemoConfig().wise_alphas == (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


@pytest.mark.parametrize("hard", ["method", "all", "none"])
@pytest.mark.parametrize("source", ["mined", "twin-oracle"])
def test_every_row_gets_the_same_images_per_step_steps_and_lr(tmp_path, monkeypatch, hard, source):
    """The fair comparison: the same steps, learning rate and images per step for every row; hard
    images for the rows whose paper uses them (NegCLIP), for all or for none, and a row with hard
    images takes half the images, each with its hard image: mined (3 nearest neighbours, mined once
    for every run and put in its folder) or the twins the records name (the oracle)."""
    import mosaictool.training as train_module
    import mosaictool.training.data as training_data

    seen, mined = [], []

    def fake_train_many(tcs, shards=None):
        assert shards is not None  # the shards' index, built once for every run
        for tc in tcs:
            seen.append(tc)
            Path(tc.out).mkdir(parents=True, exist_ok=True)
            (Path(tc.out) / "final.pt").write_bytes(b"x")
        return [Path(tc.out) / "final.pt" for tc in tcs]

    def fake_mine_for(tc, shards=None):
        mined.append((tc.method, tc.pretrained))
        return SimpleNamespace(records=[{"id": "a", "hard_images": ["b"]}, {"id": "b", "hard_images": ["a"]}]), [[1], [0]]

    monkeypatch.setattr(train_module, "train_many", fake_train_many)
    monkeypatch.setattr(train_module.ShardCache, "decode", lambda self, spec, size: False)
    monkeypatch.setattr(training_data, "mine_for", fake_mine_for)
    base = tmp_path / "base.pt"
    base.write_bytes(b"base")
    cfg = DemoConfig(seeds=2, hard_images=hard, hard_image_source=source, finetune_steps=7, finetune_lr=3e-4, finetune_batch=8,
                     device="cpu", parallel_runs=1)
    runs = finetune.finetune_all(cfg, tmp_path / "shards", base, tmp_path)
    assert list(runs) == [label for label, _, _ in METHODS] and all(len(v) == 2 for v in runs.values())
    assert len(seen) == 2 * len(METHODS)
    assert {(tc.steps, tc.lr, tc.warmup) for tc in seen} == {(7, 3e-4, 0)}
    with_hard = {tc.method for tc in seen if tc.record_hard_images or tc.hard_images}
    assert with_hard == {"method": {"negclip"}, "all": {tc.method for tc in seen}, "none": set()}[hard]
    assert all(tc.batch_size == (4 if tc.method in with_hard else 8) for tc in seen)
    # mined: ARO's 3 nearest neighbours (App. C.2), no twins; the oracle: the records' twins, nothing mined
    assert {(tc.record_hard_images, tc.hard_images) for tc in seen if tc.method in with_hard} <= {
        "mined": {(False, 3)}, "twin-oracle": {(True, 0)}}[source]
    assert all((tc.record_hard_images, tc.hard_images) == (False, 0) for tc in seen if tc.method not in with_hard)
    # mined once per row in the base's image space (not once per seed), in every mining run's folder
    assert sorted(mined) == sorted({(tc.method, str(base)) for tc in seen if tc.hard_images})
    assert all(json.loads((Path(tc.out) / "mined_hard_images.json").read_text()) == [[1], [0]]
               for tc in seen if tc.hard_images)
    assert {tc.method for tc in seen} >= {"clip", "negclip", "mosaiclip", "fsc-clip", "probe-ft"}
    # the setting is part of each run's name: changing it trains new runs for the rows it changes
    other_setting = "none" if hard != "none" else "all"
    other = finetune.finetune_all(DemoConfig(**{**cfg.__dict__, "hard_images": other_setting}),
                                  tmp_path / "shards", base, tmp_path)
    changed = [label for label, method, _ in METHODS
               if cfg.row_hard_images(method) != DemoConfig(hard_images=other_setting).row_hard_images(method)]
    assert changed and all(not set(runs[label]) & set(other[label]) for label in changed)
    if hard != "none":  # and so is the source of the hard images
        swapped = finetune.finetune_all(
            DemoConfig(**{**cfg.__dict__, "hard_image_source": "twin-oracle" if source == "mined" else "mined"}),
            tmp_path / "shards", base, tmp_path)
        assert all(set(runs[label]).isdisjoint(swapped[label]) == (label in {
            row for row, method, _ in METHODS if cfg.row_hard_images(method)}) for label in runs)
    with pytest.raises(MosaicError, match="choose method, all or none"):
        DemoConfig(hard_images="some").row_hard_images("clip")
    with pytest.raises(MosaicError, match="choose mined or twin-oracle"):
        DemoConfig(hard_image_source="twins").row_hard_images("clip")


def test_select_on_val_reads_val_only_and_gives_each_row_its_own_lr(tmp_path, monkeypatch):
    trained, benches = [], []
    best_lr = {label: config.SELECT_LRS[k % 3] for k, (label, _, _) in enumerate(METHODS)}

    def fake_finetune(cfg, shards, base, out, rows=None, shard_cache=None):
        trained.extend((label, cfg.lr_for(label), cfg.seeds) for label, _, _ in rows)
        return {label: [Path(f"{label}|{cfg.lr_for(label)}")] * cfg.seeds for label, _, _ in rows}

    def fake_evaluate(models, world, bench, **kwargs):
        benches.append(bench)
        rows = []
        for label, path in models:
            row, lr = str(path).split("|")
            value = 0.5 + 0.1 * (float(lr) == best_lr[row])  # each row has its own best val retrieval
            rows += [{"model": label, "subtask": "retrieval/coco", "metric": m, "value": value} for m in run.RETRIEVAL_METRICS]
            rows += [{"model": label, "subtask": "headline", "metric": "accuracy", "value": 1.1 - value},  # not the criterion
                     {"model": label, "subtask": "zeroshot/shape", "metric": "top1", "value": 0.9}]
        return rows

    monkeypatch.setattr(run, "finetune_all", fake_finetune)
    monkeypatch.setattr(run, "evaluate_all", fake_evaluate)
    chosen, table = run.select_on_val(DemoConfig(seeds=3, device="cpu", tuning_budget=3), tmp_path, tmp_path, tmp_path, tmp_path)
    lr_only = ["CLIP", "NegCLIP", "Probe-FT"]  # the rows whose papers tuned the lr alone: their grid is the 3 lrs
    assert {label: chosen[label] for label in lr_only} == {label: {"lr": best_lr[label], "options": {}} for label in lr_only}
    assert sorted(lr for label, lr, _ in trained if label == "CLIP") == sorted(config.SELECT_LRS)  # one seed per candidate
    assert {seeds for _, _, seeds in trained} == {1}
    assert set(benches) == {"world-val"}  # never the test split
    assert "| CLIP | lr 0.0003 | 1 | 60.0 (50.0) **(chosen)** |" in table
    assert json.loads((tmp_path / "selection.json").read_text())["chosen"] == chosen


def test_every_row_takes_one_lr_unless_selection_gave_each_its_own():
    assert {DemoConfig().lr_for(label) for label, _, _ in METHODS} == {config.FINETUNE_LR}
    own = DemoConfig(finetune_lr=None, row_lrs={label: 1e-4 * (k + 1) for k, (label, _, _) in enumerate(METHODS)})
    assert {label: own.lr_for(label) for label, _, _ in METHODS} == own.row_lrs
    with pytest.raises(MosaicError, match="no learning rate for the row 'New'"):
        own.lr_for("New")


def test_base_pretrains_in_two_ranks_on_a_multicore_cpu(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert DemoConfig(device="cpu").pretrain_ranks() == 2
    assert DemoConfig(device="cpu", pretrain_batch=15).pretrain_ranks() == 1  # a batch that does not split
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert DemoConfig(device="cpu").pretrain_ranks() == 1


def test_gpu_preset_uses_the_gpu_with_loader_workers(monkeypatch):
    """Checked on CPU with torch.cuda mocked: the GPU path itself is exercised in tests/test_gpu.py."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    cfg = DemoConfig.preset(gpu=True)
    assert cfg.world_train > DemoConfig.preset().world_train and cfg.finetune_batch > DemoConfig.preset().finetune_batch
    device, workers = cfg.runtime()
    assert device == "cuda:0" and 1 <= workers <= (os.cpu_count() or 1)
    assert DemoConfig.preset(gpu=True, loader_workers=3).runtime() == ("cuda:0", 3)
    assert DemoConfig.preset(gpu=True, device="cpu").runtime() == ("cpu", 0)
    assert DemoConfig.preset(gpu=True).runs_at_once() == 1  # a GPU trains one run at a time
    assert DemoConfig.preset(gpu=True).pretrain_ranks() == 1  # and pretrains in one process
    assert DemoConfig(device="cpu", parallel_runs=None).runs_at_once() == min(8, os.cpu_count() or 1)
    with pytest.raises(MosaicError, match="choose one"):
        DemoConfig.preset(quick=True, gpu=True)


def test_demo_cli_rejects_an_unknown_preset_and_split(runner, tmp_path):
    result = runner.invoke(app, ["demo", "--preset", "tpu", "--out", str(tmp_path / "d")])
    assert result.exit_code == 1 and "--preset 'tpu'" in result.stderr
    result = runner.invoke(app, ["demo", "--quick", "--split", "train", "--out", str(tmp_path / "d")])
    assert result.exit_code == 1 and "--split 'train'" in result.stderr
    assert not (tmp_path / "d" / "world").exists()  # refused before any work


# --quick on a 200-scene world: the whole pipeline three times within the per-test timeout
QUICK = ["--quick", "--world-train", "200"]


@pytest.mark.slow
def test_demo_quick_end_to_end(runner, tmp_path):
    out, cache = tmp_path / "demo", tmp_path / "cache"
    result = runner.invoke(app, ["demo", *QUICK, "--out", str(out), "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.stderr
    table, summary = result.stdout.strip().split("\n\n", 1)
    lines = table.splitlines()
    # base, every registry row, and Probe-FT patched; then the positive control's verdict and the power
    assert lines[0].startswith("| method |") and len(lines) == 2 + 1 + len(METHODS) + 1
    assert "positive control" in summary.lower() and "minimal detectable effect" in summary
    assert [line.split(" | ")[0][2:] for line in lines[2:]] == ["base (CLIP pretrain)", *[label for label, _, _ in METHODS],
                                                                "Probe-FT patched (α=0.2)"]
    for artifact in ("graphs.parquet", "texts.jsonl", "shards/sizes.json", "shards-plain/sizes.json", "base.pt",
                     "results.jsonl", "report.md", "methods.png", "wise_ft.png"):
        assert (out / artifact).is_file(), artifact
    rows = [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]
    models = {r["model"] for r in rows}
    assert {"base", "CLIP-s0", "NegCLIP-s0", "MosaiCLIP-s0", "FSC-CLIP-s0", "Probe-FT-s0",
            "Probe-FT patched (α=0.2)-s0", "wise-mosaiclip-a0.5", "wise-fsc-clip-a0.5"} <= models
    # a WiSE-FT point is scored with the table's checkpoints, on the table's families
    assert {r["subtask"].split("/")[0] for r in rows if r["model"] == "wise-fsc-clip-a0.5"} == \
        {r["subtask"].split("/")[0] for r in rows if r["model"] == "FSC-CLIP-s0"}
    # every row was fine-tuned with the same steps and images per step: NegCLIP with its hard images,
    # its 3 nearest neighbours mined in the base's image space (ARO App. C.2), not the world's twins
    configs = [orjson.loads(p.read_bytes()) for p in (out / "runs").glob("*-seed0-*/config.json")]
    assert len(configs) == len(METHODS)
    assert {(c["method"] == "negclip", c["record_hard_images"], c["hard_images"], c["batch_size"] * (1 + bool(c["hard_images"])),
             c["steps"]) for c in configs} == {(True, False, 3, 16, 15), (False, False, 0, 16, 15)}
    [negclip] = (out / "runs").glob("negclip-seed0-*")
    assert len(orjson.loads((negclip / "mined_hard_images.json").read_bytes())[0]) == 3
    assert {orjson.loads(p.read_bytes())["lr"] for p in (out / "runs").glob("*-seed0-*/config.json")} == {config.FINETUNE_LR}
    report = (out / "report.md").read_text()
    # the plan declared before test was read: report.md prints its digest
    assert f"sha256 `{hashlib.sha256((out / 'preregistration.json').read_bytes()).hexdigest()}`" in report
    assert "16 images per step (NegCLIP: 8 images + each one's hard image, one of its 3 nearest neighbours" in report
    assert "Mined hard images (NegCLIP): " in report and "mined neighbours" in report
    assert "lr 0.0005 for every row, calibrated on val" in report
    assert "positive control" in report.lower() and "minimal detectable effect" in report and "Holm-adjusted" in report
    assert "world's **test** split" in report and "FSC-CLIP comp" in report and "Texts audit" in report
    assert "| method − NegCLIP |" in report and "| MosaiCLIP | " in report.split("| method − NegCLIP |")[1]
    bases = [p for p in cache.glob("base-*") if p.is_dir()]  # the base and its manifest, nothing else
    assert len(bases) == 1 and sorted(p.name for p in bases[0].iterdir()) == ["base.pt", "cache-manifest.json"]
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no lock or staging folder left
    # the world's images come twice, with the varied and with the plain caption
    texts = [orjson.loads(x) for x in (out / "texts.jsonl").read_bytes().splitlines()]
    plain = {r["id"][:-len("-plain")]: r["caption"] for r in texts if r["id"].endswith("-plain")}
    varied = {r["id"]: r["caption"] for r in texts if not r["id"].endswith("-plain")}
    assert plain.keys() == varied.keys() and sum(plain[k] != varied[k] for k in plain) > len(plain) / 2

    # A second run reuses the world, the texts, the shards, the cached base and the runs.
    again = runner.invoke(app, ["demo", *QUICK, "--out", str(out), "--cache-dir", str(cache)])
    assert again.exit_code == 0, again.stderr
    assert "reusing cached base model" in again.stderr
    assert again.stdout == result.stdout  # same seeds and flags: same table
    assert "fine-tune:" not in again.stderr
    # evaluations are kept by checkpoint: base, every row's seed 0, Probe-FT patched, 2 WiSE-FT points
    assert len(list((out / "evals").glob("*.jsonl"))) == 1 + len(METHODS) + 1 + 2

    # Other fine-tuning settings in a new folder: the cached data (no text stage runs again) and base,
    # new runs, never the old ones.
    elsewhere = tmp_path / "demo2"
    other = runner.invoke(app, ["demo", *QUICK, "--out", str(elsewhere), "--cache-dir", str(cache), "--finetune-steps", "3"])
    assert other.exit_code == 0, other.stderr
    assert "reusing the cached world, texts, shards and audit" in other.stderr and "parse:" not in other.stderr
    assert (elsewhere / "texts.jsonl").read_bytes() == (out / "texts.jsonl").read_bytes()
    assert "reusing cached base model" in other.stderr and other.stderr.count("fine-tune:") == len(METHODS)


def test_data_cache_is_one_folder_per_world_and_restores_every_artifact(tmp_path):
    from mosaictool.demo.data import DATA_ARTIFACTS, data_cache, keep_data, restore_data
    from mosaictool.io import write_json

    cfg = config.DemoConfig(cache_dir=str(tmp_path / "cache"))
    out = tmp_path / "out"
    for name in DATA_ARTIFACTS:  # a folder for each folder artifact, a file for the others
        if "." in name:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_text(name)
        else:
            (out / name).mkdir(parents=True)
            (out / name / "part").write_text(name)
    assert not restore_data(data_cache(cfg), tmp_path / "new")
    keep_data(data_cache(cfg), out)
    assert data_cache(cfg).is_dir() and data_cache(cfg) != data_cache(config.DemoConfig(cache_dir=cfg.cache_dir, world_seed=1))
    assert data_cache(cfg) != data_cache(config.DemoConfig(cache_dir=cfg.cache_dir, caption_noise=0.5))
    new = tmp_path / "new"
    (new / "world").mkdir(parents=True)
    (new / "world" / "stale").write_text("another world")
    assert restore_data(data_cache(cfg), new)
    assert not (new / "world" / "stale").exists() and (new / "world" / "part").read_text() == "world"
    assert all((new / n).is_file() and (new / n).read_text() == n for n in DATA_ARTIFACTS if "." in n)
    # copies, not links: editing a restored file in place (appending a line) leaves the cache as it was
    assert (new / "texts.jsonl").stat().st_ino != (data_cache(cfg) / "texts.jsonl").stat().st_ino
    with open(new / "texts.jsonl", "a") as f:
        f.write('{"id": "poison"}\n')
    with open(new / "world" / "part", "a") as f:
        f.write("edited")
    write_json(new / "audit.json", {"key": "another audit"})
    assert (data_cache(cfg) / "audit.json").read_text() == "audit.json"
    assert (data_cache(cfg) / "texts.jsonl").read_text() == "texts.jsonl"
    assert (data_cache(cfg) / "world" / "part").read_text() == "world"
    third = tmp_path / "third"
    assert restore_data(data_cache(cfg), third) and (third / "texts.jsonl").read_text() == "texts.jsonl"


def _data_out(root):
    from mosaictool.demo.data import DATA_ARTIFACTS

    for name in DATA_ARTIFACTS:
        if "." in name:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(name)
        else:
            (root / name).mkdir(parents=True)
            (root / name / "part").write_text(name)
    return root


@pytest.mark.parametrize("damage", ["edit", "truncate", "add", "remove", "link", "manifest"])
def test_a_damaged_data_cache_is_found_and_built_again(tmp_path, caplog, damage):
    from mosaictool.demo.cache import MANIFEST
    from mosaictool.demo.data import data_cache, keep_data, restore_data

    cfg = config.DemoConfig(cache_dir=str(tmp_path / "cache"))
    keep_data(data_cache(cfg), _data_out(tmp_path / "out"))
    entry = data_cache(cfg)
    if damage == "edit":  # the same size, other bytes: only the digest tells
        (entry / "texts.jsonl").write_text("texts.jsonX")
    elif damage == "truncate":
        (entry / "world" / "part").write_text("")
    elif damage == "add":
        (entry / "world" / "extra.png").write_bytes(b"not in the manifest")
    elif damage == "remove":
        (entry / "audit.json").unlink()
    elif damage == "link":
        (entry / "texts.jsonl").unlink()
        (entry / "texts.jsonl").symlink_to(tmp_path / "out" / "texts.jsonl")
    else:
        (entry / MANIFEST).write_text("{")
    new = tmp_path / "new"
    (new / "texts.jsonl").parent.mkdir(parents=True)
    (new / "texts.jsonl").write_text("kept")
    caplog.set_level(logging.INFO, logger="mosaictool")
    assert not restore_data(entry, new)
    lines = caplog.messages
    assert len(lines) == 1 and "failed its check" in lines[0] and "building the data again" in lines[0], lines
    assert not entry.exists()  # thrown away: keep_data makes it anew
    assert (new / "texts.jsonl").read_text() == "kept" and not (new / "world").exists()  # OUT as it was
    keep_data(entry, _data_out(tmp_path / "rebuilt"))
    assert restore_data(entry, new) and (new / "texts.jsonl").read_text() == "texts.jsonl"


def test_the_demo_world_has_the_configured_caption_noise(tmp_path, caplog):
    from mosaictool.demo.data import make_world

    cfg = config.DemoConfig(world_train=20, twins=False, eval_scale=0.01, workers=1, caption_noise=0.5)
    world = make_world(cfg, tmp_path)
    manifest = json.loads((world / "manifest.json").read_text())
    assert manifest["options"]["caption_noise"] == 0.5 and manifest["counts"]["train"]["noisy"] > 0
    caplog.set_level(logging.INFO, logger="mosaictool")
    make_world(cfg, tmp_path)
    assert "world: reusing" in caplog.text
    clean = make_world(dataclasses.replace(cfg, caption_noise=0.0), tmp_path)  # another world, not the noisy one reused
    assert "caption_noise" not in json.loads((clean / "manifest.json").read_text())["options"]


@pytest.mark.parametrize("name", ["graph_repair.py", "attributes.tsv", "run.py"])
def test_data_cache_key_changes_with_the_parser_the_vocabulary_and_the_package(tmp_path, monkeypatch, name):
    """The stages and the vocabulary sit beside the package in a source checkout: their bytes are part
    of the data's key too, so a parser change never reuses texts the old parser made."""
    from mosaictool.demo import data

    cfg = config.DemoConfig(cache_dir=str(tmp_path))
    before = data.data_cache(cfg)
    real = data.file_digest
    monkeypatch.setattr(data, "file_digest", lambda f: "edited" if Path(f).name == name else real(f))
    assert data.data_cache(cfg) != before


def test_evaluate_all_gives_the_same_rows_in_one_process_or_several(tmp_path, monkeypatch):
    from mosaictool.demo.evaluation import evaluate_all
    from mosaictool.model import openclip
    from mosaictool.world.generate import generate_world

    world = tmp_path / "world"
    generate_world(world, train=0, seed=0, eval_scale=0.02)
    models = []
    for seed in (1, 2):
        path = tmp_path / f"m{seed}.pt"
        openclip.save_checkpoint(path, openclip.create("mosaic-micro", seed=seed))
        models.append((f"m{seed}", path))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    several = evaluate_all(models, world, "world-val", families=["aro"])
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    one = evaluate_all(models, world, "world-val", families=["aro"])
    assert json.dumps(several) == json.dumps(one) and one[0]["model"] == "m1" and {r["model"] for r in one} == {"m1", "m2"}
    assert any(r["metric"] == "hits" for r in one)


def test_cached_rows_of_an_older_scorer_are_not_reused(tmp_path, monkeypatch):
    """A checkpoint's cached rows are keyed by the scoring code too: rows an older benchmark wrote lack the subtasks a
    newer one adds (a new column read as "–"), so a change to mosaictool/bench or mosaictool/model scores again."""
    from mosaictool.demo import evaluation
    from mosaictool.model import openclip
    from mosaictool.world.generate import generate_world

    code = tmp_path / "code"
    for rel in ("bench/aro.py", "model/openclip.py", "demo/run.py"):
        (code / rel).parent.mkdir(parents=True, exist_ok=True)
        (code / rel).write_text(f"# {rel}\n")
    before = evaluation.scoring_code_digest(code)
    (code / "demo" / "run.py").write_text("# another demo\n")
    assert evaluation.scoring_code_digest(code) == before  # not scoring code
    (code / "bench" / "aro.py").write_text("# a new column\n")
    assert evaluation.scoring_code_digest(code) != before
    assert evaluation.scoring_code_digest() == evaluation.scoring_code_digest()

    world, cache = tmp_path / "world", tmp_path / "evals"
    generate_world(world, train=0, seed=0, eval_scale=0.02)
    path = tmp_path / "m.pt"
    openclip.save_checkpoint(path, openclip.create("mosaic-micro", seed=1))
    first = evaluation.evaluate_all([("m", path)], world, "world-val", families=["aro"], cache=cache)
    assert len(list(cache.glob("*.jsonl"))) == 1
    scored = []
    real = evaluation._score_one
    monkeypatch.setattr(evaluation, "_score_one", lambda job: scored.append(job[0]) or real(job))
    assert evaluation.evaluate_all([("m", path)], world, "world-val", families=["aro"], cache=cache) == first
    assert scored == []  # the same scorer: read from the cache
    monkeypatch.setattr(evaluation, "scoring_code_digest", lambda: "a newer scorer")
    assert evaluation.evaluate_all([("m", path)], world, "world-val", families=["aro"], cache=cache) == first
    assert scored == ["m"] and len(list(cache.glob("*.jsonl"))) == 2


def test_the_cached_base_is_a_checked_copy_and_a_damaged_one_is_trained_again(tmp_path, monkeypatch, caplog):
    import mosaictool.training
    import mosaictool.training.launch
    from mosaictool.demo.base import pretrain_base

    world, shards = tmp_path / "world", tmp_path / "shards-plain"
    world.mkdir()
    (world / "manifest.json").write_text('{"seed": 0}')
    shards.mkdir()
    (shards / "000000.tar").write_bytes(b"tar")
    (shards / "sizes.json").write_text('{"000000.tar": 1}')
    trained = []

    def fake_train(tc, *ranks):
        trained.append(tc.out)
        Path(tc.out).mkdir(parents=True, exist_ok=True)
        (Path(tc.out) / "final.pt").write_bytes(b"weights of run %d" % len(trained))
        return Path(tc.out) / "final.pt"

    monkeypatch.setattr(mosaictool.training, "train", fake_train)
    monkeypatch.setattr(mosaictool.training.launch, "train_in_local_ranks", fake_train)
    cfg = config.DemoConfig(cache_dir=str(tmp_path / "cache"), device="cpu")
    first = pretrain_base(cfg, shards, world, tmp_path / "a")
    assert first.read_bytes() == b"weights of run 1" and len(trained) == 1
    with open(first, "ab") as f:  # a user's edit in one demo folder ...
        f.write(b" edited")
    second = pretrain_base(cfg, shards, world, tmp_path / "b")
    assert second.read_bytes() == b"weights of run 1" and len(trained) == 1  # ... reaches neither the cache nor the next demo
    entry = next((tmp_path / "cache").glob("base-*"))
    (entry / "base.pt").write_bytes(b"weights of run X")  # the cache itself damaged: same size, other bytes
    caplog.set_level(logging.INFO, logger="mosaictool")
    third = pretrain_base(cfg, shards, world, tmp_path / "c")
    err = caplog.text
    assert "failed its check (base.pt does not match its manifest" in err and "training it again" in err
    assert third.read_bytes() == b"weights of run 2" and len(trained) == 2


def test_runs_are_shared_out_evenly_and_a_process_error_comes_back(tmp_path):
    """Each process gets about the same work and a share of every row; a run's error in a forked
    process is the demo's error."""
    from dataclasses import replace

    from mosaictool.training import ShardCache, TrainConfig

    base = TrainConfig(data="d", out="", steps=40, batch_size=32)
    todo = [replace(base, out=f"{m}{s}", method=m, seed=s, method_options={"curriculum": True} if m == "mosaiclip" else {},
                    record_hard_images=m == "negclip", batch_size=16 if m == "negclip" else 32)
            for s in range(5) for m in ("clip", "negclip", "mosaiclip", "fsc-clip", "probe-ft")]
    shares = finetune.share_out(todo, 2)
    assert sorted(tc.out for s in shares for tc in s) == sorted(tc.out for tc in todo)
    texts = {tc.out: finetune._expected_texts(tc.method, tc.method_options, tc.steps) for tc in todo}
    cost = [sum(tc.steps * tc.batch_size * (1 + tc.record_hard_images) + tc.batch_size * texts[tc.out] for tc in s)
            for s in shares]
    largest = max(tc.steps * tc.batch_size * (1 + tc.record_hard_images) + tc.batch_size * texts[tc.out] for tc in todo)
    assert abs(cost[0] - cost[1]) <= largest
    assert all({tc.method for tc in s} == {"clip", "negclip", "mosaiclip", "fsc-clip", "probe-ft"} for s in shares)
    assert finetune.share_out(todo[:1], 2) == [todo[:1]]
    missing = TrainConfig(data=str(tmp_path / "nowhere.jsonl"), out=str(tmp_path / "r"), quiet=True)
    with pytest.raises(MosaicError, match="nowhere.jsonl"):
        finetune._train_in_processes([[missing], [replace(missing, out=str(tmp_path / "r2"))]], ShardCache())


def test_the_data_cache_key_reads_the_package_the_stages_and_the_vocabulary(tmp_path, monkeypatch):
    """Any change to mosaictool's code, its graph stages or its vocabularies makes new data (never a
    stale reuse): the key hashes every file of the three folders, wherever they are installed."""
    import mosaictool.stages
    import mosaictool.vocab
    from mosaictool.demo import data

    read = []
    monkeypatch.setattr(data, "file_digest", lambda f: read.append(Path(f)) or "x")
    data.data_cache(DemoConfig(cache_dir=str(tmp_path)))
    folders = [Path(data.__file__).resolve().parents[1], *map(Path, mosaictool.stages.__path__), *map(Path, mosaictool.vocab.__path__)]
    for folder in folders:
        assert any(f.is_relative_to(folder) for f in read), folder
    assert Path(data.__file__).resolve() in {f.resolve() for f in read}


# --- bad input (moved from test_bad_folders.py) ---

@pytest.mark.parametrize("cache", ["f", "f/sub"])
def test_demo_cache_dir_that_is_a_file_writes_nothing_in_out(tmp_path, cache):
    (tmp_path / "f").write_text("x")
    refused_run(["demo", "--quick", "--out", tmp_path / "d", "--cache-dir", tmp_path / cache], "--cache-dir", "is a file, not a folder")
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
    r = run_cli("demo", "--quick", "--out", out, "--cache-dir", tmp_path / "cache", timeout=1200)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (out / "report.md").is_file()
    assert not any((out / name).exists() for name in ("claims.md", "selection.json", "ladder.png"))

