"""A text stage over a sharded corpus, one output file per input shard, resumable and partitionable.

`-o graphs/` (a path ending in '/') names an output folder, as img2dataset's --output_folder does:
every input shard (a tar of a folder or brace pattern, a Parquet or JSONL file of several) gets its
own JSONL output of the same stem (`shards/00042.tar` -> `graphs/00042.jsonl`), written to a temporary
file and renamed into place when complete. Beside it a dot file, `.00042.jsonl.done`, records what
made it: the stage, its flags, and the input shard's name, size and modification time. A rerun skips
a shard whose output and record are there and agree with the input and flags as they are now, so a
run killed in any way (kill -9, a lost node, a SLURM time limit) continues where it stopped and ends
with the bytes an uninterrupted run writes; a shard that changed since, or a run with other flags,
is done again. `--num-shards N --shard-index i` takes the shards at positions i, i+N, i+2N, ... of
the input's order, so N runs (a job array) share a corpus without talking to each other, and their
files together are the one-run output.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import typer

from mosaictool import __version__
from mosaictool.api import Records
from mosaictool.atomic import write_text
from mosaictool.errors import MosaicError
from mosaictool.io import STDIO, RecordWriter, parse_json, progress
from mosaictool.locks import LOCK_NAME, folder_lock
from mosaictool.paths import Read, Write, check_outputs
from mosaictool.sources import input_files

# The flags that leave the output as it is: a run with other values still continues a folder.
NEUTRAL_FLAGS = frozenset({"input", "output", "quiet", "workers", "batch_size", "num_shards", "shard_index"})
STEM_SUFFIXES = (".jsonl.gz", ".jsonl", ".tar", ".parquet", ".csv.gz", ".tsv.gz", ".csv", ".tsv")


def per_shard_output(output: str) -> bool:
    """Whether -o names an output folder (one file per input shard): a path ending in '/'."""
    return output != STDIO and output.endswith(("/", os.sep))


def check_partition(num_shards: int, shard_index: int, output: str) -> None:
    if num_shards < 1:
        raise MosaicError(f"--num-shards must be at least 1, got {num_shards}")
    if not 0 <= shard_index < num_shards:
        raise MosaicError(f"--shard-index must be between 0 and {num_shards - 1} (--num-shards {num_shards}), got {shard_index}")
    if num_shards > 1 and not per_shard_output(output):
        raise MosaicError(f"--num-shards needs an output folder, -o FOLDER/ (ending in '/'), one file per input shard; "
                          f"got -o {output}")


def output_name(shard: str) -> str:
    """The output file of an input shard: its stem and .jsonl (`00042.tar` -> `00042.jsonl`)."""
    name = os.path.basename(shard)
    lower = name.lower()
    stem = next((name[:-len(s)] for s in STEM_SUFFIXES if lower.endswith(s)), name)
    return f"{stem}.jsonl"


def run_per_shard(stage: Callable[[str], Records], *, name: str, input: str, output: str, reads: Iterable[Read] = (),
                  options: dict, num_shards: int = 1, shard_index: int = 0, quiet: bool = False) -> None:
    """Run `stage` (a shard's path -> its records) on this run's shards of `input`, each into its
    file in the folder `output`, skipping the shards already done (see the module's docstring)."""
    if input == STDIO:
        raise MosaicError(f"-o {output}: an output folder holds one file per input shard; stdin has none: give the input "
                          "as files (a folder, a brace pattern such as 'shards/{00000..00099}.tar')")
    shards = input_files(input)
    names: dict[str, str] = {}
    for shard in shards:
        out = output_name(shard)
        if out in names:
            raise MosaicError(f"-o {output}: the input shards {names[out]} and {shard} would both be written to {out}; "
                              "give the shards distinct file names")
        names[out] = shard
    mine = shards[shard_index::num_shards]
    folder = Path(output)
    targets = [folder / output_name(s) for s in mine]
    check_outputs([Write("-o", t) for t in targets], [*(Read("INPUT", s) for s in shards), *reads])
    lock = LOCK_NAME if num_shards == 1 else f".mosaictool-{shard_index}-of-{num_shards}.lock"
    written = records = 0
    with folder_lock(folder, f"mosaictool {name} -o {output}", flag="-o", name=lock):
        todo = []
        for shard, target in zip(mine, targets):
            _remove_leftovers(target)
            made = _made_by(name, shard, options)
            if not _complete(target, _done_file(target), made):
                todo.append((shard, target, made))
        skipped = len(mine) - len(todo)
        # the bar counts the shards left, so that its ETA is theirs
        bar = progress(todo, desc=name, unit="shard", quiet=quiet, total=len(todo))
        for shard, target, made in bar:
            stage_records = stage(shard)
            with RecordWriter(target) as writer:
                writer.write_all(stage_records)
            stage_records.skips.report()
            record = {**made, "records": writer.count, "bytes": target.stat().st_size}
            write_text(_done_file(target), json.dumps(record, sort_keys=True) + "\n", flag="-o")
            written += 1
            records += writer.count
            bar.set_postfix_str(f"{records} records")
    if not quiet:
        part = f" (part {shard_index} of {num_shards}: {len(mine)} of {len(shards)} shards)" if num_shards > 1 else ""
        typer.echo(f"{name}: {written} shard(s) written ({records} records), {skipped} already complete, in {output}{part}",
                   err=True)


def _made_by(name: str, shard: str, options: dict) -> dict:
    st = os.stat(shard)
    return {"stage": name, "version": __version__, "input": os.path.basename(shard), "input_size": st.st_size,
            "input_mtime_ns": st.st_mtime_ns, "options": {k: v for k, v in sorted(options.items()) if k not in NEUTRAL_FLAGS}}


def _done_file(target: Path) -> Path:
    """The record of what made `target` (a dot file: no reader of the folder takes it for a shard)."""
    return target.with_name(f".{target.name}.done")


def _complete(target: Path, done: Path, made: dict) -> bool:
    """Whether `target` is a finished output of the shard as it is now, made with these flags."""
    if not (target.is_file() and done.is_file()):
        return False
    try:
        record = parse_json(done.read_bytes(), str(done))
    except (OSError, MosaicError):
        return False
    return (isinstance(record, dict) and {k: record.get(k) for k in made} == made
            and record.get("bytes") == target.stat().st_size)


def _remove_leftovers(target: Path) -> None:
    """The temporary files that a killed run writing `target` left: RecordWriter's of the output and
    atomic's of its `.done` record (`.00042.jsonl.*.tmp` is both)."""
    for leftover in target.parent.glob(f".{glob.escape(target.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            leftover.unlink()
