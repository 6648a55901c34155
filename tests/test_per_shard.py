"""A text stage over a sharded corpus into `-o FOLDER/`: one output per input shard, resumed after
kill -9 to the bytes of an uninterrupted run, split over job-array runs by --num-shards/--shard-index."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from clirun import argv
from helpers import invoke
from mosaictool.locks import folder_lock

DATA = Path(__file__).parent / "data"


def graphs() -> list[dict]:
    """Real captions' scene graphs (parse's output), to feed decompose without loading spaCy."""
    lines = [*(DATA / "decompose" / "input.jsonl").read_text().splitlines(), *(DATA / "decompose" / "real.jsonl").read_text().splitlines()]
    return [json.loads(line) for line in lines if line.strip()]


def graph_shards(folder: Path, shards: int, per_shard: int) -> Path:
    """`shards` JSONL files of `per_shard` graph records each, ids unique over all of them."""
    folder.mkdir(parents=True)
    pool = graphs()
    n = 0
    for s in range(shards):
        with open(folder / f"{s:05d}.jsonl", "w") as f:
            for _ in range(per_shard):
                f.write(json.dumps({**pool[n % len(pool)], "id": f"s{s}-{n}"}) + "\n")
                n += 1
    return folder


def outputs(folder: Path) -> dict[str, bytes]:
    """Every file of an output folder but its lock, by name: outputs, .done records, leftovers."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if not p.name.endswith(".lock")}


def concatenated(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.glob("*.jsonl")))


def test_resume_after_kill_9_gives_the_bytes_of_an_uninterrupted_run(tmp_path):
    shards = graph_shards(tmp_path / "graphs", shards=8, per_shard=300)
    whole = tmp_path / "whole"
    assert invoke(["decompose", shards, "-o", f"{whole}/", "-q"]).exit_code == 0
    assert sorted(p.name for p in whole.glob("*.jsonl")) == [f"{s:05d}.jsonl" for s in range(8)]

    killed = tmp_path / "killed"
    proc = subprocess.Popen(argv("decompose", shards, "-o", f"{killed}/", "-q"), stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not list(killed.glob(".*.done")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(list(killed.glob(".*.done")))
    assert 1 <= done_before < 8, "the run was not killed halfway"

    result = invoke(["decompose", shards, "-o", f"{killed}/"])
    assert result.exit_code == 0, result.stderr
    assert f"{8 - done_before} shard(s) written" in result.stderr and f"{done_before} already complete" in result.stderr
    assert outputs(killed) == outputs(whole)  # no temporary file left, every output and record the same


def test_partitions_concatenate_to_the_one_run_output(tmp_path):
    shards = graph_shards(tmp_path / "graphs", shards=7, per_shard=20)
    assert invoke(["decompose", shards, "-o", tmp_path / "whole.jsonl", "-q"]).exit_code == 0
    parts = tmp_path / "parts"
    for index in (2, 0, 1):  # any order, as a job array's tasks run
        result = invoke(["decompose", shards, "-o", f"{parts}/", "--num-shards", 3, "--shard-index", index])
        assert result.exit_code == 0, result.stderr
        assert f"part {index} of 3: {len(range(index, 7, 3))} of 7 shards" in result.stderr
    assert concatenated(parts) == (tmp_path / "whole.jsonl").read_bytes()
    # the parts wrote the same folder as one run: a one-run rerun finds every shard done
    assert "0 shard(s) written (0 records), 7 already complete" in invoke(["decompose", shards, "-o", f"{parts}/"]).stderr


def test_img2dataset_tars_per_shard(tmp_path):
    captions = ["A red dog on a blue sofa.", "Two cats sleep on a bed.", "A man riding a horse on the beach.",
                "A small boat near a white lighthouse.", "A woman holding an umbrella in the rain."]
    folder = tmp_path / "shards"
    folder.mkdir()
    for s in range(3):
        with tarfile.open(folder / f"{s:05d}.tar", "w") as tar:
            for i in range(2):
                key = f"{s:05d}{i:04d}"
                for ext, data in (("jpg", b"\xff\xd8not decoded"), ("txt", captions[(2 * s + i) % 5].encode())):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        (folder / f"{s:05d}.parquet").write_bytes(b"img2dataset's metadata, not a shard to parse")
    assert invoke(["parse", folder, "-o", tmp_path / "whole.jsonl", "-q"]).exit_code == 0
    pattern = f"{folder}/{{00000..00002}}.tar"
    for index in range(2):
        assert invoke(["parse", pattern, "-o", f"{tmp_path / 'graphs'}/", "--num-shards", 2, "--shard-index", index, "-q"]).exit_code == 0
    assert sorted(p.name for p in (tmp_path / "graphs").glob("*.jsonl")) == ["00000.jsonl", "00001.jsonl", "00002.jsonl"]
    assert concatenated(tmp_path / "graphs") == (tmp_path / "whole.jsonl").read_bytes()
    first = json.loads((tmp_path / "graphs" / "00001.jsonl").read_text().splitlines()[0])
    assert first["id"] == "000010000" and first["image"] == f"{folder}/00001.tar#000010000.jpg"


def test_a_changed_shard_or_other_flags_are_done_again(tmp_path):
    shards = graph_shards(tmp_path / "graphs", shards=3, per_shard=10)
    out = tmp_path / "out"
    assert invoke(["decompose", shards, "-o", f"{out}/", "-q"]).exit_code == 0
    before = outputs(out)

    changed = shards / "00001.jsonl"
    lines = changed.read_text().splitlines()
    changed.write_text("\n".join(lines[:4]) + "\n")  # the shard was re-downloaded with fewer records
    result = invoke(["decompose", shards, "-o", f"{out}/"])
    assert "1 shard(s) written (4 records), 2 already complete" in result.stderr, result.stderr
    assert len((out / "00001.jsonl").read_text().splitlines()) == 4
    assert (out / "00000.jsonl").read_bytes() == before["00000.jsonl"]

    same_size = "\n".join(line.replace('"s1-', '"S1-') for line in lines[:4]) + "\n"  # the same size, other ids
    changed.write_text(same_size)
    os.utime(changed, ns=(0, changed.stat().st_mtime_ns + 1_000_000_000))
    assert "1 shard(s) written (4 records)" in invoke(["decompose", shards, "-o", f"{out}/"]).stderr
    assert json.loads((out / "00001.jsonl").read_text().splitlines()[0])["id"].startswith("S1-")

    result = invoke(["decompose", shards, "-o", f"{out}/", "--max", "1"])  # other flags: other outputs
    assert "3 shard(s) written" in result.stderr
    # a flag that leaves the output as it is (the progress bar) keeps the shards done
    written = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert invoke(["decompose", shards, "-o", f"{out}/", "--max", "1", "--quiet"]).exit_code == 0
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == written

    (out / "00002.jsonl").write_text("cut off")  # an output changed behind its record is not taken as done
    assert "1 shard(s) written" in invoke(["decompose", shards, "-o", f"{out}/", "--max", "1"]).stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--num-shards", "0"], "--num-shards must be at least 1, got 0"),
    (["--shard-index", "-1", "--num-shards", "2"], "--shard-index must be between 0 and 1 (--num-shards 2), got -1"),
    (["--shard-index", "2", "--num-shards", "2"], "--shard-index must be between 0 and 1 (--num-shards 2), got 2"),
    (["--shard-index", "1"], "--shard-index must be between 0 and 0 (--num-shards 1), got 1"),
])
def test_bad_partition_flags_are_one_line(tmp_path, args, message):
    shards = graph_shards(tmp_path / "graphs", shards=2, per_shard=2)
    for stage in ("parse", "decompose", "negate", "template"):
        result = invoke([stage, shards, "-o", f"{tmp_path / 'out'}/", *args])
        assert result.exit_code == 1 and result.stderr == f"Error: {message}\n", (stage, result.stderr)
    assert not (tmp_path / "out").exists()


def test_outputs_a_folder_cannot_hold(tmp_path):
    shards = graph_shards(tmp_path / "graphs", shards=2, per_shard=2)
    result = invoke(["decompose", shards, "-o", tmp_path / "one.jsonl", "--num-shards", "2"])
    assert result.exit_code == 1 and "--num-shards needs an output folder, -o FOLDER/" in result.stderr
    result = invoke(["decompose", "-", "-o", f"{tmp_path / 'out'}/"], input="")
    assert result.exit_code == 1 and "stdin has none" in result.stderr
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "00000.jsonl").write_bytes((shards / "00000.jsonl").read_bytes())
    result = invoke(["decompose", f"{{{shards},{tmp_path / 'b'}}}/00000.jsonl", "-o", f"{tmp_path / 'out'}/"])
    assert result.exit_code == 1 and "would both be written to 00000.jsonl" in result.stderr
    result = invoke(["decompose", shards, "-o", f"{shards}/"])  # its own input, replaced
    assert result.exit_code == 1 and "which it would destroy" in result.stderr
    assert not (tmp_path / "out").exists()


def test_one_writer_per_output_folder(tmp_path):
    shards = graph_shards(tmp_path / "graphs", shards=2, per_shard=2)
    out = tmp_path / "out"
    with folder_lock(out, "another decompose", flag="-o"):
        result = invoke(["decompose", shards, "-o", f"{out}/"])
    assert result.exit_code == 1 and "another writer is using it: another decompose" in result.stderr
    assert not list(out.glob("*.jsonl"))
