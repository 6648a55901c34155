"""`mosaictool vocab` (issue #3)."""

import typer

from mosaictool.cli.common import not_implemented


def register(app) -> None:
    sub = typer.Typer(help="Show, build and import the object / attribute / relation vocabularies.", no_args_is_help=True)
    sub.command("show")(not_implemented("vocab show", 3))
    app.add_typer(sub, name="vocab")
