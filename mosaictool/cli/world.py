"""`mosaictool world` (issue #8)."""

from mosaictool.cli.common import not_implemented


def register(app) -> None:
    app.command("world")(not_implemented("world", 8))
