"""The paper's claims on the world (claims.md): every regime that tests one, on the demo's split,
and the verdict of each claim (mosaictool.demo.claims).

Run it on test once the settings are chosen on val (`mosaictool demo --experiment claims`): it reads
the table's rows (the preservation regime: the demo's base is taught relations before any method
touches it) and runs the teaching regime, pretraining from scratch, data efficiency and the tower
split, noisy captions, and adds MosaiCLIP without its curriculum, MosaiCLIP_WiSE-FT (the image tower interpolated at
alpha 0.5) and the text towers' tree-scores for the claims those test."""

from __future__ import annotations

import dataclasses
import logging
import re
import time

from mosaictool.analysis.stats import paired, seed_paired
from mosaictool.atomic import write_text
from mosaictool.demo.claims import (
    ARO_COLUMNS,
    PRESERVATION,
    TABLE_REGIME,
    Claim,
    claims_markdown,
    control_claims,
    passed_by_column,
    table1_claims,
)
from mosaictool.demo.config import COLUMNS, METHODS
from mosaictool.demo.evaluation import column_value
from mosaictool.demo.experiments import Context, Section, get
from mosaictool.demo.experiments.common import Variant, finetune_variants, score
from mosaictool.demo.finetune import wise_visual
from mosaictool.demo.significance import case_matrix, positive_control

logger = logging.getLogger(__name__)

NAME = "claims"
HELP = "the paper's claims, each with a verdict (claims.md): the regimes above on the demo's split"
PLACE = 80  # HELP: its line in `demo --help` and docs/demo.md; PLACE: its place in those lists
FILES = ("claims.md",)  # what it writes in the demo folder
REGIMES = ("teach", "scratch", "efficiency", "noisy", "towers")
WISE_ALPHA = 0.5


def run(ctx: Context) -> Section:
    ctx = dataclasses.replace(ctx, claims=True)
    minutes: dict[str, float] = {}
    t0 = time.perf_counter()
    table_control = positive_control(ctx.table_rows, ctx.groups)
    claims = (control_claims(ctx.table_rows, ctx.groups, TABLE_REGIME)
              + table1_claims(ctx.table_rows, ctx.groups, TABLE_REGIME, PRESERVATION) + table_claims(ctx))
    controls = {TABLE_REGIME: table_control["verdict"]}
    minutes["the table's extras (no curriculum, WiSE-FT, tree-scores)"] = (time.perf_counter() - t0) / 60
    sections = []
    for name in REGIMES:
        t0 = time.perf_counter()
        logger.info(f"claims: the {name} regime")
        section = get(name).run(ctx)
        minutes[name] = (time.perf_counter() - t0) / 60
        claims += section.claims
        controls[name] = section.control or "none stated"
        sections.append(section)
    # a regime with no control of its own fine-tunes from the table's base and is scored on the same cases:
    # the table's control vouches for it (or not)
    table_passed = passed_by_column(table_control["columns"].items())
    claims = [c if c.control is not None else dataclasses.replace(c, control=table_passed) for c in claims]
    text = claims_markdown(claims, minutes, ctx.cfg.split, controls)
    write_text(ctx.out / FILES[0], text + "\n")
    # report.md's sections are "## ": claims.md's own headings go one level down there
    body = re.sub(r"^## ", "### ", text.split("\n", 2)[2], flags=re.MULTILINE)
    body += "\n\n" + "\n\n".join(f"### {s.title}\n\n{s.text}" for s in sections)
    return Section("The paper's claims", body, [ctx.out / FILES[0], *(f for s in sections for f in s.files)], claims)


def table_claims(ctx: Context) -> list[Claim]:
    """The claims read off the table's runs and a few runs beside them (the demo's split)."""
    rows, groups = ctx.table_rows, ctx.groups
    out = []
    sub, metric = next((s, m) for c, s, m in COLUMNS if c == "productivity")
    values = [[column_value(rows, m, sub, metric) for m in groups.get(row, [])] for row in ("MosaiCLIP", "NegCLIP")]
    if len(values[0]) > 1 and len(values[0]) == len(values[1]):
        out.append(Claim("MosaiCLIP generalizes better than NegCLIP and CLIP to more complex sentences [...] significantly "
                         "improves over NegCLIP by upto 15% across different text complexities (4-12)", "Sec. 4.2, Fig. 4a",
                         "up to +15", "MosaiCLIP − NegCLIP, CREPE productivity R@1", TABLE_REGIME,
                         seed_paired(*values), columns=("productivity",)))
    label, method, options = next(row for row in METHODS if row[0] == "MosaiCLIP")
    [nocurric] = finetune_variants(ctx, [Variant("− curriculum", "ablation − curriculum", method,
                                                 {**options, "curriculum": False}, lr_row=label)]).values()
    mosaiclip = [p for p in _finals(ctx, "MosaiCLIP")]
    wise = wise_visual(ctx.cfg, ctx.base, mosaiclip, ctx.out, WISE_ALPHA)
    extra, extra_groups = score(ctx, {"MosaiCLIP no curriculum": nocurric, "MosaiCLIP WiSE-FT": wise}, "claims", ctx.cfg.split)
    rows, groups = rows + extra, {**groups, **extra_groups}
    aro = {name: case_matrix(rows, groups, name) for name in ("MosaiCLIP", "MosaiCLIP no curriculum", "MosaiCLIP WiSE-FT", "NegCLIP")}
    if all(m is not None for m in aro.values()):
        out.append(Claim("curriculum learning can bring consistent improvements of up to 1.2% on average", "Sec. 4.4, Tables 6 "
                         "and 8", "up to +1.2", "MosaiCLIP − MosaiCLIP without curriculum, ARO cases", TABLE_REGIME,
                         paired(aro["MosaiCLIP"], aro["MosaiCLIP no curriculum"]), columns=ARO_COLUMNS))
        out.append(Claim("robust fine-tuning (WiSE-FT) [...] while still improving over NegCLIP by about 5% on compositional "
                         "reasoning tasks", "Sec. 4.4, Table 8", "about +5", f"MosaiCLIP_WiSE-FT (image tower, α = "
                         f"{WISE_ALPHA:g}) − NegCLIP, ARO cases", TABLE_REGIME,
                         paired(aro["MosaiCLIP WiSE-FT"], aro["NegCLIP"]), family=PRESERVATION, columns=ARO_COLUMNS))
    sub, metric = next((s, m) for c, s, m in COLUMNS if c == "recognition")
    recog = [[column_value(rows, m, sub, metric) for m in groups[row]] for row in ("MosaiCLIP WiSE-FT", "MosaiCLIP")]
    if len(recog[0]) > 1:
        out.append(Claim("MosaiCLIP_WiSE-FT [...] leads to least forgetting", "App. C.4, Table 9", "21 tasks: little to no "
                         "degradation", "MosaiCLIP_WiSE-FT − MosaiCLIP, recognition (zero-shot top-1)",
                         TABLE_REGIME, seed_paired(*recog), columns=("recognition",)))
    from mosaictool.demo.experiments.ladder import text_tower_measures

    towers = text_tower_measures(ctx, {"MosaiCLIP": mosaiclip, "NegCLIP": _finals(ctx, "NegCLIP")}, ctx.cfg.split)
    scores = [[m["tree-score"] for m in towers[row]] for row in ("MosaiCLIP", "NegCLIP")]
    if len(scores[0]) > 1:
        out.append(Claim("MosaiCLIP's language encoder has higher tree-scores than NegCLIP's language encoder", "Sec. 4.2, "
                         "Fig. 4b", "higher (figure)", "MosaiCLIP − NegCLIP, text tower tree-score (Murty et al. 2023)",
                         TABLE_REGIME, seed_paired(*scores), scale=1.0, unit=""))
    return out


def _finals(ctx: Context, row: str):
    """The table's checkpoints of `row` (its runs are reused: the same settings, the same folders)."""
    label, method, options = next(r for r in METHODS if r[0] == row)
    return finetune_variants(ctx, [Variant(row, label, method, dict(options), lr_row=label)])[row]
