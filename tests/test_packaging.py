"""The built wheel installs `stages/` and `vocab/` inside the package and runs outside the repo."""

from __future__ import annotations

import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from mosaictool.cli import app

REPO = Path(__file__).resolve().parent.parent


def test_every_command_has_help(runner):
    commands = ["parse", "decompose", "negate", "template", "texts-report", "vocab", "world", "shard", "train", "wise-ft",
                "evaluate", "tree-score", "demo", "import"]
    top = runner.invoke(app, ["--help"])
    assert top.exit_code == 0
    for name in commands:
        assert name in top.stdout
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, name
        assert len(result.stdout.strip().splitlines()) > 3, name


def _command_paths(command, path=()):
    yield list(path)
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _command_paths(sub, (*path, name))


def test_every_command_and_subcommand_help_shows_an_example(runner):
    import typer

    example = re.compile(r"^\s+(\S+\s+\|\s+)?mosaictool\s+\S", re.M)  # an indented invocation, maybe piped into
    paths = list(_command_paths(typer.main.get_command(app)))
    assert ["vocab", "build"] in paths and ["train"] in paths
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], prog_name="mosaictool")
        assert result.exit_code == 0, path
        assert example.search(result.stdout), f"`mosaictool {' '.join(path)} --help` shows no example"


def test_help_imports_no_torch():
    """`--help` stays fast by importing neither torch nor spaCy (perf/startup_speed.py times it)."""
    code = "import sys; from mosaictool.cli import app; print('torch' in sys.modules, 'spacy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
    code = ("import runpy, sys; sys.argv = ['mosaictool', '--help']\n"
            "try: runpy.run_module('mosaictool', run_name='__main__')\n"
            "except SystemExit as e: assert not e.code, e.code\n"
            "print('torch' in sys.modules, 'spacy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Usage: mosaictool" in out and out.split()[-2:] == ["False", "False"]


@pytest.mark.slow
def test_wheel_installs_and_parses_in_a_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
                   check=True, capture_output=True)
    (wheel,) = dist.glob("mosaictool-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "mosaictool/stages/parse.py" in names
    assert not any(n.startswith(("stages/", "vocab/")) for n in names), "stages/vocab must not be top-level packages"

    # A clean venv that sees the *running* environment's packages (torch, spaCy, ...), whether that is a
    # user's venv or the system interpreter: system_site_packages would show the base interpreter's
    # instead. Paths listed in a .pth are appended after the venv's own site-packages (so the wheel wins)
    # and their own .pth files are not run (so an editable install of the repo stays invisible).
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    env_site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    running = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    (Path(env_site) / "_running_env.pth").write_text("\n".join(running) + "\n")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    where = subprocess.run([py, "-c", "import mosaictool, mosaictool.stages.parse as p; print(p.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert str(env_dir) in where
    out = subprocess.run([env_dir / "bin" / "mosaictool", "parse", str(REPO / "examples" / "captions.jsonl"), "-q"],
                         cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert len(out.splitlines()) == 60 and '"graph"' in out
