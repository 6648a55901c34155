"""Probe-C (seed 004 Sec. 3.2, 3.4, Table 4): compositional understanding, from the JSONL that
`mosaictool probe build c` writes from COCO captions (or `mosaictool world` for the synthetic world).

Per group two images x1, x2 and two prompts p1, p2 (p_i describes x_i). Split `composition`: the same
noun with antonym attributes ("a small dog" / "a big dog"); split `object`: the same attribute on
different nouns. Scores, Winoground's (metrics.winoground_scores, strict): text = f(p1,x1) > f(p2,x1)
and f(p2,x2) > f(p1,x2); image = f(p1,x1) > f(p1,x2) and f(p2,x2) > f(p2,x1); group = both. mu_c = the
softmax probability of the right prompt over the two, for each image (logit_scale x cosine), averaged
over the group's two images and then over groups. Per attribute category (Table 5: size, color, ...)
rows `composition/<category>` are details. Headline: mu_c of the composition split, the paper's
Probe-C figure (Table 2).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._probe import read_jsonl
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row
from mosaictool.errors import MosaicError

SUBTASKS = ["composition", "object"]
FIELDS = ("id", "split", "images", "texts")

LAYOUT = """\
  probe_c/probe_c.jsonl   one group per line: {id, split: composition|object, images: [x1, x2], texts: [p1, p2],
                          compositions: [[attribute, noun], [attribute, noun]], category}; image paths relative to probe_c/
                          (written by `mosaictool probe build c` from COCO captions)
  text / image / group scores (strict) and mu_c per split; headline = mu_c of the composition split"""


def load_groups(folder: Path, name: str, limit: int | None = None, splits=None) -> list[Item]:
    path = folder / "probe_c.jsonl"
    items = []
    for rec in read_jsonl(path, name, FIELDS, None):
        if rec["split"] not in SUBTASKS:
            raise MosaicError(f"{name}: {path}: group {rec['id']}: split {rec['split']!r} is not composition or object")
        if splits and rec["split"] not in splits:
            continue
        if limit is not None and sum(it.meta["subtask"] == rec["split"] for it in items) >= limit:
            continue
        items.append(Item([ImageRef(str(folder / p)) for p in rec["images"]], list(rec["texts"]),
                          {"subtask": rec["split"], "category": rec.get("category") or "other", "id": rec["id"]}))
    return items


def group_confidence(s: np.ndarray, logit_scale: float) -> float:
    """Mean over the two images of the right prompt's softmax probability."""
    return float(metrics.confidence(s, [0, 1], logit_scale).mean())


def score_rows(items: list[Item], sims, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
    by: dict[str, list[np.ndarray]] = defaultdict(list)
    by_cat: dict[str, list[np.ndarray]] = defaultdict(list)
    for item, s in zip(items, sims):
        s = np.asarray(s, dtype=np.float64)
        by[item.meta["subtask"]].append(s)
        if item.meta["subtask"] == "composition":
            by_cat[item.meta["category"]].append(s)

    def block(name: str, mats: list[np.ndarray], detail: bool = False) -> list[dict]:
        acc = metrics.winoground_accuracy(mats)
        out = [row(name, k, acc[k], len(mats), detail=detail) for k in ("text", "image", "group")]
        out.append(row(name, "mu_c", float(np.mean([group_confidence(m, logit_scale) for m in mats])), len(mats), detail=detail))
        return out

    rows = []
    for sub in SUBTASKS:
        if by[sub]:
            rows += block(sub, by[sub])
    for cat in sorted(by_cat):
        rows += block(f"composition/{cat}", by_cat[cat], detail=True)
    if by["composition"]:
        rows.append(row(HEADLINE, "mu_c", float(np.mean([group_confidence(m, logit_scale) for m in by["composition"]])),
                        len(by["composition"])))
    return rows


class ProbeC:
    name = "probe_c"
    subtasks = SUBTASKS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """Groups in file order; `limit` = per split."""
        return load_groups(Path(root) / "probe_c", self.name, limit, subtasks)

    def score(self, items: list[Item], sims, *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        return score_rows(items, sims, logit_scale)


BENCHMARK = ProbeC()
