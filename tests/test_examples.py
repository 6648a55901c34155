"""Every pipeline under examples/ runs as a user would run it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.sh")))
def test_example_pipeline_runs(script, tmp_path):
    proc = subprocess.run(["bash", str(EXAMPLES / script), str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Error" not in proc.stderr


def test_graph_pipeline_outputs(tmp_path):
    subprocess.run(["bash", str(EXAMPLES / "pipeline.sh"), str(tmp_path)], check=True, capture_output=True, timeout=600)
    import orjson

    texts = [orjson.loads(line) for line in (tmp_path / "texts.jsonl").read_bytes().splitlines()]
    assert len(texts) == 60  # one record per caption, all the way through
    assert sum(bool(r["texts"]["negatives"]) for r in texts) > 45
    assert all(r["texts"]["positives"][0]["kind"] == "caption" for r in texts)
