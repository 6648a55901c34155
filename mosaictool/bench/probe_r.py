"""Probe-R (Schiappa et al. 2023, Sec. 3.1, 3.4, Table 3): relational understanding, scored as the authors' code
scores it (core/eval_relation_understanding.py, eval_clip, commit da44432), from their released
relation_eval_subject.json or from the JSONL that `mosaictool probe build r` writes.

Per group: the anchor image X_R1 with prompts R1 = <s, r, o>, R2 = <s, r~, o> (an unseen predicate),
R3 = <s~, r, o> (an unseen subject), O1 = <s>, O3 = <s~>; up to 10 subject-only images X_O1 (the
subject, none of the anchor's other objects) and, in the authors' files, 10 images X_O3 of s~. Each
comparison is one image against two prompts; a set of images (X_O1, X_O3) counts as ONE image whose
logits are the mean of its images' logits, as in their code (one comparison per group, not per image).
The confidence c of the right prompt is its softmax probability over the two logits (logit_scale x
cosine, metrics.confidence); a comparison is right when its logit is strictly higher (a tie is wrong;
theirs: softmax[0] > softmax[1]). Subtasks, named <right>_vs_<other> (rows accuracy and mu_c):
  R1_vs_R3, R1_vs_R2      X_R1 (Table 3 columns 1-2: subject swap, predicate swap)
  O1_vs_R1, O1_vs_R2      X_O1 (Table 3 columns 3-4: "P_R1 vs P_O1" and "vs P_R2" under X_O1)
  R1_vs_O1                X_R1 (in their code, not in Table 3; detail row)
  X_O1/R1_vs_R2, X_O1/R1_vs_R3, O1_vs_O3   X_O1 (in their code, not in Table 3; detail rows)
  O3_vs_O1                X_O3 (their files only; detail row)
For O1_vs_O3 and O3_vs_O1 their code records a stale accuracy (that of X_O1/R1_vs_R3, the last
`result`); we score the comparison itself. Their mu_c for these is the same as ours.
Headline: the ACCURACY of R1_vs_R2. Table 2's Probe-R column is captioned mu(c) but holds Table 3's
R1 vs R2 accuracy (FLAVA 68.29, ViLT 69.00 are the Acc column; their mu(c) are 64.65, 64.77).
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._formats import PROBE_R
from mosaictool.bench._probe import OURS, need, read_json, read_jsonl, which_layout
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row

# per kind of item: its texts (by prompt name) and its comparisons (subtask, right, other, detail)
TEXTS = {"anchor": ("R1", "R2", "R3", "O1"), "subject": ("O1", "R1", "R2", "R3", "O3"), "swap": ("O3", "O1")}
COMPARISONS = {
    "anchor": [("R1_vs_R3", "R1", "R3", False), ("R1_vs_R2", "R1", "R2", False), ("R1_vs_O1", "R1", "O1", True)],
    "subject": [("O1_vs_R1", "O1", "R1", False), ("O1_vs_R2", "O1", "R2", False), ("X_O1/R1_vs_R2", "R1", "R2", True),
                ("X_O1/R1_vs_R3", "R1", "R3", True), ("O1_vs_O3", "O1", "O3", True)],
    "swap": [("O3_vs_O1", "O3", "O1", True)],
}
SUBTASKS = [c[0] for kind in ("anchor", "subject", "swap") for c in COMPARISONS[kind]]
FIELDS = ("id", "image", "texts", "subject_images")
PROMPTS = ("R1", "R2", "R3", "O1", "O3")
OURS_FILE = "probe_r.jsonl"
OFFICIAL_FILE = "relation_eval_subject.json"
OFFICIAL_FIELDS = ("positive_image_ids", "negative_image_ids", "positive_prompt", "negative_prompt",
                   "negative_object", "positive_object", "negative_predicate_prompt")

LAYOUT = """\
  either ours: probe_r/probe_r.jsonl   one group per line: {id, image, texts: {R1, R2, R3, O1, O3}, subject_images: [...],
                          relation: [s, r, o], predicate_swap, subject_swap}; image paths relative to probe_r/
                          (written by `mosaictool probe build r` from Visual Genome)
  or the authors' release (UnderstandingVisualTextModels, new_datasets/README.md):
    probe_r/relation_eval_subject.json   {anchor image id: {positive_image_ids (X_O1), negative_image_ids (X_O3),
                          positive_prompt (R1), negative_prompt (R3), negative_predicate_prompt (R2), positive_object,
                          negative_object}}; O1 / O3 = "A photo of <object>." as their eval script builds them
    probe_r/images/<VG image id>.jpg     Visual Genome images (their --root_image_dir)
  accuracy (strict) and mu_c (2-way softmax) per comparison; X_O1 / X_O3 image sets: mean logits, one comparison
  per group; headline = accuracy of R1 vs R2 (Table 2's Probe-R numbers are Table 3's R1 vs R2 accuracy)"""


def _group(gid, anchor: ImageRef, subject: list[ImageRef], swap: list[ImageRef], texts: dict) -> list[Item]:
    out = [Item([anchor], [texts[p] for p in TEXTS["anchor"]], {"subtask": "anchor", "id": gid})]
    if subject:
        out.append(Item(subject, [texts[p] for p in TEXTS["subject"]], {"subtask": "subject", "id": gid}))
    if swap:
        out.append(Item(swap, [texts[p] for p in TEXTS["swap"]], {"subtask": "swap", "id": gid}))
    return out


def load_groups(folder: Path, name: str, limit: int | None = None) -> list[Item]:
    """Our JSONL: per group the anchor item, then the subject-only item."""
    path = folder / OURS_FILE
    items = []
    for rec in read_jsonl(path, name, FIELDS, limit, contract=PROBE_R):
        items += _group(rec["id"], ImageRef(str(folder / rec["image"])), [ImageRef(str(folder / p)) for p in rec["subject_images"]],
                        [], rec["texts"])
    return items


def load_official(folder: Path, name: str, limit: int | None = None) -> list[Item]:
    """The authors' relation_eval_subject.json: per group the anchor, X_O1 and X_O3 items; prompts as
    their VisualGenomeDataset.collate_fn builds them."""
    path = folder / OFFICIAL_FILE
    data = read_json(path, name, dict)

    def image(i) -> ImageRef:
        return ImageRef(str(folder / "images" / f"{i}.jpg"))

    items = []
    for gid, ann in islice(data.items(), limit):
        need(ann, OFFICIAL_FIELDS, name, f"{path}: group {gid}")
        texts = {"R1": ann["positive_prompt"], "R2": ann["negative_predicate_prompt"], "R3": ann["negative_prompt"],
                 "O1": f"A photo of {ann['positive_object']}.", "O3": f"A photo of {ann['negative_object']}."}
        items += _group(gid, image(gid), [image(i) for i in ann["positive_image_ids"]],
                        [image(i) for i in ann["negative_image_ids"]], texts)
    return items


def score_rows(items: list[Item], sims, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
    pairs: dict[str, list[np.ndarray]] = {s: [] for s in SUBTASKS}
    for item, s in zip(items, sims):
        kind = item.meta["subtask"]
        # an image set is one image: the mean of its images' logits (theirs: torch.mean over the 10 images)
        logits = np.asarray(s, dtype=np.float64).mean(axis=0)
        names = TEXTS[kind]
        for sub, right, other, _ in COMPARISONS[kind]:
            pairs[sub].append(logits[[names.index(right), names.index(other)]])
    rows = []
    detail = {c[0]: c[3] for kind in COMPARISONS.values() for c in kind}
    for sub in SUBTASKS:
        if pairs[sub]:
            scores = np.stack(pairs[sub])
            rows.append(row(sub, "accuracy", metrics.choice_accuracy(scores, 0, "strict"), len(scores), detail=detail[sub]))
            rows.append(row(sub, "mu_c", metrics.mean_confidence(scores, 0, logit_scale), len(scores), detail=detail[sub]))
    head = next((r for r in rows if r["subtask"] == "R1_vs_R2" and r["metric"] == "accuracy"), None)
    if head is not None:
        rows.append(row(HEADLINE, "accuracy", head["value"], head["n"]))
    return rows


class ProbeR:
    name = "probe_r"
    # `probe build` links its records to the source images (COCO, VG) where they lie: out of --data-root by design
    images_outside_root = True
    subtasks = SUBTASKS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None) -> list[Item]:
        """Our layout or the authors' (by the files present); `limit` = groups."""
        folder = Path(root) / "probe_r"
        if which_layout(folder, self.name, OURS_FILE, (OFFICIAL_FILE,)) == OURS:
            return load_groups(folder, self.name, limit)
        return load_official(folder, self.name, limit)

    def score(self, items: list[Item], sims, *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        return score_rows(items, sims, logit_scale)


BENCHMARK = ProbeR()
