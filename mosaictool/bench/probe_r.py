"""Probe-R (seed 004 Sec. 3.1, 3.4, Table 3): relational understanding, from the JSONL that
`mosaictool probe build r` writes from Visual Genome (or `mosaictool world` for the synthetic world).

Per group: the anchor image X_R1 with prompts R1 = <s, r, o>, R2 = <s, r~, o> (an unseen predicate),
R3 = <s~, r, o> (an unseen subject); up to 10 subject-only images X_O1 with O1 = <s>, and O3 = <s~>.
Each comparison is one image against two prompts; the confidence c of the right one is its softmax
probability over the two logits (logit_scale x cosine, metrics.confidence), and a case is right when
its logit is strictly higher (a tie is wrong). Subtasks (rows accuracy and mu_c):
  R1_vs_R2  anchor image, right = R1 (predicate swap)
  R1_vs_R3  anchor image, right = R1 (subject swap)
  O1_vs_R1  each subject-only image, right = O1 (the image shows s but not the relation)
  O1_vs_O3  each subject-only image, right = O1 (our reading of Table 3's last column, P_O3 = <s~>)
Subject-only images count one case each. Headline: mu_c of R1_vs_R2, the paper's Probe-R figure (Table 2).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._probe import read_jsonl
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row
from mosaictool.errors import MosaicError

SUBTASKS = ["R1_vs_R2", "R1_vs_R3", "O1_vs_R1", "O1_vs_O3"]
FIELDS = ("id", "image", "texts", "subject_images")
PROMPTS = ("R1", "R2", "R3", "O1", "O3")

LAYOUT = """\
  probe_r/probe_r.jsonl   one group per line: {id, image, texts: {R1, R2, R3, O1, O3}, subject_images: [...],
                          relation: [s, r, o], predicate_swap, subject_swap}; image paths relative to probe_r/
                          (written by `mosaictool probe build r` from Visual Genome)
  accuracy (strict) and mu_c (2-way softmax) for R1 vs R2, R1 vs R3 (anchor), O1 vs R1, O1 vs O3 (subject-only images);
  headline = mu_c of R1 vs R2"""


def load_groups(folder: Path, name: str, limit: int | None = None) -> list[Item]:
    path = folder / "probe_r.jsonl"
    items = []
    for rec in read_jsonl(path, name, FIELDS, limit):
        texts = rec["texts"]
        missing = [k for k in PROMPTS if k not in texts]
        if missing:
            raise MosaicError(f"{name}: {path}: group {rec['id']}: texts lack {', '.join(missing)}")
        items.append(Item([ImageRef(str(folder / rec["image"]))], [texts["R1"], texts["R2"], texts["R3"]],
                          {"subtask": "anchor", "id": rec["id"]}))
        if rec["subject_images"]:
            items.append(Item([ImageRef(str(folder / p)) for p in rec["subject_images"]], [texts["O1"], texts["R1"], texts["O3"]],
                              {"subtask": "subject", "id": rec["id"]}))
    return items


def score_rows(items: list[Item], sims, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
    cases: dict[str, list[np.ndarray]] = {s: [] for s in SUBTASKS}
    for item, s in zip(items, sims):
        s = np.asarray(s, dtype=np.float64)
        if item.meta["subtask"] == "anchor":
            cases["R1_vs_R2"].append(s[:, [0, 1]])
            cases["R1_vs_R3"].append(s[:, [0, 2]])
        else:
            cases["O1_vs_R1"].append(s[:, [0, 1]])
            cases["O1_vs_O3"].append(s[:, [0, 2]])
    rows = []
    for sub in SUBTASKS:
        if cases[sub]:
            scores = np.concatenate(cases[sub])
            rows.append(row(sub, "accuracy", metrics.choice_accuracy(scores, 0, "strict"), len(scores)))
            rows.append(row(sub, "mu_c", metrics.mean_confidence(scores, 0, logit_scale), len(scores)))
    head = next((r for r in rows if r["subtask"] == "R1_vs_R2" and r["metric"] == "mu_c"), None)
    if head is not None:
        rows.append(row(HEADLINE, "mu_c", head["value"], head["n"]))
    return rows


class ProbeR:
    name = "probe_r"
    subtasks = SUBTASKS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None) -> list[Item]:
        """Per group the anchor item, then the subject-only item; `limit` = groups."""
        return load_groups(Path(root) / "probe_r", self.name, limit)

    def score(self, items: list[Item], sims, *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        return score_rows(items, sims, logit_scale)


BENCHMARK = ProbeR()
