"""`mosaictool negate` (issue #3)."""

from mosaictool.cli.common import not_implemented


def register(app) -> None:
    app.command("negate")(not_implemented("negate", 3))
