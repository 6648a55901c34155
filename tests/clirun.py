"""Run the real `mosaictool` command in a child process, with the interpreter that runs the tests.

`python -m mosaictool`, never a `mosaictool` looked up on PATH: under `python -m pytest` without an
activated virtualenv there is none (exit 127), or one of another install. Shell scripts (examples/,
the README's commands) get a PATH whose `mosaictool` and `duckdb` are small shims to this interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MOSAICTOOL = (sys.executable, "-m", "mosaictool")
TORCHRUN = (sys.executable, "-m", "torch.distributed.run")  # what the `torchrun` script runs


def argv(*args) -> list[str]:
    """The command line that runs `mosaictool ARGS` with this interpreter."""
    return [*MOSAICTOOL, *map(str, args)]


def run(*args, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    """`mosaictool ARGS` to completion; stdout and stderr captured as text unless told otherwise."""
    kwargs.setdefault("capture_output", "stdout" not in kwargs and "stderr" not in kwargs)
    kwargs.setdefault("text", True)
    return subprocess.run(argv(*args), timeout=timeout, **kwargs)


# Console scripts of this environment that shell scripts call by name, as `python -m MODULE`.
SHIMS = {"mosaictool": "mosaictool", "duckdb": "duckdb_cli", "torchrun": "torch.distributed.run"}


def shell_env(bin_dir: Path) -> dict[str, str]:
    """os.environ with `bin_dir` first on PATH, holding a shim per SHIMS entry that runs this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, module in SHIMS.items():
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m {module} "$@"\n')
        shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def refused_run(cmd, *needles):
    r = run(*cmd)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("Error:") == 1, r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr

