"""The main job end to end in its quick form, as CI and a new user run it."""

from __future__ import annotations

import orjson
import pytest

from mosaictool.cli import app
from mosaictool.demo import COLUMNS, METHODS, column_value, mean_ci, paired_diff, paired_markdown, table_markdown


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
    assert table.splitlines()[2] == "| NegCLIP | " + " | ".join(["+10.3 ± 1.4 (p=0.001)"] * len(COLUMNS)) + " |"
    assert paired_markdown(rows, {"CLIP": ["CLIP-s0"], "NegCLIP": ["NegCLIP-s0"]}) == ""  # one seed: no table


def test_column_value_averages_a_family_and_skips_nan():
    rows = [
        {"model": "m", "subtask": "zeroshot/colour", "metric": "top1", "value": 0.5},
        {"model": "m", "subtask": "zeroshot/shape", "metric": "top1", "value": 0.7},
        {"model": "m", "subtask": "zeroshot/shape", "metric": "top5", "value": 1.0},
        {"model": "m", "subtask": "aro/VG-Attribution", "metric": "micro_accuracy", "value": float("nan")},
    ]
    assert column_value(rows, "m", "zeroshot/*", "top1") == pytest.approx(0.6)
    assert column_value(rows, "m", "aro/VG-Attribution", "micro_accuracy") != column_value(rows, "m", "aro/VG-Attribution", "micro_accuracy")


def test_table_has_a_row_per_method_and_a_column_per_split():
    summary = {"A": {c: (0.5, 0.01) for c, _, _ in COLUMNS}, "B": {c: (0.25, float("nan")) for c, _, _ in COLUMNS}}
    table = table_markdown(summary)
    assert table.splitlines()[0].count("|") == len(COLUMNS) + 2
    assert "| A | 50.0 ± 1.0 |" in table and "| B | 25.0 | 25.0 |" in table


@pytest.mark.slow
def test_demo_quick_end_to_end(runner, tmp_path):
    out, cache = tmp_path / "demo", tmp_path / "cache"
    result = runner.invoke(app, ["demo", "--quick", "--out", str(out), "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("| method |") and len(lines) == 2 + 1 + len(METHODS)
    for artifact in ("graphs.parquet", "negatives.parquet", "texts.jsonl", "shards/sizes.json", "shards-plain/sizes.json", "base.pt",
                     "results.jsonl", "report.md", "methods.png", "wise_ft.png"):
        assert (out / artifact).is_file(), artifact
    rows = [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]
    models = {r["model"] for r in rows}
    assert {"base", "CLIP-s0", "NegCLIP-s0", "MosaiCLIP-s0", "MosaiCLIP-NoCurric-s0"} <= models
    assert len(list(cache.glob("base-*.pt"))) == 1
    # the world's images come twice, with the varied and with the plain caption
    texts = [orjson.loads(x) for x in (out / "texts.jsonl").read_bytes().splitlines()]
    plain = {r["id"][:-len("-plain")]: r["caption"] for r in texts if r["id"].endswith("-plain")}
    varied = {r["id"]: r["caption"] for r in texts if not r["id"].endswith("-plain")}
    assert plain.keys() == varied.keys() and sum(plain[k] != varied[k] for k in plain) > len(plain) / 2

    # A second run reuses the world, the texts, the shards, the cached base and the runs.
    again = runner.invoke(app, ["demo", "--quick", "--out", str(out), "--cache-dir", str(cache)])
    assert again.exit_code == 0, again.stderr
    assert "reusing cached base model" in again.stderr
    assert again.stdout == result.stdout  # same seeds and flags: same table
    assert "fine-tune:" not in again.stderr

    # Other fine-tuning settings: new runs from the same cached base, never the old ones.
    other = runner.invoke(app, ["demo", "--quick", "--out", str(out), "--cache-dir", str(cache), "--finetune-steps", "3"])
    assert other.exit_code == 0, other.stderr
    assert "reusing cached base model" in other.stderr and other.stderr.count("fine-tune:") == len(METHODS)
