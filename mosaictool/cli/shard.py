"""`mosaictool shard` (issue #4)."""

from mosaictool.cli.common import not_implemented


def register(app) -> None:
    app.command("shard")(not_implemented("shard", 4))
