"""Shared fixtures: real benchmark annotation files (vendored in tests/data/benchmarks), the ones only
../shared has, and a CLI runner."""

from __future__ import annotations

import os

# Passive OpenMP waits, as the `mosaictool` command sets them (mosaictool/cli/__init__.py), for the
# tests that call the library in this process: before torch loads OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# isort: split

import json
import lzma
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers import Case
from train_fixtures import write_tiny_model

REPO = Path(__file__).resolve().parent.parent
VENDORED = Path(__file__).resolve().parent / "data" / "benchmarks"
SHARED = Path(os.environ.get("MOSAICTOOL_SHARED", REPO.parent / "shared"))

# Tests never reach the network (CI has none): Hugging Face libraries fail at once instead of retrying.
# Set here so the subprocesses the tests start inherit it.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def real_benchmarks(tmp_path_factory) -> Path:
    """The vendored annotation files (tests/data/benchmarks, see its README), unpacked in the layout of
    the benchmarks' own repositories: ROOT/sugarcrepe/data/*.json, valse/data, imagecode/data and
    vl_compo's reference-results."""
    root = tmp_path_factory.mktemp("benchmarks")
    for packed in VENDORED.rglob("*"):
        if packed.is_file() and packed.name != "README.md":
            target = root / packed.relative_to(VENDORED)
            target.parent.mkdir(parents=True, exist_ok=True)
            if packed.suffix == ".xz":
                target.with_suffix("").write_bytes(lzma.decompress(packed.read_bytes()))
            else:
                target.write_bytes(packed.read_bytes())
    return root


@pytest.fixture(scope="session")
def shared_vl_checklist() -> Path:
    """VL-CheckList's annotation subset and corpus files, from ../shared only: they are free for
    non-commercial use only, so the repository does not ship them (MIT)."""
    folder = SHARED / "benchmarks" / "vl_checklist"
    if not folder.is_dir():
        pytest.skip(f"VL-CheckList's files are not vendored (non-commercial licence); none at {folder} "
                    "(a checkout beside the project's shared/ folder has them, or set MOSAICTOOL_SHARED)")
    return folder


def coco_captions(benchmarks: Path) -> list[str]:
    """The real COCO captions of SugarCrepe's positive side, deduplicated, in a fixed order."""
    seen: dict[str, None] = {}
    for path in sorted((benchmarks / "sugarcrepe" / "data").glob("*.json")):
        for _key, ex in sorted(json.loads(path.read_text()).items(), key=lambda kv: int(kv[0])):
            seen.setdefault(ex["caption"].strip(), None)
    return list(seen)


@pytest.fixture(scope="session")
def real_captions(real_benchmarks) -> list[str]:
    return coco_captions(real_benchmarks)


@pytest.fixture(scope="session")
def tiny_worlds(tmp_path_factory):
    """make_world's records with images and the tiny model's config, made once a session for each set
    of arguments: `tiny_worlds(n=12)` -> (captions.jsonl, model config). Several modules train on the
    same world; they read it and write elsewhere (tmp_path)."""
    from train_fixtures import make_world, write_tiny_model

    made: dict[tuple, tuple[Path, Path]] = {}

    def build(n: int = 12, **kwargs) -> tuple[Path, Path]:
        key = (n, *sorted(kwargs.items()))
        if key not in made:
            root = tmp_path_factory.mktemp(f"tiny-world-{n}")
            made[key] = make_world(root, n=n, **kwargs), write_tiny_model(root)
        return made[key]

    return build


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """The shipped mosaic-tiny model (seed 0) saved once a session as a mosaictool checkpoint, tiny.pt,
    for the tests that evaluate or score with some model; they read it and write elsewhere."""
    from mosaictool.model import openclip

    path = tmp_path_factory.mktemp("tiny-checkpoint") / "tiny.pt"
    openclip.save_checkpoint(path, openclip.create("mosaic-tiny", seed=0))
    return path


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="session")
def shell_env(tmp_path_factory) -> dict[str, str]:
    """The environment for a shell script that calls `mosaictool` (and `duckdb`) by name: shims on
    PATH to the interpreter running the tests, whether or not its virtualenv is activated."""
    from clirun import shell_env

    return shell_env(tmp_path_factory.mktemp("bin"))


@pytest.fixture(scope="session")
def relforms_world(tmp_path_factory) -> Path:
    """A tiny world (30 train scenes with their twins, eval_scale 0.01: 24 relation-form records a split),
    made once a session: the relation-form tests read it."""
    from mosaictool.world.generate import generate_world

    out = tmp_path_factory.mktemp("relforms") / "world"
    generate_world(out, train=30, seed=0, twins=True, binding_twins=True, shape_twins=True, eval_scale=0.01)
    return out


@pytest.fixture
def case(tmp_path) -> Case:
    return Case(tmp_path)


@pytest.fixture(scope="module")
def tiny_world(tiny_worlds) -> Path:
    """8 make_world records with images (batch 4: two batches)."""
    return tiny_worlds(n=8)[0]


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    import torch

    from mosaictool.model import openclip

    d = tmp_path_factory.mktemp("ckpts")
    tiny = d / "tiny.pt"
    openclip.save_checkpoint(tiny, openclip.create("mosaic-tiny", seed=0))
    other = d / "other.pt"
    openclip.save_checkpoint(other, openclip.create("test-tiny", model_config_file=write_tiny_model(d), seed=0))
    blob = tiny.read_bytes()
    (d / "truncated.pt").write_bytes(blob[: len(blob) // 2])
    (d / "zero.pt").write_bytes(b"")
    lie = torch.load(tiny, weights_only=True)  # mosaic-tiny weights under another architecture's config
    other_ckpt = torch.load(other, weights_only=True)
    lie.update(model_name=other_ckpt["model_name"], model_cfg=other_ckpt["model_cfg"])
    torch.save(lie, d / "lie.pt")
    torch.save(other_ckpt["state_dict"], d / "other_weights.pt")  # a plain open_clip weights file
    return {p.stem: p for p in d.glob("*.pt")}


@pytest.fixture(scope="module")
def bench_root(tmp_path_factory) -> Path:
    """SugarCrepe's layout: three subsets of three cases, COCO val2017 images."""
    from PIL import Image

    root = tmp_path_factory.mktemp("bench")
    (root / "sugarcrepe").mkdir()
    colours = ["red", "green", "blue"]
    for sub in ("add_att", "swap_obj", "replace_rel"):
        cases = {str(i): {"filename": f"{c}.jpg", "caption": f"a {c} square", "negative_caption": f"a {colours[i - 1]} circle"}
                 for i, c in enumerate(colours)}
        (root / "sugarcrepe" / f"{sub}.json").write_text(json.dumps(cases))
    (root / "coco" / "val2017").mkdir(parents=True)
    for c in colours:
        Image.new("RGB", (24, 24), c).save(root / "coco" / "val2017" / f"{c}.jpg")
    return root


class Stop(Exception):
    pass


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """A resumable run (last.pt at step 1 of 3, no final.pt) and a finished one (final.pt)."""
    from mosaictool.training import TrainConfig, train
    from train_fixtures import make_world, write_tiny_model

    root = tmp_path_factory.mktemp("runs")
    data, model_cfg = make_world(root / "world", n=8), write_tiny_model(root)
    base = {"data": str(data), "model_config": str(model_cfg), "batch_size": 4, "steps": 3, "warmup": 1, "quiet": True}

    def stop(step, metrics, model):
        raise Stop()

    with pytest.raises(Stop):
        train(TrainConfig(out=str(root / "resumable"), save_every=1, **base), on_step=stop)
    final = train(TrainConfig(out=str(root / "finished"), **base))
    return root / "resumable", final, data, model_cfg

