"""decompose's relation positives on the hand-annotated gold scene graphs (perf/positive_precision.py): the share a
gold relation matches, and the share entailed once the misses judged by hand (docs/reviews/positive_precision_dev.jsonl)
count, keep their measured floors, and the positives are not bought by dropping most of them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GOLD_DIR = REPO / "tests" / "data" / "gold_graphs"
JUDGED = REPO / "docs" / "reviews" / "positive_precision_dev.jsonl"

# Measured on the 340 development captions: 391 relation positives, 334 matched (0.854), 384 entailed (0.982,
# Wilson 95% 0.964-0.991); before the rules of nested phrases and nearer subjects 422, 345 (0.818), 398 (0.943).
# Floors a little below: a change that lets unentailed positives back in, or drops many, fails here.
FLOORS = {"matched": 0.84, "entailed": 0.975, "positives": 360}


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "perf" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # parses 340 captions: ~10-30 s
def test_relation_positives_on_the_gold_graphs_keep_their_measured_floors():
    parts = [GOLD_DIR / "coco.jsonl", GOLD_DIR / "other.jsonl"]
    if not all(p.is_file() for p in parts):
        pytest.skip("gold scene graphs not in this checkout")
    script = _script("positive_precision")
    result = script.measure(script.read_gold(parts))
    t = result["totals"]
    entailed = script.entailed(result, script.read_judgements(JUDGED))
    got = {"matched": t["relations_matched"] / t["relations"], "entailed": entailed / t["relations"], "positives": t["relations"]}
    assert all(got[k] >= floor for k, floor in FLOORS.items()), got


def test_wilson_interval():
    script = _script("positive_precision")
    lo, hi = script.wilson(375, 382)
    assert 0.96 < lo < 0.965 and 0.99 < hi < 0.992
    assert script.wilson(0, 0) == (0.0, 0.0)
