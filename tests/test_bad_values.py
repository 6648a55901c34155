"""Values checked at the boundary: flags (negative, zero, NaN, inf where meaningless), a run
folder's config.json, checkpoints holding NaN weights, benchmark annotation files, images (size
limits, special files) and Parquet output types. Each refused case: exit 1, one `Error:` line naming
the flag / file and field, no traceback, the inputs byte-identical, nothing half-written."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mosaictool.cli import app

sys.path.insert(0, str(Path(__file__).parent))

runner = CliRunner()


def invoke(args):
    return runner.invoke(app, [str(a) for a in args])


def refused(result, *needles: str, code: int = 1) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, (result.exit_code, result.stdout[-300:], result.stderr[-1500:])
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "<dir>"
            for p in sorted(folder.rglob("*"))}


# ---- flags ------------------------------------------------------------------------------------------

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


@pytest.mark.parametrize("args, flag, rule", FLAGS, ids=[" ".join(a[a.index(f.split()[0]) - 2 if a[0] == "train" else 0:]) for a, f, _ in FLAGS])
def test_meaningless_flag_values_are_refused(tmp_path, monkeypatch, args, flag, rule):
    monkeypatch.chdir(tmp_path)
    Path("data.jsonl").write_text('{"id": 1, "caption": "a red cube", "image": "x.png"}\n')
    before = snapshot(tmp_path)
    refused(invoke(args), flag, rule)
    assert snapshot(tmp_path) == before  # nothing written: no run folder, world, shards or demo output
