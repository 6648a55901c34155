"""`mosaictool train` (issue #4)."""

from mosaictool.cli.common import not_implemented


def register(app) -> None:
    app.command("train")(not_implemented("train", 4))
