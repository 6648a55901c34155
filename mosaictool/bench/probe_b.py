"""Probe-B (Schiappa et al. 2023, Sec. 3.3, 3.4, Tables 8-9): contextual understanding, scored as the authors' code
scores it (core/eval_context_understanding.py for split MR, core/eval_cooccurence_understanding.py for
split R, eval_clip and make_comparisons, commit da44432), from their released files or from the JSONL
and images that `mosaictool probe build b` writes from COCO instances (or `mosaictool world`).

Per record three images: x0, x0~ (x0 with a filler patch that hides no object) and x1~. Split MR: x0 is
the photo, x1~ keeps every object on the filler (background gone); the prompts are every class's (line
i of prompts.txt, or "a photo of a <class>."). Split R: x0 keeps every object on the filler, x1~ only
the target; the prompts are the target's and those of the classes not in the original image, in class
order. For every image v the probabilities p_v are the softmax over its prompts of logit_scale x cosine.
Each filler (black, gray, noise, scene) is scored apart: subtask `<split>/<filler>`. Everything is
computed PER RECORD (image), then averaged over the records, as theirs:
  MR  mAP_<v> = mean over images of AP_v, the average precision of that image's ranking of the classes
      by p_v (its labels = the classes present): sum of the precision at each present class over
      (#present + 1e-8) (their epsilon, kept so the numbers agree to rounding). Tied scores count as one
      rank whose positives all get the precision at its end (scikit-learn's rule): the score never
      depends on the class or record order (theirs takes numpy's argsort order among ties).
      robustness_<a>_<b> = mean over images of 1 - (AP_a - AP_b) / AP_a (gamma_r; 1 = unchanged).
      confidence_change_<a>_<b> = mean over images of the mean over present classes of p_a - p_b.
  R   accuracy_<v> = fraction of records whose target's logit is strictly above every other prompt's
      (theirs: np.argmax, where a tie goes to the earlier class; equal whenever there is no tie).
      robustness_<a>_<b> = mean over records of 1 - (c_a - c_b) / c_a, c = p(target): the relative
      change of the softmax confidence (Table 9). confidence_change_<a>_<b> = mean of c_a - c_b.
for the pairs (a, b) in ((x0, x1), (x0, x0_patch), (x0_patch, x1)). Rows `MR` and `R` average the
fillers (NaNs left out). Headline: MR mAP on x1 (objects on a filler, background gone), averaged over
the fillers present. Their co-occurrence script drops the class "apple" (records and prompt) from split
R; so does our reader of their files.
"""

from __future__ import annotations

import csv
import os
from collections import defaultdict
from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import read_text
from mosaictool.bench._formats import PROBE_B
from mosaictool.bench._probe import OURS, coco_name, need, read_json, read_jsonl, which_layout
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row
from mosaictool.errors import MosaicError

FILLERS = ["black", "gray", "noise", "scene"]
SPLITS = ["MR", "R"]
SUBTASKS = [f"{s}/{f}" for s in SPLITS for f in FILLERS]
VIEWS = ("x0", "x0_patch", "x1")
PAIRS = (("x0", "x1"), ("x0", "x0_patch"), ("x0_patch", "x1"))
FIELDS = ("id", "split", "filler", "images", "labels", "target")
OURS_FILE = "probe_b.jsonl"
# the authors' files, and their image folders (their argparse defaults' last parts, joined as they join them)
MR_FILE, R_FILE, CLASSES_FILE = "background_context_dataset.json", "object_context_dataset.json", "prompt_classes.csv"
ORIGINAL, PATCH = "val2014", "val2014_random_patch_dataset"
NO_BACKGROUND, ALONE = "val2014_background_removed_dataset", "val2014_background_removed_and_cooccurrence_dataset"
AP_EPSILON = 1e-8  # theirs: average_precision's epsilon

LAYOUT = """\
  either ours: probe_b/classes.txt   one class name per line (prompt "a photo of a <class>.", or line i of probe_b/prompts.txt)
               probe_b/probe_b.jsonl   one record per line: {id, split: MR|R, filler, images: {x0, x0_patch, x1},
                          labels: [classes present], target: class (R) or null}; image paths relative to probe_b/
                          (written by `mosaictool probe build b`)
  or the authors' release (UnderstandingVisualTextModels, new_datasets/README.md; folders as their eval scripts join them):
    probe_b/prompt_classes.csv              columns class, prompt
    probe_b/background_context_dataset.json   split MR: [{image, image_id, annotations: {class: [...]}}]
    probe_b/object_context_dataset.json       split R: [{image_id, object, other_objects, path}]
    probe_b/val2014/COCO_val2014_<id>.jpg                                           MR x0
    probe_b/val2014_random_patch_dataset/<filler>/COCO_val2014_<id>.jpg             MR and R x0~
    probe_b/val2014_background_removed_dataset/segmentation_mask/<filler>/COCO_val2014_<id>.jpg   MR x1~, R x0
    probe_b/val2014_background_removed_and_cooccurrence_dataset/segmentation_mask/<filler>/<object>_COCO_val2014_<id>.jpg   R x1~
    (<id> zero-padded to 12 digits; a filler is scored where its patch folder exists; records without their
    images there are left out, as their scripts leave them out)
  per <split>/<filler>: per-image AP (MR) or accuracy (R) of x0, x0_patch, x1, averaged; relative robustness and
  confidence change per image, averaged; headline = MR mAP on x1 averaged over fillers"""


def prompt(c: str) -> str:
    return f"a photo of {'an' if c[:1] in 'aeiou' else 'a'} {c}."


def _lines(path: Path, name: str) -> list[str]:
    return [c.strip() for c in read_text(path, name).splitlines() if c.strip()]


def read_classes(folder: Path, name: str) -> tuple[list[str], dict[str, str]]:
    """Class names, and each one's prompt (prompts.txt, line for line, when present)."""
    path = folder / "classes.txt"
    if not path.is_file():
        raise MosaicError(f"{name}: {path} not found; build it with `mosaictool probe build b --out <data root>` or fix --data-root")
    classes = _lines(path, name)
    prompts = [prompt(c) for c in classes]
    if (folder / "prompts.txt").is_file():
        prompts = _lines(folder / "prompts.txt", name)
        if len(prompts) != len(classes):
            raise MosaicError(f"{name}: {folder / 'prompts.txt'} has {len(prompts)} lines for {len(classes)} classes; one prompt per class")
    return classes, dict(zip(classes, prompts))


def _item(images: list[ImageRef], split: str, filler: str, rid, classes: list[str], prompts: dict[str, str],
          labels: list[str], target: str | None) -> Item:
    """MR: every class's prompt, meta labels = the present classes' indices. R: the target's prompt and
    those of the classes not in the original image (class order), meta target = the target's index."""
    meta = {"subtask": f"{split}/{filler}", "split": split, "id": rid}
    if split == "MR":
        return Item(images, [prompts[c] for c in classes], {**meta, "labels": [classes.index(c) for c in labels]})
    cands = [c for c in classes if c == target or c not in labels]
    return Item(images, [prompts[c] for c in cands], {**meta, "target": cands.index(target)})


def load_records(folder: Path, name: str, limit: int | None = None, subtasks=None) -> list[Item]:
    """Our JSONL; `limit` = records per split/filler."""
    classes, prompts = read_classes(folder, name)
    path = folder / OURS_FILE
    items: list[Item] = []
    per: dict[str, int] = defaultdict(int)
    for rec in read_jsonl(path, name, FIELDS, contract=PROBE_B):
        sub = f"{rec['split']}/{rec['filler']}"
        if sub not in SUBTASKS:
            raise MosaicError(f"{name}: {path}: record {rec['id']}: split/filler {sub!r} is not one of {', '.join(SUBTASKS)}")
        unknown = [c for c in rec["labels"] + ([rec["target"]] if rec["target"] else []) if c not in classes]
        if unknown:
            raise MosaicError(f"{name}: {path}: record {rec['id']}: class(es) {', '.join(unknown)} not in classes.txt")
        if rec["split"] == "MR" and not rec["labels"]:
            raise MosaicError(f"{name}: {path}: record {rec['id']}: split MR needs the classes present (labels); "
                              "an image with none has no AP")
        if rec["split"] == "R" and not rec["target"]:
            raise MosaicError(f"{name}: {path}: record {rec['id']}: split R needs a target class")
        if (subtasks and sub not in subtasks) or (limit is not None and per[sub] >= limit):
            continue
        per[sub] += 1
        images = [ImageRef(str(folder / rec["images"][v])) for v in VIEWS]
        items.append(_item(images, rec["split"], rec["filler"], rec["id"], classes, prompts, rec["labels"], rec["target"]))
    return items


def _listing(path: Path) -> set[str]:
    return set(os.listdir(path)) if path.is_dir() else set()


def load_official(folder: Path, name: str, limit: int | None = None, subtasks=None) -> list[Item]:
    """The authors' files: per filler whose patch folder exists, MR records (BackgroundCuesDataset) then
    R records (OccurenceDataset), each kept as their datasets keep them; `limit` = per split/filler."""
    classes, prompts = _classes(folder, name)
    mr = read_json(folder / MR_FILE, name, list) if (folder / MR_FILE).is_file() else []
    alone = read_json(folder / R_FILE, name, list) if (folder / R_FILE).is_file() else []
    items: list[Item] = []
    for filler in FILLERS:
        patched = _listing(folder / PATCH / filler)
        if not patched:
            continue
        if not (subtasks and f"MR/{filler}" not in subtasks):
            items += _mr_items(folder, name, filler, mr, patched, classes, prompts, limit)
        if not (subtasks and f"R/{filler}" not in subtasks):
            items += _r_items(folder, name, filler, alone, patched, classes, prompts, limit)
    return items


def _classes(folder: Path, name: str) -> tuple[list[str], dict[str, str]]:
    """The class names in the authors' order and each one's prompt (their classes file)."""
    path = folder / CLASSES_FILE
    if not path.is_file():
        raise MosaicError(f"{name}: {path} not found: the authors' Probe-B files need it beside {MR_FILE} / {R_FILE}")
    with open(path, encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    if not table or not {"class", "prompt"} <= set(table[0]):
        raise MosaicError(f"{name}: {path}: expected the columns class and prompt")
    return [r["class"] for r in table], {r["class"]: r["prompt"] for r in table}


def _mr_items(folder: Path, name: str, filler: str, mr: list, patched: set[str], classes: list[str], prompts: dict[str, str],
              limit: int | None) -> list[Item]:
    """One filler's MR items (BackgroundCuesDataset): the original, patched and background-free images."""
    mod = folder / NO_BACKGROUND / "segmentation_mask" / filler
    items: list[Item] = []
    for k, ann in enumerate(mr):
        need(ann, ("image", "image_id", "annotations"), name, f"{folder / MR_FILE}: item {k}")
        if ann["image"] not in patched or (limit is not None and len(items) >= limit):
            continue
        labels = list(ann["annotations"])
        unknown = [c for c in labels if c not in prompts]
        if unknown or not labels:
            raise MosaicError(f"{name}: {folder / MR_FILE}: item {k}: "
                              + (f"class(es) {', '.join(unknown)} not in {CLASSES_FILE}" if unknown else "no annotated class"))
        file = coco_name(ann["image_id"])
        images = [ImageRef(str(p)) for p in (folder / ORIGINAL / file, folder / PATCH / filler / file, mod / file)]
        items.append(_item(images, "MR", filler, ann["image_id"], classes, prompts, labels, None))
    return items


def _r_items(folder: Path, name: str, filler: str, alone: list, patched: set[str], classes: list[str], prompts: dict[str, str],
             limit: int | None) -> list[Item]:
    """One filler's R items (OccurenceDataset): the background-free, patched and single-object images."""
    r_classes = [c for c in classes if c != "apple"]  # their co-occurrence script drops apple
    mod = folder / NO_BACKGROUND / "segmentation_mask" / filler
    single = folder / ALONE / "segmentation_mask" / filler
    originals, singles = _listing(mod), _listing(single)
    items: list[Item] = []
    for k, ann in enumerate(alone):
        need(ann, ("image_id", "object", "other_objects"), name, f"{folder / R_FILE}: item {k}")
        file = coco_name(ann["image_id"])
        alone_file = f"{ann['object']}_{file}"
        if (file not in patched or file not in originals or ann["object"] == "apple" or alone_file not in singles
                or (limit is not None and len(items) >= limit)):
            continue
        labels = [ann["object"]] + [c for c in ann["other_objects"] if c != "apple"]
        unknown = [c for c in labels if c not in prompts]
        if unknown:
            raise MosaicError(f"{name}: {folder / R_FILE}: item {k}: class(es) {', '.join(unknown)} not in {CLASSES_FILE}")
        images = [ImageRef(str(p)) for p in (mod / file, folder / PATCH / filler / file, single / alone_file)]
        items.append(_item(images, "R", filler, f"{ann['object']}_{ann['image_id']}", r_classes, prompts, labels, ann["object"]))
    return items


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max())
    return e / e.sum()


def average_precision(scores, positive) -> float:
    """AP of one image's ranking of the classes: the sum over present classes of the precision at their
    rank, over (#present + 1e-8) as the authors' average_precision. A run of tied scores is one rank
    whose positives all get the precision at the run's end (scikit-learn's rule), so ties do not depend
    on the order of the classes."""
    s = np.asarray(scores, dtype=np.float64)
    pos = np.asarray(positive, dtype=bool)
    order = np.argsort(-s, kind="stable")
    s, pos = s[order], pos[order]
    ends = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # the last index of each run of equal scores
    hits = np.cumsum(pos)[ends]
    gained = np.diff(np.r_[0, hits])
    return float((gained * hits / (ends + 1)).sum() / (pos.sum() + AP_EPSILON))


def _score_group(split: str, mats: list[np.ndarray], items: list[Item], logit_scale: float) -> dict[str, float]:
    """The metrics of one split/filler: per record, then the mean over records."""
    per: dict[str, list[float]] = defaultdict(list)
    for m, it in zip(mats, items):
        probs = {view: softmax(logit_scale * m[v]) for v, view in enumerate(VIEWS)}
        if split == "MR":
            labels = it.meta["labels"]
            positive = np.zeros(m.shape[1], dtype=bool)
            positive[labels] = True
            h = {view: average_precision(probs[view], positive) for view in VIEWS}
            for view in VIEWS:
                per[f"mAP_{view}"].append(h[view])
            for a, b in PAIRS:
                per[f"robustness_{a}_{b}"].append(1 - (h[a] - h[b]) / h[a])
                per[f"confidence_change_{a}_{b}"].append(float(np.mean(probs[a][labels] - probs[b][labels])))
        else:
            t = it.meta["target"]
            for v, view in enumerate(VIEWS):
                per[f"accuracy_{view}"].append(float(metrics.choice_correct(m[v][None], t, "strict")[0]))
            c = {view: probs[view][t] for view in VIEWS}
            for a, b in PAIRS:
                per[f"robustness_{a}_{b}"].append(1 - (c[a] - c[b]) / c[a])
                per[f"confidence_change_{a}_{b}"].append(c[a] - c[b])
    return {k: float(np.mean(v)) for k, v in per.items()}


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
        got = [row(sub, k, v, len(idx)) for k, v in _score_group(split, mats, [items[i] for i in idx], logit_scale).items()]
        rows += got
        per_split[split].append(got)
    for split, parts in per_split.items():
        for k in range(len(parts[0])):
            # a NaN (an underflowed confidence of 0 in a robustness ratio) is left out of the split's mean
            values = [p[k]["value"] for p in parts if p[k]["value"] is not None]
            rows.append(row(split, parts[0][k]["metric"], float(np.mean(values)) if values else float("nan"),
                            sum(p[k]["n"] for p in parts)))
    head = [r for r in rows if r["subtask"] == "MR" and r["metric"] == "mAP_x1"]
    if head:
        rows.append(row(HEADLINE, "mAP_x1", head[0]["value"], head[0]["n"]))
    return rows


class ProbeB:
    name = "probe_b"
    # `probe build` links its records to the source images (COCO, VG) where they lie: out of --data-root by design
    images_outside_root = True
    subtasks = SUBTASKS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """Our layout or the authors' (by the files present); `limit` = records per split/filler."""
        folder = Path(root) / "probe_b"
        if which_layout(folder, self.name, OURS_FILE, (MR_FILE, R_FILE)) == OURS:
            return load_records(folder, self.name, limit, subtasks)
        return load_official(folder, self.name, limit, subtasks)

    def score(self, items: list[Item], sims, *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        return score_rows(items, sims, logit_scale)


BENCHMARK = ProbeB()
