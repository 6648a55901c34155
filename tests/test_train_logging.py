"""`train --report-to` and `--eval-bench`: the loop's metrics reach TensorBoard (read back with its own
reader), the evaluation headline after every epoch reaches metrics.jsonl and TensorBoard, and neither
changes the trained weights or --resume."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from mosaictool.cli import app
from mosaictool.errors import MosaicError
from mosaictool.model import openclip
from mosaictool.training import TrainConfig, train
from train_fixtures import tiny_config

runner = CliRunner()


@pytest.fixture(scope="module")
def world(tiny_worlds, tmp_path_factory):
    """8 training records (2 micro-batches of 4 per epoch), a tiny model, and a small world's val split."""
    from mosaictool.world.generate import generate_world

    root = tmp_path_factory.mktemp("logging")
    generate_world(root / "bench", train=0, eval_scale=0.01)
    return (*tiny_worlds(n=8), root / "bench")


config = functools.partial(tiny_config, steps=4)


def scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_report_to_tensorboard_and_eval_every_epoch(world, tmp_path):
    """Through the CLI, as a user runs it; the weights equal those of a run without either flag."""
    data, model_cfg, bench = world
    run = tmp_path / "run"
    result = runner.invoke(app, [
        "train", "--data", str(data), "--model-config", str(model_cfg), "--method", "negclip", "--batch-size", "4",
        "--steps", "4", "--warmup", "1", "--report-to", "tensorboard", "--eval-bench", "world-val:crepe",
        "--eval-data-root", str(bench), "--out", str(run), "-q"])
    assert result.exit_code == 0, result.output
    logged = lines(run)
    got = scalars(run)
    for term in ("loss", "i2t", "t2i", "lr", "logit_scale", "samples_per_s", "texts_per_s", "texts_per_image"):
        assert [s for s, _ in got[f"train/{term}"]] == [1, 2, 3, 4], term
    for term in ("loss", "i2t", "t2i", "lr"):  # the very numbers of metrics.jsonl
        assert [v for _, v in got[f"train/{term}"]] == pytest.approx([m[term] for m in logged], rel=1e-6), term
    assert not any(t.startswith("gpu/") for t in got)  # CPU run: no GPU memory curve
    # the headline after each epoch (2 steps each), logged at the step that ends it
    key = "world-val/headline/accuracy"
    assert [s for s, _ in got[f"eval/{key}"]] == [2, 4]
    assert [m["step"] for m in logged if f"eval/{key}" in m] == [2, 4]
    assert [v for _, v in got[f"eval/{key}"]] == pytest.approx([m[f"eval/{key}"] for m in logged if f"eval/{key}" in m])
    assert all(0 <= v <= 1 for _, v in got[f"eval/{key}"])
    # off by default, and neither flag changes what is trained
    plain = train(config(world, tmp_path / "plain", method="negclip"))
    assert not (tmp_path / "plain" / "tensorboard").exists()
    assert all(not any(k.startswith("eval/") for k in m) for m in lines(tmp_path / "plain"))
    a, b = (openclip.read_checkpoint(p)["state_dict"] for p in (plain, run / "final.pt"))
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)


def test_resume_logs_each_step_once(world, tmp_path):
    """A run stopped after its step-2 checkpoint, resumed with --report-to given again: every step once
    in TensorBoard (the first attempt's step 3 purged) and in metrics.jsonl."""
    run = tmp_path / "run"

    def stop(step, metrics, model):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config(world, run, save_every=2, report_to="tensorboard"), on_step=stop)
    assert (run / "last.pt").exists()
    train(TrainConfig(data="", out=str(run), quiet=True, report_to="tensorboard"), resume=True)
    got = scalars(run)
    assert [s for s, _ in got["train/loss"]] == [1, 2, 3, 4]
    assert [v for _, v in got["train/loss"]] == pytest.approx([m["loss"] for m in lines(run)], rel=1e-6)
    assert [m["step"] for m in lines(run)] == [1, 2, 3, 4]


def test_bad_flags_are_one_line_naming_the_flag(world, tmp_path):
    data, model_cfg, bench = world
    base = ["train", "--data", str(data), "--model-config", str(model_cfg), "--steps", "1", "--out", str(tmp_path / "r")]
    for extra, message in ((["--report-to", "mlflow"], "--report-to 'mlflow': choose tensorboard, wandb"),
                           (["--eval-bench", "world-val"], "--eval-bench world-val: give --eval-data-root"),
                           (["--eval-bench", "nope", "--eval-data-root", str(bench)], "unknown benchmark 'nope'")):
        result = runner.invoke(app, base + extra)
        assert result.exit_code == 1 and message in result.output, result.output
        assert "Traceback" not in result.output
    assert not (tmp_path / "r").exists()
    with pytest.raises(MosaicError, match="world-val: no benchmark files under"):  # an empty root: before any run folder
        (tmp_path / "empty" / "val").mkdir(parents=True)
        train(config(world, tmp_path / "r2", eval_bench="world-val", eval_data_root=str(tmp_path / "empty")))
    assert not (tmp_path / "r2").exists()


def test_eval_leaves_lora_training_unchanged(world, tmp_path):
    """--eval-bench scores a merged copy of a --lora model: the model being trained, base weights and
    adapters, is bit for bit what it is without evaluation."""
    bench = str(world[2])
    states = []  # the LoRA models' own weights (base and adapters) after the last step and its evaluation
    for name, kw in (("plain", {}), ("eval", dict(eval_bench="world-val:crepe", eval_data_root=bench))):
        keep = {}
        train(config(world, tmp_path / name, lora=2, lr=1e-2, **kw),
              on_step=lambda step, metrics, model: keep.update({k: v.clone() for k, v in model.state_dict().items()}))
        states.append(keep)
    a, b = states
    assert any(".base_layer." in k for k in a)
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)
    assert [m["step"] for m in lines(tmp_path / "eval") if "eval/world-val/headline/accuracy" in m] == [2, 4]


def test_a_new_run_moves_the_metrics_of_an_attempt_without_checkpoint_aside(tmp_path, caplog):
    from mosaictool.training.reporting import Reporter

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": "nan"}\n')  # a diverged attempt: no checkpoint
    with caplog.at_level("WARNING", logger="mosaictool.training.reporting"):
        reporter = Reporter([], run, metrics_file=True)
    for step in (1, 2, 3):
        reporter.write_line({"step": step})
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]  # appended, they read 1, 1, 2, 3
    assert (run / "metrics.1.jsonl").read_text() == '{"step": 1, "loss": "nan"}\n'
    assert [r.getMessage() for r in caplog.records] == [
        f"{run / 'metrics.jsonl'}: an earlier attempt logged there without leaving a checkpoint; its lines moved to "
        f"{run / 'metrics.1.jsonl'}"]
