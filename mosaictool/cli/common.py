"""What every command shares: the standard record flags, error handling, and the stage driver."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Annotated

import typer

from mosaictool.api import Records
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
                                            "an input of the command is refused.")
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


