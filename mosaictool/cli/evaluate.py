"""`mosaictool evaluate` (issue #5)."""

from mosaictool.cli.common import not_implemented


def register(app) -> None:
    app.command("evaluate")(not_implemented("evaluate", 5))
