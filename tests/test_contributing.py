"""CONTRIBUTING.md's worked examples run: each python block whose first line is `# file: PATH` (a new
module) or `# in: PATH, class NAME` (lines of a class) is taken from the file, put where the
registry finds it, and shown where a user meets it: the benchmark in the registry and `evaluate
--list`, the method and the training flag in `train --help`, the experiment in `demo --experiment`'s
help and the files the demo may write."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import typer

from mosaictool import bench, methods
from mosaictool.demo import experiments

REPO = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```python\n# (file|in): ([^\n]+)\n(.*?)^```$", re.M | re.S)


def examples() -> dict[str, str]:
    """The marked blocks of CONTRIBUTING.md: the file (or `in:` place) each names -> its code."""
    return {where: code for _kind, where, code in BLOCK.findall((REPO / "CONTRIBUTING.md").read_text(encoding="utf-8"))}


def example(path: str) -> str:
    found = examples()
    assert path in found, f"CONTRIBUTING.md has no block marked `# file: {path}` (it has {sorted(found)})"
    return found[path]


@pytest.fixture
def in_package(tmp_path, monkeypatch):
    """Write CONTRIBUTING.md's module `path` beside its package (on the package's __path__, as a new file
    of the package is found) for one test; the registries forget it afterwards."""

    def add(package, path: str) -> None:
        name = Path(path).stem
        (tmp_path / f"{name}.py").write_text(example(path), encoding="utf-8")
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
        monkeypatch.delitem(sys.modules, f"{package.__name__}.{name}", raising=False)
        clear()

    def clear() -> None:
        bench.registry.cache_clear()
        methods._registry.cache_clear()
        experiments.registry.cache_clear()

    yield add
    monkeypatch.undo()
    clear()


def test_every_example_is_marked_and_compiles():
    found = examples()
    assert set(found) == {"mosaictool/bench/caption_pairs.py", "mosaictool/methods/multi_neg.py",
                          "mosaictool/demo/experiments/rows.py", "mosaictool/training/config.py, class TrainConfig"}
    for where, code in found.items():
        if where.startswith("mosaictool/") and where.endswith(".py"):
            assert not (REPO / where).exists(), f"{where}: the example would hide a real module of that name"
            compile(code, where, "exec")


def test_the_benchmark_example_is_listed_loads_and_scores(in_package, tmp_path, runner):
    in_package(bench, "mosaictool/bench/caption_pairs.py")
    b = bench.get("caption-pairs")
    assert bench.data_names(b) == ("caption_pairs/",)
    from mosaictool.cli import app

    listed = runner.invoke(app, ["evaluate", "--list"])
    assert listed.exit_code == 0, listed.output
    assert "caption-pairs" in listed.output and "caption_pairs/test.jsonl" in listed.output

    root = tmp_path / "data"
    (root / "caption_pairs").mkdir(parents=True)
    lines = [{"image": "images/1.jpg", "caption": "a dog on a sofa", "negative": "a sofa on a dog"},
             {"image": "images/2.jpg", "caption": "a red cup", "negative": "a cup that is not red"}]
    (root / "caption_pairs" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    items = b.load(root)
    assert [it.texts for it in items] == [["a dog on a sofa", "a sofa on a dog"], ["a red cup", "a cup that is not red"]]
    assert items[0].images[0].path == str(root / "caption_pairs" / "images" / "1.jpg")
    assert len(b.load(root, limit=1)) == 1
    rows = b.score(items, [np.array([[0.3, 0.2]]), np.array([[0.4, 0.4]])])  # the tie is wrong
    assert {(r["subtask"], r["metric"]): r["value"] for r in rows} == {("all", "accuracy"): 0.5, ("headline", "accuracy"): 0.5}

    (root / "caption_pairs" / "test.jsonl").write_text(json.dumps(lines[0]) + "\n{\"image\": 1}\n")
    with pytest.raises(Exception, match=r"test\.jsonl:2: KeyError\('caption'\)"):
        b.load(root)


def _train_help(runner) -> str:
    """`mosaictool train --help` of an app made now (the command's flags are read from TrainConfig and
    the method registry when it registers)."""
    from mosaictool.cli import train

    app = typer.Typer(rich_markup_mode=None)
    app.callback()(lambda: None)
    train.register(app)
    shown = runner.invoke(app, ["train", "--help"], terminal_width=400)
    assert shown.exit_code == 0, shown.output
    return " ".join(shown.output.split())


def test_the_method_example_is_a_method_with_its_flag(in_package, runner):
    in_package(methods, "mosaictool/methods/multi_neg.py")
    assert methods.names()[:3] == ("clip", "negclip", "multi-neg")  # place 25: after negclip (20)
    method = methods.create("multi-neg", {"negs": 3})
    assert method.slots(0, 10) == (1, 3)
    record = {"caption": "a dog on a sofa",
              "texts": {"negatives": [{"kind": "text", "text": t} for t in ("a sofa on a dog", "a cat on a sofa")]
                        + [{"kind": "graph", "text": "a dog under a sofa"}]}}
    chosen = method.select(record, random.Random(0), 1, 3)
    assert chosen.pos == ["a dog on a sofa"] and sorted(chosen.neg) == ["a cat on a sofa", "a sofa on a dog"]
    with pytest.raises(Exception, match="--negs 0: must be at least 1"):
        methods.create("multi-neg", {"negs": 0})
    shown = _train_help(runner)
    assert "--negs <int> Text negatives per image, e.g. --negs 4. Default: 2. [multi-neg]" in shown
    assert "multi-neg: NegCLIP with --negs text negatives per image." in shown


def test_the_experiment_example_is_listed_and_writes_its_file(in_package, tmp_path):
    in_package(experiments, "mosaictool/demo/experiments/rows.py")
    assert experiments.names()[-1] == "rows"  # PLACE 90: last
    assert "rows: the table's scored rows as rows.csv (nothing trained)" in experiments.help_text()
    assert "rows.csv" in experiments.files()
    table = [{"model": "CLIP s0", "benchmark": "world", "subtask": "headline", "metric": "accuracy", "value": 0.5, "n": 8,
              "detail": False}]
    ctx = experiments.Context(cfg=None, shards=None, plain_shards=None, base=None, world=None, out=tmp_path, table_rows=table)
    section = experiments.run("rows", ctx)
    assert section.files == [tmp_path / "rows.csv"]
    assert (tmp_path / "rows.csv").read_text() == "model,benchmark,subtask,metric,value,n\nCLIP s0,world,headline,accuracy,0.5,8\n"


def test_the_training_flag_example_is_a_flag(runner, monkeypatch):
    from mosaictool.cli import train
    from mosaictool.training import config

    where = "mosaictool/training/config.py, class TrainConfig"
    namespace = vars(config).copy()
    exec(compile("class TrainConfig(TrainConfig):\n" + textwrap.indent(textwrap.dedent(example(where)), "    "), where, "exec"),
         namespace)
    extended = dataclasses.dataclass(namespace["TrainConfig"])
    assert extended(data="d", out="o").logit_scale_max == 100.0
    monkeypatch.setattr(train, "TrainConfig", extended)
    assert "--logit-scale-max <float> Clamp the learned temperature exp(logit_scale) to at most this after each step " \
           "(CLIP's 100: Radford et al. 2021, Sec. 2.5), e.g. --logit-scale-max 50. [default: 100.0]" in _train_help(runner)
