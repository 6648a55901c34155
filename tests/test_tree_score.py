"""tree-score: prefix-sharing equals the per-span definition, projections on hand-made charts,
invariants (non-contextual encoder, two words), alignment, brackets, and the CLI end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import CAP, assert_ok, invoke, jsonl, out_records, refused_leaving_files
from helpers import refused as assert_refused
from mosaictool.analysis import tree_score as ts
from mosaictool.cli import app

CAPTIONS = [
    "A man riding a horse on the beach.",
    "two dogs play",
    "a red double-decker bus parked next to a tall building with graffiti",
    "cat sleeping",
    "A woman's hand holding a half-eaten slice of pizza , next to a cup of coffee .",
]


@pytest.fixture(scope="module")
def tiny():
    from mosaictool.model.openclip import create

    return create("mosaic-tiny", seed=0)


@pytest.fixture(scope="module")
def prepared(tiny):
    tower = ts.text_tower(tiny.model)
    return [ts.prepare(c, tiny.tokenizer, max_words=40, context_length=tower.context_length) for c in CAPTIONS]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from mosaictool.model.openclip import create, save_checkpoint

    d = tmp_path_factory.mktemp("ckpt")
    paths = []
    for seed in (0, 1):
        save_checkpoint(d / f"m{seed}.pt", create("mosaic-tiny", seed=seed))
        paths.append(str(d / f"m{seed}.pt"))
    return paths


def max_diff(a, b):
    return max(float(np.nanmax(np.abs(x - y))) for x, y in zip(a, b))


# --- charts -------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, 2])
def test_prefix_sharing_equals_per_span_masking(tiny, prepared, k):
    tower = ts.text_tower(tiny.model)
    fast = ts.charts_prefix(tower, prepared, layer_threshold=k, max_tokens=64)  # small budget: several chunks
    slow = ts.charts_per_span(tower, prepared, layer_threshold=k)
    assert max_diff(fast, slow) < 1e-5
    # The masks matter: charts differ between thresholds and are not all 1.
    assert float(np.nanmin(fast[0])) < 0.99


def test_prefix_sharing_equals_span_alone_for_shifted_positions(tiny, prepared):
    tower = ts.text_tower(tiny.model)
    fast = ts.charts_prefix(tower, prepared, positions="shifted")
    slow = ts.charts_per_span(tower, prepared, positions="shifted")
    assert max_diff(fast, slow) < 1e-5
    assert max_diff(fast, ts.charts_prefix(tower, prepared)) > 1e-3


def test_causal_tower_spans_from_the_first_word_are_invariant(tiny, prepared):
    tower = ts.text_tower(tiny.model)
    for chart in ts.charts_prefix(tower, prepared):
        np.testing.assert_allclose(chart[0], 1.0, atol=1e-6)


def test_contextual_states_equal_open_clips_own_text_forward(tiny, prepared):
    import torch

    m, tower = tiny.model, ts.text_tower(tiny.model)
    ids = tiny.tokenizer([CAPTIONS[0]])
    with torch.inference_mode():
        x = m.token_embedding(ids) + m.positional_embedding
        ref = m.ln_final(m.transformer(x, attn_mask=m.attn_mask))[0]
        ours = ts._contextual(tower, prepared[:1], 0)[0][0]
    assert ids[0, : len(prepared[0].ids)].tolist() == prepared[0].ids
    torch.testing.assert_close(ours, ref[: len(prepared[0].ids)], atol=1e-5, rtol=1e-5)


def test_custom_text_clip_tower(tiny, prepared):
    import open_clip
    import torch

    from mosaictool.model.openclip import model_config

    cfg = model_config("mosaic-tiny")  # a shipped config: mosaictool's, not registered in open_clip for good
    torch.manual_seed(0)
    model = open_clip.CustomTextCLIP(cfg["embed_dim"], cfg["vision_cfg"], cfg["text_cfg"]).eval()
    tower = ts.text_tower(model)
    assert tower.blocks is model.text.transformer.resblocks
    assert max_diff(ts.charts_prefix(tower, prepared[:2], layer_threshold=1),
                    ts.charts_per_span(tower, prepared[:2], layer_threshold=1)) < 1e-5


def test_bad_threshold_and_positions(tiny):
    from mosaictool.errors import MosaicError

    tower = ts.text_tower(tiny.model)
    with pytest.raises(MosaicError, match="layer-threshold"):
        ts._check_threshold(tower, tower.n_layers, "original")
    with pytest.raises(MosaicError, match="shifted"):
        ts._check_threshold(tower, 1, "shifted")


# --- invariants ---------------------------------------------------------------------------------


def non_contextual(bundle):
    """Zero every block's residual branches: each token's state is its own embedding."""
    import copy

    import torch

    b = copy.deepcopy(bundle)
    with torch.no_grad():
        for blk in b.model.transformer.resblocks:
            for lin in (blk.attn.out_proj, blk.mlp.c_proj):
                lin.weight.zero_()
                lin.bias.zero_()
    return b


def test_non_contextual_encoder_scores_zero_and_projects_right_branching(tiny):
    records = [{"id": i, "caption": c} for i, c in enumerate(CAPTIONS)]
    out = list(ts.score_records(records, non_contextual(tiny), label="flat", with_chart=True, batch_size=2))
    for rec in out:
        assert rec["tscore"] == 0.0 and rec["tscore_exact"] == 0.0
        assert all(v == 1.0 for row in rec["chart"] for v in row)
        n = rec["n_words"]
        assert rec["tree"] == ts.tree_string(ts.right_branching(n), rec["words"])
        assert rec["tree_exact"] == rec["tree"]


def test_two_word_sentence_scores_zero(tiny):
    out = list(ts.score_records([{"id": "x", "caption": "cat sleeping"}], tiny, label="m"))
    assert out[0]["tscore"] == 0.0 and out[0]["tscore_exact"] == 0.0
    assert out[0]["tree"] == "(cat sleeping)"


# --- projections on hand-made charts ------------------------------------------------------------


class FixedChoices:
    """An rng whose choice() returns the given split points in order."""

    def __init__(self, picks):
        self.picks = list(picks)

    def choice(self, options):
        pick = self.picks.pop(0)
        assert pick in options
        return pick


# 3 words; leaves 1; c(0,1) = 0.9, c(1,2) = 0.1. Root splits: k=0 -> 1 + 0.1 = 1.1, k=1 -> 0.9 + 1 = 1.9.
CHART3 = [[1.0, 0.9, None], [None, 1.0, 0.1], [None, None, 1.0]]


def test_greedy_on_a_hand_made_chart():
    # root: best 1.9; random split r=0 -> 1.1: +0.8. node (0,1): only split, 2 - 2 = 0.
    tree, score = ts.project_greedy(CHART3, FixedChoices([0, 0]))
    assert tree == ((0, 1), 2)
    assert score == pytest.approx(0.8)
    tree, score = ts.project_greedy(CHART3, FixedChoices([1, 0]))
    assert score == pytest.approx(0.0)
    # Without normalisation: sum of the chosen children's chart values, 1.9 + 2.
    assert ts.project_greedy(CHART3, None, normalize=False)[1] == pytest.approx(3.9)


def test_exact_on_a_hand_made_chart():
    # B(0,1) = 2; B(0,2) = max(1 + 0.1 + 0 + 2, 0.9 + 1 + 2 + 0) = 3.9; E(0,2) = (3.1 + 3.9) / 2 = 3.5.
    tree, best, expected = ts.project_exact(CHART3)
    assert tree == ((0, 1), 2)
    assert (best, expected) == pytest.approx((3.9, 3.5))


def test_greedy_differs_from_exact_where_greedy_is_myopic():
    # 4 words, leaves 1; c01 = c02 = 0.9, c13 = 0.95, c12 = c23 = 0. Greedy root: k=0 -> 1 + 0.95 = 1.95 beats
    # k=2 -> 0.9 + 1 = 1.9; then (1,3) ties 1 = 1 -> k=1. Tree (0 (1 (2 3))) worth 1+0.95+1+0+1+1 = 4.95.
    # Exact: (((0 1) 2) 3) worth c02 + c33 + c01 + c22 + c00 + c11 = 5.8.
    c = np.full((4, 4), np.nan)
    for i in range(4):
        c[i, i] = 1.0
    c[0, 1], c[0, 2], c[1, 3], c[1, 2], c[2, 3] = 0.9, 0.9, 0.95, 0.0, 0.0
    tree, score = ts.project_greedy(c.tolist(), None, normalize=False)
    assert tree == (0, (1, (2, 3)))
    assert score == pytest.approx(4.95)
    exact_tree, best, _ = ts.project_exact(c.tolist())
    assert exact_tree == (((0, 1), 2), 3)
    assert best == pytest.approx(5.8)


def all_trees(i, j):
    if i == j:
        yield i
        return
    for k in range(i, j):
        for left in all_trees(i, k):
            for right in all_trees(k + 1, j):
                yield (left, right)


def tree_value(c, tree):
    """Sum of c over the tree's non-root nodes (leaves included)."""
    total, stack = 0.0, [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, tuple):
            for child in node:
                lo, hi = span(child)
                total += c[lo][hi]
                stack.append(child)
    return total


def span(tree):
    if isinstance(tree, int):
        return tree, tree
    return span(tree[0])[0], span(tree[1])[1]


def random_split_mean(c, i, j):
    """Expectation of tree_value over trees drawn by uniform random splits, by enumeration."""
    if i == j:
        return 0.0
    return sum(c[i][k] + c[k + 1][j] + random_split_mean(c, i, k) + random_split_mean(c, k + 1, j) for k in range(i, j)) / (j - i)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6).flatmap(lambda n: st.lists(st.floats(0, 1), min_size=n * n, max_size=n * n)))
def test_exact_is_the_best_tree_and_the_random_split_mean(values):
    n = int(math.isqrt(len(values)))
    c = np.array(values).reshape(n, n).tolist()
    tree, best, expected = ts.project_exact(c)
    assert best == pytest.approx(max(tree_value(c, t) for t in all_trees(0, n - 1)))
    assert tree_value(c, tree) == pytest.approx(best)
    assert expected == pytest.approx(random_split_mean(c, 0, n - 1))
    greedy_tree, _ = ts.project_greedy(c, None, normalize=False)
    assert tree_value(c, greedy_tree) <= best + 1e-9


def test_per_caption_rng_is_reproducible():
    c = np.random.default_rng(0).uniform(size=(8, 8))
    a = ts.score_chart(c, ts.caption_rng(3, 17))
    b = ts.score_chart(c, ts.caption_rng(3, 17))
    assert a == b
    assert ts.score_chart(c, ts.caption_rng(3, 18))["tscore_exact"] == a["tscore_exact"]


# --- words, tokens, trees, brackets -------------------------------------------------------------


def test_prepare_aligns_words_to_tokens(tiny, prepared):
    p = prepared[4]
    assert p.words[-1] == "coffee" and "," in p.words  # trailing ' .' dropped, inner punctuation kept
    full = tiny.tokenizer([" ".join(p.words)])[0].tolist()
    assert full[: len(p.ids)] == p.ids and full[len(p.ids)] == tiny.tokenizer.eot_token_id
    for w, (t0, t1) in zip(p.words, p.wspan):
        assert p.ids[t0:t1] == tiny.tokenizer.encode(w)


def test_prepare_skip_reasons(tiny):
    kw = dict(max_words=5, context_length=48)
    assert ts.prepare("dog.", tiny.tokenizer, **kw) == "too_short"
    assert ts.prepare("a b c d e f", tiny.tokenizer, **kw) == "too_long"
    assert ts.prepare("x " * 30, tiny.tokenizer, max_words=40, context_length=20) == "context"

    class Merging:  # a tokenizer whose whole-caption encoding is not the words' concatenation
        sot_token_id = 0

        def encode(self, text):
            return [len(text)]

    assert ts.prepare("a cat", Merging(), **kw) == "alignment"


def test_parse_tree_brackets_and_binarisation():
    gold = ts.parse_tree("(a (man (rides (a horse) fast)))")
    assert ts.tree_leaves(gold) == ["a", "man", "rides", "a", "horse", "fast"]
    # n-ary (rides (a horse) fast) binarises to (rides ((a horse) fast)).
    assert ts.brackets(gold) == {(0, 5), (1, 5), (2, 5), (3, 5), (3, 4)}
    assert ts.brackets(ts.parse_tree("((a))")) == set()
    assert ts.brackets(ts.right_branching(4)) == {(0, 3), (1, 3), (2, 3)}
    with pytest.raises(ValueError):
        ts.parse_tree("(a (b)")
    prf = ts.bracket_prf([({(0, 3), (1, 3), (2, 3)}, {(0, 3), (0, 1), (2, 3)})])
    assert prf == pytest.approx({"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3})


def test_bootstrap_ci():
    mean, lo, hi = ts.bootstrap_ci(np.random.default_rng(0).normal(1.0, 1.0, size=400), seed=0)
    assert lo < mean < hi and lo < 1.0 < hi and hi - lo == pytest.approx(2 * 1.96 / 20, rel=0.2)
    assert ts.bootstrap_ci([2.0])[0] == 2.0
    values = np.random.default_rng(1).normal(0.0, 1.0, size=50)
    assert ts.bootstrap_ci(values, seed=3) == ts.bootstrap_ci(values, seed=3) != ts.bootstrap_ci(values, seed=4)


# --- CLI ----------------------------------------------------------------------------------------


def write_captions(path, extra=()):
    rows = [{"id": i, "caption": c, "src": "test"} for i, c in enumerate([*CAPTIONS, "dog", *extra])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_cli_end_to_end(tmp_path, runner, checkpoints):
    rows = write_captions(tmp_path / "caps.jsonl", extra=[" ".join(["word"] * 13)])
    (tmp_path / "gold.jsonl").write_text(
        json.dumps({"id": 0, "tree": "(A man (riding (a horse) (on (the beach))))"}) + "\n"
    )
    out, report = tmp_path / "out.jsonl", tmp_path / "ts.md"
    args = ["tree-score", str(tmp_path / "caps.jsonl"), "--checkpoint", checkpoints[0], "--checkpoint", checkpoints[1],
            "--max-words", "12", "--gold", str(tmp_path / "gold.jsonl"), "--report", str(report), "-o", str(out)]
    result = runner.invoke(app, args + ["--chart", "--batch-size", "4"])
    assert result.exit_code == 0, result.output
    recs = [orjson.loads(line) for line in out.read_text().splitlines()]
    assert len(recs) == 2 * len(rows)
    assert [r["id"] for r in recs] == [r["id"] for r in rows] * 2
    assert [r["model"] for r in recs] == [checkpoints[0]] * len(rows) + [checkpoints[1]] * len(rows)
    by_reason = {r["id"]: r["skipped"] for r in recs[: len(rows)]}
    assert by_reason[5] == "too_short" and by_reason[6] == "too_long"
    assert [r["id"] for r in recs[: len(rows)] if r["skipped"] is None] == [0, 1, 2, 3]  # caption 4 has 16 words
    for r in recs:
        assert r["src"] == "test"
        if r["skipped"]:
            assert r["tscore"] is None and r["tree"] is None and r["chart"] is None
        else:
            assert isinstance(r["tscore"], float) and isinstance(r["tscore_exact"], float)
            assert len(r["chart"]) == r["n_words"] and ts.tree_leaves(ts.parse_tree(r["tree"])) == r["words"]
    assert "4 captions scored (skipped: too_short 1, too_long 2)" in result.stderr
    assert "4 paired captions" in result.stderr
    text = report.read_text()
    assert "| a | b |" in text and "right-branching F1" in text

    # Same output whatever the batch size.
    out1 = tmp_path / "out1.jsonl"
    result = runner.invoke(app, args[:-1] + [str(out1), "--chart", "--batch-size", "1", "--quiet"])
    assert result.exit_code == 0, result.output
    assert out1.read_text() == out.read_text()


def test_cli_errors(tmp_path, runner, checkpoints):
    write_captions(tmp_path / "caps.jsonl")
    result = runner.invoke(app, ["tree-score", str(tmp_path / "caps.jsonl")])
    assert result.exit_code == 1 and "--checkpoint" in result.stderr
    result = runner.invoke(app, ["tree-score", str(tmp_path / "caps.jsonl"), "--checkpoint", checkpoints[0], "-k", "9"])
    assert result.exit_code == 1 and "layer-threshold must be in 0..3" in result.stderr
    result = runner.invoke(app, ["tree-score", str(tmp_path / "caps.jsonl"), "--checkpoint",
                                 checkpoints[0], "--text-key", "nope"])
    assert result.exit_code == 1 and "caps.jsonl:1: missing or non-string 'nope'" in result.stderr
    result = runner.invoke(app, ["tree-score", str(tmp_path / "caps.jsonl"), "--checkpoint", str(tmp_path / "no.pt")])
    assert result.exit_code == 1 and "checkpoint not found" in result.stderr


def test_cli_limit_and_threshold(tmp_path, runner, checkpoints):
    write_captions(tmp_path / "caps.jsonl")
    result = runner.invoke(
        app, ["tree-score", str(tmp_path / "caps.jsonl"), "--checkpoint", checkpoints[0], "--limit", "2", "-k", "2", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    recs = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in recs] == [0, 1]


# --- bad input (moved from test_bad_flags_more.py) ---

@pytest.fixture
def caps(tmp_path):
    path = tmp_path / "caps.jsonl"
    path.write_text(json.dumps({"id": 1, "caption": "a dog on a mat"}) + "\n" + json.dumps({"id": 2, "caption": "a red cube"}) + "\n")
    return path


@pytest.mark.parametrize("flags, needle", [(["--seed", "-1"], "--seed -1"), (["--limit", "0"], "--limit")],
                         ids=["seed -1", "limit 0"])
def test_tree_score_bad_numbers(tmp_path, caps, tiny_checkpoint, flags, needle):
    refused_leaving_files(tmp_path, ["tree-score", caps, "--checkpoint", tiny_checkpoint, "-o", tmp_path / "t.jsonl", "-q", *flags], needle)


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
    refused_leaving_files(tmp_path, ["tree-score", caps, "--checkpoint", tiny_checkpoint, "--gold", gold, "-o", tmp_path / "t.jsonl", "-q"],
            f"{gold}:2:", "bad gold `tree`", needle)


def test_gold_tree_words_still_parse():
    from mosaictool.analysis import tree_score as ts

    assert ts.parse_tree(["a", ["dog", ["on", ["a", "mat"]]]]) == ["a", ["dog", ["on", ["a", "mat"]]]]
    assert ts.brackets(ts.parse_tree("((a))")) == set()


# --- bad input (moved from test_bad_input.py) ---

def test_tree_score_bad_records(case, ckpts):
    caps = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}, {"id": 2, "text": CAP}))
    case.freeze()
    assert_refused(invoke(["tree-score", caps, "--checkpoint", ckpts["tiny"], "-o", case.dst / "t.jsonl", "-q"]),
                   f"{caps}:2:", "missing or non-string 'caption'", "--text-key")
    gold = case.file("gold.jsonl", jsonl({"id": 1, "tree": "((a red) dog"}))
    ok = case.file("ok.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    assert_refused(invoke(["tree-score", ok, "--checkpoint", ckpts["tiny"], "--gold", gold, "-o", case.dst / "t.jsonl",
                           "-q"]), f"{gold}:1:", "bad gold `tree`")
    case.untouched()


def test_tree_score_skips_an_overlong_caption_with_a_note(case, ckpts):
    caps = case.file("caps.jsonl", jsonl({"id": 1, "caption": "dog " * 25_000}, {"id": 2, "caption": "a red dog"}))
    result = invoke(["tree-score", caps, "--checkpoint", ckpts["tiny"], "-o", case.dst / "t.jsonl", "-q"])
    assert_ok(result)
    rows = out_records(case.dst / "t.jsonl")
    assert [(r["id"], r["skipped"]) for r in rows] == [(1, "too_long"), (2, None)]
    assert "too_long 1" in result.stderr

