"""Nothing lost: no output may destroy an input, one writer per output folder, a full disk is one line
with nothing half-written, outputs keep the umask, and -o through a symlink writes its target.

Every refusal is checked the same way: exit 1, one `Error:` line naming the output and the input,
every file under the test's folder byte-identical afterwards and nothing new in it.

CASES (new, beyond tests/test_bad_input.py; 59 here, and the demo cache's in tests/test_demo.py):
 overwrite   parse: 1 -o = INPUT  2 the same by another path (./, ..)  3 a symlink to it  4 a hard link to it
             5 `< out -o out` (stdin)  6 `>> input` (stdout)  7 -o a file of the --model folder
             decompose: 8 -o through a symlinked folder  9 -o a file of --vocab   negate: 10 -o = INPUT  11 a --vocab file
             template: 12 -o = INPUT (.gz)
             evaluate: 13 -o = -c  14 --report = -c  15 --plot = -c  16 --report = -o  17 -o an annotation under -d
             18 -o the config.json of -c's run  19 -o = --model-config  20 -o = --pretrained weights
             tree-score: 21 -o = INPUT  22 --report = -c  23 -o = --gold  24 --report = -o
             world audit: 25 -o = TEXTS  26 -o = --world's manifest.json
             vocab: 27 build -o = --base  28 build -o = the shipped vocabulary  29 import-vg -o = --base
             probe build: 30 r --out holding --vg-relationships as probe_r/probe_r.jsonl  31 b --images inside --out/probe_b
             shard: 32 --out = --image-root  33 --out holding INPUT named sizes.json
             train: 34 --out = the --data shard folder  35 --out holding --data as metrics.jsonl  36 --out = the run of
             --pretrained  37 --out holding --model-config as config.json  38 --resume of a run whose stored --data is itself
             wise-ft: 39 --out holding --zeroshot under an output's name  40 the same for --finetuned
             demo: 41 --out = --cache-dir  42 --out inside the cache  43 the cache inside --out
 allowed     44 evaluate -o beside the checkpoint, rerun in the data root; shard --out inside the image root;
             wise-ft --out = the fine-tuned run's folder; train --resume writing its own run
 writers     45 a second writer (train, shard, wise-ft, demo) refused, naming the holder's pid  46 a SIGKILLed holder:
             the next writer proceeds  47 two real `train --out r` at once (slow)  48 a cache entry: the second waits
 disk full   49 Parquet -o (polars)  50 shard  51 train (slow)  52 wise-ft, the previous file intact (ulimit -f)
             53 a metrics line cut off by a full disk is removed
 umask       54 022 and 077 on JSONL, Parquet, reports, checkpoints, shards, vocabularies
 symlinks    55 -o through a symlink replaces the target, the link stays  56 a dangling link: the target is created
 folders     57 demo --out a folder that is not a demo's (its own shards/ would be replaced)  58 world --overwrite of a
             world folder holding anything else (runs/)  59 train / wise-ft --out an existing file
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mosaictool.cli import app
from mosaictool.errors import MosaicError
from mosaictool.training.config import TrainConfig
from train_fixtures import make_world, write_tiny_model

runner = CliRunner()
CAPS = "".join(json.dumps({"id": i, "caption": f"a red cube left of a blue ball {i}"}) + "\n" for i in range(3))


def tree(root: Path) -> dict[str, str]:
    """Every file and link under `root` (hidden ones too) -> its bytes' digest or the link's target."""
    out = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            p = Path(folder) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = "<dir>"
    return out


def refused(root: Path, args: list, *needles: str, cwd: Path | None = None) -> str:
    """Run the command; exit 1, one `Error:` line holding every needle, `root` unchanged."""
    before = tree(root)
    old = os.getcwd()
    if cwd:
        os.chdir(cwd)
    try:
        result = runner.invoke(app, [str(a) for a in args])
    finally:
        os.chdir(old)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1, (result.stdout[-500:], result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert tree(root) == before, "a file changed or appeared"
    return lines[0]


@pytest.fixture
def files(tmp_path):
    """Inputs every case can point at: captions, a checkpoint in a run folder, a vocabulary, a bench root."""
    (tmp_path / "caps.jsonl").write_text(CAPS)
    run = tmp_path / "runs" / "m1"
    run.mkdir(parents=True)
    for name, content in (("config.json", "{}"), ("metrics.jsonl", '{"step": 1}\n'), ("final.pt", "weights")):
        (run / name).write_text(content)
    from mosaictool.vocab import DEFAULT_DIR

    shutil.copytree(DEFAULT_DIR, tmp_path / "vocab", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (tmp_path / "bench" / "aro").mkdir(parents=True)
    (tmp_path / "bench" / "aro" / "visual_genome_relation.json").write_text("[]")
    return tmp_path


# ---- the record stages ------------------------------------------------------------------------------


def test_parse_output_is_the_input_by_any_name(files):
    caps = files / "caps.jsonl"
    (files / "link.jsonl").symlink_to("caps.jsonl")
    os.link(caps, files / "hard.jsonl")
    refused(files, ["parse", caps, "-o", caps], "-o", "is the input INPUT")
    refused(files, ["parse", "caps.jsonl", "-o", "./sub/../caps.jsonl"], "is the input", cwd=files)
    refused(files, ["parse", caps, "-o", files / "link.jsonl"], "is the input INPUT")
    refused(files, ["parse", caps, "-o", files / "hard.jsonl"], "under another name: a link")
    (files / "model").mkdir()
    (files / "model" / "meta.json").write_text("{}")
    refused(files, ["parse", caps, "--model", files / "model", "-o", files / "model" / "meta.json"], "--model")


@pytest.mark.parametrize("direction", ["stdin", "stdout"])
def test_shell_redirections_of_the_same_file(files, direction):
    caps = files / "caps.jsonl"
    before = tree(files)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if direction == "stdin":  # mosaictool parse - -o caps.jsonl < caps.jsonl
        with open(caps, "rb") as stdin:
            proc = subprocess.run([sys.executable, "-m", "mosaictool", "parse", "-", "-o", str(caps)], stdin=stdin,
                                  capture_output=True, text=True, env=env)
        needle = "is the input on stdin"
    else:  # mosaictool parse caps.jsonl >> caps.jsonl: would read its own output forever
        with open(caps, "ab") as stdout:
            proc = subprocess.run([sys.executable, "-m", "mosaictool", "parse", str(caps)], stdout=stdout,
                                  stderr=subprocess.PIPE, text=True, env=env)
        needle = "stdout (-o -): is the input INPUT"
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and needle in proc.stderr, proc.stderr
    assert tree(files) == before


def test_decompose_negate_template(files):
    caps = files / "caps.jsonl"
    (files / "alias").symlink_to(files, target_is_directory=True)
    refused(files, ["decompose", caps, "-o", files / "alias" / "caps.jsonl"], "is the input")
    refused(files, ["decompose", caps, "--vocab", files / "vocab", "-o", files / "vocab" / "objects.tsv"],
            "would replace", "a file of the folder that --vocab reads")
    refused(files, ["negate", caps, "-o", caps], "is the input")
    refused(files, ["negate", caps, "--vocab", files / "vocab", "-o", files / "vocab" / "relations.tsv"], "--vocab")
    (files / "caps.jsonl.gz").write_bytes(b"\x1f\x8b")
    refused(files, ["template", files / "caps.jsonl.gz", "-o", files / "caps.jsonl.gz"], "is the input")


# ---- models and benchmarks ---------------------------------------------------------------------------


def test_evaluate_outputs(files):
    ckpt = files / "runs" / "m1" / "final.pt"
    base = ["evaluate", "-b", "aro:VG-Relation", "-d", files / "bench", "-c", ckpt]
    refused(files, [*base, "-o", ckpt], "-o", "is the input --checkpoint")  # the 32 MB -> 5 KB
    refused(files, [*base, "--report", ckpt], "--report", "is the input --checkpoint")
    refused(files, [*base, "--plot", ckpt], "--plot", "is the input --checkpoint")
    refused(files, [*base, "-o", files / "r.jsonl", "--report", files / "r.jsonl"], "are the same file")
    refused(files, [*base, "-o", files / "bench" / "aro" / "visual_genome_relation.json"],
            "a file of the folder that --data-root reads")
    refused(files, [*base, "-o", files / "runs" / "m1" / "config.json"], "a file of the run that --checkpoint reads")
    (files / "cfg.json").write_text("{}")
    refused(files, ["evaluate", "-b", "aro", "-d", files / "bench", "--model-config", files / "cfg.json",
                    "-o", files / "cfg.json"],
            "is the input --model-config")
    (files / "w.pt").write_text("weights")
    refused(files, ["evaluate", "-b", "aro", "-d", files / "bench", "--model", "ViT-B-32", "--pretrained", files / "w.pt",
                    "--report", files / "w.pt"], "is the input --pretrained")


def test_tree_score_outputs(files):
    caps, ckpt = files / "caps.jsonl", files / "runs" / "m1" / "final.pt"
    refused(files, ["tree-score", caps, "--checkpoint", ckpt, "-o", caps], "is the input INPUT")
    refused(files, ["tree-score", caps, "--checkpoint", ckpt, "--report", ckpt], "is the input --checkpoint")
    (files / "gold.jsonl").write_text('{"id": 0, "tree": "(a b)"}\n')
    refused(files, ["tree-score", caps, "--checkpoint", ckpt, "--gold", files / "gold.jsonl", "-o", files / "gold.jsonl"],
            "--gold")
    refused(files, ["tree-score", caps, "--checkpoint", ckpt, "-o", files / "t.jsonl", "--report", files / "t.jsonl"],
            "same file")


def test_world_audit_outputs(files):
    (files / "w").mkdir()
    (files / "w" / "manifest.json").write_text("{}")
    refused(files, ["world", "audit", files / "caps.jsonl", "-o", files / "caps.jsonl"], "is the input TEXTS")
    refused(files, ["world", "audit", files / "caps.jsonl", "--world", files / "w", "-o", files / "w" / "manifest.json"],
            "--world")


def test_vocab_build_and_import_never_write_over_their_base(files, monkeypatch):
    import mosaictool.vocab

    refused(files, ["vocab", "build", files / "caps.jsonl", "--base", files / "vocab", "-o", files / "vocab"],
            "-o", "is the folder that --base reads")
    monkeypatch.setattr(mosaictool.vocab, "DEFAULT_DIR", files / "vocab")  # stands for the shipped one
    refused(files, ["vocab", "build", files / "caps.jsonl", "-o", files / "vocab"], "the shipped vocabulary")
    (files / "vg").mkdir()
    refused(files, ["vocab", "import-vg", files / "vg", "--base", files / "vocab", "-o", files / "vocab"], "--base")


def test_probe_build_outputs(files):
    rel = files / "data" / "probe_r" / "probe_r.jsonl"
    rel.parent.mkdir(parents=True)
    rel.write_text("[]")
    refused(files, ["probe", "build", "r", "--vg-relationships", rel, "--images", files, "--out", files / "data"],
            "is the input --vg-relationships")
    (files / "data" / "probe_b" / "imgs").mkdir(parents=True)
    (files / "inst.json").write_text("{}")
    refused(files, ["probe", "build", "b", "--coco-instances", files / "inst.json", "--images",
                    files / "data" / "probe_b" / "imgs",
                    "--out", files / "data"], "probe_b/ there holds the input --images")


def test_shard_outputs(files):
    (files / "imgs").mkdir()
    refused(files, ["shard", files / "caps.jsonl", "--image-root", files / "imgs", "--out", files / "imgs"],
            "is the folder that --image-root reads")
    (files / "s").mkdir()
    (files / "s" / "sizes.json").write_text(CAPS)
    refused(files, ["shard", files / "s" / "sizes.json", "--out", files / "s"], "its sizes.json is the input INPUT")


def test_train_outputs(files):
    shards = files / "shards"
    shards.mkdir()
    (shards / "000000.tar").write_text("tar")
    cfg = write_tiny_model(files)
    refused(files, ["train", "--data", shards, "--out", shards], "is the folder that --data reads")
    (files / "r").mkdir()
    (files / "r" / "metrics.jsonl").write_text(CAPS)
    refused(files, ["train", "--data", files / "r" / "metrics.jsonl", "--out", files / "r"],
            "its metrics.jsonl is the input --data")
    run = files / "runs" / "m1"
    refused(files, ["train", "--data", files / "caps.jsonl", "--pretrained", run / "final.pt", "--out", run],
            "its final.pt is the input --pretrained")
    (run / "best.pt").write_text("weights")  # not a name train writes: the run's config.json and metrics still are
    refused(files, ["train", "--data", files / "caps.jsonl", "--pretrained", run / "best.pt", "--out", run],
            "its config.json would replace", "a file of the run that --pretrained reads")
    (files / "c").mkdir()
    (files / "c" / "config.json").write_text(cfg.read_text())
    refused(files, ["train", "--data", files / "caps.jsonl", "--model-config", files / "c" / "config.json", "--out", files / "c"],
            "its config.json is the input --model-config")
    (files / "own").mkdir()
    own = TrainConfig(data=str(files / "own"), out=str(files / "own"))  # as train writes it
    (files / "own" / "config.json").write_text(json.dumps(dataclasses.asdict(own)))
    refused(files, ["train", "--resume", files / "own"], "is the folder that --data reads")


def test_wise_ft_outputs(files):
    (files / "wise").mkdir()
    zs, ft = files / "wise" / "wise_ft_alpha_0.000.pt", files / "wise" / "wise_ft_alpha_1.000.pt"
    zs.write_text("zero-shot")
    ft.write_text("fine-tuned")
    refused(files, ["wise-ft", "--zeroshot", zs, "--finetuned", files / "runs" / "m1" / "final.pt", "--alpha", "0,0.5",
                    "--out", files / "wise"], "its wise_ft_alpha_0.000.pt is the input --zeroshot")
    refused(files, ["wise-ft", "--zeroshot", files / "runs" / "m1" / "final.pt", "--finetuned", ft, "--alpha", "1",
                    "--out", files / "wise"], "is the input --finetuned")


def test_demo_out_and_cache_are_kept_apart(files):
    cache = files / "cache"
    cache.mkdir()
    refused(files, ["demo", "--quick", "--out", cache, "--cache-dir", cache], "is the folder that --cache-dir reads")
    refused(files, ["demo", "--quick", "--out", cache / "data-x", "--cache-dir", cache],
            "lies inside the folder that --cache-dir reads")
    refused(files, ["demo", "--quick", "--out", files, "--cache-dir", cache], "holds the input --cache-dir")


def test_demo_never_takes_over_a_folder_of_someone_else(files):
    (files / "project" / "shards").mkdir(parents=True)
    (files / "project" / "shards" / "000000.tar").write_text("their own shards")
    refused(files, ["demo", "--quick", "--out", files / "project", "--cache-dir", files / "cache"],
            "not a demo folder (no demo_config.json) and it holds shards")


def test_world_overwrite_never_deletes_what_else_is_in_the_folder(files):
    (files / "w" / "train").mkdir(parents=True)
    (files / "w" / "manifest.json").write_text("{}")
    (files / "w" / "runs").mkdir()
    (files / "w" / "runs" / "final.pt").write_text("a model trained on this world")
    refused(files, ["world", "--out", files / "w", "--overwrite", "--train", "1", "-q"], "holds runs besides the world")


def test_train_out_that_is_a_file(files):
    refused(files, ["train", "--data", files / "caps.jsonl", "--out", files / "caps.jsonl"], "is a file, not a folder")
    refused(files, ["wise-ft", "--zeroshot", files / "caps.jsonl", "--finetuned", files / "runs" / "m1" / "final.pt",
                    "--out", files / "caps.jsonl"], "is a file, not a folder")


def test_what_stays_allowed(files):
    """No false alarms on the everyday layouts."""
    from mosaictool.paths import RUN_FILES, Read, Write, check_outputs, checkpoint

    run = files / "runs" / "m1"
    (run / "results.jsonl").write_text("old results")  # evaluate -o beside the checkpoint, run again
    check_outputs([Write("-o", run / "results.jsonl")], checkpoint("-c", run / "final.pt"))
    (files / "results.jsonl").write_text("old")  # evaluate -d . -o results.jsonl, run again
    check_outputs([Write("-o", files / "results.jsonl")], [Read("--data-root", files, ("aro/", "coco/"), exclusive=False)])
    check_outputs([Write("--out", files / "shards", ("*.tar", "sizes.json"))], [Read("--image-root", files, ())])
    check_outputs([Write("--out", run, ("wise_ft_alpha_0.500.pt",))], checkpoint("--finetuned", run / "final.pt"))
    check_outputs([Write("--out", run, RUN_FILES)], [Read("--data", files / "caps.jsonl")])  # --resume: its own run
    with pytest.raises(MosaicError, match="would replace"):
        check_outputs([Write("-o", run / "metrics.jsonl")], checkpoint("-c", run / "final.pt"))


# ---- one writer per folder -----------------------------------------------------------------------------

HOLD = """
import sys, time
from mosaictool.locks import folder_lock
with folder_lock(sys.argv[1], "a test holder"):
    print("held", flush=True)
    time.sleep(120)
"""


def hold(folder: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_is_told_who_holds_the_folder_and_a_killed_holder_frees_it(tmp_path):
    from mosaictool.locks import LOCK_NAME, folder_lock

    folder = tmp_path / "out"
    holder = hold(folder)
    try:
        with pytest.raises(MosaicError, match=rf"another writer is using it: a test holder \(pid {holder.pid} on "):
            with folder_lock(folder, "second"):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (folder / LOCK_NAME).exists()  # left by the killed holder: no longer locked by anyone
    with folder_lock(folder, "third") as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not (folder / LOCK_NAME).exists() and folder.is_dir()


@pytest.mark.parametrize("command", ["train", "shard", "wise-ft", "demo"])
def test_every_writer_command_takes_the_lock(files, command):
    out = files / "held"
    holder = hold(out)
    try:
        world = make_world(files / "w", n=4)
        args = {
            "train": ["train", "--data", world, "--out", out],
            "shard": ["shard", world, "--image-root", world.parent, "--out", out],
            "wise-ft": ["wise-ft", "--zeroshot", files / "runs" / "m1" / "final.pt", "--finetuned",
                        files / "runs" / "m1" / "final.pt", "--out", out],
            "demo": ["demo", "--quick", "--out", out, "--cache-dir", files / "cache"],
        }[command]
        refused(files, args, f"--out {out}: another writer is using it", f"(pid {holder.pid} on ")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


def test_a_stale_lock_left_in_a_shard_folder_is_taken_over(files):
    out = files / "shards"
    holder = hold(out)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    world = make_world(files / "w", n=4)
    result = runner.invoke(app, ["shard", str(world), "--image-root", str(world.parent), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["000000.tar", "sizes.json"]  # the lock file gone with it


WAIT = """
import sys, time
from pathlib import Path
from mosaictool.locks import cache_lock
with cache_lock(sys.argv[1], "the first demo", log=print):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    Path(sys.argv[1] + ".done").write_text("done")  # still holding it
"""


def test_a_cache_entry_has_one_writer_and_the_second_waits_saying_for_whom(tmp_path):
    from mosaictool.locks import cache_lock

    lock = tmp_path / ".data-x.lock"
    first = subprocess.Popen([sys.executable, "-c", WAIT, str(lock), "2"], stdout=subprocess.PIPE, text=True)
    assert first.stdout.readline().strip() == "held"
    lines: list[str] = []
    with cache_lock(lock, "the second demo", log=lines.append):
        assert Path(f"{lock}.done").exists()  # got it only once the first was done
    first.wait()
    assert len(lines) == 1 and f"waiting for the first demo (pid {first.pid} on " in lines[0]


@pytest.mark.slow
def test_two_trains_into_one_folder_at_once(tmp_path):
    """The issue's case: two `train --out r` started together. One runs, the other stops at once."""
    world = make_world(tmp_path / "w", n=8)
    cfg = write_tiny_model(tmp_path)
    args = [sys.executable, "-m", "mosaictool", "train", "--data", str(world), "--out", str(tmp_path / "r"), "--model-config",
            str(cfg), "--batch-size", "4", "--steps", "6", "--no-augment", "--device", "cpu", "-q"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1], results
    err = next(e for code, e in results if code == 1)
    assert err.count("\n") == 1 and "another writer is using it: mosaictool train (pid" in err
    steps = [json.loads(line)["step"] for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 7))  # every step once


# ---- a full disk -------------------------------------------------------------------------------------------


def limited(args: list, limit: int, **kw) -> subprocess.CompletedProcess:
    """The command with `ulimit -f` at `limit` bytes; SIGXFSZ ignored, so a write past it fails with EFBIG."""

    def fsize():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "mosaictool", *map(str, args)], preexec_fn=fsize, capture_output=True,
                          text=True, env=env, **kw)


def one_disk_full_line(proc, name) -> None:
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {name}: cannot write (File too large): the disk is full"), proc.stderr


def no_temp_files(folder: Path) -> None:
    assert not [p for p in Path(folder).rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]


def test_parquet_output_on_a_full_disk(tmp_path):
    (tmp_path / "caps.jsonl").write_text(CAPS)
    out = tmp_path / "o" / "graphs.parquet"
    out.parent.mkdir()
    out.write_bytes(b"the previous output")
    proc = limited(["parse", tmp_path / "caps.jsonl", "-o", out, "-q"], 2500)  # the JSONL fits, its Parquet not
    one_disk_full_line(proc, out)
    assert out.read_bytes() == b"the previous output"
    no_temp_files(out.parent)


def test_shards_on_a_full_disk(tmp_path):
    world = make_world(tmp_path / "w", n=8, size=64)
    proc = limited(["shard", world, "--image-root", world.parent, "--out", tmp_path / "s", "-q"], 8000)
    one_disk_full_line(proc, tmp_path / "s" / "000000.tar")
    assert not (tmp_path / "s").exists()  # the folder it made, removed with everything in it


@pytest.mark.slow
def test_train_on_a_full_disk(tmp_path):
    world = make_world(tmp_path / "w", n=8)
    cfg = write_tiny_model(tmp_path)
    run = tmp_path / "run"
    proc = limited(["train", "--data", world, "--out", run, "--model-config", cfg, "--batch-size", "4", "--steps", "2",
                    "--no-augment", "--device", "cpu", "-q"], 1 << 20)  # a 6 MB final.pt
    one_disk_full_line(proc, run / "final.pt")
    assert sorted(p.name for p in run.iterdir()) == ["config.json", "metrics.jsonl"]  # no final.pt, no temp file


@pytest.mark.slow
def test_wise_ft_on_a_full_disk_keeps_the_previous_checkpoint(tmp_path):
    from mosaictool.model import openclip

    cfg = write_tiny_model(tmp_path)
    for seed in (1, 2):
        openclip.save_checkpoint(tmp_path / f"m{seed}.pt", openclip.create("test-tiny", model_config_file=cfg, seed=seed))
    out = tmp_path / "wise"
    args = ["wise-ft", "--zeroshot", tmp_path / "m1.pt", "--finetuned", tmp_path / "m2.pt", "--alpha", "0.5", "--out", out,
            "--device", "cpu"]
    assert runner.invoke(app, [str(a) for a in args]).exit_code == 0
    before = (out / "wise_ft_alpha_0.500.pt").read_bytes()
    proc = limited([*args[:-4], "--alpha", "0.25,0.5", "--out", out, "--device", "cpu"], 1 << 20)
    one_disk_full_line(proc, out / "wise_ft_alpha_0.250.pt")
    assert (out / "wise_ft_alpha_0.500.pt").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["wise_ft_alpha_0.500.pt"]


def test_a_metrics_line_is_never_half_written(tmp_path, monkeypatch):
    from mosaictool.atomic import append_line

    log = tmp_path / "metrics.jsonl"
    append_line(log, '{"step": 1}\n')

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def tell(self):
            return self.f.tell()

        def truncate(self, n):
            return self.f.truncate(n)

        def write(self, data):
            self.f.write(data[:5])
            self.f.flush()
            raise OSError(28, "No space left on device")

    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, m="r", *a, **k: Full(real_open(p, m, *a, **k)))
    with pytest.raises(MosaicError, match="metrics.jsonl: cannot write .*the disk is full"):
        append_line(log, '{"step": 2}\n')
    monkeypatch.undo()
    assert log.read_text() == '{"step": 1}\n'


# ---- the umask and symbolic links ---------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_outputs_keep_the_umask(tmp_path, mask):
    from mosaictool import vocab
    from mosaictool.atomic import torch_save, write_text
    from mosaictool.io import write_records
    from mosaictool.stages.shard import write_shards

    world = make_world(tmp_path / "w", n=3)
    old = os.umask(mask)
    try:
        write_records(tmp_path / "a.jsonl", [{"id": 1}])
        write_records(tmp_path / "a.parquet", [{"id": 1}])
        write_records(tmp_path / "a.jsonl.gz", [{"id": 1}])
        write_text(tmp_path / "report.md", "# report\n")
        torch_save({"x": 1}, tmp_path / "c.pt")
        write_shards([json.loads(line) for line in world.read_text().splitlines()], out=tmp_path / "s", image_root=world.parent)
        vocab.save(vocab.load(), tmp_path / "v")
    finally:
        os.umask(old)
    made = [tmp_path / n for n in ("a.jsonl", "a.parquet", "a.jsonl.gz", "report.md", "c.pt")]
    made += [*(tmp_path / "s").iterdir(), *(tmp_path / "v").iterdir()]
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in made} == {p.name: oct(0o666 & ~mask) for p in made}


def test_output_through_a_symlink_replaces_its_target(tmp_path):
    from mosaictool.atomic import write_text
    from mosaictool.io import write_records

    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.jsonl"
    target.write_text("old\n")
    link = tmp_path / "out.jsonl"
    link.symlink_to(target)
    write_records(link, [{"id": 1}])
    assert link.is_symlink() and target.read_text() == '{"id":1}\n'
    dangling = tmp_path / "report.md"
    dangling.symlink_to(tmp_path / "real" / "report.md")
    write_text(dangling, "# new\n")
    assert dangling.is_symlink() and (tmp_path / "real" / "report.md").read_text() == "# new\n"
    pq = tmp_path / "t.parquet"
    pq.symlink_to(tmp_path / "real" / "t.parquet")
    write_records(pq, [{"id": 1}])
    assert pq.is_symlink() and (tmp_path / "real" / "t.parquet").stat().st_size > 0
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["out.jsonl", "report.md", "t.parquet"]


def test_the_help_says_what_o_does_with_a_symlink():
    result = runner.invoke(app, ["parse", "--help"], env={"COLUMNS": "300"})
    assert "a symlink's target is replaced (the link stays)" in " ".join(result.stdout.split())


def test_a_world_folder_keeps_the_umask(tmp_path):
    from mosaictool.world.generate import generate_world

    old = os.umask(0o077)
    try:
        generate_world(tmp_path / "w", train=1, eval_scale=0.01)
    finally:
        os.umask(old)
    assert oct((tmp_path / "w").stat().st_mode & 0o777) == oct(0o700)
    assert oct((tmp_path / "w" / "manifest.json").stat().st_mode & 0o777) == oct(0o600)
