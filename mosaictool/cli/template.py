"""`mosaictool template` (issue #3)."""

from mosaictool.cli.common import not_implemented


def register(app) -> None:
    app.command("template")(not_implemented("template", 3))
