"""The device rule of every command, proven on CPU with torch.cuda faked at its lowest level.

Only torch's C entry points and the queries that need a driver are replaced (`is_available`,
`device_count`, `current_device`, `torch._C._cuda_setDevice`): `torch.cuda.set_device` itself stays
real torch code, so a bare `torch.device("cuda")` is refused exactly as on a GPU machine
("Expected a torch.device with a specified index or an integer, but got:cuda").
"""

from __future__ import annotations

import json

import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from helpers import CAP, invoke, jsonl
from helpers import refused as assert_refused
from mosaictool.cli import app
from mosaictool.errors import MosaicError
from mosaictool.training import distributed as dist
from mosaictool.training.device import resolve_device

runner = CliRunner()


class FakeCuda:
    """GPUs that are visible but never touched: records what set_device selected."""

    def __init__(self, monkeypatch, count: int = 2, current: int = 0):
        self.count, self.current, self.selected = count, current, []
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: self.count)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: self.current)
        monkeypatch.setattr(torch._C, "_cuda_setDevice", self._set, raising=False)

    def _set(self, index: int) -> None:
        if not 0 <= index < self.count:  # what the driver answers: "invalid device ordinal"
            raise RuntimeError("CUDA error: invalid device ordinal")
        self.selected.append(index)
        self.current = index


@pytest.fixture
def no_torchrun(monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def cuda(monkeypatch, no_torchrun):
    return FakeCuda(monkeypatch)


@pytest.fixture
def no_cuda(monkeypatch, no_torchrun):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


def test_fake_cuda_refuses_an_unindexed_device_like_real_torch(cuda):
    with pytest.raises(ValueError, match="Expected a torch.device with a specified index or an integer, but got:cuda"):
        torch.cuda.set_device(torch.device("cuda"))
    torch.cuda.set_device(torch.device("cuda:1"))
    assert cuda.selected == [1]


def test_default_is_the_current_gpu(cuda):
    assert resolve_device(None) == "cuda:0"
    cuda.current = 1
    assert resolve_device(None) == "cuda:1"
    assert resolve_device("cuda") == "cuda:1"
    assert resolve_device("auto") == "cuda:1"


def test_explicit_index_and_cpu(cuda):
    assert resolve_device("cuda:1") == "cuda:1"
    assert resolve_device("CUDA:0") == "cuda:0"
    assert resolve_device("cpu") == "cpu"


def test_default_without_gpu_is_cpu(no_cuda):
    assert resolve_device(None) == "cpu"
    assert dist.init(None).device == "cpu"


@pytest.mark.parametrize("requested", ["cuda", "cuda:0"])
def test_missing_gpu_names_the_flag(no_cuda, requested):
    with pytest.raises(MosaicError, match="no CUDA GPU is visible here; use --device cpu"):
        resolve_device(requested)


def test_gpu_index_out_of_range(cuda):
    with pytest.raises(MosaicError,
                       match=r"--device cuda:2: GPU 2 does not exist, 2 visible.*cuda:0 \.\. cuda:1 or --device cpu"):
        resolve_device("cuda:2")


def test_not_a_device(cuda):
    with pytest.raises(MosaicError, match="--device 'gpu': not a torch device"):
        resolve_device("gpu")


def test_torchrun_takes_the_local_rank(cuda, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert resolve_device(None) == "cuda:1"
    assert resolve_device("cuda") == "cuda:1"
    monkeypatch.setenv("LOCAL_RANK", "3")  # more ranks per node than GPUs
    with pytest.raises(MosaicError, match=r"GPU 3 \(LOCAL_RANK 3\) does not exist"):
        resolve_device(None)


@pytest.mark.parametrize("requested", [None, "cuda"])
def test_init_sets_an_indexed_device(cuda, requested):
    """A crash once: init() called set_device(torch.device("cuda")); now always indexed."""
    cuda.current = 1
    info = dist.init(requested)
    assert info.device == "cuda:1" and cuda.selected == [1]


def test_init_one_rank_torchrun(cuda, monkeypatch):
    """`torchrun --nproc_per_node 1`: world size 1, LOCAL_RANK 0; no process group is needed."""
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    cuda.current = 1
    info = dist.init(None)
    assert info.device == "cuda:0" and cuda.selected == [0] and not info.distributed


def test_init_rank_on_another_gpu_is_refused(cuda, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(MosaicError, match=r"--device cuda:0 under torchrun with 2 ranks.*cuda:1"):
        dist.init("cuda:0")
    assert cuda.selected == []


# ---- every command follows the rule ------------------------------------------------------------

@pytest.fixture(scope="module")
def commands(tmp_path_factory):
    """Each command's arguments, with everything it checks before its device valid."""
    from mosaictool.model.openclip import create, save_checkpoint

    tmp_path = tmp_path_factory.mktemp("device")
    ckpt = str(tmp_path / "m.pt")
    save_checkpoint(ckpt, create("mosaic-tiny", seed=0))
    captions = tmp_path / "c.jsonl"
    captions.write_text('{"id": "a", "caption": "a red cube"}\n')
    (tmp_path / "sugarcrepe").mkdir()
    (tmp_path / "sugarcrepe" / "add_att.json").write_text(
        json.dumps({"0": {"filename": "red.jpg", "caption": "a red square", "negative_caption": "a blue square"}}))
    (tmp_path / "coco" / "val2017").mkdir(parents=True)
    Image.new("RGB", (24, 24), "red").save(tmp_path / "coco" / "val2017" / "red.jpg")
    return {
        "train": ["train", "--data", str(captions), "--out", str(tmp_path / "run"), "--steps", "1"],
        "evaluate": ["evaluate", "--bench", "sugarcrepe:add_att", "-c", ckpt, "--data-root", str(tmp_path)],
        "tree-score": ["tree-score", str(captions), "--checkpoint", ckpt],
        "wise-ft": ["wise-ft", "--zeroshot", ckpt, "--finetuned", ckpt, "--out", str(tmp_path / "w")],
        "demo": ["demo", "--quick", "--out", str(tmp_path / "demo")],
    }


COMMANDS = ["train", "evaluate", "tree-score", "wise-ft", "demo"]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("requested", ["cuda", "cuda:0"])
def test_every_command_refuses_a_missing_gpu(no_cuda, commands, command, requested):
    result = runner.invoke(app, [*commands[command], "--device", requested])
    assert result.exit_code == 1, result.output
    assert "no CUDA GPU is visible here; use --device cpu" in result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_a_bad_index(cuda, commands, command):
    result = runner.invoke(app, [*commands[command], "--device", "cuda:7"])
    assert result.exit_code == 1, result.output
    assert "--device cuda:7: GPU 7 does not exist, 2 visible" in result.output


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("requested", [None, "cuda"])
def test_every_command_picks_the_indexed_gpu(cuda, commands, monkeypatch, command, requested):
    """With a GPU visible, no --device and --device cuda reach the work as cuda:<current>: the
    first place each command would put a tensor on the device is stopped there and asked."""
    seen = []

    class Reached(Exception):
        pass

    def stop(*args, device=None, **kwargs):
        seen.append(device)
        raise Reached

    import mosaictool.model.openclip as openclip
    import mosaictool.model.wise_ft as wise_ft

    monkeypatch.setattr(openclip, "create", stop)  # train
    monkeypatch.setattr(openclip, "load_model", stop)  # evaluate, tree-score
    monkeypatch.setattr(wise_ft, "wise_ft", stop)
    import mosaictool.demo as demo

    monkeypatch.setattr(demo, "run_demo", lambda cfg: stop(device=cfg.device))
    cuda.current = 1
    args = commands[command] + ([] if requested is None else ["--device", requested])
    result = runner.invoke(app, args)
    assert isinstance(result.exception, Reached), result.output
    assert seen == ["cuda:1"]


def test_demo_gpu_preset_is_larger_and_loaders_decode_beside_the_gpu(cuda, no_torchrun):
    """--preset gpu: a larger world and longer, larger-batch runs than the CPU default, the same seeds
    (the same statistics); --quick: smaller. On a GPU DataLoader processes decode beside the step,
    on the CPU none compete with it; --loader-workers wins either way."""
    import os

    from mosaictool.demo import DemoConfig

    sizes = ("world_train", "pretrain_steps", "pretrain_batch", "finetune_steps", "finetune_batch")
    cpu, gpu, quick = DemoConfig.preset(), DemoConfig.preset(gpu=True), DemoConfig.preset(quick=True)
    for name in sizes:
        assert getattr(quick, name) < getattr(cpu, name) < getattr(gpu, name), name
    assert gpu.seeds == cpu.seeds
    device, workers = gpu.runtime()
    assert device == "cuda:0" and 1 <= workers <= os.cpu_count()
    assert DemoConfig.preset(device="cpu").runtime() == ("cpu", 0)
    assert DemoConfig.preset(gpu=True, loader_workers=2).runtime() == ("cuda:0", 2)
    assert DemoConfig.preset(gpu=True, world_train=None).world_train == gpu.world_train  # unset flags keep the preset
    with pytest.raises(MosaicError, match="choose one"):
        DemoConfig.preset(quick=True, gpu=True)
    result = runner.invoke(app, ["demo", "--preset", "tpu"])
    assert result.exit_code == 1 and "--preset 'tpu'" in result.output


# ---- perf/gpu_train.py: arguments, the no-GPU path, and its measured runs on CPU ----------------

def _gpu_train():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "perf" / "gpu_train.py"
    spec = importlib.util.spec_from_file_location("gpu_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_train_arguments():
    """The defaults are usable: a model open_clip knows, every registered method, loader processes
    that fit the machine; the methods list parses; bad values are usage errors (exit 2)."""
    import os

    import open_clip

    from mosaictool import methods

    gt = _gpu_train()
    args = gt.parse_args([])
    assert args.model in open_clip.list_models()
    assert args.methods == list(methods.names())
    assert 1 <= args.workers <= os.cpu_count() and args.batch_size >= 1 and 0 <= args.skip < args.steps - 1
    assert gt.parse_args(["--workers", "0"]).workers == 0
    assert gt.parse_args(["--methods", "clip, mosaiclip", "--compile"]).methods == ["clip", "mosaiclip"]
    for bad in (["--methods", "simclr"], ["--steps", "0"], ["--steps", "5", "--skip", "4"],
                ["--precision", "fp8"], ["--workers", "-1"]):
        with pytest.raises(SystemExit) as e:
            gt.parse_args(bad)
        assert e.value.code == 2


def test_gpu_train_without_gpu_says_so_and_exits_0(no_cuda, capsys):
    gt = _gpu_train()
    assert gt.main([]) == 0
    assert gt.main(["--device", "cuda"]) == 0
    assert "no CUDA GPU visible: nothing measured" in capsys.readouterr().out


def test_gpu_train_bad_gpu_index(cuda, capsys):
    assert _gpu_train().main(["--device", "cuda:7"]) == 1
    assert "GPU 7 does not exist" in capsys.readouterr().err


def test_gpu_train_single_gpu_env(monkeypatch):
    gt = _gpu_train()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gt.single_gpu_env("cuda:1")["CUDA_VISIBLE_DEVICES"] == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert gt.single_gpu_env("cuda:1")["CUDA_VISIBLE_DEVICES"] == "6"


@pytest.mark.slow
def test_gpu_train_measured_runs_work_on_cpu(tmp_path):
    """The two measured sides, each in its own process as on a GPU, here on the CPU with a tiny model."""
    import os

    from train_fixtures import write_tiny_model

    gt = _gpu_train()
    jsonl, csv = gt.make_data(tmp_path / "data", 12, 32)
    assert csv.read_text().splitlines()[1].split("\t")[0] == str(tmp_path / "data" / "images" / "000.png")
    base = {"model": "test-tiny", "model_config": str(write_tiny_model(tmp_path)), "device": "cpu", "batch_size": 4,
            "precision": "fp32", "workers": 0, "steps": 3, "skip": 0, "compile": False}
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    theirs = gt.run_child({**base, "side": "open_clip", "csv": str(csv), "out": str(tmp_path / "oc")}, env)
    ours = gt.run_child({**base, "side": "ours", "method": "mosaiclip", "data": str(jsonl), "out": str(tmp_path / "m")}, env)
    assert "error" not in theirs and "error" not in ours, (theirs, ours)
    assert theirs["samples_per_s"] > 0 and theirs["texts_per_image"] == 1.0 and theirs["peak_bytes"] is None
    assert ours["samples_per_s"] > 0 and ours["texts_per_image"] > 2 and ours["images_per_step"] >= 4


# --- bad input (moved from test_bad_input.py) ---

@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a GPU is visible")
def test_device_cuda_without_a_gpu(case, tiny_world, ckpts, bench_root):
    caps = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    for args in (
        ["train", "--data", tiny_world, "--out", case.dst / "run", "--steps", "1", "--batch-size", "4", "--device", "cuda"],
        ["evaluate", "-b", "sugarcrepe", "-c", ckpts["tiny"], "-d", bench_root, "--device", "cuda"],
        ["wise-ft", "--zeroshot", ckpts["tiny"], "--finetuned", ckpts["tiny"], "--out", case.dst / "w", "--device", "cuda"],
        ["tree-score", caps, "--checkpoint", ckpts["tiny"], "--device", "cuda:1"],
    ):
        assert_refused(invoke(args), "--device cuda", "no CUDA GPU is visible", "--device cpu")
    case.untouched()

