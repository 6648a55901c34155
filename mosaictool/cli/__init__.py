"""The `mosaictool` command: one module per subcommand, each a thin wrapper over a stage."""

from __future__ import annotations

import os

# OpenMP threads that spin while waiting make torch on a busy CPU up to ~50x slower (a tiny-model
# training step: 0.17 s passive vs 9 s spinning, 2 threads, other processes on the cores). It has to
# be set before torch loads its OpenMP runtime, so the command sets it as it starts; the library does
# not (a program importing mosaictool keeps its own environment); a user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# isort: split

import gc
import importlib

import typer

from mosaictool import __version__
from mosaictool.console import console_logging

# The modules of mosaictool.cli that register a command (`register(app)`), in the order of `--help`:
# a new command is a module and its name here. The API functions and docs/api.md are checked
# against the commands this registers (tests/test_api.py).
COMMANDS = ("importers", "parse", "decompose", "negate", "template", "texts_report", "vocab", "world", "shard", "train", "wise_ft",
            "evaluate", "tree_score", "demo", "probe")

app = typer.Typer(
    name="mosaictool",
    help=(
        "Teach CLIP-style models composition: scene-graph parsing, sub-graph positives and hard "
        "negatives (MosaiCLIP, NegCLIP, FSC-CLIP), training, WiSE-FT and compositionality benchmarks.\n\n"
        "Stages read and write JSONL or Parquet and pipe into each other:\n\n"
        "  mosaictool parse captions.jsonl | mosaictool decompose --max 3 | mosaictool negate | mosaictool template"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

for name in COMMANDS:
    importlib.import_module(f"{__name__}.{name}").register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mosaictool {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    console_logging()


def main() -> None:
    # The stages hold hundreds of thousands of records, each a tree of dicts and lists, and Python's
    # default thresholds (700, 10, 10) re-walk them ever more often as they pile up (reading the
    # demo's records: 2.7x faster with these; docs/performance.md).
    gc.set_threshold(50_000, 50, 1000)
    app()
