"""The paper's claims, each tested on the world at its stated size, with a verdict (claims.md).

A claim is one comparison the paper makes (its words, its table or figure, its numbers) and ours:
the same comparison on the world, as a difference with an interval. The rules, fixed before the run
that reads them:

- **Controls are not findings.** NegCLIP − CLIP is each regime's positive control (the comparison
  the settings were chosen to make pass); it is listed with the controls, at the control's own level
  (CONTROL_ALPHA, an intersection-union test, so no correction), and counted among no findings.
- **A verdict only where the instrument works.** A claim gets a verdict only when its regime's
  control passed on the columns it reads: on a control column (relation, order) that column's
  control; on any other column, or on several pooled, every control column. Otherwise it is
  *uninformative: control failed*, whatever its difference.
- **Each claim at its stated size.** superiority: the difference exceeds `margin` (0 for "improves");
  non-inferiority: it is not below −`margin` ("within 1%"); equivalence: it lies within ±`margin`
  ("similar"), the two one-sided tests of Schuirmann (1987). The margin comes from the paper's words.
- **One simultaneous interval per claim, and the verdict read off it.** Every finding's interval is
  the two-sided 1 − ALPHA/m t interval (Bonferroni over the m findings of the file): *holds* when the
  interval lies where the claim says (above the margin; inside ±margin for equivalence),
  *contradicted* when it lies wholly where the claim says it is not, *not detectable at this power*
  otherwise. A wrong holds or contradicted needs a true difference outside its interval, so the
  chance of any wrong verdict in the file is at most ALPHA (perf/claims_calibration.py simulates it).
  The MDE printed is at the same level.
- **One effect counts once.** Claims measuring one effect (MosaiCLIP − NegCLIP from the demo's base:
  Table 1's columns, with WiSE-FT, on less data) form a family; the totals count families.
- **One seed measures no training noise**: a difference, no interval, no p, no verdict.

The paper's numbers come from real benchmarks and a ViT-B/32; the world's scale is another.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from mosaictool.analysis.stats import Paired, minimal_detectable_effect
from mosaictool.demo.significance import CONTROL_ALPHA, CONTROL_COLUMNS, compare

ALPHA = 0.05  # family-wise: the chance of any wrong "holds" or "contradicted" in the file
TESTS = ("superiority", "non-inferiority", "equivalence")
HOLDS, CONTRADICTED, UNDETECTED = "holds", "contradicted", "not detectable at this power"
UNINFORMATIVE, ONE_SEED = "uninformative: control failed", "not tested: one seed"
MIXED = "mixed"
VERDICTS = (HOLDS, CONTRADICTED, MIXED, UNDETECTED, UNINFORMATIVE, ONE_SEED)
# The effect most claims of the preservation regime measure: MosaiCLIP − NegCLIP fine-tuned from the
# demo's base (Table 1's columns, MosaiCLIP with WiSE-FT, MosaiCLIP on less data).
PRESERVATION = "MosaiCLIP over NegCLIP, fine-tuned from the demo's base"
TABLE_REGIME = "preservation (the table)"
ARO_COLUMNS = ("relation", "attribute", "order")


@dataclass
class Claim:
    words: str  # the paper's words, quoted or closely paraphrased
    source: str  # e.g. "Table 1 (COCO fine-tuning)"
    paper: str  # the paper's numbers
    comparison: str  # what we compare, e.g. "MosaiCLIP − NegCLIP, relation"
    regime: str  # which of our regimes (experiment) measured it
    result: Paired
    sign: int = 1  # the paper's direction: +1 the difference is positive
    scale: float = 100.0  # x100: fractions printed as points; 1 for raw values (tree-score)
    unit: str = "pts"
    test: str = "superiority"  # one of TESTS
    margin: float = 0.0  # in the difference's units (fractions): see TESTS
    margin_words: str = ""  # where the margin comes from, in the paper's words
    family: str = ""  # the effect it measures: one family counts once in the totals ("": its own)
    columns: tuple[str, ...] = ()  # the table's columns it reads (the control gate); (): none of the control's
    control: dict[str, bool] | None = None  # its regime's control per column; None: the table's (claims experiment)
    role: str = "finding"  # "control": a regime's positive control, listed apart and never counted

    def __post_init__(self):
        if self.test not in TESTS or self.margin < 0 or self.role not in ("finding", "control"):
            raise ValueError(f"claim {self.comparison!r}: test {self.test!r}, margin {self.margin}, role {self.role!r}")

    @property
    def key(self) -> str:
        return self.family or f"{self.comparison} ({self.regime})"


@dataclass(frozen=True)
class Judged:
    claim: Claim
    verdict: str
    level: float  # the two-sided level of the interval (and of the MDE)
    interval: tuple[float, float] | None  # on the paper's side (sign applied); None with one seed
    mde: float | None


def passed_by_column(checks: Iterable[tuple[str, Paired]]) -> dict[str, bool]:
    """A regime's control per column: passed where every check of that column points the papers' way
    with p < CONTROL_ALPHA; a control column with no check failed."""
    out: dict[str, bool] = {}
    for col, r in checks:
        out[col] = out.get(col, True) and r.diff > 0 and r.p < CONTROL_ALPHA and r.seeds > 1
    return {col: out.get(col, False) for col in CONTROL_COLUMNS}


def informative(claim: Claim) -> bool:
    """Whether the regime's control vouches for this claim's columns (see the module's rules)."""
    control = claim.control or {}
    if not control:
        return False
    own = [c for c in claim.columns if c in control]
    others = not claim.columns or any(c not in control for c in claim.columns)
    return all(control[c] for c in own) and (all(control.values()) if others else True)


def simultaneous_interval(diff, se, df: float, alpha: float):
    """The two-sided 1 − alpha t interval (vectorised): with alpha = ALPHA/m, Bonferroni-simultaneous."""
    half = stats.t.ppf(1 - alpha / 2, df) * np.asarray(se, dtype=np.float64)
    return np.asarray(diff) - half, np.asarray(diff) + half


def verdict(lo, hi, test: str, margin):
    """holds / contradicted / not detectable, read off an interval [lo, hi] (the paper's side) for a claim
    of `test` at `margin` (vectorised: arrays give an array of words)."""
    lo, hi, margin = np.asarray(lo), np.asarray(hi), np.asarray(margin)
    if test == "equivalence":
        holds, against = (-margin < lo) & (hi < margin), (lo >= margin) | (hi <= -margin)
    else:
        threshold = margin if test == "superiority" else -margin
        holds, against = lo > threshold, hi < threshold
    out = np.where(holds, HOLDS, np.where(against, CONTRADICTED, UNDETECTED))
    return str(out) if out.ndim == 0 else out


def finding_alpha(m: int) -> float:
    """Each finding's share of ALPHA when the file holds m findings (Bonferroni)."""
    return ALPHA / max(1, m)


def judge(claims: list[Claim]) -> list[Judged]:
    """Every claim's interval and verdict: findings at the simultaneous level 1 − ALPHA/m (m findings),
    controls at 1 − CONTROL_ALPHA with their own rule (positive and p < CONTROL_ALPHA)."""
    alpha_each = finding_alpha(sum(c.role == "finding" for c in claims))
    out = []
    for c in claims:
        r = c.result
        alpha = alpha_each if c.role == "finding" else CONTROL_ALPHA
        if r.seeds < 2:
            out.append(Judged(c, ONE_SEED, 1 - alpha, None, None))
            continue
        lo, hi = (float(x) for x in simultaneous_interval(r.diff, r.se, r.df, alpha))
        interval = (lo, hi) if c.sign > 0 else (-hi, -lo)
        mde = minimal_detectable_effect(r.noisy_part, r.case_part, r.df, alpha)
        if c.role == "control":
            word = "control passed" if interval[0] > 0 else "control FAILED"
        elif not informative(c):
            word = UNINFORMATIVE
        else:
            word = verdict(*interval, c.test, c.margin)
        out.append(Judged(c, word, 1 - alpha, interval, mde))
    return out


def family_verdicts(judged: list[Judged]) -> dict[str, str]:
    """{family: verdict}: holds / contradicted when its decisive members agree, mixed when they do not,
    else not detectable (some member informative), uninformative (none) or not tested (one seed)."""
    members: dict[str, list[str]] = {}
    for j in judged:
        if j.claim.role == "finding":
            members.setdefault(j.claim.key, []).append(j.verdict)
    out = {}
    for key, words in members.items():
        decisive = {w for w in words if w in (HOLDS, CONTRADICTED)}
        if decisive:
            out[key] = decisive.pop() if len(decisive) == 1 else MIXED
        else:
            out[key] = next(w for w in (UNDETECTED, UNINFORMATIVE, ONE_SEED) if w in words)
    return out


def _num(claim: Claim, value: float, signed: bool = True) -> str:
    k = claim.scale
    return f"{k * value:{'+' if signed else ''}.{1 if k == 100 else 3}f}"


def _test_words(c: Claim) -> str:
    unit = f" {c.unit}" if c.unit else ""
    if c.test == "superiority":
        size = "> 0" if c.margin == 0 else f"> {_num(c, c.margin, False)}{unit}"
    elif c.test == "non-inferiority":
        size = f"> −{_num(c, c.margin, False)}{unit}"
    else:
        size = f"within ±{_num(c, c.margin, False)}{unit} (TOST)"
    return f"{c.test}: {size}" + (f"; {c.margin_words}" if c.margin_words else "")


def _ours(j: Judged) -> str:
    c, r = j.claim, j.claim.result
    unit = f" {c.unit}" if c.unit else ""
    diff = _num(c, c.sign * r.diff)
    if j.interval is None:
        return f"{diff}{unit} (1 seed: the training noise is not measured; no interval, no p)"
    lo, hi = j.interval
    cases = "" if r.cases == 1 else f" × {r.cases} cases"
    return (f"{diff}{unit} [{_num(c, lo)}, {_num(c, hi)}] ({100 * j.level:.4g}% interval; MDE {_num(c, j.mde, False)}; "
            f"{r.seeds} seeds{cases})")


def claims_markdown(claims: list[Claim], minutes: dict[str, float] | None = None, split: str = "test",
                    controls: dict[str, str] | None = None) -> str:
    """claims.md: each regime's positive control and its comparisons (not findings), then the findings,
    each with its simultaneous interval and verdict, the families' verdicts and their totals, and the
    wall time of each regime."""
    judged = judge(claims)
    findings = [j for j in judged if j.claim.role == "finding"]
    m = max(1, len(findings))
    families = family_verdicts(judged)
    counts = {w: sum(v == w for v in families.values()) for w in VERDICTS}
    one_seed = bool(claims) and all(c.result.seeds < 2 for c in claims)
    head = (f"# The paper's claims on the world ({split} split)\n\n"
            "Singh et al. (EMNLP 2023), MosaiCLIP: each claim as one comparison on the synthetic world, paired by seed "
            "(and by test case where the column is scored case by case), a t test with seeds − 1 df, tested at the size "
            "the paper states: superiority (above a margin), non-inferiority (not below −margin) or equivalence (within "
            "±margin, two one-sided tests, Schuirmann 1987). Each finding's interval is simultaneous: two-sided "
            f"1 − {ALPHA:g}/{m} (Bonferroni over the {m} findings), so the chance of any wrong verdict in this file is at "
            f"most {ALPHA:g}; the verdict is read off it: **{HOLDS}** (the interval lies where the claim says), "
            f"**{CONTRADICTED}** (wholly where it says it is not), **{UNDETECTED}** (neither; the MDE, at the same level, "
            f"is the distance from the claim's margin detected with 80% power), **{UNINFORMATIVE}** (the regime's "
            "positive control did not pass on the claim's columns: the run cannot tell methods apart there). "
            "Controls are listed apart and are not findings. Claims measuring one effect form a family, counted once.\n\n")
    if one_seed:
        head += "**One seed: the training noise is not measured, so no claim is tested (no interval, no p).**\n\n"
        # the regimes' control lines carry p-values from the cases alone: with one seed they test nothing either
        controls = {regime: ONE_SEED for regime in controls or {}}
    head += (f"Totals ({len(families)} families of {len(findings)} findings): {counts[HOLDS]} hold, {counts[CONTRADICTED]} contradicted, "
             f"{counts[MIXED]} mixed, {counts[UNDETECTED]} not detectable at this power, {counts[UNINFORMATIVE]} "
             f"uninformative (control failed)" + (f", {counts[ONE_SEED]} not tested (one seed)" if counts[ONE_SEED] else "")
             + ".\n\n")
    head += "## Controls (not findings)\n\n"
    if controls:
        head += ("Each regime's positive control, before any of its verdicts:\n\n"
                 + "\n".join(f"- **{regime}**: {line}" for regime, line in controls.items()) + "\n\n")
    rows = [j for j in judged if j.claim.role == "control"]
    if rows:
        head += ("| regime | comparison | paper | ours: difference [99% interval] | control |\n|---|---|---|---|---|\n"
                 + "\n".join(f"| {j.claim.regime} | {j.claim.comparison} | {j.claim.paper} | {_ours(j)} | {j.verdict} |"
                             for j in rows) + "\n\n")
    fam = ["## Findings\n", "| family | claims | verdict |", "|---|---|---|"]
    for key, word in families.items():
        members = ", ".join(str(n) for n, j in enumerate(findings, 1) if j.claim.key == key)
        fam.append(f"| {key} | {members} | **{word}** |")
    lines = ["| # | the paper's claim | where | paper | ours: comparison | regime | tested as | difference [simultaneous "
             "interval] | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for k, j in enumerate(findings, 1):
        c = j.claim
        lines.append(f"| {k} | {c.words} | {c.source} | {c.paper} | {c.comparison} | {c.regime} | {_test_words(c)} | "
                     f"{_ours(j)} | **{j.verdict}** |")
    times = ""
    if minutes:
        times = ("\n\nWall time of each regime on this machine: "
                 + ", ".join(f"{name} {m:.1f} min" for name, m in minutes.items()) + ".\n")
    return head + "\n".join(fam) + "\n\n" + "\n".join(lines) + times


# Table 1 (COCO fine-tuning): MosaiCLIP and NegCLIP per ARO column; the 4.1 text: "MosaiCLIP shows upto
# 16.5%, 5.3%, 32.3% of improvement over NegCLIP in understanding relations, attributes and word order"
TABLE1 = {"relation": "82.6 vs 81.7 (COCO); 80.4 vs 71.5 (CC-FT)", "attribute": "78.0 vs 72.7 (COCO); 69.8 vs 65.4 (CC-FT)",
          "order": "87.1 vs 85.7 (COCO); 85.5 vs 84.5 (CC-FT)"}
TABLE1_WORDS = "MosaiCLIP shows up to 16.5%, 5.3%, 32.3% of improvement over NegCLIP in understanding relations, attributes and word order"
# The control, NegCLIP − CLIP (Yuksekgonul et al. 2023, Table 6; Singh et al. 2023, Table 1 after COCO fine-tuning)
CONTROL_PAPER = {"relation": "81.7 vs 58.9 (COCO)", "order": "85.7 vs 38.4 (COCO)"}


def table1_claims(rows: list[dict], groups: dict[str, list[str]], regime: str, family: str,
                  control: dict[str, bool] | None = None) -> list[Claim]:
    """MosaiCLIP − NegCLIP on relation, attribute and order (Table 1) in one regime's rows (an
    improvement: superiority at 0; "up to" is the largest of the paper's settings, not a floor)."""
    versus = compare(rows, groups, "MosaiCLIP", "NegCLIP")
    return [Claim(TABLE1_WORDS, "Sec. 4.1, Table 1", paper, f"MosaiCLIP − NegCLIP, {col}", regime, versus[col],
                  family=family, columns=(col,), control=control)
            for col, paper in TABLE1.items() if col in versus]


def control_claims(rows: list[dict], groups: dict[str, list[str]], regime: str) -> list[Claim]:
    """The control comparisons NegCLIP − CLIP on relation and order, listed as controls."""
    found = compare(rows, groups, "NegCLIP", "CLIP")
    return [Claim("NegCLIP improves over CLIP fine-tuned without hard negatives (the ARO paper's finding)",
                  "Table 1; ARO Table 6", paper, f"NegCLIP − CLIP, {col}", regime, found[col], columns=(col,), role="control")
            for col, paper in CONTROL_PAPER.items() if col in found]
