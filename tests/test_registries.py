"""Benchmarks, methods and demo experiments are one registry pattern: the modules of a package are
found, and each declares itself (name, help, place, data folders, WiSE-FT rows, files). A new
method or experiment is one new module: these tests add one at runtime and see it everywhere it
belongs (the --method flags and the demo's rows; `demo --help` and the files the demo may write)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from typer.main import get_command

from mosaictool import bench, methods
from mosaictool.cli import app
from mosaictool.demo import experiments

REPO = Path(__file__).resolve().parent.parent

TOY_EXPERIMENT = '''
NAME = "toy"
HELP = "a throwaway experiment that writes one file (val)"
PLACE = 35
FILES = ("toy.md",)


def run(ctx):
    raise AssertionError("not run here")
'''

TOY_METHOD = '''
from mosaictool.methods.base import DemoRow, Method, Option


class Toy(Method):
    name = "toy"
    help = "CLIP with a weight nobody reads (a test's method)."
    place = 15
    options = (Option("toy_weight", float, 0.5, "The weight nobody reads, e.g. --toy-weight 0.2."),)
    demo_rows = (DemoRow("Toy", wise=True),)


METHOD = Toy
'''


@pytest.fixture
def package_with(tmp_path, monkeypatch):
    """Add a module (name, source) to a registry's package for one test."""

    def add(package, cache_clear, name: str, source: str) -> None:
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
        cache_clear()
        monkeypatch.delitem(sys.modules, f"{package.__name__}.{name}", raising=False)

    yield add
    experiments.registry.cache_clear()
    methods._registry.cache_clear()


def _experiment_help() -> str:
    demo = get_command(app).commands["demo"]
    return next(p.help for p in demo.params if p.name == "experiments")


def test_experiment_help_and_docs_table_are_the_registrys():
    assert _experiment_help() == experiments.help_text()
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", (REPO / "docs" / "demo.md").read_text(), flags=re.M)
    assert [name for name, _ in rows] == experiments.names()
    for name, text in rows:
        assert text.replace("`", "").startswith(experiments.registry()[name].help), f"docs/demo.md's {name} row"


def test_a_new_experiment_is_one_module(package_with):
    package_with(experiments, experiments.registry.cache_clear, "toy", TOY_EXPERIMENT)
    assert experiments.names().index("toy") == experiments.names().index("towers") + 1  # PLACE 35: after towers (30)
    assert "toy: a throwaway experiment that writes one file (val)" in experiments.help_text()
    assert "toy.md" in experiments.files()
    assert experiments.get("toy").FILES == ("toy.md",)
    with pytest.raises(Exception, match="--experiment 'toi': choose from ablate, ladder, attribution, towers, toy"):
        experiments.get("toi")


def test_a_new_method_is_one_module(package_with):
    from mosaictool.cli.train import method_parameters, methods_epilog
    from mosaictool.demo import config

    package_with(methods, methods._registry.cache_clear, "toy", TOY_METHOD)
    assert methods.names()[:3] == ("clip", "toy", "negclip")  # place 15: between clip (10) and negclip (20)
    assert methods.create("toy", {"toy_weight": 0.2}).opts == {"toy_weight": 0.2}
    flag = next(p for p in method_parameters() if p.name == "toy_weight")
    assert flag.annotation.__metadata__[0].help == "The weight nobody reads, e.g. --toy-weight 0.2. Default: 0.5. [toy]"
    assert "toy: CLIP with a weight nobody reads" in methods_epilog()
    assert ("Toy", "toy", {}) in config.demo_rows() and "Toy" in config.wise_rows()


def test_a_benchmark_declares_what_it_reads_under_the_data_root():
    assert bench.data_names(bench.get("aro")) == ("aro/", "coco/", "flickr30k/")
    assert bench.data_names(bench.get("world-val")) == ("manifest.json", "val/")
    assert bench.data_names(bench.get("eqben")) == ("eqben/",)  # no declaration: the folder of its name
