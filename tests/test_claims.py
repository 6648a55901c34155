"""claims.md's rules (mosaictool.demo.claims): the control gate, controls apart, each claim at its stated
size, simultaneous intervals that agree with the verdict, the MDE at the verdict's level, families
counted once, and no test with one seed."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sp

from mosaictool.analysis.stats import Paired, minimal_detectable_effect, paired, seed_paired, t_test
from mosaictool.demo import claims as cl

PASSED = {"relation": True, "order": True}


def _result(diff: float, se: float, seeds: int = 5, cases: int = 1) -> Paired:
    """A comparison whose SE is all seed noise (S - 1 df)."""
    df = float(seeds - 1)
    return Paired(diff=diff, se=se, df=df, p=t_test(diff, se ** 2, 0.0, df), mde=minimal_detectable_effect(se ** 2, 0.0, df),
                  seeds=seeds, cases=cases, seed_variance_measured=seeds > 1, noisy_part=se ** 2, case_part=0.0)


def _claim(result: Paired, control=None, **kw) -> cl.Claim:
    kw.setdefault("columns", ("relation",))
    return cl.Claim("w", "T1", "+1", kw.pop("comparison", "a − b"), kw.pop("regime", "r"), result,
                    control=PASSED if control is None else control, **kw)


def _verdicts(text: str) -> list[str]:
    return [line.rsplit("**", 2)[1] for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]


def test_no_verdict_where_the_regimes_control_failed_on_the_column():
    """Teaching: the control passed on order, failed on relation. A relation claim with a huge effect is
    uninformative; an order claim is judged; a column no control tests (attribute, or the ARO cases
    pooled) needs every control column."""
    teach = {"relation": False, "order": True}
    big = _result(0.2, 0.01)
    cases = [(teach, ("relation",)), (teach, ("order",)), (teach, ("attribute",)), (teach, cl.ARO_COLUMNS),
             (PASSED, ("attribute",)), ({}, ("order",))]
    judged = cl.judge([_claim(big, control, columns=cols, comparison=f"c{k}") for k, (control, cols) in enumerate(cases)])
    assert [j.verdict for j in judged] == [cl.UNINFORMATIVE, cl.HOLDS, cl.UNINFORMATIVE, cl.UNINFORMATIVE, cl.HOLDS,
                                           cl.UNINFORMATIVE]
    text = cl.claims_markdown([j.claim for j in judged])
    assert "2 hold, 0 contradicted, 0 mixed, 0 not detectable at this power, 4 uninformative (control failed)" in text
    assert _verdicts(text)[0] == cl.UNINFORMATIVE


def test_passed_by_column_needs_every_check_of_the_column():
    good, bad = _result(0.1, 0.01), _result(0.01, 0.01)
    assert cl.passed_by_column([("relation", good), ("order", good)]) == {"relation": True, "order": True}
    # the teaching control: NegCLIP above the base and above CLIP, on each column
    assert cl.passed_by_column([("relation", good), ("relation", bad), ("order", good)]) == {"relation": False, "order": True}
    assert cl.passed_by_column([("order", good)]) == {"relation": False, "order": True}  # a column not run failed
    assert cl.passed_by_column([("order", _result(-0.1, 0.01))])["order"] is False  # significant the wrong way


def test_controls_are_listed_apart_and_not_counted():
    control = _claim(_result(0.1, 0.01), role="control", comparison="NegCLIP − CLIP, relation")
    finding = _claim(_result(0.1, 0.01))
    text = cl.claims_markdown([control, finding], controls={"r": "control line"})
    before, table = text.split("| # |")
    assert "NegCLIP − CLIP, relation" in before and "control passed" in before and "NegCLIP − CLIP" not in table
    assert "99% interval" in before  # the control's own level, 0.01
    assert "Totals (1 families of 1 findings): 1 hold" in text
    assert _verdicts(text) == ["holds"]
    [j] = [j for j in cl.judge([control, finding]) if j.claim.role == "finding"]
    assert j.level == pytest.approx(0.95)  # one finding: the control took no share of alpha
    assert cl.judge([_claim(_result(0.001, 0.01), role="control")])[0].verdict == "control FAILED"


def test_each_claim_is_tested_at_its_stated_size():
    """The noisy regime's NegCLIP drop: +3.3 [+2.2, +4.3]-like on a clean mean near 61. As "a drop > 0"
    it holds; at the claim's size, a drop > 10% (6.1 points), it is contradicted."""
    drop = _result(0.033, 0.0025)
    assert cl.judge([_claim(drop)])[0].verdict == cl.HOLDS
    assert cl.judge([_claim(drop, margin=0.061)])[0].verdict == cl.CONTRADICTED
    assert cl.judge([_claim(drop, margin=0.033)])[0].verdict == cl.UNDETECTED
    # non-inferiority within 1 point: -0.3 +- small holds, -5 is contradicted, -1 undecided
    for diff, word in ((-0.003, cl.HOLDS), (-0.05, cl.CONTRADICTED), (-0.01, cl.UNDETECTED)):
        assert cl.judge([_claim(_result(diff, 0.001), test="non-inferiority", margin=0.01)])[0].verdict == word
    # equivalence (TOST) within +-6 points: a small drop measured tightly holds, a wide one is undecided, a
    # drop far outside the margin contradicts "similar"
    for diff, se, word in ((0.01, 0.005, cl.HOLDS), (0.01, 0.03, cl.UNDETECTED), (0.2, 0.01, cl.CONTRADICTED),
                           (-0.2, 0.01, cl.CONTRADICTED)):
        assert cl.judge([_claim(_result(diff, se), test="equivalence", margin=0.06)])[0].verdict == word, (diff, se)
    # the paper's direction: sign -1 claims a negative difference
    assert cl.judge([_claim(_result(-0.1, 0.01), sign=-1)])[0].verdict == cl.HOLDS
    with pytest.raises(ValueError):
        _claim(drop, test="similar")
    text = cl.claims_markdown([_claim(drop, margin=0.061, margin_words="a > 10% hit")])
    assert "superiority: > 6.1 pts; a > 10% hit" in text


def test_tost_is_schuirmanns_two_one_sided_tests():
    """Equivalence holds exactly when both one-sided t tests at the interval's alpha/2 reject."""
    rng = np.random.default_rng(0)
    results = [_result(rng.normal(0, 0.03), rng.uniform(0.002, 0.01)) for _ in range(60)]
    judged = cl.judge([_claim(r, test="equivalence", margin=0.04, comparison=f"c{k}") for k, r in enumerate(results)])
    a = 0.05 / 60 / 2  # each one-sided test at half the two-sided interval's share
    for r, j in zip(results, judged):
        lower = sp.t.sf((r.diff + 0.04) / r.se, r.df) < a  # H0: diff <= -margin
        upper = sp.t.cdf((r.diff - 0.04) / r.se, r.df) < a  # H0: diff >= +margin
        assert (j.verdict == cl.HOLDS) == (lower and upper)
    assert {j.verdict for j in judged} >= {cl.HOLDS, cl.UNDETECTED}


def test_intervals_are_simultaneous_and_agree_with_the_verdict():
    """m findings: each interval is two-sided 1 - 0.05/m, and "holds" (margin 0) exactly when the
    Bonferroni-adjusted p is below 0.05 with the paper's sign. The old file's claim 2 (-3.1 [-5.4, -0.8]
    at 95%) printed an interval excluding zero beside "not detectable"; at 1 - 0.05/18 it spans zero."""
    rng = np.random.default_rng(1)
    results = [_result(rng.normal(0, 0.02), rng.uniform(0.003, 0.01)) for _ in range(18)]
    judged = cl.judge([_claim(r) for r in results])
    for r, j in zip(results, judged):
        assert j.level == pytest.approx(1 - 0.05 / 18)
        assert j.interval == pytest.approx(r.ci(1 - 0.05 / 18))
        decisive = min(1.0, 18 * r.p) < 0.05
        assert (j.verdict == cl.HOLDS) == (decisive and r.diff > 0)
        assert (j.verdict == cl.CONTRADICTED) == (decisive and r.diff < 0)
    two = _result(-0.031, 0.0083)  # the attribute claim's numbers: 95% interval [-5.4, -0.8]
    lo95, hi95 = two.ci(0.95)
    assert hi95 < 0
    [j] = [cl.judge([_claim(two)] + [_claim(_result(0, 0.01))] * 17)[0]]
    assert j.verdict == cl.UNDETECTED and j.interval[0] < 0 < j.interval[1]


def test_mde_is_at_the_verdicts_level():
    r = _result(0.01, 0.008)
    judged = cl.judge([_claim(r)] * 23)
    expected = minimal_detectable_effect(r.noisy_part, 0.0, r.df, alpha=0.05 / 23)
    assert judged[0].mde == pytest.approx(expected) and expected > 2 * r.mde  # far above the MDE at 0.05
    assert f"MDE {100 * expected:.1f}" in cl.claims_markdown([_claim(r)] * 23)


def test_one_effect_counts_once():
    """Five claims of one family (the preservation effect) are one family in the totals; a family whose
    decisive members disagree is mixed."""
    down = _result(-0.1, 0.005)
    members = [_claim(down, family=cl.PRESERVATION, comparison=f"c{k}") for k in range(5)]
    alone = _claim(_result(0.1, 0.005))
    text = cl.claims_markdown(members + [alone])
    assert _verdicts(text) == ["contradicted"] * 5 + ["holds"]
    assert "Totals (2 families of 6 findings): 1 hold, 1 contradicted" in text
    assert f"| {cl.PRESERVATION} | 1, 2, 3, 4, 5 | **contradicted** |" in text
    mixed = cl.family_verdicts(cl.judge([_claim(down, family="f"), _claim(_result(0.1, 0.005), family="f"),
                                         _claim(_result(0.0, 0.05), family="f")]))
    assert mixed == {"f": cl.MIXED}
    quiet = cl.family_verdicts(cl.judge([_claim(_result(0.0, 0.05), family="f"), _claim(down, {}, family="f")]))
    assert quiet == {"f": cl.UNDETECTED}


def test_one_seed_gets_no_interval_no_p_and_no_verdict():
    """--quick runs one seed: the training noise is not measured, so nothing is tested (the old file
    printed intervals "from 1 seeds")."""
    rng = np.random.default_rng(2)
    a, b = rng.integers(0, 2, (1, 300)), rng.integers(0, 2, (1, 300))
    one = paired(a, b)
    assert one.seeds == 1
    text = cl.claims_markdown([_claim(one), _claim(one, role="control")], controls={"r": "control passed (p = 0.001)"})
    assert _verdicts(text) == [cl.ONE_SEED]
    assert "no interval, no p" in text and "1 seeds" not in text and "[" not in text.split("| # |")[1].split("\n", 2)[2]
    assert "MDE" not in text.split("| # |")[1] and "p =" not in text
    assert "no claim is tested" in text and "1 not tested (one seed)" in text and "- **r**: not tested: one seed" in text


def test_seed_paired_claims_take_the_same_rules():
    r = seed_paired([0.70, 0.72, 0.71, 0.73, 0.70], [0.60, 0.61, 0.60, 0.62, 0.60])
    judged = cl.judge([_claim(r, columns=("productivity",)), _claim(r, {"relation": True, "order": False}, columns=("productivity",))])
    assert [j.verdict for j in judged] == [cl.HOLDS, cl.UNINFORMATIVE]


def test_the_regimes_hand_their_control_to_their_claims():
    """The teaching regime's control (NegCLIP above the base and above CLIP) failed on relation: its
    relation and attribute claims are uninformative, its order claim is judged; its NegCLIP − CLIP rows
    are controls. Scratch's control failed on both columns: every claim of it is uninformative."""
    from mosaictool.demo.experiments import scratch, teach
    from test_significance import _rows

    accuracy = {teach.BASE: (0.7, 0.6, 0.3), "CLIP": (0.7, 0.6, 0.3), "NegCLIP": (0.7, 0.6, 0.5), "MosaiCLIP": (0.7, 0.6, 0.4)}
    rows, groups = _rows(np.random.default_rng(3), accuracy)
    control = teach.shaped_control(rows, groups)
    passed = cl.passed_by_column((col, r) for (_, col), r in control["checks"].items())
    assert passed == {"relation": False, "order": True}
    found = cl.control_claims(rows, groups, "teaching") + cl.table1_claims(rows, groups, "teaching", teach.FAMILY, passed)
    judged = {(j.claim.role, j.claim.comparison.split(", ")[-1]): j.verdict for j in cl.judge(found)}
    assert judged == {("control", "relation"): "control FAILED", ("control", "order"): "control passed",
                      ("finding", "relation"): cl.UNINFORMATIVE, ("finding", "attribute"): cl.UNINFORMATIVE,
                      ("finding", "order"): cl.CONTRADICTED}
    rows += [{"model": m, "subtask": "crepe/syst/unseen_compounds_in_laion/comp", "metric": "R@1", "value": 0.3 + 0.01 * k}
             for row in ("MosaiCLIP", "NegCLIP") for k, m in enumerate(groups[row])]
    claims = scratch.scratch_claims(rows, groups, {"relation": False, "order": False})
    assert [c.columns for c in claims] == [("relation",), ("attribute",), ("unseen",)]
    assert claims and all(j.verdict == cl.UNINFORMATIVE for j in cl.judge(claims))
    assert {c.family for c in claims} == {scratch.FAMILY}
