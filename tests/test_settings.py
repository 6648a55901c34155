"""TrainConfig is the one source of `mosaictool train`'s flags and `mosaictool.train`'s keywords (and
DemoConfig of `mosaictool demo`'s flags):
every setting is a flag and a keyword with the field's default and help, a field added to the
config is a flag with nothing else written, and the API refuses a keyword that is no setting."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import click
import pytest
import typer
from typer.main import get_command

import mosaictool
import mosaictool.training.loop
from clirun import refused_run
from helpers import file_bytes, invoke, refused, snapshot
from mosaictool.cli import app
from mosaictool.cli.common import AllowOutsideRootOpt, QuietOpt, SkipBadOpt
from mosaictool.cli.train import config_parameters
from mosaictool.training import TrainConfig
from mosaictool.training.config import flag_fields, setting


def _train_command() -> click.Command:
    return get_command(app).commands["train"]


def _help(annotation) -> str:
    return next(m for m in annotation.__metadata__ if isinstance(m, typer.models.OptionInfo)).help


@pytest.fixture
def captured(monkeypatch) -> list[TrainConfig]:
    """The configs `train` would run (the training itself left out)."""
    configs = []
    monkeypatch.setattr(mosaictool.training.loop, "train", lambda cfg, resume=False: configs.append(cfg) or "final.pt")
    return configs


def test_every_setting_is_a_flag_with_the_fields_default_and_help():
    params = {p.name: p for p in _train_command().params}
    shared = {"skip_bad": SkipBadOpt, "allow_outside_root": AllowOutsideRootOpt, "quiet": QuietOpt}
    for f in flag_fields():
        assert f.name in params, f"{f.name} has no flag"
        flag = params[f.name]
        default = f.metadata["text"] or (None if f.default is dataclasses.MISSING else f.default)
        assert flag.default == default, f.name
        assert flag.help == (f.metadata["help"] or _help(shared[f.name])), f.name
        assert flag.opts[0] == "--" + f.name.replace("_", "-")
    # only the fields that recipes and the methods' own flags set have no flag of their own
    assert {f.name for f in dataclasses.fields(TrainConfig)} - {f.name for f in flag_fields()} == {
        "method_options", "beta1", "beta2", "eps"}


def test_the_cli_and_the_api_build_the_same_config_with_the_fields_defaults(runner, captured):
    result = runner.invoke(app, ["train", "--data", "d.jsonl", "--out", "run"])
    assert result.exit_code == 0, result.stderr
    mosaictool.train("d.jsonl", out="run")
    assert captured[0] == captured[1] == TrainConfig(data="d.jsonl", out="run")


def test_every_setting_is_an_api_keyword(captured):
    """Each setting given a value of its own type that is not its default reaches the config."""
    values = {"method": "negclip", "recipe": None, "precision": "bf16", "optimizer": "sgd", "crop_scale": [0.9, 1.0],
              "report_to": None, "eval_bench": None, "device": "cpu", "model": "ViT-B-32", "pretrained": "openai",
              "record_hard_images": True, "merge_equal_texts": False, "steps": 7, "lr": 0.01, "image_root": "images",
              "texts": "texts.jsonl", "model_config": "model.json", "eval_data_root": "world"}
    for f in flag_fields():
        if f.name in ("data", "out") or f.name in values:
            continue
        change = {bool: lambda d: not d, int: lambda d: d + 2, float: lambda d: d / 2}.get(type(f.default), lambda d: "x")
        values[f.name] = change(f.default)
    mosaictool.train("d.jsonl", out="run", **values, given=())
    cfg = captured[0]
    for name, value in values.items():
        assert getattr(cfg, name) == (tuple(value) if isinstance(value, list) else value), name


def test_a_field_added_to_the_config_is_a_flag():
    @dataclasses.dataclass
    class Wider(TrainConfig):
        ema: float = setting(0.0, "Keep an exponential moving average of the weights with this decay, e.g. --ema 0.999 (0: off).")

    own, shared = config_parameters(Wider)
    command = typer.Typer()

    def train(**kwargs):
        pass

    train.__signature__ = inspect.Signature(own + shared)
    command.command()(train)
    params = {p.name: p for p in get_command(command).params}
    assert params["ema"].opts == ["--ema"] and params["ema"].default == 0.0 and "e.g. --ema 0.999" in params["ema"].help
    assert {f.name for f in flag_fields()} | {"ema"} <= set(params)


def test_an_unknown_keyword_is_a_type_error_naming_it(captured):
    with pytest.raises(TypeError, match=r"train\(\) got an unexpected keyword argument 'bacth_size'"):
        mosaictool.train("d.jsonl", out="run", bacth_size=8)
    mosaictool.train("d.jsonl", out="run", method="mosaiclip", max_pos=2)  # a method's option is a keyword too
    assert captured[0].method_options == {"max_pos": 2}


def test_a_train_config_is_accepted_whole_and_keywords_replace_its_settings(captured):
    mosaictool.train(TrainConfig(data="d.jsonl", out="run", steps=3, method="mosaiclip", method_options={"max_pos": 2}), seed=4)
    cfg = captured[0]
    assert (cfg.data, cfg.out, cfg.steps, cfg.seed, cfg.method_options) == ("d.jsonl", "run", 3, 4, {"max_pos": 2})


def test_every_demo_setting_with_a_help_is_a_demo_flag_the_preset_fills_in(runner, monkeypatch):
    """DemoConfig's flag fields are `mosaictool demo`'s flags, each None ("not given") unless it has
    a text default; given ones reach the config, the others come from the preset."""
    import mosaictool.demo
    from mosaictool.demo import experiments
    from mosaictool.demo.config import DemoConfig

    params = {p.name: p for p in get_command(app).commands["demo"].params}
    for f in flag_fields(DemoConfig):
        flag = params[f.name]
        assert flag.default == (f.metadata["text"] or (False if flag.is_flag else None)), f.name
        # --experiment lists the registry (worded by the command: the registry imports the config)
        assert flag.help == (experiments.help_text() if f.name == "experiments" else f.metadata["help"]), f.name
    assert set(params) == {f.name for f in flag_fields(DemoConfig)} | {"preset"}
    configs = []
    found = dict(table="", power=None, summary={}, wise={}, rows=[], minutes=0.1, selection=None, control={"verdict": ""},
                 headline=None, mde={})
    monkeypatch.setattr(mosaictool.demo, "run_demo", lambda cfg: configs.append(cfg) or found)
    result = runner.invoke(app, ["demo", "--quick", "--world-seed", "3", "--hard-images", "none", "-x", "ablate"])
    assert result.exit_code == 0, result.output
    assert (configs[0].world_seed, configs[0].hard_images, configs[0].experiments) == (3, "none", ("ablate",))
    assert configs[0] == DemoConfig.preset(True, world_seed=3, hard_images="none", experiments=("ablate",), device=configs[0].device)


# --- bad input (moved from test_bad_folders.py) ---

@pytest.mark.parametrize("command", ["decompose", "negate", "template"])
@pytest.mark.parametrize("seed", [-1, 2**32])
def test_seed_has_trains_bounds_in_every_text_stage(tmp_path, command, seed):
    """One rule for --seed: a whole number >= 0 and < 2**31, as train's (numpy's generators take no negative seed)."""
    (tmp_path / "in.jsonl").write_text('{"id": "a", "caption": "a red circle"}\n')
    before = file_bytes(tmp_path)
    refused_run([command, tmp_path / "in.jsonl", "--seed", seed], f"--seed {seed}: must be a whole number >= 0 and < 2147483648")
    assert file_bytes(tmp_path) == before


# --- bad input (moved from test_bad_values.py) ---

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

