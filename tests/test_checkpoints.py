"""Checkpoints are safe to read (weights_only: a pickled object is refused, never run), written
atomically, and a truncated one is named; resuming falls back to the previous good checkpoint."""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import CAP, invoke, invoke_within, jsonl, refused, snapshot, train_args
from helpers import refused as assert_refused
from mosaictool.errors import MosaicError
from mosaictool.model import openclip
from train_fixtures import TINY_MODEL, make_world, write_tiny_model


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    cfg = write_tiny_model(tmp_path_factory.mktemp("cfg"))
    return openclip.create("test-tiny", None, model_config_file=str(cfg), seed=0)


class _RunsCode:
    """Unpickling this writes a marker file: what a hostile checkpoint would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def test_checkpoint_holds_only_plain_values_and_loads_weights_only(bundle, tmp_path):
    rng = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    path = tmp_path / "last.pt"
    openclip.save_checkpoint(path, bundle, config={"out": tmp_path, "lr": np.float32(0.5)}, step=3, rng=[rng])
    ckpt = torch.load(path, map_location="cpu", weights_only=True)  # raises on any pickled object
    assert ckpt["config"] == {"out": str(tmp_path), "lr": 0.5} and ckpt["step"] == 3
    assert isinstance(ckpt["rng"][0]["numpy"][1], torch.Tensor)
    # the stored RNG states restore the same streams
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.setstate(ckpt["rng"][0]["python"])
    np.random.set_state(ckpt["rng"][0]["numpy"])
    torch.set_rng_state(ckpt["rng"][0]["torch"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
    assert not [p for p in tmp_path.iterdir() if p.name != "last.pt"], "no temp file left behind"


def test_a_pickled_object_is_refused_and_not_run(bundle, tmp_path):
    marker = tmp_path / "ran.txt"
    hostile = tmp_path / "hostile.pt"
    payload = {"format": openclip.CHECKPOINT_FORMAT, "state_dict": bundle.model.state_dict(), "x": _RunsCode(marker)}
    torch.save(payload, hostile)
    for load in (openclip.read_checkpoint, openclip.load_checkpoint, openclip.is_mosaictool_checkpoint,
                 lambda p: openclip.load_model(checkpoint=str(p)), lambda p: openclip.create("test-tiny", str(p))):
        with pytest.raises(MosaicError, match="refused: the checkpoint carries a pickled Python object") as err:
            load(hostile)
        assert str(hostile) in str(err.value) and "exec" in str(err.value)
    assert not marker.exists()
    # the file really is hostile: an unsafe load runs its code
    torch.load(hostile, weights_only=False)
    assert marker.read_text() == "ran"


@pytest.mark.parametrize("size", [0, 100, "half"])
def test_truncated_checkpoint_is_named(bundle, tmp_path, size):
    path = tmp_path / "last.pt"
    openclip.save_checkpoint(path, bundle, step=1)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 if size == "half" else size])
    with pytest.raises(MosaicError, match=r"last\.pt: (truncated or corrupt|empty) checkpoint") as err:
        openclip.read_checkpoint(path)
    assert str(path) in str(err.value)


def test_keep_previous_and_resume_fallback(bundle, tmp_path, caplog):
    path = tmp_path / "last.pt"
    openclip.save_checkpoint(path, bundle, keep_previous=True, step=2)
    assert not openclip.previous_checkpoint(path).exists()
    openclip.save_checkpoint(path, bundle, keep_previous=True, step=4)
    assert openclip.previous_checkpoint(path) == tmp_path / "last.prev.pt"
    assert openclip.read_checkpoint(tmp_path / "last.prev.pt")["step"] == 2
    assert openclip.read_resume_checkpoint(path)["step"] == 4
    # the newest is cut short (a full disk, a copy that stopped): resume from the one before, and say so
    path.write_bytes(path.read_bytes()[:1000])
    assert openclip.read_resume_checkpoint(path)["step"] == 2
    err = caplog.text  # a warning of the mosaictool.model.openclip logger
    assert "last.pt: truncated or corrupt" in err and "last.prev.pt (step 2)" in err
    # without a previous one the error names the file
    os.unlink(tmp_path / "last.prev.pt")
    with pytest.raises(MosaicError, match="last.pt: truncated or corrupt"):
        openclip.read_resume_checkpoint(path)
    assert openclip.read_resume_checkpoint(tmp_path / "none.pt") is None


def test_a_failed_write_leaves_the_old_checkpoint(bundle, tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    openclip.save_checkpoint(path, bundle, step=1)
    before = path.read_bytes()

    def full_disk(obj, f, *a, **k):
        f.write(b"PK\x03\x04partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(MosaicError, match=f"{path}: cannot write .*the disk is full"):
        openclip.save_checkpoint(path, bundle, keep_previous=True, step=2)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_unpickling_error_type_is_what_torch_raises(tmp_path):
    # read_checkpoint tells "refused" from "corrupt" by this exception type
    bad = tmp_path / "x.pt"
    torch.save({"x": _RunsCode(tmp_path / "m")}, bad)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(bad, weights_only=True)


def test_other_files_get_the_right_message(tmp_path):
    garbage = tmp_path / "notes.pt"
    garbage.write_bytes(b"hello, this is not a checkpoint")
    with pytest.raises(MosaicError, match="notes.pt: truncated or corrupt checkpoint"):
        openclip.read_checkpoint(garbage)
    archive = tmp_path / "openai-like.pt"  # a TorchScript archive, as OpenAI ships CLIP weights
    with warnings.catch_warnings(), \
            pytest.raises(MosaicError, match="openai-like.pt: not a mosaictool checkpoint; .* --pretrained"):
        warnings.simplefilter("ignore")  # torch.jit's deprecation and its "dispatching to torch.jit.load"
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), archive)
        openclip.read_checkpoint(archive)
    plain = tmp_path / "plain.pt"
    torch.save({"state_dict": {"w": torch.zeros(1)}}, plain)
    with pytest.raises(MosaicError, match="plain.pt: not a mosaictool checkpoint"):
        openclip.read_checkpoint(plain)


# --- bad input (moved from test_bad_checkpoints.py) ---

KEY = "visual.conv1.weight"


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


# --- bad input (moved from test_bad_input.py) ---

CKPT_ERRORS = {
    "truncated": "truncated or corrupt checkpoint",
    "zero": "empty checkpoint (0 bytes)",
    "lie": "weights do not fit the test-tiny its config describes",
}


@pytest.mark.parametrize("kind", sorted(CKPT_ERRORS))
def test_bad_checkpoint_in_evaluate_tree_score_wise_ft(case, ckpts, bench_root, kind, tmp_path):
    bad = ckpts[kind]
    caps = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    before = snapshot(bad.parent)
    assert_refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "-c", bad, "-d", bench_root, "-o",
                           case.dst / "r.jsonl", "-q"]), str(bad), CKPT_ERRORS[kind])
    assert_refused(invoke(["tree-score", caps, "--checkpoint", bad, "-o", case.dst / "t.jsonl", "-q"]), str(bad),
                   CKPT_ERRORS[kind])
    assert_refused(invoke(["wise-ft", "--zeroshot", ckpts["tiny"], "--finetuned", bad, "--out", case.dst / "w"]),
                   str(bad), CKPT_ERRORS[kind])
    case.untouched()
    assert snapshot(bad.parent) == before
    assert len(assert_refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "-c", bad, "-d", bench_root]))) < 400


def test_wise_ft_with_mismatched_checkpoints(case, ckpts):
    case.freeze()
    assert_refused(invoke(["wise-ft", "--zeroshot", ckpts["tiny"], "--finetuned", ckpts["other"], "--out", case.dst / "w"]),
                   "are different architectures (model_name: 'mosaic-tiny' vs 'test-tiny')")
    assert_refused(invoke(["wise-ft", "--zeroshot", ckpts["other_weights"], "--finetuned", ckpts["tiny"], "--out",
                           case.dst / "w"]), "--zeroshot", "other_weights.pt", "another architecture")
    assert_refused(invoke(["wise-ft", "--zeroshot", ckpts["truncated"], "--finetuned", ckpts["tiny"], "--out",
                           case.dst / "w"]), "--zeroshot", "truncated.pt")
    case.untouched()


def test_pretrained_weights_of_another_architecture(case, tiny_world, ckpts, bench_root):
    case.freeze()
    assert_refused(invoke(train_args(tiny_world, case.dst / "run", "--model", "mosaic-tiny", "--pretrained",
                                     ckpts["other_weights"])), "other_weights.pt", "another architecture")
    assert_refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "--model", "mosaic-tiny", "--pretrained",
                           ckpts["other_weights"], "-d", bench_root]), "other_weights.pt", "another architecture")
    case.untouched()


# --- bad input (moved from test_bad_values.py) ---

def edited_run(run_folder, tmp_path, edit) -> Path:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_folder[0], run)
    config = json.loads((run / "config.json").read_text())
    text = edit(config)
    (run / "config.json").write_text(text if isinstance(text, str) else json.dumps(config, indent=1))
    return run


def _set(**values):
    def edit(config):
        config.update(values)
    return edit


def _drop(name):
    def edit(config):
        del config[name]
    return edit


CONFIG_EDITS = [
    ("truncated", lambda c: json.dumps(c)[:200], "config.json: not a readable JSON file"),
    ("not-an-object", lambda c: "[1, 2]", "config.json: expected a JSON object of the run's settings, got list"),
    ("wrong-type", _set(batch_size="4"), "config.json: batch_size: expected a whole number >= 1, got '4'"),
    ("float-for-int", _set(steps=3.5), "config.json: steps: expected a whole number >= 1"),
    ("negative", _set(grad_clip=-1), "config.json: grad_clip: expected a finite number > 0"),
    ("bool-for-int", _set(lora=True), "config.json: lora: expected a whole number >= 0, got True"),
    ("list-for-str", _set(model=["test-tiny"]), "config.json: model: expected text"),
    ("bad-pair", _set(crop_scale=[0.8]), "config.json: crop_scale:"),
    ("unknown", _set(bogus=1), "config.json: unknown field 'bogus'"),
    ("missing", _drop("data"), "config.json: missing field 'data'"),
    ("unknown-method", _set(method="fancy"), "config.json: --method"),
    ("another-run", _set(seed=7), "config.json: seed is 7, but"),
    ("another-optimizer", _set(optimizer="sgd"), "config.json: optimizer is 'sgd', but"),
    ("locked-tower", _set(lock_image=True), "config.json: lock_image is True, but"),
    ("another-model", _set(model="mosaic-micro"), "config.json: model is 'mosaic-micro', but"),
]


@pytest.mark.parametrize("name, edit, message", CONFIG_EDITS, ids=[c[0] for c in CONFIG_EDITS])
def test_resume_refuses_a_broken_or_foreign_config(run_folder, tmp_path, name, edit, message):
    run = edited_run(run_folder, tmp_path, edit)
    before = snapshot(run)
    refused(invoke(["train", "--resume", run]), message)
    assert snapshot(run) == before


def test_resume_refuses_weights_of_another_architecture(run_folder, tmp_path):
    """The model config file edited in place (its path unchanged): last.pt's tensors no longer fit;
    one line naming the first mismatch and the count, not torch's size-mismatch list."""
    run = edited_run(run_folder, tmp_path, lambda c: None)
    config = json.loads((run / "config.json").read_text())
    wider = tmp_path / "test-tiny.json"
    model = json.loads(Path(run_folder[3]).read_text())
    model["vision_cfg"]["width"] = 48
    wider.write_text(json.dumps(model))
    config["model_config"] = str(wider)
    (run / "config.json").write_text(json.dumps(config, indent=1))
    before = snapshot(run)
    line = refused(invoke(["train", "--resume", run]), "last.pt: its weights do not fit the test-tiny that",
                   "config.json describes", "visual.", "more)")
    assert len(line) < 400
    assert snapshot(run) == before


def nan_copy(src: Path, dst: Path, key_part: str = "visual") -> Path:
    import torch

    ckpt = torch.load(src, weights_only=True)
    key = next(k for k, v in ckpt["state_dict"].items() if key_part in k and v.is_floating_point())
    ckpt["state_dict"][key] = ckpt["state_dict"][key].clone().fill_(float("nan"))
    torch.save(ckpt, dst)
    return dst


def test_resume_refuses_nan_weights_in_last_pt(run_folder, tmp_path):
    run = edited_run(run_folder, tmp_path, lambda c: None)
    nan_copy(run / "last.pt", run / "last.pt")
    before = snapshot(run)
    refused(invoke(["train", "--resume", run]), "last.pt: its weights hold NaN or inf")
    assert snapshot(run) == before


def test_nan_checkpoints_are_refused_where_they_are_read(run_folder, tmp_path):
    _, final, data, model_cfg = run_folder
    bad = nan_copy(final, tmp_path / "nan.pt")
    caps = tmp_path / "caps.jsonl"
    caps.write_text('{"id": 1, "caption": "a red circle left of a blue square"}\n')
    # a one-case SugarCrepe for evaluate
    root = tmp_path / "bench"
    (root / "sugarcrepe").mkdir(parents=True)
    (root / "coco" / "val2017").mkdir(parents=True)
    import shutil

    shutil.copy(Path(data).parent / "images" / "000.png", root / "coco" / "val2017" / "a.png")
    (root / "sugarcrepe" / "add_att.json").write_text(json.dumps({"0": {"filename": "a.png", "caption": "a red circle",
                                                                          "negative_caption": "a blue circle"}}))
    out = tmp_path / "o"
    out.mkdir()
    before = snapshot(tmp_path)
    for args in (
        ["evaluate", "-b", "sugarcrepe:add_att", "-d", root, "-c", bad, "-o", out / "r.jsonl"],
        ["tree-score", caps, "--checkpoint", bad, "-o", out / "t.jsonl"],
        ["wise-ft", "--zeroshot", final, "--finetuned", bad, "--out", out / "w"],
        ["wise-ft", "--zeroshot", bad, "--finetuned", final, "--out", out / "w"],
        ["train", "--data", data, "--out", out / "t", "--model-config", model_cfg, "--pretrained", bad, "--steps", "1"],
    ):
        refused(invoke(args), f"{bad}: its weights hold NaN or inf")
        assert snapshot(tmp_path) == before


TINY_TEXT = {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}


TINY_VISION = {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 8}


MODEL_CONFIG_FILES = [
    ({"embed_dim": "32", "vision_cfg": TINY_VISION, "text_cfg": TINY_TEXT},
     "model config: embed_dim: expected an integer > 0, got str"),
    ({"embed_dim": 32, "vision_cfg": "big", "text_cfg": TINY_TEXT}, "model config: vision_cfg: expected an object, got str"),
    ({"embed_dim": 32, "vision_cfg": {**TINY_VISION, "width": -32}, "text_cfg": TINY_TEXT},
     "vision_cfg.width: expected an integer > 0, got -32"),
    ({"embed_dim": 32, "vision_cfg": {**TINY_VISION, "image_size": [32]}, "text_cfg": TINY_TEXT},
     "vision_cfg.image_size: expected"),
    ({"embed_dim": 32, "vision_cfg": TINY_VISION, "text_cfg": {**TINY_TEXT, "heads": 0}},
     "text_cfg.heads: expected an integer > 0, got 0"),
    ({"embed_dim": 32, "vision_cfg": {k: v for k, v in TINY_VISION.items() if k != "head_width"}, "text_cfg": TINY_TEXT},
     "cannot build the model tiny: embed_dim and num_heads must be greater than 0"),  # 32 wide, heads of 64
]


@pytest.mark.parametrize("config, message", MODEL_CONFIG_FILES, ids=[m.split(": ")[-2] if ": " in m else m for _, m in MODEL_CONFIG_FILES])
def test_bad_model_config_file(tmp_path, config, message):
    (tmp_path / "tiny.json").write_text(json.dumps(config))
    (tmp_path / "caps.jsonl").write_text('{"id": 1, "caption": "a red circle"}\n')
    before = snapshot(tmp_path)
    refused(invoke(["tree-score", tmp_path / "caps.jsonl", "--model-config", tmp_path / "tiny.json", "-o", tmp_path / "t.jsonl"]),
            "tiny.json", message)
    assert snapshot(tmp_path) == before


def test_resume_after_a_torn_metrics_line_and_a_broken_one(run_folder, tmp_path):
    run = edited_run(run_folder, tmp_path, lambda c: None)
    metrics = run / "metrics.jsonl"
    good = metrics.read_text()
    metrics.write_text(good + '{"step": 2, "loss": 1.')  # the line a kill -9 cut
    result = invoke(["train", "--resume", run, "-q"])
    assert result.exit_code == 0, result.stderr
    assert [json.loads(x)["step"] for x in metrics.read_text().splitlines()] == [1, 2, 3]

    run = edited_run(run_folder, tmp_path / "again", lambda c: None)
    (run / "metrics.jsonl").write_text("not json\n" + good)
    before = snapshot(run)
    refused(invoke(["train", "--resume", run]), "metrics.jsonl:1: not a metrics line")
    assert snapshot(run) == before


@pytest.mark.parametrize("content, message", [
    ("[[1, 2], [0", "not readable JSON"),
    ('[[1, "x"]]', "[0][1]: expected an integer >= 0, got str"),
    ("[[1]]", "holds 1 rows for 8 records"),
], ids=["truncated", "wrong-type", "other-data"])
def test_resume_refuses_a_broken_mined_hard_images_file(run_folder, tmp_path, content, message):
    run = edited_run(run_folder, tmp_path, _set(hard_images=2))
    # a run that mined hard images: its config and last.pt say so (the copy's last.pt was written without)
    import torch

    state = torch.load(run / "last.pt", weights_only=True)
    state["config"]["hard_images"] = 2
    torch.save(state, run / "last.pt")
    (run / "mined_hard_images.json").write_text(content)
    before = snapshot(run)
    refused(invoke(["train", "--resume", run]), "mined_hard_images.json: ", message, "delete it")
    assert snapshot(run) == before


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.pop("model_name"), "missing 'model_name'"),
    (lambda c: c.update(model_cfg="mosaic-tiny"), "model_cfg: expected"),
    (lambda c: c.update(quick_gelu=0), "quick_gelu: expected true or false, got int"),
], ids=["no-model-name", "model-cfg-a-string", "quick-gelu-an-int"])
def test_an_edited_checkpoint_header_is_one_line(run_folder, tmp_path, edit, message):
    import torch

    ckpt = torch.load(run_folder[1], weights_only=True)
    edit(ckpt)
    torch.save(ckpt, tmp_path / "m.pt")
    (tmp_path / "caps.jsonl").write_text('{"id": 1, "caption": "a red circle"}\n')
    refused(invoke(["tree-score", tmp_path / "caps.jsonl", "--checkpoint", tmp_path / "m.pt", "-o", tmp_path / "t.jsonl"]),
            f"{tmp_path / 'm.pt'}: {message}")
    assert not (tmp_path / "t.jsonl").exists()


def test_resume_refuses_a_last_pt_without_its_step(run_folder, tmp_path):
    import torch

    run = edited_run(run_folder, tmp_path, lambda c: None)
    state = torch.load(run / "last.pt", weights_only=True)
    state["step"] = "1"
    torch.save(state, run / "last.pt")
    before = snapshot(run)
    refused(invoke(["train", "--resume", run]), "last.pt: step: expected an integer >= 0, got str")
    assert snapshot(run) == before

