"""Shared fixtures: the real benchmark annotation files beside the repo, and a CLI runner."""

from __future__ import annotations

import mosaictool  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch is imported)

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MOSAICTOOL_SHARED", REPO.parent / "shared"))
BENCHMARKS = SHARED / "benchmarks"

# Tests never reach the network (CI has none): Hugging Face libraries fail at once instead of retrying.
# Set here so the subprocesses the tests start inherit it.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def shared_benchmarks() -> Path:
    if not BENCHMARKS.is_dir():
        pytest.skip(f"real benchmark files not found at {BENCHMARKS} (set MOSAICTOOL_SHARED)")
    return BENCHMARKS


def coco_captions() -> list[str]:
    """The real COCO captions of SugarCrepe's positive side, deduplicated, in a fixed order."""
    seen: dict[str, None] = {}
    for path in sorted((BENCHMARKS / "sugarcrepe" / "data").glob("*.json")):
        for _key, ex in sorted(json.loads(path.read_text()).items(), key=lambda kv: int(kv[0])):
            seen.setdefault(ex["caption"].strip(), None)
    return list(seen)


@pytest.fixture(scope="session")
def real_captions(shared_benchmarks) -> list[str]:
    return coco_captions()


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="session")
def shell_env(tmp_path_factory) -> dict[str, str]:
    """The environment for a shell script that calls `mosaictool` (and `duckdb`) by name: shims on
    PATH to the interpreter running the tests, whether or not its virtualenv is activated."""
    from clirun import shell_env

    return shell_env(tmp_path_factory.mktemp("bin"))
