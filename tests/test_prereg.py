"""The demo's equal tuning budget (--select-on-val, mosaictool.demo.tuning) and its pre-registration
(preregistration.json, mosaictool.demo.prereg): the same number of val trials for every row, drawn
deterministically; the plan written before any evaluation on test, its digest in report.md, another
plan refused, and test read once. The fine-tuning and the evaluations are stubbed: no model trains."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mosaictool.demo import DemoConfig, prereg, run, tuning
from mosaictool.demo import significance as sig
from mosaictool.demo.config import METHODS, SELECT_LRS
from mosaictool.demo.experiments import Section
from mosaictool.demo.report import build_report
from mosaictool.errors import MosaicError

LABELS = [label for label, _, _ in METHODS]


@pytest.mark.parametrize("budget", [1, 3, 6, 10, 40])
def test_every_row_gets_the_same_number_of_trials_over_its_own_grid(budget):
    cfg = DemoConfig(tuning_budget=budget)
    sizes = {label: len(tuning.row_grid(cfg, label)) for label in LABELS}
    # the lr for every row; MosaiCLIP's p_obj x caps (Singh et al. 2023, App. H.1); FSC-CLIP's components
    assert sizes == {"CLIP": 3, "NegCLIP": 3, "MosaiCLIP": 27, "FSC-CLIP": 12, "Probe-FT": 3}
    for label in LABELS:
        trials = tuning.draw_trials(cfg, label)
        assert len(trials) == budget, label
        grid = [tuning.describe(lr, options) for lr, options in tuning.row_grid(cfg, label)]
        points = [t.point for t in trials]
        assert set(points) <= set(grid)
        if budget <= len(grid):  # drawn without repeats, one seed each
            assert len(set(points)) == budget and {t.seed for t in trials} == {0}
        else:  # the whole grid, then again at the next seeds: each point's runs differ by their seed
            assert set(points) == set(grid)
            assert len({(t.point, t.seed) for t in trials}) == budget
            assert max(points.count(p) for p in grid) - min(points.count(p) for p in grid) <= 1
    mosaiclip = tuning.row_grid(cfg, "MosaiCLIP")
    assert {lr for lr, _ in mosaiclip} == set(SELECT_LRS)
    assert {o["category_probs"]["obj"] for _, o in mosaiclip} == {0.0, 0.08, 0.15}
    assert all(o["category_probs"]["attr"] == o["category_probs"]["rel"] for _, o in mosaiclip)  # p_attr = p_rel
    assert {(o["max_pos"], o["max_neg"]) for _, o in mosaiclip} == {(2, 4), (3, 6), (4, 8)}


def test_the_draw_is_seeded_and_the_same_in_another_process():
    cfg = DemoConfig(tuning_budget=5)
    first = tuning.draw_trials(cfg, "MosaiCLIP")
    assert tuning.draw_trials(cfg, "MosaiCLIP") == first
    assert tuning.draw_trials(DemoConfig(tuning_budget=5, tuning_seed=1), "MosaiCLIP") != first
    # not Python's salted string hash: another interpreter with another hash seed draws the same
    code = ("from mosaictool.demo import DemoConfig, tuning; "
            "print([t.point for t in tuning.draw_trials(DemoConfig(tuning_budget=5), 'MosaiCLIP')])")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "123"})
    assert other.stdout.strip() == str([t.point for t in first])


def _fake_evaluate(score):
    """evaluate_all returning, per model, val retrieval `score(label, path)` and the benchmarks it was asked for."""
    benches = []

    def evaluate(models, world, bench, **kwargs):
        benches.append(bench)
        rows = []
        for name, path in models:
            value = score(name, path)
            rows += [{"model": name, "subtask": "retrieval/coco", "metric": m, "value": value} for m in run.RETRIEVAL_METRICS]
            rows += [{"model": name, "subtask": "headline", "metric": "accuracy", "value": 1 - value}]  # not the criterion
        return rows
    return evaluate, benches


def test_select_on_val_gives_every_row_its_budget_and_its_best_point_on_val(tmp_path, monkeypatch):
    trained = []

    def fake_finetune(cfg, shards, base, out, rows=None, shard_cache=None):
        runs = {}
        for label, method, options in rows:
            lr = cfg.lr_for(label)
            for seed in range(cfg.seeds):
                path = Path(json.dumps({"label": label, "lr": lr, "options": options, "seed": seed}, sort_keys=True))
                if path not in trained:  # a run trained once: later rounds find it (the runs' folders)
                    trained.append(path)
                runs.setdefault(label, []).append(path)
        return runs

    def score(name, path):  # FSC-CLIP is best without focal loss at 1e-3, MosaiCLIP with p_obj 0 at 3e-4; seed 1 adds noise
        run_ = json.loads(str(path))
        best = {("FSC-CLIP", 1e-3): "focal_gamma" in run_["options"],
                ("MosaiCLIP", 3e-4): run_["options"].get("category_probs", {}).get("obj") == 0.0}
        return (0.5 + 0.2 * (run_["lr"] == 5e-4) + 0.25 * best.get((run_["label"], run_["lr"]), False)
                + 0.01 * run_["seed"])

    evaluate, benches = _fake_evaluate(score)
    monkeypatch.setattr(run, "finetune_all", fake_finetune)
    monkeypatch.setattr(run, "evaluate_all", evaluate)
    cfg = DemoConfig(seeds=3, device="cpu", tuning_budget=12)
    chosen, table = run.select_on_val(cfg, tmp_path, tmp_path, tmp_path, tmp_path)
    runs = [json.loads(str(p)) for p in trained]
    assert {label: sum(r["label"] == label for r in runs) for label in LABELS} == dict.fromkeys(LABELS, 12)
    assert set(benches) == {"world-val"}  # never the test split
    assert chosen["FSC-CLIP"] == {"lr": 1e-3, "options": {"focal_gamma": 0.0}}  # the whole 12-point grid, once each
    assert chosen["CLIP"] == {"lr": 5e-4, "options": {}}  # 3 lrs x 4 seeds, each point the mean of its 4 runs
    # MosaiCLIP: 12 of its 27 points, drawn; the best of those drawn
    drawn = {t.point for t in tuning.draw_trials(cfg, "MosaiCLIP")}
    assert tuning.describe(chosen["MosaiCLIP"]["lr"], chosen["MosaiCLIP"]["options"]) in drawn
    assert "| CLIP | lr 0.0005 | 4 | 71.5 (28.5) **(chosen)** |" in table
    saved = json.loads((tmp_path / "selection.json").read_text())
    assert saved["budget"] == 12 and all(len(t) == 12 for t in saved["trials"].values())
    assert saved["chosen"] == chosen


def _stub_pipeline(monkeypatch, tmp_path, calls, score=lambda name, path: 0.5):
    """Every stage of _run_demo stubbed, recording the order of the calls that matter."""
    world = tmp_path / "world"
    for split in ("val", "test"):  # report.md reads the relation items for the blind reader's score
        (world / split / "aro").mkdir(parents=True, exist_ok=True)
        (world / split / "aro" / "visual_genome_relation.json").write_text("[]")

    def finetune(cfg, shards, base, out, rows=None, shard_cache=None):
        calls.append("finetune")
        return {label: [Path(f"{label}-{seed}.pt") for seed in range(cfg.seeds)] for label, _, _ in rows or METHODS}

    evaluate, benches = _fake_evaluate(score)

    def evaluate_all(models, world, bench, **kwargs):
        calls.append(f"evaluate {bench}" + (" (preregistered)" if (tmp_path / "out" / prereg.NAME).is_file() else ""))
        return evaluate(models, world, bench, **kwargs)

    def report(*args, **kwargs):  # the real report.md, of the stubs' numbers
        calls.append("report")
        return build_report(*args, **kwargs)

    for name, fake in {"data_cache": lambda cfg: None, "restore_data": lambda cached, out: True,
                       "make_world": lambda cfg, out: world, "make_texts": lambda cfg, world, out: out / "texts.jsonl",
                       "shards_and_audit": lambda cfg, world, texts, out, cache: (out / "shards", out / "shards-plain", ""),
                       "pretrain_base": lambda cfg, plain, world, out: out / "base.pt", "finetune_all": finetune,
                       "wise_models": lambda cfg, base, runs, out: ({}, {}), "evaluate_all": evaluate_all,
                       "build_report": report}.items():
        monkeypatch.setattr(run, name, fake)
    monkeypatch.setattr(run.experiments, "run", lambda name, ctx: calls.append(f"experiment {name}") or Section(name, "stubbed"))


def _config(tmp_path, **settings) -> DemoConfig:
    return DemoConfig(out=str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"), device="cpu", seeds=2, **settings)


def test_the_preregistration_is_written_before_test_is_read_and_its_digest_is_in_the_report(tmp_path, monkeypatch):
    calls = []
    _stub_pipeline(monkeypatch, tmp_path, calls)
    run.run_demo(_config(tmp_path, select_on_val=True, tuning_budget=2, experiments=("claims",)))
    out = tmp_path / "out"
    assert calls.count("evaluate world-val (preregistered)") == 2  # the search on val: 2 rounds, after the declaration too
    assert "evaluate world" not in calls and calls.count("evaluate world (preregistered)") == 1  # test: once, declared before
    assert calls[-2:] == ["experiment claims", "report"]
    plan = json.loads((out / prereg.NAME).read_text())
    assert plan["settings"]["tuning_budget"] == 2 and "out" not in plan["settings"]
    assert plan["tuning"]["criterion"] == tuning.CRITERION
    assert {label: len(r["trials"]) for label, r in plan["tuning"]["rows"].items()} == dict.fromkeys(LABELS, 2)
    assert plan["headline"]["comparison"] == "MosaiCLIP − NegCLIP"
    assert plan["headline"]["column"] == sig.HEADLINE_COLUMN == "rel group trained"
    assert plan["claims"]["regimes"][0] == "preservation (the table)" and "demo/claims.py" in plan["claims"]["code"]
    stated = {(c["regime"], c["comparison"]): c for c in plan["claims"]["stated"]}  # every claim as its code states it
    assert stated["noisy", "MosaiCLIP clean − MosaiCLIP noisy, ARO cases"]["test"] == "equivalence"
    assert ("TABLE_REGIME", "MosaiCLIP − NegCLIP, CREPE productivity R@1") in stated
    digest = hashlib.sha256((out / prereg.NAME).read_bytes()).hexdigest()
    report = (out / "report.md").read_text()
    assert f"sha256 `{digest}`" in report and "2 fine-tuning runs per row over its own grid" in report
    assert json.loads((out / prereg.READ_NAME).read_text())["preregistration"] == digest


def test_a_changed_setting_is_refused_and_the_same_plan_reads_the_same_numbers(tmp_path, monkeypatch):
    calls = []
    _stub_pipeline(monkeypatch, tmp_path, calls)
    out = tmp_path / "out"
    run.run_demo(_config(tmp_path))
    declared, report = (out / prereg.NAME).read_bytes(), (out / "report.md").read_bytes()
    run.run_demo(_config(tmp_path))  # the same plan: the same numbers, accepted
    assert (out / "report.md").read_bytes() == report
    calls.clear()
    with pytest.raises(MosaicError) as refused:
        run.run_demo(_config(tmp_path, finetune_steps=7))
    assert "\n" not in str(refused.value) and "settings.finetune_steps differ" in str(refused.value)
    assert "choose a new --out" in str(refused.value) and calls == []  # refused before any work
    assert (out / prereg.NAME).read_bytes() == declared
    with pytest.raises(MosaicError, match="experiments differ"):  # claims added after test was read: another plan
        run.run_demo(_config(tmp_path, experiments=("claims",)))
    # test read again under the same plan with other numbers (say, runs trained again): refused, nothing rewritten
    _stub_pipeline(monkeypatch, tmp_path, calls, score=lambda name, path: 0.6)
    results = (out / "results.jsonl").read_bytes()
    with pytest.raises(MosaicError, match="test was read once for pre-registration") as again:
        run.run_demo(_config(tmp_path))
    assert "\n" not in str(again.value)
    assert (out / "results.jsonl").read_bytes() == results and (out / "report.md").read_bytes() == report
    # a new folder is a new pre-registration
    run.run_demo(DemoConfig(**{**_config(tmp_path, finetune_steps=7).__dict__, "out": str(tmp_path / "other")}))
    assert (tmp_path / "other" / prereg.NAME).read_bytes() != declared


def test_a_val_run_declares_nothing(tmp_path, monkeypatch):
    calls = []
    _stub_pipeline(monkeypatch, tmp_path, calls)
    run.run_demo(_config(tmp_path, split="val"))
    assert calls[-2:] == ["evaluate world-val", "report"]
    assert not (tmp_path / "out" / prereg.NAME).exists() and not (tmp_path / "out" / prereg.READ_NAME).exists()


def test_every_grid_point_builds_its_method_and_the_chosen_point_reuses_its_val_run(tmp_path):
    """Each knob value is a valid option of its method, and the table's run of a row at its chosen point is
    the seed-0 trial run of that point (one folder: the same settings' digest), not a second training."""
    from mosaictool.demo import finetune
    from mosaictool.methods import create

    cfg = DemoConfig(tuning_budget=40, device="cpu", parallel_runs=1, seeds=2)
    methods = {label: (method, options) for label, method, options in METHODS}
    for label in LABELS:
        for _, options in tuning.row_grid(cfg, label):
            create(methods[label][0], {**methods[label][1], **options})  # raises on an option the method lacks
    base = tmp_path / "base.pt"
    base.write_bytes(b"base")
    trial = tuning.draw_trials(cfg, "MosaiCLIP")[5]
    method, options = methods["MosaiCLIP"]
    searched, _ = finetune.planned_runs(DemoConfig(**{**cfg.__dict__, "seeds": 1, "finetune_lr": None,
                                                      "row_lrs": {"MosaiCLIP": trial.lr}}),
                                        tmp_path / "shards", base, tmp_path, rows=[("MosaiCLIP", method, {**options, **trial.options})])
    table, todo = finetune.planned_runs(DemoConfig(**{**cfg.__dict__, "finetune_lr": None,
                                                      "row_lrs": dict.fromkeys(LABELS, trial.lr),
                                                      "row_options": {"MosaiCLIP": trial.options}}),
                                        tmp_path / "shards", base, tmp_path)
    assert table["MosaiCLIP"][0] == searched["MosaiCLIP"][0]
    [chosen] = [tc for tc in todo if tc.method == "mosaiclip" and tc.seed == 0]
    assert chosen.lr == trial.lr and chosen.method_options == {**options, **trial.options}


def test_an_experiments_variant_of_a_tuned_row_starts_from_its_chosen_knobs(tmp_path, monkeypatch):
    from mosaictool.demo.experiments import Context, common

    seen = []

    def fake_finetune(cfg, shards, base, out, rows=None, lock=None, shard_cache=None):
        seen.extend((label, options) for label, _, options in rows)
        return {label: [] for label, _, _ in rows}

    monkeypatch.setattr(common, "finetune_all", fake_finetune)
    cfg = DemoConfig(finetune_lr=None, row_lrs=dict.fromkeys(LABELS, 5e-4), row_options={"MosaiCLIP": {"max_pos": 4, "max_neg": 8}})
    common.finetune_variants(Context(cfg, tmp_path, tmp_path, tmp_path, tmp_path, tmp_path), [
        common.Variant("− curriculum", "ablation − curriculum", "mosaiclip", {"curriculum": False}, lr_row="MosaiCLIP"),
        common.Variant("max-pos 1", "ablation max-pos", "mosaiclip", {"max_pos": 1}, lr_row="MosaiCLIP"),
        common.Variant("NegCLIP", "NegCLIP", "negclip", {}, lr_row="NegCLIP"),
        common.Variant("rung 2", "ladder 2", "mosaiclip", {}, lr=1e-4)])  # no row of the table: nothing chosen for it
    assert seen == [("ablation − curriculum", {"max_pos": 4, "max_neg": 8, "curriculum": False}),
                    ("ablation max-pos", {"max_pos": 1, "max_neg": 8}), ("NegCLIP", {}), ("ladder 2", {})]
