"""Probe-B (seed 004 Sec. 3.3, 3.4, Tables 8-9): contextual understanding, from the JSONL and images
that `mosaictool probe build b` writes from COCO instances (or `mosaictool world` for the world).

Per record three images: x0, x0~ (x0 with a filler patch that hides no object) and x1~ (background
replaced by the filler). Split MR: x0 is the photo, x1~ keeps every object; prompts "a photo of a
<class>." (or the line of prompts.txt) for every class of classes.txt; h = mAP: per class, average precision of the images ranked by
cosine (ties in file order), over the split's records, averaged over the classes present in any of
them. Split R: x0 keeps every object on the filler, x1~ only the target; prompts = the target and the
classes not in the original image; h = accuracy (target strictly above every other prompt).
Each filler (black, gray, noise, scene) is scored apart: subtask `<split>/<filler>`.
Rows per subtask, for each image v in (x0, x0_patch, x1): `mAP_<v>` or `accuracy_<v>`; for each pair
(a, b) in ((x0, x1), (x0, x0_patch), (x0_patch, x1)): `robustness_<a>_<b>` = gamma_r = 1 - (h(a) - h(b)) / h(a)
= h(b) / h(a) (1 = unchanged; printed as percent), and `confidence_change_<a>_<b>` = mean over the
(record, present object) pairs of c(a) - c(b), c = the object's softmax probability over the prompts
(logit_scale x cosine). Rows `MR` and `R` average the fillers (NaNs left out). Headline: MR mAP on x1 (objects on a
filler, background gone), averaged over the fillers present.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._probe import read_jsonl
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row
from mosaictool.errors import MosaicError

FILLERS = ["black", "gray", "noise", "scene"]
SPLITS = ["MR", "R"]
SUBTASKS = [f"{s}/{f}" for s in SPLITS for f in FILLERS]
VIEWS = ("x0", "x0_patch", "x1")
PAIRS = (("x0", "x1"), ("x0", "x0_patch"), ("x0_patch", "x1"))
FIELDS = ("id", "split", "filler", "images", "labels", "target")

LAYOUT = """\
  probe_b/classes.txt     one class name per line (prompt "a photo of a <class>.", or line i of probe_b/prompts.txt if present)
  probe_b/probe_b.jsonl   one record per line: {id, split: MR|R, filler, images: {x0, x0_patch, x1}, labels: [classes present],
                          target: class (R) or null}; image paths relative to probe_b/ (written by `mosaictool probe build b`)
  per <split>/<filler>: mAP (MR) or accuracy (R) of x0, x0_patch, x1; relative robustness and confidence change;
  headline = MR mAP on x1 averaged over fillers"""


def prompt(c: str) -> str:
    return f"a photo of {'an' if c[:1] in 'aeiou' else 'a'} {c}."


def _lines(path: Path) -> list[str]:
    return [c.strip() for c in path.read_text(encoding="utf-8").splitlines() if c.strip()]


def read_classes(folder: Path, name: str) -> tuple[list[str], dict[str, str]]:
    """Class names, and each one's prompt (prompts.txt, line for line, when present)."""
    path = folder / "classes.txt"
    if not path.is_file():
        raise MosaicError(f"{name}: {path} not found; build it with `mosaictool probe build b --out <data root>` or fix --data-root")
    classes = _lines(path)
    prompts = [prompt(c) for c in classes]
    if (folder / "prompts.txt").is_file():
        prompts = _lines(folder / "prompts.txt")
        if len(prompts) != len(classes):
            raise MosaicError(f"{name}: {folder / 'prompts.txt'} has {len(prompts)} lines for {len(classes)} classes; one prompt per class")
    return classes, dict(zip(classes, prompts))


def load_records(folder: Path, name: str, limit: int | None = None, subtasks=None) -> list[Item]:
    classes, prompts = read_classes(folder, name)
    path = folder / "probe_b.jsonl"
    items: list[Item] = []
    per: dict[str, int] = defaultdict(int)
    for rec in read_jsonl(path, name, FIELDS):
        sub = f"{rec['split']}/{rec['filler']}"
        if sub not in SUBTASKS:
            raise MosaicError(f"{name}: {path}: record {rec['id']}: split/filler {sub!r} is not one of {', '.join(SUBTASKS)}")
        unknown = [c for c in rec["labels"] + ([rec["target"]] if rec["target"] else []) if c not in classes]
        if unknown:
            raise MosaicError(f"{name}: {path}: record {rec['id']}: class(es) {', '.join(unknown)} not in classes.txt")
        if (subtasks and sub not in subtasks) or (limit is not None and per[sub] >= limit):
            continue
        per[sub] += 1
        images = [ImageRef(str(folder / rec["images"][v])) for v in VIEWS]
        if rec["split"] == "MR":
            texts = [prompts[c] for c in classes]
            meta = {"labels": [classes.index(c) for c in rec["labels"]]}
        else:
            if not rec["target"]:
                raise MosaicError(f"{name}: {path}: record {rec['id']}: split R needs a target class")
            cands = [rec["target"]] + [c for c in classes if c not in rec["labels"]]
            texts = [prompts[c] for c in cands]
            meta = {"labels": [0]}
        items.append(Item(images, texts, {"subtask": sub, "split": rec["split"], "id": rec["id"], **meta}))
    return items


def average_precision(scores: np.ndarray, positive: np.ndarray) -> float:
    """AP of one class: mean precision at each positive, ranking by score (stable: ties in input order)."""
    order = np.argsort(-scores, kind="stable")
    hits = positive[order].astype(bool)
    if not hits.any():
        return float("nan")
    precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
    return float(precision[hits].mean())


def mean_ap(scores: np.ndarray, positive: np.ndarray) -> float:
    """(records, classes) scores and 0/1 labels -> mAP over the classes with a positive."""
    aps = [average_precision(scores[:, k], positive[:, k]) for k in range(scores.shape[1]) if positive[:, k].any()]
    return float(np.mean(aps)) if aps else float("nan")


def _score_group(split: str, mats: list[np.ndarray], labels: list[list[int]], logit_scale: float) -> dict[str, float]:
    out: dict[str, float] = {}
    h = {}
    for v, view in enumerate(VIEWS):
        if split == "MR":
            scores = np.stack([m[v] for m in mats])
            positive = np.zeros_like(scores, dtype=bool)
            for r, ls in enumerate(labels):
                positive[r, ls] = True
            h[view] = mean_ap(scores, positive)
            out[f"mAP_{view}"] = h[view]
        else:
            # R records have different numbers of prompts: one row at a time
            h[view] = float(np.mean([metrics.choice_correct(m[v][None], 0, "strict")[0] for m in mats]))
            out[f"accuracy_{view}"] = h[view]
    conf = {view: [metrics.confidence(np.repeat(m[v][None], len(ls), 0), ls, logit_scale) for m, ls in zip(mats, labels)]
            for v, view in enumerate(VIEWS)}
    for a, b in PAIRS:
        out[f"robustness_{a}_{b}"] = h[b] / h[a] if h[a] else float("nan")
        out[f"confidence_change_{a}_{b}"] = float(np.mean(np.concatenate(conf[a]) - np.concatenate(conf[b])))
    return out


def score_rows(items: list[Item], sims, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        groups[it.meta["subtask"]].append(i)
    rows: list[dict] = []
    per_split: dict[str, list[list[dict]]] = defaultdict(list)
    for sub in SUBTASKS:
        idx = groups.get(sub)
        if not idx:
            continue
        split = sub.split("/")[0]
        mats = [np.asarray(sims[i], dtype=np.float64) for i in idx]
        got = [row(sub, k, v, len(idx)) for k, v in _score_group(split, mats, [items[i].meta["labels"] for i in idx], logit_scale).items()]
        rows += got
        per_split[split].append(got)
    for split, parts in per_split.items():
        for k in range(len(parts[0])):
            # a filler whose h(x) is 0 has no robustness (NaN): the split's mean is over the others
            values = [p[k]["value"] for p in parts if not np.isnan(p[k]["value"])]
            rows.append(row(split, parts[0][k]["metric"], float(np.mean(values)) if values else float("nan"), sum(p[k]["n"] for p in parts)))
    head = [r for r in rows if r["subtask"] == "MR" and r["metric"] == "mAP_x1"]
    if head:
        rows.append(row(HEADLINE, "mAP_x1", head[0]["value"], head[0]["n"]))
    return rows


class ProbeB:
    name = "probe_b"
    subtasks = SUBTASKS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """Records in file order; `limit` = per split/filler."""
        return load_records(Path(root) / "probe_b", self.name, limit, subtasks)

    def score(self, items: list[Item], sims, *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        return score_rows(items, sims, logit_scale)


BENCHMARK = ProbeB()
