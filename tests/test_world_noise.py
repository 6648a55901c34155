"""Noisy train captions (`world --caption-noise`): the clean world untouched, the stated rate, each
kind's truth record, determinism, the CLI's checks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from scipy.stats import binomtest
from typer.testing import CliRunner

from mosaictool.cli import app
from mosaictool.errors import MosaicError
from mosaictool.world import generate_world
from mosaictool.world.captions import holds
from mosaictool.world.noise import FRAGMENT_FORMS, NOISE_KINDS, said_description
from mosaictool.world.vocab import word_meanings

SMALL = {"train": 200, "twins": True, "binding_twins": True, "shape_twins": True, "eval_scale": 0.02}
NOISE_FIELDS = ("clean_caption", "clean_mentions", "noise")


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def train_records(world: Path) -> list[dict]:
    return [json.loads(line) for line in (world / "train" / "captions.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def worlds(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("noise")
    generate_world(root / "clean", seed=0, **SMALL)
    generate_world(root / "noisy", seed=0, caption_noise=0.5, **SMALL)
    return root / "clean", root / "noisy"


@pytest.fixture(scope="module")
def noisy(worlds) -> list[dict]:
    return train_records(worlds[1])


def test_noise_zero_is_the_clean_world_and_noise_changes_only_train_captions(worlds, tmp_path):
    clean, noisy = worlds
    zero = tmp_path / "zero"
    generate_world(zero, seed=0, caption_noise=0.0, **SMALL)
    assert tree(zero) == tree(clean)
    manifest = json.loads((clean / "manifest.json").read_text())
    assert "caption_noise" not in manifest["options"] and "noisy" not in manifest["counts"]["train"]
    a, b = tree(clean), tree(noisy)
    assert a.keys() == b.keys()
    # images, val and test: the same bytes (only train captions get noise)
    assert [k for k in a if a[k] != b[k]] == ["manifest.json", "train/captions.jsonl"]
    # the noisy world's records, with their clean caption and mentions put back, are the clean world's
    restored = [{**{k: v for k, v in r.items() if k not in NOISE_FIELDS}, "caption": r["clean_caption"],
                 "mentions": r["clean_mentions"]}
                for r in train_records(noisy)]
    assert restored == train_records(clean)
    options = json.loads((noisy / "manifest.json").read_text())["options"]
    assert options["caption_noise"] == 0.5 and options["noise_kinds"] == list(NOISE_KINDS)


def test_the_stated_rate_is_the_share_of_noisy_captions(worlds, noisy):
    n, k = len(noisy), sum(bool(r["noise"]) for r in noisy)
    assert binomtest(k, n, 0.5).pvalue > 1e-3, (k, n)
    counts = json.loads((worlds[1] / "manifest.json").read_text())["counts"]["train"]
    assert counts["noisy"] == k and counts["records"] == n
    assert all((r["caption"] != r["clean_caption"]) == bool(r["noise"]) for r in noisy)
    assert all(r["clean_caption"] == r["caption"] and r["clean_mentions"] == r["mentions"] for r in noisy if not r["noise"])


def entries(records, kind):
    return [(r, e) for r in records for e in r["noise"] if e["kind"] == kind]


def test_every_kind_appears_and_its_spans_are_its_words(noisy):
    for kind in NOISE_KINDS:
        assert entries(noisy, kind), kind
    for r in noisy:
        for e in r["noise"]:
            for start, end in e["spans"]:
                assert 0 <= start < end <= len(r["caption"]) and r["caption"][start:end].strip(), (r["caption"], e)


def test_a_wrong_attribute_is_false_of_the_scene(noisy):
    for r, e in entries(noisy, "wrong_attribute"):
        obj = r["scene"]["objects"][e["object"]]
        assert obj[e["attribute"]] == e["true"] != e["value"]
        (start, end), = e["spans"]
        assert r["caption"][start:end] == e["word"]
        mention = r["mentions"]["mentions"][e["mention"]]
        assert mention["object"] == e["object"] and e["word"] in mention["attributes"]
        desc = said_description(mention)
        assert desc[e["attribute"]] == e["value"] and not holds([desc], [], r["scene"]), (r["caption"], e)


def test_a_dropped_mention_is_in_the_scene_and_no_longer_said(noisy):
    for r, e in entries(noisy, "dropped_mention"):
        assert 0 <= e["object"] < len(r["scene"]["objects"]) and e["words"] and not e["spans"]
        assert any(m["object"] == e["object"] for m in r["clean_mentions"]["mentions"])
        assert not any(m["object"] == e["object"] for m in r["mentions"]["mentions"]), (r["caption"], e)
        assert all(w in r["clean_caption"] for w in e["words"] + e["relations"])


def test_unrelated_words_are_no_words_of_the_world(noisy):
    world_words = {w for table in word_meanings().values() for phrase in table for w in phrase.split()}
    for r, e in entries(noisy, "unrelated_words"):
        assert sorted(r["caption"][s:t] for s, t in e["spans"]) == sorted(e["words"])
        for words in e["words"]:
            assert not set(re.split(r"[\s,.:#/-]+", words.lower())) & world_words, words


def test_fragments_have_their_forms(noisy):
    forms = {e["form"] for _, e in entries(noisy, "fragment")}
    assert forms == set(FRAGMENT_FORMS)
    for r, e in entries(noisy, "fragment"):
        if e["form"] != "truncated":
            assert r["mentions"]["relations"] == [], r["caption"]
        if e["form"] == "keywords":
            # the adjectives are loose tags: in the caption, bound to no noun
            clean_words = {w for m in r["clean_mentions"]["mentions"] for w in m["attributes"]}
            assert all(m["attributes"] == [] for m in r["mentions"]["mentions"]) and set(e["unbound"]) <= clean_words
            assert sorted(r["caption"][s:t] for s, t in e["spans"]) == sorted(e["unbound"])
        if e["form"] == "truncated" and len(r["noise"]) == 1:  # cut alone: a prefix of the clean caption
            assert r["clean_caption"].startswith(r["caption"].removesuffix("...")) and e["cut"], r["caption"]


def test_noisy_mentions_are_true_except_the_wrong_attribute(noisy):
    """What a noisy caption still says is true of its image: only the wrong attribute is false."""
    for r in noisy:
        wrong = {e["mention"] for e in r["noise"] if e["kind"] == "wrong_attribute"}
        said = r["mentions"]["mentions"]
        for k, m in enumerate(said):
            if m["object"] is not None and k not in wrong:
                assert holds([said_description(m)], [], r["scene"]), (r["caption"], m)
        for rel in r["mentions"]["relations"]:
            s, o = said[rel["subject"]]["object"], said[rel["object"]]["object"]
            relation = {"subject": s, "relation": rel["relation"], "object": o}
            assert any(x == relation for x in r["scene"]["relations"]), r["caption"]


@pytest.mark.slow
def test_same_seed_same_noise_whatever_the_workers(tmp_path):
    tiny = {"seed": 0, "train": 70, "twins": True, "eval_scale": 0.01, "caption_noise": 0.5}
    generate_world(tmp_path / "one", workers=1, **tiny)
    generate_world(tmp_path / "two", workers=2, **tiny)
    assert tree(tmp_path / "one") == tree(tmp_path / "two")
    assert any(r["noise"] for r in train_records(tmp_path / "one"))


def test_noise_kinds_restrict_the_kinds(tmp_path):
    out = tmp_path / "w"
    generate_world(out, seed=1, train=80, eval_scale=0.01, caption_noise=1.0, noise_kinds=("dropped_mention",))
    records = train_records(out)
    made = [r for r in records if r["noise"]]
    assert made and all([e["kind"] for e in r["noise"]] == ["dropped_mention"] for r in made)
    # a caption of one object has no mention to drop: it stays clean
    assert all(len({m["object"] for m in r["mentions"]["mentions"] if m["object"] is not None}) <= 1
               for r in records if not r["noise"])
    with pytest.raises(MosaicError, match="--noise-kinds"):
        generate_world(tmp_path / "x", train=1, eval_scale=0.01, caption_noise=0.5, noise_kinds=("typos",))


@pytest.mark.parametrize("value", ["nan", "1.5", "-0.1"])
def test_cli_refuses_a_rate_outside_zero_to_one(tmp_path, value):
    result = CliRunner().invoke(app, ["world", "--out", str(tmp_path / "w"), "--train", "5", "--caption-noise", value, "-q"])
    assert result.exit_code == 1 and "--caption-noise" in result.stderr and not (tmp_path / "w").exists()


def test_cli_writes_a_noisy_world_and_checks_the_kinds(tmp_path):
    out = tmp_path / "w"
    result = CliRunner().invoke(app, ["world", "--out", str(out), "--train", "30", "--eval-scale", "0.01", "-q",
                                      "--caption-noise", "0.5", "--noise-kinds", "wrong_attribute, unrelated_words"])
    assert result.exit_code == 0, result.output
    assert "caption noise:" in result.stderr and "val/test clean" in result.stderr
    kinds = {e["kind"] for r in train_records(out) for e in r["noise"]}
    assert kinds and kinds <= {"wrong_attribute", "unrelated_words"}
    bad = CliRunner().invoke(app, ["world", "--out", str(tmp_path / "b"), "--train", "5", "--caption-noise", "0.5",
                                   "--noise-kinds", "typos"])
    assert bad.exit_code == 1 and "wrong_attribute" in bad.stderr
    alone = CliRunner().invoke(app, ["world", "--out", str(tmp_path / "c"), "--train", "5", "--noise-kinds", "fragment"])
    assert alone.exit_code == 1 and "--caption-noise" in alone.stderr
