"""`mosaictool vocab wordnet`: object pairs WordNet says may name one thing, kept apart by negate.

The WordNet here is a small database of our own, written in Princeton's WNdb format (data.noun's byte
offsets, index.noun's sense order), so nltk's real reader reads it as it reads WordNet 3.0.
"""

import pytest
from typer.testing import CliRunner

from mosaictool.cli import app
from mosaictool.errors import MosaicError
from mosaictool.stages.vocab_tools import build_from_graphs, wordnet_overlaps
from mosaictool.vocab import Vocab, load, save

runner = CliRunner()

# key: (words, hypernym keys); a word's senses are listed in index.noun in the order of SENSES
SYNSETS = {
    "furniture": (["furniture", "article_of_furniture"], []),
    "table": (["table"], ["furniture"]),
    "desk": (["desk"], ["table"]),
    "chair": (["chair"], ["furniture"]),
    "bread": (["bread"], []),
    "bun": (["bun", "roll"], ["bread"]),
    "bagel": (["bagel"], ["bun"]),
    "roll_motion": (["roll", "rolling"], []),
    "calculator": (["calculator"], []),
    "computer": (["computer"], []),
    "reckoner": (["reckoner", "calculator", "computer"], []),  # a person who computes: a rare sense of both
}
SENSES = {  # word -> its synsets, most frequent first
    "furniture": ["furniture"], "article_of_furniture": ["furniture"], "table": ["table"], "desk": ["desk"],
    "chair": ["chair"], "bread": ["bread"], "bun": ["bun"], "roll": ["roll_motion", "bun"], "rolling": ["roll_motion"],
    "bagel": ["bagel"], "calculator": ["calculator", "reckoner"], "computer": ["computer", "reckoner"], "reckoner": ["reckoner"],
}


def write_wordnet(folder, line_end="\n"):
    """A WNdb database of SYNSETS: every pointer is a byte offset into data.noun, as in WordNet's own files."""
    folder.mkdir()
    offsets, pos = {}, 0
    for key, (words, hypers) in SYNSETS.items():
        offsets[key] = pos
        pos += len(_data_line(key, words, hypers, {k: 0 for k in SYNSETS}, line_end).encode())
    (folder / "data.noun").write_bytes("".join(
        _data_line(key, words, hypers, offsets, line_end) for key, (words, hypers) in SYNSETS.items()).encode())
    (folder / "index.noun").write_text("".join(
        f"{word} n {len(keys)} 1 @ {len(keys)} 0 " + " ".join(f"{offsets[k]:08d}" for k in keys) + "  \n"
        for word, keys in sorted(SENSES.items())))
    (folder / "lexnames").write_text("".join(f"{i:02d}\t{name}\t{kind}\n" for i, (name, kind) in enumerate(
        [("adj.all", 3), ("adj.pert", 3), ("adv.all", 4), ("noun.Tops", 1), ("noun.act", 1), ("noun.animal", 1), ("noun.artifact", 1)])))
    for name in ("data.verb", "data.adj", "data.adv", "index.verb", "index.adj", "index.adv", "noun.exc", "verb.exc", "adj.exc", "adv.exc"):
        (folder / name).write_text("")
    return folder


def _data_line(key, words, hypers, offsets, line_end):
    lemmas = " ".join(f"{w} 0" for w in words)
    pointers = "".join(f" @ {offsets[h]:08d} n 0000" for h in hypers)
    return f"{offsets[key]:08d} 06 n {len(words):02x} {lemmas} {len(hypers):03d}{pointers} | {key.replace('_', ' ')}  {line_end}"


def vocab_of(*names):
    return Vocab(objects={n: "thing" for n in names}, attributes={}, relations={})


def test_first_senses_give_synonyms_and_kinds_at_any_depth(tmp_path):
    wordnet = write_wordnet(tmp_path / "wn")
    rows = set(wordnet_overlaps(vocab_of("desk", "table", "chair", "furniture", "bun", "roll", "bagel", "bread"), wordnet))
    assert ("desk", "table", "kind") in rows and ("desk", "furniture", "kind") in rows  # furniture two levels up
    assert ("bun", "roll", "synonym") in rows and ("bagel", "bread", "kind") in rows
    # "roll"'s first sense is the motion: it pairs with nothing, but "bun"'s first sense is one of its senses
    assert not any(name == "roll" for name, _, _ in rows)
    assert not any({"chair", "table"} == {a, b} or {"chair", "desk"} == {a, b} for a, b, _ in rows)  # co-hyponyms contradict


def test_a_sense_shared_only_by_rare_senses_pairs_nothing(tmp_path):
    wordnet = write_wordnet(tmp_path / "wn")
    assert wordnet_overlaps(vocab_of("calculator", "computer"), wordnet) == ()


def test_overlaps_keep_negate_from_replacing_one_by_the_other(tmp_path):
    v = Vocab(objects={"desk": "furniture", "table": "furniture", "chair": "furniture"}, attributes={}, relations={},
              overlaps=(("desk", "table", "kind"),))
    assert "table" in v.unsafe("objects", "desk") and "desk" in v.unsafe("objects", "table")
    assert "chair" not in v.unsafe("objects", "desk")
    save(v, tmp_path / "v")
    assert load(tmp_path / "v").overlaps == (("desk", "table", "kind"),)


def test_the_shipped_vocabulary_keeps_wordnets_overlaps_apart():
    v = load()
    assert ("desk", "table", "kind") in v.overlaps
    for name, other in (("desk", "table"), ("table", "desk"), ("fridge", "refrigerator"), ("laptop", "computer")):
        assert other in v.unsafe("objects", name), (name, other)
    assert "chair" not in v.unsafe("objects", "table")


def test_vocab_build_carries_the_bases_overlaps_and_parts_of_kept_names():
    base = Vocab(objects={"desk": "furniture", "table": "furniture", "lamp": "furniture", "drawer": "furniture"},
                 attributes={}, relations={}, overlaps=(("desk", "table", "kind"), ("lamp", "table", "kind")),
                 parts=(("drawer", "desk"), ("drawer", "lamp")))
    records = [{"graph": {"entities": [{"lemma_head": n, "head": n, "attributes": []} for n in ("desk", "table", "drawer")],
                          "relations": []}}] * 2
    built = build_from_graphs(records, min_count=1, base=base)
    assert built.overlaps == (("desk", "table", "kind"),) and built.parts == (("drawer", "desk"),)


def test_cli_writes_a_vocabulary_with_overlaps(tmp_path):
    wordnet = write_wordnet(tmp_path / "wn")
    save(vocab_of("desk", "table", "chair"), tmp_path / "mine")
    result = runner.invoke(app, ["vocab", "wordnet", str(wordnet), "--vocab", str(tmp_path / "mine"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.stderr
    assert "1 object pairs from WordNet" in result.stderr
    assert (tmp_path / "out" / "overlaps.tsv").read_text() == "name\tother\trelation\ndesk\ttable\tkind\n"
    assert not (tmp_path / "mine" / "overlaps.tsv").exists()  # the input vocabulary is left as it was


@pytest.mark.parametrize("case", ["crlf", "missing", "output inside"])
def test_cli_refuses_what_it_cannot_read_and_writes_nothing(tmp_path, case):
    wordnet = write_wordnet(tmp_path / "wn", line_end="\r\n" if case == "crlf" else "\n")
    if case == "missing":
        (wordnet / "index.noun").unlink()
    out = wordnet if case == "output inside" else tmp_path / "out"
    result = runner.invoke(app, ["vocab", "wordnet", str(wordnet), "-o", str(out)])
    assert result.exit_code == 1
    assert {"crlf": "Windows line ends", "missing": "missing index.noun", "output inside": "WORDNET_DIR"}[case] in result.stderr
    assert not (out / "objects.tsv").exists()


def test_cli_refuses_to_write_over_the_vocabulary_it_reads_and_names_its_flag(tmp_path):
    wordnet = write_wordnet(tmp_path / "wn")
    save(vocab_of("desk", "table"), tmp_path / "mine")
    before = (tmp_path / "mine" / "objects.tsv").read_text()
    result = runner.invoke(app, ["vocab", "wordnet", str(wordnet), "--vocab", str(tmp_path / "mine"), "-o", str(tmp_path / "mine")])
    assert result.exit_code == 1 and "--vocab" in result.stderr and "--base" not in result.stderr
    assert (tmp_path / "mine" / "objects.tsv").read_text() == before and not (tmp_path / "mine" / "overlaps.tsv").exists()


def test_a_bad_overlap_row_names_the_file_and_row(tmp_path):
    save(vocab_of("desk", "table"), tmp_path / "v")
    (tmp_path / "v" / "overlaps.tsv").write_text("name\tother\trelation\ndesk\ttable\tsame\n")
    with pytest.raises(MosaicError, match=r"overlaps.tsv: the row 'desk' - 'table': relation must be one of synonym, kind"):
        load(tmp_path / "v")

