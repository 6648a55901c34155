"""The blind review kit (perf/rubric_sample.py, perf/rubric_tally.py) on real captions: texts made from
parsed SugarCrepe (COCO) captions (tests/data/decompose/real.jsonl, and tests/data/texts_report/real_swap.jsonl for
a role swap) and SugarCrepe's vendored files."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from statsmodels.stats.proportion import proportion_confint

import mosaictool
from mosaictool.stages.decompose import decompose
from mosaictool.stages.negate import negate
from mosaictool.stages.template import template
from mosaictool.vocab import DEFAULT_DIR, load

REPO = Path(__file__).resolve().parent.parent


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "perf" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rubric_sample = _script("rubric_sample")
rubric_tally = _script("rubric_tally")


@pytest.fixture(scope="module")
def texts(tmp_path_factory) -> Path:
    graphs = [json.loads(line) for name in ("decompose/real.jsonl", "texts_report/real_swap.jsonl")
              for line in (REPO / "tests" / "data" / name).read_text().splitlines()]
    # a copy of the shipped vocabulary reads as a user's own (its counts no reference corpus's, whose unseen draws are a
    # last resort) and unseen_rate=1 turns the counts' preference off: else these few captions have fewer transforms
    # than the sampler's spread over them needs
    folder = tmp_path_factory.mktemp("vocab") / "vocab"
    shutil.copytree(DEFAULT_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    vocab = load(folder)
    path = tmp_path_factory.mktemp("texts") / "texts.jsonl"
    mosaictool.write(template(negate(decompose(graphs, vocab=vocab), vocab=str(folder), seed=0, unseen_rate=1.0), vocab=vocab), path)
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def sample(texts: Path, benchmarks: Path, out: Path, *extra: str) -> int:
    return rubric_sample.main([str(texts), "--sugarcrepe", str(benchmarks / "sugarcrepe" / "data"), "--negatives", "14",
                               "--positives", "6", "--sugarcrepe-n", "5", "--out", str(out), *extra])


def test_sheet_hides_source_and_role_and_is_seeded(texts, real_benchmarks, tmp_path, capsys):
    assert sample(texts, real_benchmarks, tmp_path / "a") == 0
    assert "wrote 25 items" in capsys.readouterr().out
    sheet, key = read(tmp_path / "a" / "review_sheet.jsonl"), read(tmp_path / "a" / "review_key.jsonl")
    assert [row["id"] for row in sheet] == [row["id"] for row in key] == [f"item-{i:02d}" for i in range(1, 26)]
    assert all(set(row) == {"id", "caption", "text"} for row in sheet)
    assert all(row["text"] == row["text"].lower() and not row["text"].endswith(".") for row in sheet)
    roles = [(row["source"], row["role"]) for row in key]
    assert roles.count(("mosaictool", "negative")) == 14 and roles.count(("mosaictool", "positive")) == 6
    assert roles.count(("sugarcrepe", "negative")) == 5  # --sugarcrepe-n, all from the drawn captions (checked below)
    assert len(set(roles[:10])) > 1  # shuffled together, not one source after another
    # graph negatives spread over the transforms: no transform twice before every one that has items is drawn
    per, size = {}, {}
    for row in key:
        if row["role"] == "negative" and row["source"] == "mosaictool":
            per[row["stratum"]] = per.get(row["stratum"], 0) + 1
            size[row["stratum"]] = row["population"]
    left = [n for s, n in per.items() if n < size[s]]  # strata not drawn to the last item
    assert len(per) >= 5 and left and max(left) - min(left) <= 1
    assert all(n <= max(left) for s, n in per.items() if n == size[s])  # an exhausted stratum gave all it had
    # SugarCrepe's negatives are of the sampled captions only
    mine = {s["caption"] for s, k in zip(sheet, key) if k["source"] == "mosaictool"}
    assert all(s["caption"] in mine for s, k in zip(sheet, key) if k["source"] == "sugarcrepe")
    assert all(k["record"].split("/")[0] in rubric_sample.SUGARCREPE_SUBSETS for k in key if k["source"] == "sugarcrepe")
    # same seed, same bytes; another seed, another sample
    assert sample(texts, real_benchmarks, tmp_path / "b") == 0
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
               for f in ("review_sheet.jsonl", "review_key.jsonl", "labels.jsonl"))
    assert sample(texts, real_benchmarks, tmp_path / "c", "--seed", "1") == 0
    assert read(tmp_path / "c" / "review_sheet.jsonl") != sheet
    # a folder with labels is a reviewer's work: never replaced
    assert sample(texts, real_benchmarks, tmp_path / "a") == 1
    assert "already holds labels.jsonl" in capsys.readouterr().err


def test_tally_shares_with_wilson_intervals(texts, real_benchmarks, tmp_path, capsys):
    assert sample(texts, real_benchmarks, tmp_path) == 0
    key = read(tmp_path / "review_key.jsonl")
    labels = []
    for i, row in enumerate(key):
        # SugarCrepe's negatives all false and fluent; every other mosaictool negative not false; one item left unlabelled
        theirs, negative = row["source"] == "sugarcrepe", row["role"] == "negative"
        flags = {"not_false": (not theirs and negative and i % 2 == 0) or not negative, "entailed": not negative,
                 "uninterpretable": False, "disfluent": not theirs and negative, "implausible": False, "debris": False}
        labels.append({"id": row["id"], **flags, "reason": "" if theirs or not negative else "made-up"})
    labels[-1] = {"id": key[-1]["id"], **dict.fromkeys(rubric_tally.LABELS), "reason": ""}
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    assert rubric_tally.main([str(tmp_path / "labels.jsonl"), "--key", str(tmp_path / "review_key.jsonl")]) == 0
    out = capsys.readouterr().out
    rows, missing = rubric_tally.tally(str(tmp_path / "labels.jsonl"), str(tmp_path / "review_key.jsonl"))
    assert missing == 1 and "1 item(s) of the key not labelled yet" in out
    by = {row["group"]: row for row in rows}
    theirs = by["SugarCrepe negatives (all)"]
    assert theirs["not_false"][0] == 0 and theirs["disfluent"][0] == 0
    positives = by["mosaictool sub-graph positives (all)"]
    assert positives["entailed"][0] == positives["n"]
    mine = by["mosaictool graph negatives (all)"]
    count, low, high = mine["not_false"]
    assert (low, high) == pytest.approx(proportion_confint(count, mine["n"], method="wilson"))
    assert 0 < low < count / mine["n"] < high < 1
    assert f"| mosaictool graph negatives (all) | {mine['n']} | {count / mine['n']:.0%} [{low:.0%}, {high:.0%}] |" in out
    assert sum(row["n"] for g, row in by.items() if g.endswith("(all)")) == len(key) - 1


@pytest.mark.parametrize("change, message", [
    ({"disfluent": "yes"}, "'disfluent' must be true or false"),
    ({"debris": True, "reason": " "}, "debris without a reason"),
    ({"not_false": True}, "not_false without a reason"),
    ({"entailed": True}, "'entailed' is true but 'not_false' false"),
    ({"id": "item-99"}, "'item-99' is not in"),
])
def test_tally_refuses_bad_labels_in_one_line(texts, real_benchmarks, tmp_path, capsys, change, message):
    assert sample(texts, real_benchmarks, tmp_path) == 0
    labels = read(tmp_path / "labels.jsonl")
    labels[0] = {**labels[0], **dict.fromkeys(rubric_tally.LABELS, False), "reason": ""}
    labels[1] = {**labels[1], **dict.fromkeys(rubric_tally.LABELS, False), "reason": "", **change}
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    capsys.readouterr()
    assert rubric_tally.main([str(tmp_path / "labels.jsonl"), "--key", str(tmp_path / "review_key.jsonl")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("Error: ") and message in err[0]
    if "not in" not in message:
        assert "labels.jsonl:2: " in err[0]
        assert rubric_tally.main([str(tmp_path / "labels.jsonl"), "--key", str(tmp_path / "review_key.jsonl"), "--skip-bad"]) == 0
        assert "skipped 1 bad record" in capsys.readouterr().err


def test_weighted_share_is_the_stratified_estimate(tmp_path):
    """Strata drawn evenly but of unequal sizes: the weighted row is sum W_s p_s, not the pooled share."""
    key = [{"id": f"i{i}", "source": "mosaictool", "role": "negative", "stratum": s, "population": pop, "record": "r"}
           for i, (s, pop) in enumerate([("a", 90)] * 4 + [("b", 10)] * 4)]
    flags = [True, False, False, False, True, True, True, True]  # a: 1/4 not false, b: 4/4
    labels = [{"id": f"i{i}", "not_false": f, "entailed": False, "uninterpretable": False, "disfluent": False,
               "implausible": False, "debris": False, "reason": "x"} for i, f in enumerate(flags)]
    (tmp_path / "key.jsonl").write_text("".join(json.dumps(k) + "\n" for k in key))
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    rows, missing = rubric_tally.tally(str(tmp_path / "labels.jsonl"), str(tmp_path / "key.jsonl"))
    weighted = next(r for r in rows if r.get("weighted"))
    share, low, high = weighted["not_false"]
    assert missing == 0 and share == pytest.approx(0.9 * 0.25 + 0.1 * 1.0)  # 0.325; pooled would be 5/8
    half = 1.959964 * (0.81 * 0.25 * 0.75 / 4) ** 0.5
    assert (low, high) == pytest.approx((max(0.0, share - half), share + half))  # clipped at 0


relation_positive_kit = _script("relation_positive_kit")


def test_relation_positive_kit_is_blind_seeded_and_tallies(texts, tmp_path):
    rows = read(texts)
    n_pos = sum(p["kind"] == "relation" for r in rows for p in r["texts"]["positives"])
    n_neg = sum(n["kind"] == "graph" and n["transform"].startswith("f_rel") for r in rows for n in r["texts"]["negatives"])
    pos, neg = min(n_pos, 12), min(n_neg, 4)
    args = ["--positives", str(pos), "--negatives", str(neg), "--seed", "3"]
    assert relation_positive_kit.main([str(texts), *args, "--out", str(tmp_path / "a")]) == 0
    assert relation_positive_kit.main([str(texts), *args, "--out", str(tmp_path / "b")]) == 0
    for name in ("review_sheet.jsonl", "review_key.jsonl", "sheet_a.jsonl", "sheet_b.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    sheet, key = read(tmp_path / "a" / "review_sheet.jsonl"), read(tmp_path / "a" / "review_key.jsonl")
    assert all(set(item) == {"id", "caption", "text"} for item in sheet)  # nothing tells a positive from a negative
    assert [k["role"] for k in key].count("positive") == pos and [k["role"] for k in key].count("negative") == neg
    by_id = {r["id"]: r for r in rows}
    for item, k in zip(sheet, key):
        texts_of = by_id[k["record"]]["texts"]
        said = texts_of["positives"] if k["role"] == "positive" else texts_of["negatives"]
        assert item["text"] in {t["text"].lower().rstrip(".") for t in said}
    a, b = read(tmp_path / "a" / "sheet_a.jsonl"), read(tmp_path / "a" / "sheet_b.jsonl")
    assert a[0] == sheet[0] and b[-1] == sheet[-1] and a + b[len(a) + len(b) - len(sheet):] == sheet
    # rubric_tally joins its key: every item labelled entailed gives 100% entailed positives
    labels = [{"id": k["id"], "not_false": True, "entailed": k["role"] == "positive", "uninterpretable": False,
               "disfluent": False, "implausible": False, "debris": False,
               "reason": "" if k["role"] == "positive" else "may hold"} for k in key]
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    assert rubric_tally.main([str(tmp_path / "labels.jsonl"), "--key", str(tmp_path / "a" / "review_key.jsonl")]) == 0
