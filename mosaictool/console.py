"""The console of a program built on mosaictool: the library logs (`logging.getLogger(__name__)`),
and a program that wants its messages on stderr, as the `mosaictool` command shows them, calls
console_logging() once."""

from __future__ import annotations

import logging
import sys


class _ConsoleHandler(logging.StreamHandler):
    """Writes to the sys.stderr of the moment a record is emitted, not of the moment the handler was
    made: a test's CliRunner swaps sys.stderr for each command it runs."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def console_logging() -> None:
    """Show the `mosaictool` logger's INFO messages on stderr, as they are (`note: ...`, `world:
    reusing ...`), stdout keeping the data. A program calls it once (the `mosaictool` command, the perf/
    scripts); the library itself never does: a program importing mosaictool configures its own logging.
    A second call adds no second handler."""
    logger = logging.getLogger("mosaictool")
    if not any(isinstance(h, _ConsoleHandler) for h in logger.handlers):
        handler = _ConsoleHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
