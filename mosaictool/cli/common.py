"""What every command shares: the standard record flags, error handling, and the stage driver."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import signal
import sys
import threading
import types
import typing
from collections.abc import Callable, Iterable
from typing import Annotated, Optional

import typer

from mosaictool.api import Records, flag_words
from mosaictool.errors import MosaicError, Terminated
from mosaictool.io import RecordWriter
from mosaictool.paths import Read, Write, check_outputs
from mosaictool.sources import input_files

InputArg = Annotated[str, typer.Argument(
    help="Input JSONL (.jsonl, .jsonl.gz) or .parquet file, a CSV/TSV table, or WebDataset tars (a .tar, a folder of them, "
         "'shards/{00000..00999}.tar'); '-' reads stdin (JSONL).")]
OutputOpt = Annotated[
    str, typer.Option("--output", "-o", help="Output path: .jsonl, .jsonl.gz or .parquet; '-' (default) is stdout JSONL. "
                                            "Written whole or not at all; a symlink's target is replaced (the link stays); "
                                            "an input of the command is refused. A folder, ending in '/', gets one JSONL "
                                            "per input shard (shards/00042.tar -> graphs/00042.jsonl), and a rerun skips "
                                            "the shards already done: `-o graphs/`.")
]
NumShardsOpt = Annotated[
    int, typer.Option("--num-shards", help="Split the input's shards over N independent runs (a SLURM job array, several "
                                          "nodes): this run takes the shards at positions --shard-index, +N, +2N, ... of "
                                          "the input's order (a folder's: by name). Needs -o FOLDER/; the N runs' files "
                                          "together are the one-run output. Example: --num-shards 8 --shard-index "
                                          "$SLURM_ARRAY_TASK_ID -o graphs/")
]
ShardIndexOpt = Annotated[
    int, typer.Option("--shard-index", help="Which of the --num-shards runs this is, from 0 to N-1 (e.g. $SLURM_ARRAY_TASK_ID).")
]
SkipBadOpt = Annotated[
    bool, typer.Option("--skip-bad", help="Skip bad records (counted and reported on stderr) instead of stopping.")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
AllowOutsideRootOpt = Annotated[
    bool, typer.Option("--allow-outside-root",
                       help="Read images named outside the image root (--image-root, --data-root, --images): an absolute path, "
                            "'..', a symbolic link leading out. Off by default: records from elsewhere cannot make it read any file "
                            "you can read. Example: --image-root data/ --allow-outside-root for records naming /mnt/coco/x.jpg.")
]
AssignIdsOpt = Annotated[
    bool, typer.Option("--assign-ids", help="Give records without an 'id' their line number as id.")
]


def config_options(config: type, *, unset: bool = False, helps: dict[str, str] | None = None) -> list[inspect.Parameter]:
    """One keyword parameter, a typer option, per flag field of a config dataclass (TrainConfig,
    DemoConfig; made with training.config.setting), in the fields' order: its flag --NAME-WITH-DASHES
    (a switch: and --no-NAME) or its `flags`, its help, its metavar, and the field's default (`text`,
    the flag's form, where it has one). `unset`: every flag without a `text` defaults to None (a
    switch to off), "not given", for a preset to fill in. Bounds are the config's, checked with its
    own messages when the config is built (records.check_flags). `helps`: a field's help made by the
    command (DemoConfig's --experiment lists the experiment registry, which itself imports the config)."""
    from mosaictool.training.config import flag_fields

    hints = typing.get_type_hints(config)  # without Annotated: the plain type the flag parses
    params = []
    for f in flag_fields(config):
        meta = f.metadata
        tp = hints[f.name]
        if typing.get_origin(tp) in (typing.Union, types.UnionType):  # `X | None`: None is the flag's "not given"
            tp = next(t for t in typing.get_args(tp) if t is not type(None))
        if meta.get("text") is not None:
            tp = str
        if typing.get_origin(tp) is tuple:  # a repeatable flag
            tp = list[typing.get_args(tp)[0]]
        default = None if f.default is dataclasses.MISSING else f.default
        if meta.get("text") is not None:
            default = meta["text"]
        elif unset:
            default = False if tp is bool else None
        dash = f.name.replace("_", "-")
        decl = meta.get("flags") or ((f"--{dash}/--no-{dash}",) if tp is bool else ())
        help_text = (helps or {}).get(f.name) or meta["help"]
        option = typer.Option(*decl, help=help_text, metavar=meta.get("metavar"))
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=Annotated[Optional[tp] if default is None else tp, option]))
    return params


def fail(message: str) -> None:
    typer.echo(f"Error: {message}", err=True)
    _drop_unwritable_stdout()
    raise typer.Exit(1)


def _drop_unwritable_stdout() -> None:
    # stdout on a full disk (`> /dev/full`) fails again when Python flushes it at exit, with a
    # second, traceback-like message; the error has been reported once already.
    if sys.stdout is None:  # closed from the start (`>&-`): nothing to flush
        return
    try:
        sys.stdout.flush()
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


_HANDLER_PID: int | None = None


def _terminate(signum, frame) -> None:
    if os.getpid() != _HANDLER_PID:
        # a forked worker inherited the handler (multiprocessing.Pool.terminate sends SIGTERM):
        # end as SIGTERM would, without a Terminated traceback per worker
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    raise Terminated()


def _on_sigterm_unwind() -> None:
    """SIGTERM (a scheduler, `timeout`, `kill`) unwinds like Ctrl-C instead of killing the process
    outright, so temporary files are removed and no half-written output is left."""
    global _HANDLER_PID
    if threading.current_thread() is threading.main_thread():
        if _HANDLER_PID is None:
            # forked workers (multiprocessing.Pool, DataLoader) get the default back at once: a
            # Python-level handler there made Pool.terminate() hang now and then, joining a worker
            # that never ran the handler
            os.register_at_fork(after_in_child=_default_sigterm)
        _HANDLER_PID = os.getpid()
        signal.signal(signal.SIGTERM, _terminate)


def _default_sigterm() -> None:
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except ValueError:  # not the main thread of the child: _terminate still ends it
        pass


def _quiet_on_closed_stdout() -> None:
    # The reader of our stdout went away (`| head`): stop quietly, and keep Python from
    # complaining again when it flushes stdout at exit.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(0)


def handles_errors(fn: Callable) -> Callable:
    """Turn user errors into `Error: ...` on stderr with exit 1, and a closed stdout into a quiet exit."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _on_sigterm_unwind()
        try:
            with flag_words():  # the API's errors in the command line's words
                return fn(*args, **kwargs)
        except MosaicError as e:
            fail(str(e))
        except BrokenPipeError:
            _quiet_on_closed_stdout()
        except Terminated:
            typer.echo("Terminated (SIGTERM).", err=True)
            raise typer.Exit(143)
        except KeyboardInterrupt:
            typer.echo("Interrupted.", err=True)
            raise typer.Exit(130)
        except OSError as e:
            # A file error no stage anticipated: one line naming the file, not a traceback.
            where = f"{e.filename}: " if e.filename else ""
            fail(f"{where}{e.strerror or e} (check the path and its permissions, or the free disk space)")

    return wrapper


def write_stage(records: Records, *, input: str, output: str, reads: Iterable[Read] = ()) -> int:
    """Write the records of a stage (a mosaictool.api function) to -o and report its skips; returns
    how many were written. -o is checked against what the stage reads (INPUT, and `reads`: a
    vocabulary, a model) before the first record is read."""
    check_outputs([Write("-o", output)], [*(Read("INPUT", f) for f in input_files(input)), *reads])
    with RecordWriter(output) as writer:
        writer.write_all(records)
    records.skips.report()
    return writer.count


def run_stage(stage: Callable[[str, bool], Records], *, name: str, input: str, output: str, reads: Iterable[Read] = (),
              flags: dict, num_shards: int = 1, shard_index: int = 0, quiet: bool = False) -> None:
    """Run a text stage, `stage(source, quiet)` (a mosaictool.api function), into -o: one file, or a
    folder of one file per input shard (mosaictool.cli.per_shard) that a rerun continues; `flags`:
    the command's, which a shard's output is recorded as made with."""
    from mosaictool.cli.per_shard import check_partition, per_shard_output, run_per_shard

    check_partition(num_shards, shard_index, output)
    if not per_shard_output(output):
        write_stage(stage(input, quiet), input=input, output=output, reads=reads)
        return
    run_per_shard(lambda shard: stage(shard, True), name=name, input=input, output=output, reads=reads, options=flags,
                  num_shards=num_shards, shard_index=shard_index, quiet=quiet)

