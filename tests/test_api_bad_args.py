"""mosaictool.api given what a Python caller may pass by mistake: a str, float or bool where a whole
number belongs, None, NaN, a list or a number where a path belongs, a str where a list of paths
belongs, non-dict records, an output equal to the input. Each is MosaicError naming the argument
(the command line's errors name its flags), raised before anything is read or written (an unknown
keyword is Python's own TypeError)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import mosaictool
from mosaictool import api
from mosaictool.errors import MosaicError

REPO = Path(__file__).resolve().parent.parent
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
