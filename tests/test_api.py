"""mosaictool.api: each function on small data gives what its command gives (the same bytes, rows and
error messages), `import mosaictool` stays cheap, and the examples of the docstrings and docs/api.md
are the same and run."""

from __future__ import annotations

import doctest
import inspect
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mosaictool
from mosaictool import api
from mosaictool.cli import app
from mosaictool.errors import MosaicError
from train_fixtures import weights, write_tiny_model

REPO = Path(__file__).resolve().parent.parent
CAPTIONS = REPO / "examples" / "captions.jsonl"
# one function per command that makes or uses data, and read/write; in the order of docs/api.md
FUNCTIONS = [name for name in api.__all__ if inspect.isfunction(getattr(api, name))]


def cli(runner, *args) -> str:
    """Run `mosaictool ARGS` in-process; its stdout (it must succeed)."""
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.stderr[-2000:]
    return result.stdout


def cli_error(runner, *args) -> str:
    """Run `mosaictool ARGS`, which must fail with exit 1; its one-line message without `Error: `."""
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 1, (result.exit_code, result.stderr[-2000:])
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: "), result.stderr
    return line.removeprefix("Error: ")


def api_error(fn, *args, **kwargs) -> str:
    with pytest.raises(MosaicError) as e:
        result = fn(*args, **kwargs)
        if isinstance(result, api.Records):
            list(result)
    return str(e.value)


@pytest.fixture
def captions(tmp_path) -> Path:
    """The first 5 captions of examples/captions.jsonl."""
    path = tmp_path / "captions.jsonl"
    path.write_text("".join(CAPTIONS.read_text().splitlines(keepends=True)[:5]))
    return path


def test_import_is_cheap_and_exports_the_api():
    code = ("import sys, mosaictool\n"
            "print('torch' in sys.modules, 'spacy' in sys.modules, 'mosaictool.api' in sys.modules)\n"
            "names = [n for n in mosaictool.__all__ if callable(getattr(mosaictool, n))]\n"
            "print('torch' in sys.modules, 'spacy' in sys.modules, mosaictool.parse is mosaictool.api.parse)\n"
            "print(' '.join(names))")
    lines = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines[0].split() == ["False", "False", "False"]  # nothing loaded before it is used
    assert lines[1].split() == ["False", "False", "True"]  # the API itself loads neither torch nor spaCy
    exported = set(lines[2].split())
    # world and demo are mosaictool.api.world / .demo: mosaictool.world and mosaictool.demo are packages
    assert exported >= set(FUNCTIONS) - {"world", "demo"} and "MosaicError" in exported


def test_the_functions_are_the_apps_commands_in_every_list():
    """The app's registered commands are the one list: each is an API function (its name with _) or
    one of api.COMMANDS_ONLY; mosaictool's lazy names are the same functions (world and demo are
    packages there); docs/api.md has a section per function (checked with FUNCTIONS below)."""
    from typer.main import get_command

    commands = set(get_command(app).commands)
    assert commands == {n.replace("_", "-") for n in FUNCTIONS} - {"read", "write"} | set(api.COMMANDS_ONLY)
    assert set(mosaictool._API) == set(FUNCTIONS) - {"world", "demo"}
    sections = re.findall(r"^## (\w+)\(", (REPO / "docs" / "api.md").read_text(), flags=re.M)
    assert sections == FUNCTIONS


def test_graph_stages_give_the_cli_bytes(runner, captions, tmp_path):
    """parse -> decompose -> negate -> template, each flag given a non-default value: the API's records
    written with mosaictool.write are the command's output byte for byte, from a file or from dicts."""
    steps = [
        ("parse", ["--max-chars", "500"], dict(max_chars=500)),
        ("decompose", ["--max", "2", "--seed", "1"], dict(max_subgraphs=2, seed=1)),
        ("negate", ["--max", "4", "--probs", "0.2,0.4,0.4", "--text", "replace,shuffle", "--seed", "3"],
         dict(max_negatives=4, probs=(0.2, 0.4, 0.4), text=["replace", "shuffle"], seed=3)),
        ("template", ["--style", "varied", "--seed", "2"], dict(style="varied", seed=2)),
    ]
    source = captions
    for name, flags, kwargs in steps:
        by_cli, by_api = tmp_path / f"{name}-cli.jsonl", tmp_path / f"{name}-api.jsonl"
        cli(runner, name, source, *flags, "-o", by_cli, "-q")
        assert mosaictool.write(getattr(mosaictool, name)(source, **kwargs), by_api) == 5
        assert by_api.read_bytes() == by_cli.read_bytes(), name
        in_memory = list(getattr(mosaictool, name)(list(mosaictool.read(source)), **kwargs))
        assert in_memory == list(mosaictool.read(by_cli)), name
        source = by_cli
    assert all(r["texts"]["negatives"] for r in mosaictool.read(source))


def test_bad_records_fail_as_the_cli_does_or_are_counted(runner, captions, tmp_path):
    bad = tmp_path / "bad.jsonl"
    lines = captions.read_text().splitlines()
    bad.write_text("\n".join([lines[0], '{"id": "x"}', *lines[1:3]]) + "\n")
    message = api_error(mosaictool.parse, bad)
    assert message.startswith(f"{bad}:2: missing 'caption'") and "use skip_bad to skip" in message
    assert cli_error(runner, "parse", bad) == message.replace("text_key", "--text-key").replace("skip_bad", "--skip-bad")
    # records in memory are named by their number in the iterable
    records = [*mosaictool.read(captions)][:2] + [{"id": "x"}, {"caption": "no id"}]
    assert api_error(mosaictool.parse, records).startswith("record 3: missing 'caption'")
    assert api_error(mosaictool.read, records).startswith("record 4: missing 'id'")
    assert api_error(mosaictool.read, [{"id": 1, "when": {1, 2}}]).startswith("record 1: not JSON")
    graphs = mosaictool.parse(records, skip_bad=True, assign_ids=True)
    assert [r["id"] for r in graphs] == [records[0]["id"], records[1]["id"], 4]
    assert graphs.skips.count == 1 and graphs.skips.examples[0].startswith("record 3:")
    assert records[3] == {"caption": "no id"}, "the caller's dicts are never changed"


def test_bad_values_fail_as_the_cli_does_naming_the_argument(runner, captions, tmp_path):
    """The same check fails from Python and from the command line, each in its own words: the
    argument the caller passed, the flag the user gave."""
    out = tmp_path / "out"
    cases = [
        (["parse", captions, "--workers", "0"], mosaictool.parse, (captions,), dict(workers=0),
         "batch_size, workers and max_chars must be at least 1"),
        (["decompose", captions, "--max", "0"], mosaictool.decompose, (captions,), dict(max_subgraphs=0),
         "max_subgraphs must be at least 1"),
        (["negate", captions, "--probs", "1,x"], mosaictool.negate, (captions,), dict(probs="1,x"),
         "probs must be three non-negative numbers 'obj,attr,rel' with a positive sum, got '1,x'"),
        (["negate", captions, "--text", "bogus"], mosaictool.negate, (captions,), dict(text=["bogus"]),
         "text: unknown method(s) bogus; choose from negclip,replace,shuffle,order"),
        (["template", captions, "--style", "fancy"], mosaictool.template, (captions,), dict(style="fancy"),
         "style must be one of plain, varied, got 'fancy'"),
        (["shard", captions, "--out", out, "--shard-size", "0"], mosaictool.shard, (captions,), dict(out=out, shard_size=0),
         "shard_size must be at least 1"),
        (["world", "--out", out, "--workers", "0"], api.world, (out,), dict(workers=0), "workers 0: must be a whole number >= 1"),
        (["train", "--data", captions, "--out", out, "--crop-scale", "1"], mosaictool.train, (captions,),
         dict(out=out, crop_scale="1"), "crop_scale '1': two numbers LOW,HIGH, e.g. 0.8,1"),
        (["train", "--resume", out, "--max-pos", "2"], mosaictool.train, (), dict(resume=out, max_pos=2),
         "resume uses the run's stored options; leave out max_pos"),
        (["wise-ft", "--zeroshot", "a.pt", "--finetuned", "b.pt", "--out", out, "--alpha", "a,b"], mosaictool.wise_ft,
         ("a.pt",), dict(finetuned="b.pt", out=out, alpha="a,b"), "alpha 'a,b': expected comma-separated numbers like 0,0.25,0.5,0.75,1"),
        (["evaluate", "--bench", "world", "--limit", "0"], mosaictool.evaluate, ("world",), dict(limit=0),
         "limit and batch_size must be at least 1"),
        (["tree-score", captions, "--model", "m", "--positions", "odd"], mosaictool.tree_score, (captions,),
         dict(model="m", positions="odd"), "positions must be one of original, shifted, not 'odd'"),
        (["demo", "--preset", "cpu"], api.demo, (), dict(preset="cpu"), "preset 'cpu': the one preset is gpu"),
    ]
    for args, fn, positional, kwargs, words in cases:
        by_api, by_cli = api_error(fn, *positional, **kwargs), cli_error(runner, *args)
        assert by_api.startswith(words), by_api
        flags = {a for a in args if isinstance(a, str) and a.startswith("--")}
        assert not any(f in by_api for f in flags), by_api
        reworded = by_cli
        for flag, argument in api._argument_table([*kwargs, "batch_size", "max_chars"]).items():
            reworded = re.sub(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", argument, reworded)
        assert by_api == reworded.replace("--max-pos", "max_pos").replace("--quick", "quick"), (by_api, by_cli)
    assert not out.exists()


def test_demo_runs_the_config_the_cli_runs(runner, tmp_path, monkeypatch):
    import mosaictool.demo

    configs = []
    found = dict(table="| row |", power=None, summary={}, wise={}, rows=[], minutes=0.1, selection=None,
                 control={"verdict": "control: ok"}, headline=None, mde={})
    monkeypatch.setattr(mosaictool.demo, "run_demo", lambda cfg: configs.append(cfg) or found)
    shown = cli(runner, "demo", "--quick", "--out", tmp_path / "d", "--seeds", "2", "-x", "ablate", "--device", "cpu",
                "--cache-dir", tmp_path / "cache", "--teach-steps", "9", "--teach-lr", "0.002", "--scratch-seeds", "2")
    assert api.demo(quick=True, out=tmp_path / "d", seeds=2, experiments=["ablate"], device="cpu",
                    cache_dir=str(tmp_path / "cache"), teach_steps=9, teach_lr=0.002, scratch_seeds=2).to_dict() == found
    assert shown == "| row |\n\ncontrol: ok\n"  # the command prints the table the API returns
    assert configs[0] == configs[1] and configs[0].seeds == 2 and configs[0].experiments == ("ablate",)
    assert (configs[0].teach_steps, configs[0].teach_lr, configs[0].scratch_seeds) == (9, 0.002, 2)
    assert "unknown demo setting(s) sedes" in api_error(api.demo, sedes=2)


def test_world_and_shard_give_the_cli_files(runner, tmp_path):
    cli(runner, "world", "--out", tmp_path / "w-cli", "--train", "12", "--eval-scale", "0.02", "--seed", "3", "-q")
    world = api.world(tmp_path / "w-api", train=12, eval_scale=0.02, seed=3, quiet=True)
    assert world.counts["train"]["records"] == 12 and world.out == tmp_path / "w-api"
    assert json.dumps(world.to_dict(), sort_keys=True) == json.dumps(json.loads((world.out / "manifest.json").read_text()), sort_keys=True)

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    assert files(tmp_path / "w-api") == files(tmp_path / "w-cli")
    captions = tmp_path / "w-cli" / "train" / "captions.jsonl"
    cli(runner, "shard", captions, "--out", tmp_path / "s-cli", "--image-root", captions.parent, "--shard-size", "5", "-q")
    shards = mosaictool.shard(captions, out=tmp_path / "s-api", image_root=captions.parent, shard_size=5, quiet=True)
    assert shards.samples == 12 and shards.sizes == {"000000.tar": 5, "000001.tar": 5, "000002.tar": 2}
    assert files(tmp_path / "s-api") == files(tmp_path / "s-cli")


@pytest.mark.slow
def test_train_wise_ft_evaluate_tree_score_give_the_cli_results(runner, tmp_path, monkeypatch):
    import torch

    monkeypatch.chdir(tmp_path)  # the checkpoints' labels in the rows are the paths given
    api.world("w", train=24, eval_scale=0.02, quiet=True)
    config = write_tiny_model(tmp_path)
    flags = dict(model_config=str(config), batch_size=8, steps=2, seed=1, device="cpu", quiet=True)
    cli(runner, "train", "--data", "w/train/captions.jsonl", "--out", "runs/cli", *_flags(flags))
    final = mosaictool.train("w/train/captions.jsonl", out="runs/api", **flags)
    assert final == Path("runs/api/final.pt")

    same = weights("runs/cli/final.pt")
    assert all(torch.equal(v, same[k]) for k, v in weights(final).items())
    mosaictool.train("w/train/captions.jsonl", out="runs/base", **{**flags, "steps": 1})

    printed = cli(runner, "wise-ft", "--zeroshot", "runs/base/final.pt", "--finetuned", final, "--alpha", "0.5",
                  "--out", "wise-cli", "--device", "cpu")
    paths = mosaictool.wise_ft("runs/base/final.pt", finetuned=final, alpha=[0.5], out="wise-api", device="cpu")
    assert [p.name for p in paths] == [Path(printed.strip()).name]
    assert all(torch.equal(v, weights(printed.strip())[k]) for k, v in weights(paths[0]).items())

    cli(runner, "evaluate", "--bench", "world", "-c", final, "--data-root", "w", "--limit", "4", "--device", "cpu", "-q",
        "-o", "eval-cli.jsonl")
    rows = mosaictool.evaluate("world", checkpoints=[final], data_root="w", limit=4, device="cpu", quiet=True,
                               output="eval-api.jsonl").rows
    assert Path("eval-api.jsonl").read_bytes() == Path("eval-cli.jsonl").read_bytes()
    assert rows and len(rows) == Path("eval-cli.jsonl").read_bytes().count(b"\n")  # the same rows (NaN is JSON's null)

    cli(runner, "tree-score", CAPTIONS, "--checkpoint", final, "--limit", "5", "--device", "cpu", "-q", "-o", "trees-cli.jsonl")
    scores = mosaictool.tree_score(CAPTIONS, checkpoints=[final], limit=5, device="cpu", quiet=True)
    assert mosaictool.write(scores, "trees-api.jsonl") == 5
    assert Path("trees-api.jsonl").read_bytes() == Path("trees-cli.jsonl").read_bytes()
    assert scores.summary["models"][0]["model"] == str(final) and "captions scored" in scores.summary_text()


def _flags(kwargs: dict) -> list[str]:
    out = []
    for name, value in kwargs.items():
        flag = "--" + name.replace("_", "-")
        out += [flag] if value is True else [flag, str(value)]
    return out


# ---------------------------------------------------------------------------------------------
# The examples: one per function, in its docstring and in docs/api.md


def _examples(fn) -> str:
    """The doctest lines of a docstring (prompts and expected output), dedented."""
    doc = inspect.cleandoc(fn.__doc__ or "")
    block = doc[doc.index(">>>"):] if ">>>" in doc else ""
    return "\n".join(line for line in block.splitlines() if line.strip())


def test_every_function_has_a_summary_and_one_example_also_in_the_docs():
    docs = "\n".join(text for _, text in _doc_blocks())
    for name in FUNCTIONS:
        fn = getattr(api, name)
        doc = inspect.cleandoc(fn.__doc__)
        assert doc.split("\n\n")[0] and _examples(fn), name
        params = list(inspect.signature(fn).parameters.values())
        positional = [i for i, p in enumerate(params) if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert positional == [0, 1][:len(positional)] and len(positional) <= (2 if name == "write" else 1), \
            f"{name}: keyword-only after the first argument"
        assert _examples(fn) in docs, f"docs/api.md does not show {name}'s docstring example"


def _doc_blocks() -> list[tuple[str, str]]:
    """docs/api.md's ```pycon blocks, each with the name of the section it is in."""
    blocks, section, block = [], "intro", None
    for line in (REPO / "docs" / "api.md").read_text().splitlines():
        if line.startswith("## "):
            section = re.match(r"## (\w+)", line).group(1)
        elif line == "```pycon":
            block = []
        elif line == "```" and block is not None:
            blocks.append((section, "\n".join(block) + "\n"))
            block = None
        elif block is not None:
            block.append(line)
    return blocks


@pytest.mark.slow
def test_the_docs_examples_run(tmp_path, monkeypatch):
    """docs/api.md's examples (the docstrings' and the introduction's) run in order in a folder
    holding a copy of examples/ and give what they show; the demo's takes minutes: shown, not run."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    blocks = _doc_blocks()
    assert [name for name, _ in blocks] == ["intro", *FUNCTIONS]
    globs: dict = {}
    runner = doctest.DocTestRunner()
    for name, text in blocks:
        if name == "wise_ft":  # its example starts from runs/base: a model to go back towards
            mosaictool.train("shards", out="runs/base", batch_size=8, steps=1, seed=1, quiet=True)
        test = doctest.DocTestParser().get_doctest(text, {}, name, "docs/api.md", 0)
        test.globs = globs  # one session: `import mosaictool` in the introduction holds for every example
        result = runner.run(test, clear_globs=False)
        assert result.failed == 0, name
        assert result.attempted > 0 or name == "demo", name
        if name == "intro":
            assert Path("texts.jsonl").read_bytes().count(b"\n") == 60


# --- bad input (moved from test_api_bad_args.py) ---

NAN = math.nan


# (function, positional args, keyword that is wrong, its value, words the message holds); `{tmp}` in a
# positional arg or `out` is the test's folder
CASES = [
    ("parse", ["captions"], "batch_size", "10", "batch_size '10': must be a whole number, not a string"),
    ("parse", ["captions"], "batch_size", 2.5, "batch_size 2.5: must be a whole number, not float"),
    ("parse", ["captions"], "workers", True, "workers True: must be a whole number, not bool"),
    ("parse", ["captions"], "max_chars", None, "max_chars None: must be a whole number"),
    ("parse", ["captions"], "text_key", 5, "text_key 5: must be a string"),
    ("read", ["captions"], "skip_bad", "yes", "skip_bad 'yes': must be True or False"),
    ("decompose", [[]], "max_subgraphs", "2", "max_subgraphs '2': must be a whole number"),
    ("decompose", [[]], "max_subgraphs", 1.5, "max_subgraphs 1.5: must be a whole number"),
    ("decompose", [[]], "seed", 1.5, "seed 1.5: must be a whole number"),
    ("decompose", [[]], "max_keys", math.inf, "max_keys inf: must be a whole number"),
    ("negate", [[]], "max_negatives", True, "max_negatives True: must be a whole number"),
    ("negate", [[]], "seed", None, "seed None: must be a whole number"),
    ("negate", [[]], "probs", 5, "probs 5: must be a string or a list, each a finite number"),
    ("negate", [[]], "text", 5, "text 5: must be a string or a list, each a string"),
    ("template", [[]], "seed", 2.5, "seed 2.5: must be a whole number"),
    ("template", [[]], "vocab", 5, "vocab 5: must be a string, a path or None"),
    ("texts_report", [[]], "sample", "5", "sample '5': must be a whole number"),
    ("texts_report", [[]], "vocab", 5, "vocab 5: must be a string, a path or None"),
    ("write", [[{"id": 1}]], "path", 5, "path 5: must be a string or a path"),
    ("write", [[{"id": 1}]], "path", ["x.jsonl"], "path ['x.jsonl']: must be a string or a path"),
    ("shard", ["captions"], "shard_size", "10", "shard_size '10': must be a whole number"),
    ("shard", ["captions"], "shard_size", 2.5, "shard_size 2.5: must be a whole number"),
    ("shard", ["captions"], "shard_size", True, "shard_size True: must be a whole number"),
    ("shard", ["captions"], "out", None, "out None: must be a string or a path"),
    ("shard", ["captions"], "image_root", 5, "image_root 5: must be a string or a path"),
    ("world", ["{tmp}/w"], "train", "40", "train '40': must be a whole number"),
    ("world", ["{tmp}/w"], "train", True, "train True: must be a whole number"),
    ("world", ["{tmp}/w"], "seed", "1", "seed '1': must be a whole number"),
    ("world", ["{tmp}/w"], "image_size", 64.0, "image_size 64.0: must be a whole number"),
    ("world", ["{tmp}/w"], "eval_scale", NAN, "eval_scale nan: must be a finite number > 0"),
    ("world", [None], "train", 40, "out None: must be a string or a path"),
    ("train", ["captions"], "steps", "2", "steps '2': must be a whole number >= 1"),
    ("train", ["captions"], "steps", 2.7, "steps 2.7: must be a whole number >= 1"),
    ("train", ["captions"], "steps", True, "steps True: must be a whole number >= 1"),
    ("train", ["captions"], "batch_size", 4.0, "batch_size 4.0: must be a whole number >= 1"),
    ("train", ["captions"], "lr", "1e-3", "lr '1e-3': must be a finite number > 0"),
    ("train", ["captions"], "lr", True, "lr True: must be a finite number > 0"),
    ("train", ["captions"], "lr", NAN, "lr nan: must be a finite number > 0"),
    ("train", ["captions"], "seed", 1.0, "seed 1.0: must be a whole number >= 0"),
    ("train", ["captions"], "momentum", "0.9", "momentum '0.9': must be a finite number >= 0"),
    ("train", ["captions"], "augment", "no", "augment 'no': must be true or false"),
    ("train", ["captions"], "lock_image", 1, "lock_image 1: must be true or false"),
    ("train", ["captions"], "lora", True, "lora True: must be a whole number >= 0"),
    ("train", ["captions"], "crop_scale", 5, "crop_scale 5: must be a string or a list"),
    ("train", [["captions"]], "seed", 0, "must be a string, a path or None, not list"),
    ("train", ["captions"], "max_pos", "3", "max_pos '3': must be a whole number, not str"),
    ("train", ["captions"], "max_pos", 2.5, "max_pos 2.5: must be a whole number, not float"),
    ("wise_ft", ["a.pt"], "alpha", None, "alpha None: must be a finite number, a string or a list"),
    ("wise_ft", ["a.pt"], "alpha", True, "alpha True: must be a finite number"),
    ("wise_ft", ["a.pt"], "alpha", [[1]], "alpha [[1]]: must be"),
    ("wise_ft", [None], "alpha", 0.5, "zeroshot None: must be a string or a path"),
    ("evaluate", ["world"], "limit", "5", "limit '5': must be a whole number or None"),
    ("evaluate", ["world"], "limit", 2.5, "limit 2.5: must be a whole number or None"),
    ("evaluate", ["world"], "batch_size", True, "batch_size True: must be a whole number"),
    ("evaluate", ["world"], "workers", None, "workers None: must be a whole number"),
    ("evaluate", ["world"], "checkpoints", "a.pt", "checkpoints 'a.pt': must be a list, each a string or a path, not a string"),
    ("evaluate", [5], "limit", None, "bench 5: must be a string, a list, each a string or None"),
    ("evaluate", ["world"], "data_root", ["."], "data_root ['.']: must be a string or a path"),
    ("tree_score", ["captions"], "checkpoints", "a.pt", "checkpoints 'a.pt': must be a list"),
    ("tree_score", ["captions"], "layer_threshold", "x", "layer_threshold 'x': must be a whole number"),
    ("demo", [], "seeds", "2", "seeds '2': must be a whole number >= 1"),
    ("demo", [], "seeds", 2.5, "seeds 2.5: must be a whole number >= 1"),
    ("demo", [], "seeds", True, "seeds True: must be a whole number >= 1"),
    ("demo", [], "finetune_lr", NAN, "finetune_lr nan: must be a finite number > 0"),
    ("demo", [], "quick", "yes", "quick 'yes': must be True or False"),
    ("demo", [], "experiments", 5, "experiments 5: must be a list"),
]


# what each function needs besides the wrong argument, so that only that argument is wrong
NEEDS = {"shard": {"out": "{tmp}/shards"}, "train": {"out": "{tmp}/run", "method": "clip"},
         "wise_ft": {"finetuned": "b.pt", "out": "{tmp}/wise"}, "evaluate": {"checkpoints": ["a.pt"]},
         "tree_score": {"model": "m"}, "demo": {"out": "{tmp}/demo"}}


def _fill(value, tmp: Path, captions: Path):
    if value == "captions":
        return captions
    if isinstance(value, list):
        return [_fill(v, tmp, captions) if v == "captions" else v for v in value]
    return value.replace("{tmp}", str(tmp)) if isinstance(value, str) else value


def assert_refused(tmp_path: Path, captions: Path, fn: str, args: list, kwargs: dict, words: str) -> None:
    """api.<fn>(*args, **kwargs) raises one MosaicError line holding `words`, writing nothing."""
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(MosaicError) as e:
        result = getattr(api, fn)(*[_fill(a, tmp_path, captions) for a in args], **kwargs)
        if isinstance(result, api.Records):
            list(result)
    assert words in str(e.value)
    assert "\n" not in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "nothing written"


@pytest.mark.parametrize("fn, args, name, value, words", CASES,
                         ids=[f"{c[0]}-{c[2]}={c[3]!r}" for c in CASES])
def test_a_wrong_type_or_value_is_refused_naming_the_argument(tmp_path, monkeypatch, fn, args, name, value, words):
    import mosaictool.demo

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(mosaictool.demo, "run_demo", lambda cfg: pytest.fail("the demo ran"))
    captions = tmp_path / "captions.jsonl"
    captions.write_text((REPO / "examples" / "captions.jsonl").read_text().splitlines()[0] + "\n")
    if fn == "train" and name == "max_pos":
        NEEDS["train"]["method"] = "mosaiclip"
    kwargs = {k: _fill(v, tmp_path, captions) for k, v in NEEDS.get(fn, {}).items()}
    NEEDS["train"]["method"] = "clip"
    assert_refused(tmp_path, captions, fn, args, {**kwargs, name: value}, words)


@pytest.mark.parametrize("fn", ["parse", "shard", "evaluate", "world", "train"])
def test_an_unknown_keyword_is_pythons_type_error(fn):
    """(train's keywords are TrainConfig's settings and the methods' options; demo's, DemoConfig's: see test_api)"""
    with pytest.raises(TypeError, match=rf"{fn}\(\) got an unexpected keyword argument 'bogus'"):
        getattr(api, fn)("x.jsonl", bogus=1)


def test_write_refuses_non_dicts_none_and_its_own_input(tmp_path):
    out = tmp_path / "out.jsonl"
    with pytest.raises(MosaicError, match=r"^record 2: expected a dict, got int; nothing written$"):
        mosaictool.write(iter([{"id": 1}, 2]), out)
    with pytest.raises(MosaicError, match=r"^records: give an iterable of records \(dicts\), not NoneType$"):
        mosaictool.write(None, out)
    assert not out.exists()
    captions = tmp_path / "captions.jsonl"
    captions.write_text('{"id": 1, "caption": "a red cube"}\n')
    before = captions.read_bytes()
    for records in (mosaictool.read(captions), mosaictool.template(mosaictool.read(captions))):
        with pytest.raises(MosaicError, match="is the input"):
            mosaictool.write(records, captions)
        assert captions.read_bytes() == before


def test_a_generator_that_raises_midway_leaves_nothing(tmp_path):
    """The caller's own exception comes back unchanged (it is theirs to read), and no output is left."""
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "x.png")

    def records():
        yield {"id": 1, "caption": "a red cube", "image": "x.png"}
        raise RuntimeError("the caller's bug")

    with pytest.raises(RuntimeError, match="the caller's bug"):
        mosaictool.write(records(), tmp_path / "out.jsonl")
    with pytest.raises(RuntimeError, match="the caller's bug"):
        mosaictool.shard(records(), out=tmp_path / "shards", image_root=tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.name != "x.png") in ([], ["shards"])
    assert not list((tmp_path / "shards").glob("*")) if (tmp_path / "shards").exists() else True


# Worker counts and sizes beyond what the machine holds: refused before a process is forked or a byte
# allocated (the memory is fixed at 8 GiB so that the cases do not depend on the machine running them).
TOO_BIG = [
    ("parse", ["captions"], {}, "workers", 10000, "workers 10000: must be a whole number >= 1 and <= "),
    ("negate", [[]], {}, "workers", 10000, "workers 10000: must be a whole number >= 1 and <= "),
    ("world", ["{tmp}/w"], {}, "workers", 10000, "workers 10000: must be a whole number >= 1 and <= "),
    ("evaluate", ["world"], {"checkpoints": ["a.pt"]}, "workers", 10000, "workers 10000: must be a whole number >= 0 and <= "),
    ("train", ["captions"], {}, "num_workers", 10000, "num_workers 10000: must be a whole number >= 0 and <= "),
    ("demo", [], {}, "workers", 10000, "workers 10000: must be a whole number >= 1 and <= "),
    ("demo", [], {}, "loader_workers", 10000, "loader_workers 10000: must be a whole number >= 0 and <= "),
    ("world", ["{tmp}/w"], {}, "train", 10**12, "train 1000000000000: ~1,000,000,000,000 train records need"),
    ("world", ["{tmp}/w"], {}, "eval_scale", 1e6, "eval_scale 1e+06: ~"),
    ("train", ["captions"], {"method": "mosaiclip"}, "max_pos", 10**6, "max_pos/max_neg (1000000 positive and 6 negative"),
    ("train", ["captions"], {"method": "mosaiclip"}, "max_neg", 10**6, "(3 positive and 1000000 negative texts per image)"),
    ("train", ["captions"], {"method": "fsc-clip"}, "hn_per_image", 10**6, "hn_per_image (1 positive and 1000000 negative"),
    ("train", ["captions"], {}, "accum_freq", 10**6, "accum_freq 1000000 x batch_size 32: the micro-batches of one step"),
    ("train", ["captions"], {}, "lora", 10**6, "lora 1000000: above the width of this model's attention layers"),
]


@pytest.mark.parametrize("fn, args, extra, name, value, words", TOO_BIG, ids=[f"{c[0]}-{c[3]}={c[4]!r}" for c in TOO_BIG])
def test_too_many_workers_or_more_than_the_machine_holds_is_refused_naming_the_argument(tmp_path, monkeypatch, fn, args, extra,
                                                                                  name, value, words):
    import mosaictool.demo
    from mosaictool import records

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(mosaictool.demo, "run_demo", lambda cfg: pytest.fail("the demo ran"))
    monkeypatch.setattr(records, "machine_memory", lambda: 8 * 2**30, raising=False)
    captions = tmp_path / "captions.jsonl"
    captions.write_text((REPO / "examples" / "captions.jsonl").read_text().splitlines()[0] + "\n")
    kwargs = {k: _fill(v, tmp_path, captions) for k, v in {**NEEDS.get(fn, {}), **extra}.items()}
    assert_refused(tmp_path, captions, fn, args, {**kwargs, name: value}, words)



# The stages' checks write the name they report (no rewrite of a finished message): told to name
# arguments in some other way, every name in their messages is that way, and none is a flag.
def _marked(argument: str, off: bool = False) -> str:
    return f"<{argument}{'=off' if off else ''}>"


@pytest.mark.parametrize("stage, make, record, words", [
    ("parse", lambda: ("caption", 2000), {"id": 1, "text": "a dog"}, ["<text_key>"]),
    ("parse", lambda: ("caption", 3), {"id": 1, "caption": "a dog"}, ["<max_chars> 3"]),
    ("decompose", lambda: ("caption", True), {"id": 1, "graph": {"entities": [], "attributes": [], "relations": []}},
     ["<text_key>", "<caption=off>"]),
    ("negate", lambda: (("negclip",), "caption"), {"id": 1, "caption": " ", "subgraphs": [],
                                                   "graph": {"entities": [], "attributes": [], "relations": []}}, ["<text>"]),
], ids=["parse-key", "parse-length", "decompose-key", "negate-empty"])
def test_a_stage_check_names_the_arguments_as_it_is_told(stage, make, record, words):
    import importlib

    from mosaictool.errors import RecordError

    check = importlib.import_module(f"mosaictool.stages.{stage}").make_check(*make(), _marked)
    with pytest.raises(RecordError) as caught:
        check(record)
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))
    assert "--" not in str(caught.value)


@pytest.mark.parametrize(("call", "message"), [
    # a value that looks like a flag stays as the caller gave it: the check named the argument already
    (lambda: list(mosaictool.negate([], text=["negclip", "--max"])), "text: unknown method(s) --max;"),
    (lambda: list(mosaictool.negate([], probs="--probs")),
     "probs must be three non-negative numbers 'obj,attr,rel' with a positive sum, got '--probs'"),
    (lambda: list(mosaictool.decompose([], max_subgraphs=0)), "max_subgraphs must be at least 1"),
])
def test_an_argument_checks_message_is_not_rewritten_after_it_named_the_argument(call, message):
    with pytest.raises(MosaicError) as caught:
        call()
    assert str(caught.value).startswith(message), str(caught.value)
