"""The one exception type for user errors, and the per-record variant stages raise."""


class MosaicError(Exception):
    """A user error: the message says what failed, where, and how to fix it. The CLI prints
    `Error: <message>` on stderr and exits 1."""


class ArgumentError(MosaicError):
    """A MosaicError raised by a check that names the argument as its caller knows it (`--max` on the
    command line, `max_subgraphs` in the API): its message is final, values included (a value such as
    "--max" is not a flag to translate)."""


class RecordError(ValueError):
    """One input record is unusable. Raised by a stage's `check`; the record reader adds the
    `path:line:` location, and `--skip-bad` turns it into a counted skip."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every `finally` runs: temporary outputs are removed and a
    run folder keeps only complete checkpoints."""
