"""Meaningless values of list-like and seldom-probed flags: evaluate --bench items (empty, named
twice, empty subtask lists), negate --text / --probs, wise-ft --alpha items, tree-score --seed /
--limit and its --gold trees, and a folder or FIFO given to evaluate -c. Each refused case: exit
1, one `Error:` line naming the flag (or file:line), no traceback, inputs byte-identical, nothing
written."""

from __future__ import annotations

import json
import os

import pytest

from test_bad_values import refused_leaving_files as refused

# ---- evaluate --bench -----------------------------------------------------------------------------------

BENCH = {
    "empty item": ("aro,,sugarcrepe", "empty item"),
    "trailing comma": ("aro,", "empty item"),
    "benchmark twice": ("sugarcrepe,sugarcrepe", "sugarcrepe is named twice"),
    "whole and subtask": ("aro,aro:VG-Relation", "aro is named twice"),
    "empty subtask list": ("aro:", "empty subtask"),
    "only a plus": ("aro:+", "empty subtask"),
    "empty subtask between plus": ("aro:VG-Relation++VG-Attribution", "empty subtask"),
    "subtask twice": ("aro:VG-Relation+VG-Relation", "named twice"),
}


@pytest.mark.parametrize("spec, needle", BENCH.values(), ids=list(BENCH))
def test_bad_bench_lists(tmp_path, spec, needle):
    (tmp_path / "root").mkdir()
    refused(tmp_path, ["evaluate", "-b", spec, "-c", tmp_path / "m.pt", "-d", tmp_path / "root", "-o", tmp_path / "r.jsonl"],
            "--bench", needle)


def test_bench_spec_keeps_spaces_and_subtasks():
    from mosaictool.bench.engine import parse_bench_spec

    assert parse_bench_spec(" aro : VG-Relation + COCO-Order , sugarcrepe") == [("aro", ["VG-Relation", "COCO-Order"]),
                                                                               ("sugarcrepe", None)]


# ---- evaluate -c: a folder or FIFO is not a checkpoint -----------------------------------------------------


@pytest.mark.parametrize("kind", ["folder", "FIFO"])
def test_evaluate_checkpoint_not_a_file(tmp_path, kind):
    (tmp_path / "root").mkdir()
    ckpt = tmp_path / "m.pt"
    ckpt.mkdir() if kind == "folder" else os.mkfifo(ckpt)
    words = "a folder" if kind == "folder" else "a FIFO"
    refused(tmp_path, ["evaluate", "-b", "sugarcrepe", "-c", ckpt, "-d", tmp_path / "root", "-o", tmp_path / "r.jsonl"],
            f"{ckpt}: not a weights file ({words}")


# ---- negate --text / --probs ---------------------------------------------------------------------------

NEGATE = {
    "text empty item": (["--text", "negclip,,replace"], "--text 'negclip,,replace'", "empty item"),
    "text trailing comma": (["--text", "replace,"], "--text", "empty item"),
    "text only a comma": (["--text", ","], "--text", "empty item"),
    "text twice": (["--text", "replace,replace"], "--text", "replace is named twice"),
    "text unknown": (["--text", "wordnet"], "--text", "unknown method(s) wordnet"),
    "probs sum 3": (["--probs", "1,1,1"], "--probs '1,1,1'", "sum to 1, these sum to 3"),
    "probs sum 0.6": (["--probs", "0.2,0.2,0.2"], "--probs", "sum to 0.6"),
    "probs overflow": (["--probs", "1e308,1e308,1e308"], "--probs", ""),
    "probs four": (["--probs", "0.25,0.25,0.25,0.25"], "--probs", "three"),
    "probs text": (["--probs", "obj,attr,rel"], "--probs", "three"),
    "probs all zero": (["--probs", "0,0,0"], "--probs", "positive sum"),
    "probs negative": (["--probs", "-0.5,0.75,0.75"], "--probs", "non-negative"),
}


@pytest.mark.parametrize("flags, flag, needle", NEGATE.values(), ids=list(NEGATE))
def test_bad_negate_lists(tmp_path, flags, flag, needle):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "caption": "a dog", "graph": {"entities": [], "relations": []}, "subgraphs": []}) + "\n")
    refused(tmp_path, ["negate", src, "-o", tmp_path / "out.jsonl", "-q", *flags], flag, needle)


def test_negate_lists_that_mean_something():
    from mosaictool.stages.negate import parse_probs, parse_text_methods

    assert parse_text_methods("") == ()
    assert parse_text_methods(" order , negclip") == ("negclip", "order")
    assert parse_probs("0.333,0.333,0.333") == pytest.approx((1 / 3,) * 3)  # rounded thirds pass, normalised
    assert sum(parse_probs("0.15,0.425,0.425")) == pytest.approx(1)


# ---- wise-ft --alpha -----------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", ["0.5,,1", "0.5,", ",0.5"])
def test_wise_ft_alpha_empty_item(tmp_path, alpha):
    refused(tmp_path, ["wise-ft", "--zeroshot", tmp_path / "a.pt", "--finetuned", tmp_path / "b.pt", "--out", tmp_path / "w",
                       "--alpha", alpha], f"--alpha {alpha!r}", "empty item")


# ---- tree-score -----------------------------------------------------------------------------------------


@pytest.fixture
def caps(tmp_path):
    path = tmp_path / "caps.jsonl"
    path.write_text(json.dumps({"id": 1, "caption": "a dog on a mat"}) + "\n" + json.dumps({"id": 2, "caption": "a red cube"}) + "\n")
    return path


@pytest.mark.parametrize("flags, needle", [(["--seed", "-1"], "--seed -1"), (["--limit", "0"], "--limit")],
                         ids=["seed -1", "limit 0"])
def test_tree_score_bad_numbers(tmp_path, caps, tiny_checkpoint, flags, needle):
    refused(tmp_path, ["tree-score", caps, "--checkpoint", tiny_checkpoint, "-o", tmp_path / "t.jsonl", "-q", *flags], needle)


GOLD = {
    "leaves numbers": ([[0, 1], [2, [3, 4]]], "leaf 0 is not a word"),
    "leaf null": (["a", ["dog", None]], "leaf None is not a word"),
    "leaf bool": ([True, "dog"], "leaf True is not a word"),
    "leaf float": (["a", 0.5], "leaf 0.5 is not a word"),
    "empty list": ([], "empty bracket"),
    "empty node in list": (["a", ["dog", []]], "empty bracket"),
    "empty string": ("", "empty bracket"),
    "empty brackets": ("(a (dog ()))", "empty bracket"),
    "blank leaf": (["a", " "], "is not a word"),
}


@pytest.mark.parametrize("tree, needle", GOLD.values(), ids=list(GOLD))
def test_tree_score_bad_gold_trees(tmp_path, caps, tiny_checkpoint, tree, needle):
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": 2, "tree": "(a (red cube))"}) + "\n" + json.dumps({"id": 1, "tree": tree}) + "\n")
    refused(tmp_path, ["tree-score", caps, "--checkpoint", tiny_checkpoint, "--gold", gold, "-o", tmp_path / "t.jsonl", "-q"],
            f"{gold}:2:", "bad gold `tree`", needle)


def test_gold_tree_words_still_parse():
    from mosaictool.analysis import tree_score as ts

    assert ts.parse_tree(["a", ["dog", ["on", ["a", "mat"]]]]) == ["a", ["dog", ["on", ["a", "mat"]]]]
    assert ts.brackets(ts.parse_tree("((a))")) == set()
