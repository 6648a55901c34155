"""Why MosaiCLIP trails NegCLIP on relation, tested (val split): two runs that could falsify the account.

The account (docs/results.md): one-object sub-graph texts ("a red square", "a blue circle") are
positives of "a red square left of a blue circle" and of its swap alike, so MosaiCLIP's loss pays
the text tower to ignore who is where; NegCLIP's swap, the one negative that says who is where, is
not among MosaiCLIP's. The measure is calibrated (analysis.text_separation.role_distance): how far
the text tower puts a caption from its swap as a share of how far it puts it from the same objects
with a relation of the other axis, so that a tower that draws every text closer (fine-tuning does)
does not read as role-blind. Its predictions, each tested against the table's MosaiCLIP:
- MosaiCLIP's role distance is below NegCLIP's;
- MosaiCLIP without one-object positives (`--positives no-objects`) has a larger role distance and
  scores higher on relation;
- MosaiCLIP with NegCLIP's swap among its negatives (`--negatives graph+negclip`) likewise.
A prediction is "holds" when the difference has the predicted sign at Holm-adjusted p < 0.05 over
this experiment's tests, "contradicted" when it is significant the other way, and otherwise "not
detected" (with the MDE: the size the test would see).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mosaictool.analysis.stats import Paired, format_p, holm, seed_paired
from mosaictool.atomic import write_text
from mosaictool.demo.config import METHODS
from mosaictool.demo.evaluation import column_value
from mosaictool.demo.experiments import Context, Section
from mosaictool.demo.experiments.common import Variant, finetune_variants, method_variant, score_on_val
from mosaictool.demo.significance import CASE_COLUMNS, compare

NAME = "mechanism"
HELP = ("the account of MosaiCLIP's relation gap tested: a calibrated text-tower measure of who-is-where and two runs that "
        "could falsify it, MosaiCLIP without one-object positives and with NegCLIP's swap among its negatives (val)")
PLACE = 36  # HELP: its line in `demo --help` and docs/demo.md; PLACE: its place in those lists
FILES = ("mechanism.md",)  # what it writes in the demo folder

NO_OBJECTS, WITH_SWAP = "MosaiCLIP − one-object positives", "MosaiCLIP + NegCLIP's swap"
TESTS = {NO_OBJECTS: {"positives": "no-objects"}, WITH_SWAP: {"negatives": "graph+negclip"}}
COLUMNS_READ = ("relation", "rel group trained")


def variants(ctx: Context) -> list[Variant]:
    """The table's NegCLIP and MosaiCLIP rows (their runs), and MosaiCLIP with each test's one change."""
    rows = {label: (method, options) for label, method, options in METHODS}
    out = [Variant(label, label, *rows[label], lr_row=label) for label in ("NegCLIP", "MosaiCLIP")]
    method, options = rows["MosaiCLIP"]
    out += [method_variant(ctx, name, f"mechanism {k}", method, {**options, **change}, lr_row="MosaiCLIP")
            for k, (name, change) in enumerate(TESTS.items())]
    return out


def role_distances(ctx: Context, runs: dict[str, list[Path]]) -> dict[str, list[float]]:
    """Per row (and the base), each seed's role distance on the world's val VG-Relation items."""
    from mosaictool.analysis.text_separation import role_distance
    from mosaictool.bench import get
    from mosaictool.bench.engine import load_items
    from mosaictool.model.openclip import load_checkpoint

    items = [it for it in load_items(get("world-val"), ctx.world, subtasks=["aro"])
             if it.meta["subtask"] == CASE_COLUMNS["relation"].split("/", 1)[1]]
    return {name: [role_distance(load_checkpoint(p), items) for p in finals]
            for name, finals in {"base": [ctx.base], **runs}.items()}


def run(ctx: Context) -> Section:
    runs = finetune_variants(ctx, variants(ctx))
    rows, groups = score_on_val(ctx, runs, NAME)
    distances = role_distances(ctx, runs)
    table = mechanism_markdown(rows, groups, distances, ctx.cfg.seeds)
    write_text(ctx.out / FILES[0], table + "\n")
    return Section("Why MosaiCLIP trails NegCLIP on relation: the account tested (val)", table, [ctx.out / FILES[0]])


def predictions(rows: list[dict], groups: dict[str, list[str]], distances: dict[str, list[float]]) -> list[dict]:
    """Each prediction: what it says, the sign it predicts, the test result; p Holm-adjusted over them all."""
    found: list[dict] = [{"claim": "MosaiCLIP's role distance is below NegCLIP's", "sign": -1,
                          "result": seed_paired(distances["MosaiCLIP"], distances["NegCLIP"])}]
    for name in TESTS:
        found.append({"claim": f"{name}: role distance above MosaiCLIP's", "sign": +1,
                      "result": seed_paired(distances[name], distances["MosaiCLIP"])})
        by_col = compare(rows, groups, name, "MosaiCLIP")
        found += [{"claim": f"{name}: {col} above MosaiCLIP's", "sign": +1, "result": by_col[col]}
                  for col in COLUMNS_READ if col in by_col]
    for f, p in zip(found, holm([f["result"].p for f in found])):
        f["p_holm"] = p
        f["verdict"] = verdict(f["result"], f["sign"], p)
    return found


def verdict(result: Paired, sign: int, p_holm: float, alpha: float = 0.05) -> str:
    if p_holm >= alpha:
        return "not detected"
    return "holds" if np.sign(result.diff) == sign else "contradicted"


def mechanism_markdown(rows: list[dict], groups: dict[str, list[str]], distances: dict[str, list[float]], seeds: int) -> str:
    sub = {"relation": CASE_COLUMNS["relation"], "rel group trained": CASE_COLUMNS["rel group trained"]}
    metric = {"relation": "accuracy", "rel group trained": "group"}
    lines = ["| row | role distance | " + " | ".join(COLUMNS_READ) + " |", "|---|---|" + "---|" * len(COLUMNS_READ)]
    for name, values in distances.items():
        cells = [f"{100 * np.mean([column_value(rows, m, sub[c], metric[c]) for m in groups[name]]):.1f}"
                 if name in groups else "" for c in COLUMNS_READ]
        lines.append(f"| {name} | {np.mean(values):.3f} | " + " | ".join(cells) + " |")
    tests = ["| prediction | difference [95% CI] | p (Holm) | MDE | verdict |", "|---|---|---|---|---|"]
    for f in predictions(rows, groups, distances):
        r, scale = f["result"], (1 if "role distance" in f["claim"] else 100)
        lo, hi = r.ci()
        tests.append(f"| {f['claim']} | {scale * r.diff:+.3g} [{scale * lo:+.3g}, {scale * hi:+.3g}] | {format_p(f['p_holm'])} "
                     f"| {scale * r.mde:.3g} | {f['verdict']} |")
    return ("Role distance: how far each row's text tower puts a val VG-Relation caption from its swap, as a share of how "
            "far it puts it from the same objects with a relation of the other axis (mean over seeds; 0: the swap is the "
            "caption to the tower, 1: as far as a changed relation word). Relation and rel group trained: val accuracy and "
            f"group score (%), means over {seeds} seeds.\n\n" + "\n".join(lines)
            + "\n\nThe account's predictions, each tested (role distance paired by seed, the columns by seed and test case; "
            "Holm over this table; a prediction holds when its sign is seen at p < 0.05, is contradicted when the "
            "opposite sign is):\n\n" + "\n".join(tests))
