"""`mosaictool wise-ft` (issue #4)."""

from mosaictool.cli.common import not_implemented


def register(app) -> None:
    app.command("wise-ft")(not_implemented("wise-ft", 4))
