"""Run the mosaictool CLI and pause it once, mid-run, at a known point, so that a test can signal it there.

    python tests/paused_cli.py MODULE:NAME N mosaictool-arguments...

After the N-th call of MODULE:NAME (a function, or Class.method) has returned, the process prints
READY on stderr and sleeps; the test, which reads stderr up to that line, sends its signal, and the
signal lands while the command is in the middle of its work, every time (a child polled from outside
may have finished before the poll sees it). Nothing else differs from `python -m mosaictool`.
"""

from __future__ import annotations

import functools
import importlib
import signal
import sys
import time

READY = "paused-for-a-signal"


def pause_after(target: str, n: int) -> None:
    module, _, qualname = target.partition(":")
    *path, name = qualname.split(".")
    owner = importlib.import_module(module)
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    calls = 0

    @functools.wraps(original)
    def paused(*args, **kwargs):
        nonlocal calls
        result = original(*args, **kwargs)
        calls += 1
        if calls == n:
            print(READY, file=sys.stderr, flush=True)
            time.sleep(600)  # a signal ends it; without one the command goes on (and the test fails)
        return result

    setattr(owner, name, paused)


def main() -> None:
    target, n, *args = sys.argv[1:]
    # Ctrl-C's KeyboardInterrupt even where the test runner was started with SIGINT ignored (a shell
    # that runs it in the background does that, and a child inherits it).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    pause_after(target, int(n))
    from mosaictool.cli import main as cli

    sys.argv = ["mosaictool", *args]
    cli()


if __name__ == "__main__":
    main()
