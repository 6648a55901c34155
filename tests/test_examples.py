"""Every pipeline under examples/ runs as a user would run it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def check_graph_pipeline(out: Path) -> None:
    texts = [orjson.loads(line) for line in (out / "texts.jsonl").read_bytes().splitlines()]
    assert len(texts) == 60  # one record per caption, all the way through
    assert sum(bool(r["texts"]["negatives"]) for r in texts) > 45
    assert all(r["texts"]["positives"][0]["kind"] == "caption" for r in texts)


OUTPUT_CHECKS = {"pipeline.sh": check_graph_pipeline}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.sh")))
def test_example_pipeline_runs(script, tmp_path, shell_env):
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(EXAMPLES / script), str(out)], capture_output=True, text=True, timeout=900,
                          env=shell_env)
    assert proc.returncode == 0, proc.stderr
    assert "Error" not in proc.stderr
    if script in OUTPUT_CHECKS:
        OUTPUT_CHECKS[script](out)
