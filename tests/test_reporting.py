"""`train --report-to`: the logger writes the loop's metrics where TensorBoard and wandb read them."""

from __future__ import annotations

import sys
import types

import pytest

from mosaictool.errors import MosaicError
from mosaictool.training.reporting import Reporter, parse_report_to

METRICS = {"step": 3, "epoch": 0, "loss": 2.5, "i2t": 2.0, "t2i": 3.0, "lr": 1e-4, "logit_scale": 14.3,
           "samples_per_s": 40.0, "texts_per_image": 4.5, "pos_per_image": 2.0, "neg_per_image": 2.5}


def test_parse_report_to():
    assert parse_report_to(None) == [] == parse_report_to("none") == parse_report_to("")
    assert parse_report_to("tensorboard, wandb,tensorboard") == ["tensorboard", "wandb"]
    with pytest.raises(MosaicError, match="--report-to 'mlflow': choose tensorboard, wandb"):
        parse_report_to("tensorboard,mlflow")


def test_tensorboard_event_file_holds_every_term_rate_and_eval(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    reporter = Reporter(["tensorboard"], tmp_path)
    for step in (1, 2, 3):
        reporter.log_step(step, {**METRICS, "step": step, "loss": 3.0 - step})
    reporter.log_eval(3, {"aro/VG-Relation/accuracy": 0.61})
    reporter.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/i2t", "train/t2i", "train/lr", "train/samples_per_s", "train/texts_per_s",
            "eval/aro/VG-Relation/accuracy"} <= tags
    assert not tags & {"train/step", "train/epoch"} and not any(t.startswith("gpu/") for t in tags)  # CPU run
    assert [(e.step, e.value) for e in events.Scalars("train/loss")] == [(1, 2.0), (2, 1.0), (3, 0.0)]
    assert events.Scalars("train/texts_per_s")[0].value == pytest.approx(40.0 * 4.5)
    assert events.Scalars("eval/aro/VG-Relation/accuracy")[0].value == pytest.approx(0.61)


def test_off_by_default_writes_nothing(tmp_path):
    reporter = Reporter([], tmp_path)
    reporter.log_step(1, METRICS)
    reporter.close()
    assert not reporter and list(tmp_path.iterdir()) == []


def test_wandb_gets_the_same_scalars(tmp_path, monkeypatch):
    calls = []
    run = types.SimpleNamespace(log=lambda d, step: calls.append(("log", step, d)), finish=lambda: calls.append(("finish",)))
    fake = types.ModuleType("wandb")
    fake.init = lambda **kw: calls.append(("init", kw)) or run
    monkeypatch.setitem(sys.modules, "wandb", fake)
    reporter = Reporter(["wandb"], tmp_path / "run1", config={"lr": 1e-4})
    reporter.log_step(3, METRICS)
    reporter.close()
    (_, init), (_, step, logged), finish = calls
    assert init["name"] == "run1" and init["config"] == {"lr": 1e-4} and init["dir"] == str(tmp_path / "run1")
    assert step == 3 and logged == reporter.step_scalars(METRICS) and logged["train/i2t"] == 2.0
    assert finish == ("finish",)


def test_missing_package_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    with pytest.raises(MosaicError, match="--report-to wandb needs the wandb package: pip install wandb"):
        Reporter(["wandb"], tmp_path)


def test_gpu_memory_on_cuda(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 2**30 if device == "cuda:1" else 0)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: 3 * 2**30 if device == "cuda:1" else 0)
    scalars = Reporter([], tmp_path, device="cuda:1").step_scalars(METRICS)
    assert scalars["gpu/memory_allocated_gb"] == 1.0 and scalars["gpu/max_memory_allocated_gb"] == 3.0
