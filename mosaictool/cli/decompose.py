"""`mosaictool decompose` (issue #3)."""

from mosaictool.cli.common import not_implemented


def register(app) -> None:
    app.command("decompose")(not_implemented("decompose", 3))
