"""`mosaictool demo` (issue #7)."""

from mosaictool.cli.common import not_implemented


def register(app) -> None:
    app.command("demo")(not_implemented("demo", 7))
