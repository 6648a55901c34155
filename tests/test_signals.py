"""SIGINT and SIGTERM in the middle of parse, negate, shard, evaluate and train (the real command in a
subprocess): outputs complete or absent, and train --resume then bit-exact."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from helpers import GRAPH, invoke, jsonl

# --- bad input (moved from test_bad_input.py) ---

def _run_and_signal(args: list, sig: int, pause_after: str, calls: int = 1) -> tuple[int, str]:
    """Run `mosaictool ARGS`, paused after the `calls`-th call of `pause_after`; send `sig` there and
    return (exit code, stderr)."""
    import subprocess

    import paused_cli

    proc = subprocess.Popen([sys.executable, paused_cli.__file__, pause_after, str(calls), *map(str, args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        before = []
        for line in proc.stderr:  # blocks until the child writes a line; ends if the child does
            if line.strip() == paused_cli.READY:
                break
            before.append(line)
        else:
            proc.wait()
            pytest.fail(f"ended before the pause (exit {proc.returncode}): {''.join(before)[-2000:]}")
        proc.send_signal(sig)
        _, after = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(before) + after


def _assert_stopped(code: int, err: str, sig: int) -> None:
    import signal

    assert "Traceback" not in err, err
    expected = {signal.SIGINT: (130, "Interrupted."), signal.SIGTERM: (143, "Terminated (SIGTERM).")}[sig]
    assert (code, err.strip().splitlines()[-1]) == expected, (code, err[-2000:])


@pytest.mark.slow
@pytest.mark.parametrize("stage, sig", [("parse", "SIGINT"), ("negate", "SIGTERM")])
def test_signal_in_the_middle_of_a_record_stage(case, stage, sig):
    import signal

    sig = getattr(signal, sig)
    if stage == "parse":
        records = [{"id": i, "caption": f"a red dog number {i} on a blue sofa near {i % 7} cats"} for i in range(300)]
    else:
        first = json.loads(invoke(["decompose", "-q"], input=jsonl({"id": 0, "caption": "a dog", "graph": GRAPH})).stdout)
        records = [{**first, "id": i} for i in range(300)]
    src = case.file("in.jsonl", jsonl(*records))
    case.freeze()
    code, err = _run_and_signal([stage, src, "-o", case.dst / "out.jsonl", "-q"], sig, "mosaictool.io:RecordWriter.write",
                                calls=100)
    _assert_stopped(code, err, sig)
    case.untouched()  # the input as it was, no output and no temporary file


@pytest.mark.slow
def test_sigterm_in_the_middle_of_shard(case, tiny_world):
    import signal

    records = [json.loads(x) for x in tiny_world.read_text().splitlines()]
    many = [{**records[i % len(records)], "id": i} for i in range(300)]
    src = case.file("many.jsonl", jsonl(*many))
    case.freeze()
    out = case.dst / "shards"
    # paused with one shard of 200 complete and the next one open
    code, err = _run_and_signal(["shard", src, "--image-root", tiny_world.parent, "--out", out, "--shard-size", "200", "-q"],
                                signal.SIGTERM, "webdataset:ShardWriter.write", calls=250)
    _assert_stopped(code, err, signal.SIGTERM)
    case.untouched()


@pytest.mark.slow
def test_sigint_in_the_middle_of_evaluate(case, ckpts, bench_root):
    import signal

    root = case.src / "bench"
    shutil.copytree(bench_root, root)
    colours = ["red", "green", "blue"]
    cases = {str(i): {"filename": f"{colours[i % 3]}.jpg", "caption": f"a {colours[i % 3]} square number {i}",
                      "negative_caption": f"a {colours[(i + 1) % 3]} circle number {i}"} for i in range(30)}
    (root / "sugarcrepe" / "add_att.json").write_text(json.dumps(cases))
    case.freeze()
    # paused with the images encoded and the texts not yet, the output file open
    code, err = _run_and_signal(["evaluate", "-b", "sugarcrepe:add_att", "-c", ckpts["tiny"], "-d", root, "-o",
                                 case.dst / "r.jsonl", "--batch-size", "8", "-q"], signal.SIGINT,
                                "mosaictool.bench.engine:Encoder.images")
    _assert_stopped(code, err, signal.SIGINT)
    case.untouched()


@pytest.mark.slow
def test_signals_in_the_middle_of_train_then_resume_is_bit_exact(case, tiny_world):
    import signal

    import torch

    import clirun
    from mosaictool.model import openclip

    def mosaictool(*cmd):
        done = clirun.run(*cmd, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]

    args = ["--batch-size", "4", "--steps", "20", "--save-every", "2", "--no-augment", "--device", "cpu", "-q"]
    # every run in the same kind of process (same threads), so that equal means bit for bit
    mosaictool("train", "--data", tiny_world, "--out", case.dst / "ref", *args)
    reference = openclip.read_checkpoint(case.dst / "ref" / "final.pt")["state_dict"]
    for sig in (signal.SIGTERM, signal.SIGINT):
        run = case.dst / sig.name
        # paused after the second checkpoint (step 4): last.pt and last.prev.pt on disk
        code, err = _run_and_signal(["train", "--data", tiny_world, "--out", run, *args], sig,
                                    "mosaictool.model.openclip:save_checkpoint", calls=2)
        _assert_stopped(code, err, sig)
        assert not (run / "final.pt").exists() and not [p for p in run.iterdir() if p.name.startswith(".")]
        assert openclip.read_resume_checkpoint(run / "last.pt")["step"] == 4
        mosaictool("train", "--resume", run, "-q")
        resumed = openclip.read_checkpoint(run / "final.pt")["state_dict"]
        assert all(torch.equal(reference[k], resumed[k]) for k in reference), sig.name
        assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == list(range(1, 21))

