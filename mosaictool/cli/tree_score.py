"""`mosaictool tree-score` (issue #6)."""

from mosaictool.cli.common import not_implemented


def register(app) -> None:
    app.command("tree-score")(not_implemented("tree-score", 6))
