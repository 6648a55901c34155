"""The demo's positive control and power, on synthetic result rows (no training)."""

from __future__ import annotations

import numpy as np
import pytest

from mosaictool.demo import significance


def _rows(rng, acc: dict[str, tuple[float, float, float]], seeds: int = 5, cases: int = 600) -> tuple[list[dict], dict]:
    """Engine-style "hits" rows: every method x seed answers the same cases of each case column with
    its accuracy there (acc[method] = attribute, relation, order); the cases' difficulty is shared, so
    methods agree on most cases, as models fine-tuned from one base do."""
    rows, groups = [], {}
    difficulty = {sub: rng.random(cases) for sub in significance.CASE_COLUMNS.values()}
    for method, accs in acc.items():
        groups[method] = [f"{method}-s{s}" for s in range(seeds)]
        for s in range(seeds):
            for acc_col, sub in zip(accs, significance.CASE_COLUMNS.values()):
                noise = rng.random(cases) < 0.05  # a few cases flip per seed
                hits = (difficulty[sub] < acc_col) ^ noise
                rows.append({"model": f"{method}-s{s}", "subtask": sub, "metric": "hits", "value": float(hits.mean()),
                             "n": cases, "detail": True, "hits": "".join("1" if h else "0" for h in hits)})
    return rows, groups


def test_control_passes_when_negclip_clearly_beats_clip():
    rows, groups = _rows(np.random.default_rng(0), {"CLIP": (0.8, 0.60, 0.30), "NegCLIP": (0.8, 0.70, 0.45)})
    control = significance.positive_control(rows, groups)
    assert control["passed"], control["verdict"]
    assert control["verdict"].startswith("positive control passed")
    assert control["columns"]["order"].diff == pytest.approx(0.15, abs=0.03)
    assert control["columns"]["relation"].p < significance.CONTROL_ALPHA


@pytest.mark.parametrize("negclip", [(0.8, 0.60, 0.30), (0.8, 0.70, 0.20)], ids=["no effect", "order reversed"])
def test_control_fails_loudly_without_the_effect(negclip):
    rows, groups = _rows(np.random.default_rng(1), {"CLIP": (0.8, 0.60, 0.30), "NegCLIP": negclip})
    control = significance.positive_control(rows, groups)
    assert not control["passed"]
    assert control["verdict"].startswith("POSITIVE CONTROL FAILED") and "p < 0.01 on order" in control["verdict"]


def test_control_without_negclip_is_not_run():
    rows, groups = _rows(np.random.default_rng(2), {"CLIP": (0.8, 0.6, 0.3), "MosaiCLIP": (0.8, 0.6, 0.3)})
    control = significance.positive_control(rows, groups)
    assert not control["passed"] and control["verdict"].startswith("POSITIVE CONTROL NOT RUN")


def test_power_is_the_largest_mde_and_shrinks_with_cases():
    acc = {"CLIP": (0.8, 0.6, 0.3), "NegCLIP": (0.8, 0.7, 0.45), "MosaiCLIP": (0.75, 0.6, 0.3)}
    small = significance.power_by_column(significance.comparisons(*_rows(np.random.default_rng(3), acc, cases=200)))
    found = significance.comparisons(*_rows(np.random.default_rng(3), acc, cases=2000))
    large = significance.power_by_column(found)
    assert set(large) == {"attribute", "relation", "order"}
    assert large["order"] == max(found[m]["order"].mde for m in found)
    assert all(large[c] < small[c] for c in large)
    text = significance.power_markdown(large, 3, {c: 2000 for c in large})
    assert "relation: " in text and "2000 cases × 3 seeds" in text and "both random, t with 2 df" in text
    assert "NOT measured" in significance.power_markdown(large, 1, {c: 2000 for c in large})


def test_hit_matrix_needs_every_seed_and_equal_cases():
    rows, groups = _rows(np.random.default_rng(4), {"CLIP": (0.8, 0.6, 0.3)}, seeds=2, cases=10)
    m = significance.hit_matrix(rows, groups["CLIP"], "aro/COCO-Order")
    assert m.shape == (2, 10) and set(np.unique(m)) <= {0.0, 1.0}
    assert significance.hit_matrix(rows, ["CLIP-s0", "CLIP-s9"], "aro/COCO-Order") is None
    rows[0]["hits"] = rows[0]["hits"][:-1]
    with pytest.raises(ValueError, match="different cases"):
        significance.hit_matrix(rows, groups["CLIP"], rows[0]["subtask"])


def _with_group(attribute: float, relation: float, order: float, group: float) -> tuple[float, ...]:
    """Accuracies of every case column (CASE_COLUMNS' order), `group` on the headline's."""
    return tuple(group if c == significance.HEADLINE_COLUMN else {"attribute": attribute, "relation": relation, "order": order}.get(c, 0.6)
                 for c in significance.CASE_COLUMNS)


def test_headline_is_the_confirmatory_mosaiclip_negclip_trained_forms_group_score():
    assert significance.HEADLINE_COLUMN == "rel group trained"
    assert significance.CASE_COLUMNS["rel group trained"] == "relforms/trained-group"
    # NegCLIP far ahead on VG-Relation's form, behind on the group score: the headline reads the latter
    rows, groups = _rows(np.random.default_rng(5), {"NegCLIP": _with_group(0.8, 0.75, 0.45, 0.30),
                                                    "MosaiCLIP": _with_group(0.8, 0.60, 0.40, 0.45)})
    head = significance.headline(rows, groups)
    assert head["result"].diff == pytest.approx(0.135, abs=0.04)  # 5% of the cases flip per seed
    assert head["verdict"].startswith("headline (confirmatory): MosaiCLIP − NegCLIP on rel group trained:")
    assert "MosaiCLIP ahead" in head["verdict"]
    same, groups = _rows(np.random.default_rng(6), {"NegCLIP": _with_group(0.8, 0.7, 0.4, 0.3),
                                                    "MosaiCLIP": _with_group(0.8, 0.5, 0.4, 0.3)})
    assert "no difference detected" in significance.headline(same, groups)["verdict"]
    assert significance.headline(*_rows(np.random.default_rng(7), {"CLIP": _with_group(0.8, 0.6, 0.3, 0.3)})) is None


def test_exploratory_p_values_are_holm_adjusted_over_their_table():
    acc = {"CLIP": (0.8, 0.6, 0.3), "NegCLIP": (0.8, 0.66, 0.36), "MosaiCLIP": (0.79, 0.61, 0.31)}
    found = significance.comparisons(*_rows(np.random.default_rng(8), acc))
    adjusted = significance.holm_family(found)
    assert set(adjusted) == {(m, c) for m in ("NegCLIP", "MosaiCLIP") for c in ("attribute", "relation", "order")}
    assert all(adjusted[m, c] >= found[m][c].p for m, c in adjusted)
    smallest = min(adjusted, key=lambda k: found[k[0]][k[1]].p)
    assert adjusted[smallest] == pytest.approx(min(1.0, 6 * found[smallest[0]][smallest[1]].p))
    text = significance.comparisons_markdown(found, adjusted=adjusted)
    raw = significance.comparisons_markdown(found)
    assert text != raw and "MDE" in text
