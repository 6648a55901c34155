"""Checkpoints are safe to read (weights_only: a pickled object is refused, never run), written
atomically, and a truncated one is named; resuming falls back to the previous good checkpoint."""

from __future__ import annotations

import os
import pickle
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from mosaictool.errors import MosaicError
from mosaictool.model import openclip
from train_fixtures import write_tiny_model


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
