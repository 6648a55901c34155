"""Weights files as users hand them over: `train --pretrained`, `tree-score --checkpoint / --pretrained`,
`wise-ft --zeroshot / --finetuned`, `--model-config`, `train --resume`. A file that is not torch's (random
bytes, text, empty, a folder, a FIFO, cut in the middle), one that carries code (refused, never run), a
state_dict that is no dict of tensors or holds integers where floats belong, and a config too big for
memory: exit 1, one `Error: FILE: ...` line, nothing written, the inputs byte-identical. What open_clip's
own loader accepts (DDP prefixes, half precision, views) loads."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
from pathlib import Path

import pytest
import torch

from mosaictool.errors import MosaicError
from mosaictool.model import openclip

sys.path.insert(0, str(Path(__file__).parent))

from test_bad_values import invoke, invoke_within, refused, snapshot  # noqa: E402
from train_fixtures import TINY_MODEL, make_world, write_tiny_model  # noqa: E402

KEY = "visual.conv1.weight"


class _RunsCode:
    """Unpickling this writes a marker file: what a hostile file would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpts")
    cfg = write_tiny_model(root)
    bundle = openclip.create("test-tiny", None, model_config_file=str(cfg), seed=0)
    openclip.save_checkpoint(root / "final.pt", bundle)
    make_world(root / "world", n=4)
    (root / "caps.jsonl").write_text('{"id": 1, "caption": "a red circle"}\n')
    return root


def state(root: Path) -> dict:
    return torch.load(root / "final.pt", weights_only=True)["state_dict"]


def header(root: Path, weights: dict, **fields) -> dict:
    ckpt = torch.load(root / "final.pt", weights_only=True)
    ckpt.update(state_dict=weights, **fields)
    return ckpt


def make(root: Path, folder: Path, case: str) -> Path:
    """The file of `case` in `folder` (a marker file next to it would show that code ran)."""
    path = folder / f"{case}.pt"
    marker = folder / "ran.txt"
    sd = state(root)
    content = {
        "random": bytes(range(256)) * 8,
        "text": b"weights: see the README\n",
        "empty": b"",
        "truncated": (root / "final.pt").read_bytes()[: (root / "final.pt").stat().st_size // 2],
        "pickle-with-code": pickle.dumps({"state_dict": _RunsCode(marker)}),  # plain pickle, not torch.save
    }
    if case in content:
        path.write_bytes(content[case])
    elif case == "folder":
        path.mkdir()
    elif case == "fifo":
        os.mkfifo(path)
    elif case == "torch-with-code":
        torch.save({**header(root, sd), "x": _RunsCode(marker)}, path)
    elif case == "int-weights":
        torch.save(header(root, {**sd, KEY: sd[KEY].to(torch.int64)}), path)
    elif case == "string-weights":
        torch.save(header(root, {k: "x" for k in sd}), path)
    elif case == "huge-config":
        vision = {**TINY_MODEL["vision_cfg"], "width": 400_000}
        torch.save(header(root, sd, model_name="test-huge", model_cfg={**TINY_MODEL, "vision_cfg": vision}), path)
    else:
        raise KeyError(case)
    return path


def readers(root: Path, path: Path, out: Path) -> dict[str, list]:
    cfg = root / "test-tiny.json"
    return {
        "train --pretrained": ["train", "--data", root / "world" / "captions.jsonl", "--out", out / "run", "--model-config", cfg,
                               "--pretrained", path, "--steps", "1", "-q"],
        "tree-score --checkpoint": ["tree-score", root / "caps.jsonl", "--checkpoint", path, "-o", out / "t.jsonl"],
        "tree-score --pretrained": ["tree-score", root / "caps.jsonl", "--model-config", cfg, "--pretrained", path,
                                    "-o", out / "t.jsonl"],
        "wise-ft --zeroshot": ["wise-ft", "--zeroshot", path, "--finetuned", root / "final.pt", "--out", out / "w"],
        "wise-ft --finetuned": ["wise-ft", "--zeroshot", root / "final.pt", "--finetuned", path, "--out", out / "w"],
    }


READERS = list(readers(Path("r"), Path("p"), Path("o")))
FILES = [  # case, the message every reader gives
    ("random", "not a torch weights file"),
    ("text", "not a torch weights file"),
    ("empty", "empty checkpoint (0 bytes)"),
    ("folder", "not a weights file (a folder)"),
    ("fifo", "not a weights file (a FIFO"),
    ("truncated", "truncated or corrupt checkpoint"),
    ("pickle-with-code", "not a torch weights file"),
    ("torch-with-code", "refused: the checkpoint carries a pickled Python object (WeightsUnpickler error: Unsupported global"),
    ("int-weights", f"{KEY} holds int64 values where the model has float32 weights"),
    ("string-weights", "not a weights file: state_dict['"),
]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("case, message", FILES, ids=[c for c, _ in FILES])
def test_a_bad_weights_file_is_one_line_naming_it(root, tmp_path, case, message, reader):
    path = make(root, tmp_path, case)
    out = tmp_path / "out"
    out.mkdir()
    before = snapshot(tmp_path), snapshot(root)
    result = invoke_within(readers(root, path, out)[reader], 60, fifo=path if case == "fifo" else None)
    refused(result, f"{path}: {message}")
    assert (snapshot(tmp_path), snapshot(root)) == before
    assert not list(out.iterdir())
    assert not (tmp_path / "ran.txt").exists()


def test_the_code_files_really_run_code_when_unpickled_unsafely(root, tmp_path):
    """The two hostile files would write the marker if loaded without weights_only."""
    for case in ("pickle-with-code", "torch-with-code"):
        path = make(root, tmp_path, case)
        marker = tmp_path / "ran.txt"
        (pickle.loads(path.read_bytes()) if case.startswith("pickle") else torch.load(path, weights_only=False))
        assert marker.read_text() == "ran"
        marker.unlink()


@pytest.mark.parametrize("reader", ["tree-score --checkpoint", "wise-ft --finetuned"])
def test_a_checkpoint_whose_config_would_not_fit_in_memory(root, tmp_path, reader):
    path = make(root, tmp_path, "huge-config")
    out = tmp_path / "out"
    out.mkdir()
    before = snapshot(tmp_path)
    refused(invoke(readers(root, path, out)[reader]), f"{path}: the model config describes ~", "more than this machine's")
    assert snapshot(tmp_path) == before


# ---- plain state_dicts for --pretrained / --zeroshot ---------------------------------------------------

STATE_DICTS = [
    ("empty-dict", lambda sd: {}, "expected a state_dict (names to tensors), got an empty dict"),
    ("a-list", lambda sd: [1, 2], "expected a state_dict (names to tensors), got list"),
    ("strings", lambda sd: {k: "x" for k in sd}, "state_dict['"),
    ("ints", lambda sd: {**sd, KEY: sd[KEY].to(torch.int32)}, f"{KEY} holds int32 values"),
    ("bools", lambda sd: {**sd, KEY: sd[KEY] > 0}, f"{KEY} holds bool values"),
]


@pytest.mark.parametrize("reader", ["train --pretrained", "tree-score --pretrained", "wise-ft --zeroshot"])
@pytest.mark.parametrize("case, edit, message", STATE_DICTS, ids=[c for c, _, _ in STATE_DICTS])
def test_a_state_dict_that_is_not_weights(root, tmp_path, case, edit, message, reader):
    path = tmp_path / "w.pt"
    torch.save(edit(state(root)), path)
    out = tmp_path / "out"
    out.mkdir()
    before = snapshot(tmp_path)
    refused(invoke(readers(root, path, out)[reader]), f"{path}: ", message)
    assert snapshot(tmp_path) == before


def _ddp(sd):
    return {"state_dict": {f"module.{k}": v for k, v in sd.items()}}


def _view(sd):
    storage = torch.zeros(sd[KEY].numel() * 3)
    view = storage[sd[KEY].numel():2 * sd[KEY].numel()].view_as(sd[KEY])
    view.copy_(sd[KEY])
    return {**sd, KEY: view}


LOADABLE = [  # what open_clip's load_checkpoint takes, and the float32 weights it gives
    ("ddp-prefixed", _ddp, lambda sd: sd),
    ("view-of-a-bigger-storage", _view, lambda sd: sd),
    ("float16", lambda sd: {k: v.half() for k, v in sd.items()}, lambda sd: {k: v.half().float() for k, v in sd.items()}),
    ("bfloat16", lambda sd: {k: v.bfloat16() for k, v in sd.items()}, lambda sd: {k: v.bfloat16().float() for k, v in sd.items()}),
]


@pytest.mark.parametrize("case, edit, want", LOADABLE, ids=[c for c, _, _ in LOADABLE])
def test_what_open_clip_loads_loads_as_pretrained_and_in_a_checkpoint(root, tmp_path, case, edit, want):
    sd = state(root)
    plain, ours = tmp_path / "plain.pt", tmp_path / "ours.pt"
    torch.save(edit(sd), plain)
    edited = edit(sd)
    torch.save(header(root, edited.get("state_dict", edited)), ours)
    expected = want(sd)
    for model in (openclip.create("test-tiny", str(plain), model_config_file=str(root / "test-tiny.json")).model,
                  openclip.load_checkpoint(ours).model):
        got = model.state_dict()
        assert all(got[k].dtype == sd[k].dtype and torch.equal(got[k], expected[k]) for k in sd)


# ---- --model-config -----------------------------------------------------------------------------------


def _sized(**cfgs):
    cfg = json.loads(json.dumps(TINY_MODEL))
    for tower, values in cfgs.items():
        cfg[tower].update(values)
    return json.dumps(cfg)


MODEL_CONFIGS = [
    ("wide", _sized(vision_cfg={"width": 200_000, "head_width": 1000}), "the model config describes ~"),
    ("long-context", _sized(text_cfg={"context_length": 10**6}), "the model config describes ~"),
    ("huge-image", _sized(vision_cfg={"image_size": 10**6, "patch_size": 1}), "the model config describes ~"),
    ("not-utf8", b"\xff\xfe{", "invalid JSON: UTF-16 text (byte-order mark ff fe), not UTF-8"),
    ("folder", None, "model config not found (a folder"),
]


@pytest.mark.parametrize("case, content, message", MODEL_CONFIGS, ids=[c for c, _, _ in MODEL_CONFIGS])
def test_a_model_config_file_that_cannot_be_built(root, tmp_path, case, content, message):
    cfg = tmp_path / "m.json"
    if content is None:
        cfg.mkdir()
    else:
        cfg.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = snapshot(tmp_path)
    for args in (["tree-score", root / "caps.jsonl", "--model-config", cfg, "-o", tmp_path / "t.jsonl"],
                 ["train", "--data", root / "world" / "captions.jsonl", "--model-config", cfg, "--out", tmp_path / "run"]):
        refused(invoke(args), f"{cfg}: {message}")
        assert snapshot(tmp_path) == before


def test_the_size_estimate_is_open_clips_parameter_count(root):
    """Within 10% of what open_clip allocates for the shipped configs, so the memory check is about right."""
    for name in ("test-tiny", "mosaic-micro", "mosaic-tiny"):
        bundle = openclip.create(name, None, model_config_file=str(root / "test-tiny.json") if name == "test-tiny" else None)
        real = sum(t.numel() for t in bundle.model.state_dict().values())
        assert openclip.estimated_parameters(bundle.meta["model_cfg"]) == pytest.approx(real, rel=0.1), name


# ---- wise-ft's alphas and inputs ----------------------------------------------------------------------


@pytest.mark.parametrize("alphas, message", [
    ("0.5,0.5", "--alpha 0.5 is given twice"),
    ("0.1234,0.1231", "--alpha 0.1231 and 0.1234 both name wise_ft_alpha_0.123.pt"),
    ("0,1e-4", "--alpha 0.0001 and 0.0 both name wise_ft_alpha_0.000.pt"),
], ids=["duplicate", "same-three-decimals", "rounds-to-zero"])
def test_wise_ft_refuses_alphas_that_name_one_file(root, tmp_path, alphas, message):
    other = tmp_path / "zs.pt"
    shutil.copy(root / "final.pt", other)
    refused(invoke(["wise-ft", "--zeroshot", other, "--finetuned", root / "final.pt", "--alpha", alphas, "--out", tmp_path / "w"]),
            message)
    assert not (tmp_path / "w").exists()


def test_wise_ft_refuses_one_file_as_both_models_and_names_minus_zero_zero(root, tmp_path):
    final = root / "final.pt"
    refused(invoke(["wise-ft", "--zeroshot", final, "--finetuned", final, "--out", tmp_path / "w"]),
            f"{final}: given as both --zeroshot and --finetuned")
    assert not (tmp_path / "w").exists()
    other = tmp_path / "zs.pt"
    shutil.copy(final, other)
    result = invoke(["wise-ft", "--zeroshot", other, "--finetuned", final, "--alpha", "-0", "--out", tmp_path / "w"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == [str(tmp_path / "w" / "wise_ft_alpha_0.000.pt")]


# ---- train --resume: last.pt replaced --------------------------------------------------------------------


class _Stop(Exception):
    pass


@pytest.fixture(scope="module")
def resumable(root, tmp_path_factory):
    from mosaictool.training import TrainConfig, train

    def stop(step, metrics, model):
        raise _Stop()

    run = tmp_path_factory.mktemp("resume") / "run"
    with pytest.raises(_Stop):
        train(TrainConfig(data=str(root / "world" / "captions.jsonl"), model_config=str(root / "test-tiny.json"), out=str(run),
                          batch_size=2, steps=3, warmup=1, save_every=1, quiet=True), on_step=stop)
    return run


@pytest.mark.parametrize("case, message", [
    ("fifo", "not a weights file (a FIFO"),
    ("folder", "not a weights file (a folder)"),
    ("int-weights", f"{KEY} holds int64 values"),
])
def test_resume_from_a_last_pt_that_is_not_weights(root, resumable, tmp_path, case, message):
    run = tmp_path / "run"
    shutil.copytree(resumable, run)
    (run / "last.pt").unlink()
    if case == "int-weights":
        ckpt = torch.load(resumable / "last.pt", weights_only=True)
        ckpt["state_dict"][KEY] = ckpt["state_dict"][KEY].to(torch.int64)
        torch.save(ckpt, run / "last.pt")
    else:
        make(root, run, case).rename(run / "last.pt")
    before = snapshot(run)
    result = invoke_within(["train", "--resume", run], 60, fifo=run / "last.pt" if case == "fifo" else None)
    refused(result, f"{run / 'last.pt'}: {message}")
    assert snapshot(run) == before


def test_is_mosaictool_checkpoint_names_what_it_cannot_read(root, tmp_path):
    with pytest.raises(MosaicError, match="not a torch weights file"):
        openclip.is_mosaictool_checkpoint(make(root, tmp_path, "random"))
    assert openclip.is_mosaictool_checkpoint(root / "final.pt")
