"""Probe-C (Schiappa et al. 2023, Sec. 3.2, 3.4, Table 4): compositional understanding, from the authors' released
data_compositional_switch.json / data_object_switch.json, or from the JSONL that `mosaictool probe
build c` writes from COCO captions (or `mosaictool world` for the synthetic world). Scored as the
authors' core/eval_compositional_understanding.py (eval_clip, commit da44432) scores it.

Per group two images x1, x2 and two prompts p1, p2 (p_i describes x_i). Split `composition`: the same
noun with antonym attributes ("a small dog" / "a big dog"); split `object`: the same attribute on
different nouns. Scores, Winoground's (metrics.winoground_scores, strict): text = f(p1,x1) > f(p2,x1)
and f(p2,x2) > f(p1,x2); image = f(p1,x1) > f(p1,x2) and f(p2,x2) > f(p2,x1); group = both. mu_c = the
softmax probability of the right prompt over the two, for each image (logit_scale x cosine), averaged
over the group's two images and then over groups (theirs logs the two images' means apart: their
mean is ours). Per attribute category (Table 5: size, color, ...) rows `composition/<category>` are
details (the authors' files carry no category: it comes from img1_composition through the shipped
probe_c_antonyms.tsv). Headline: mu_c of the composition split, the paper's Probe-C figure (Table 2:
FLAVA 67.45 = Table 4's composition mu(c)).
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from importlib import resources
from itertools import islice
from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._formats import PROBE_C
from mosaictool.bench._probe import OURS, coco_name, need, read_json, read_jsonl, which_layout
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row
from mosaictool.errors import MosaicError

SUBTASKS = ["composition", "object"]
FIELDS = ("id", "split", "images", "texts")
OURS_FILE = "probe_c.jsonl"
OFFICIAL_FILES = {"composition": "data_compositional_switch.json", "object": "data_object_switch.json"}
OFFICIAL_FIELDS = ("img1_id", "img2_id", "img1_prompt", "img2_prompt")

LAYOUT = """\
  either ours: probe_c/probe_c.jsonl   one group per line: {id, split: composition|object, images: [x1, x2], texts: [p1, p2],
                          compositions: [[attribute, noun], [attribute, noun]], category}; image paths relative to probe_c/
                          (written by `mosaictool probe build c` from COCO captions)
  or the authors' release (UnderstandingVisualTextModels, new_datasets/README.md):
    probe_c/data_compositional_switch.json, probe_c/data_object_switch.json   lists of {img1_id, img1_prompt,
                          img1_composition, img1_object, img2_id, img2_prompt, ...}: split composition / object
    probe_c/val2014/COCO_val2014_<id, 12 digits>.jpg   COCO val2014 images (their --root_image_dir)
  text / image / group scores (strict) and mu_c per split; headline = mu_c of the composition split"""


def load_groups(folder: Path, name: str, limit: int | None = None, splits=None) -> list[Item]:
    """Our JSONL; `limit` = groups per split."""
    path = folder / OURS_FILE
    items = []
    for rec in read_jsonl(path, name, FIELDS, None, contract=PROBE_C):
        if rec["split"] not in SUBTASKS:
            raise MosaicError(f"{name}: {path}: group {rec['id']}: split {rec['split']!r} is not composition or object")
        if splits and rec["split"] not in splits:
            continue
        if limit is not None and sum(it.meta["subtask"] == rec["split"] for it in items) >= limit:
            continue
        items.append(Item([ImageRef(str(folder / p)) for p in rec["images"]], list(rec["texts"]),
                          {"subtask": rec["split"], "category": rec.get("category") or "other", "id": rec["id"]}))
    return items


@cache
def categories() -> dict[str, str]:
    """Attribute -> Table 5 category, from the shipped antonym map (attribute, antonym, category)."""
    text = resources.files("mosaictool.bench").joinpath("data/probe_c_antonyms.tsv").read_text(encoding="utf-8")
    rows = [ln.split("\t") for ln in text.splitlines() if ln.strip() and not ln.startswith("#")][1:]  # after the header
    return {a.strip().lower(): cat.strip().lower() for r in rows if len(r) == 3 for a, cat in ((r[0], r[2]), (r[1], r[2]))}


def load_official(folder: Path, name: str, limit: int | None = None, splits=None) -> list[Item]:
    """The authors' two files (those present), in their order: image 1 / prompt 1, image 2 / prompt 2, as
    their COCOCompositionalDataset reads them; `limit` = groups per split."""
    items = []
    for split, file in OFFICIAL_FILES.items():
        path = folder / file
        if (splits and split not in splits) or not path.is_file():
            continue
        for k, ann in enumerate(islice(read_json(path, name, list), limit)):
            need(ann, OFFICIAL_FIELDS, name, f"{path}: item {k}")
            images = [ImageRef(str(folder / "val2014" / coco_name(ann[f"img{i}_id"]))) for i in (1, 2)]
            category = categories().get(str(ann.get("img1_composition", "")).lower(), "other")
            items.append(Item(images, [ann["img1_prompt"], ann["img2_prompt"]],
                              {"subtask": split, "category": category, "id": f"{split}:{k}"}))
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
    # `probe build` links its records to the source images (COCO, VG) where they lie: out of --data-root by design
    images_outside_root = True
    subtasks = SUBTASKS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """Our layout or the authors' (by the files present), groups in file order; `limit` = per split."""
        folder = Path(root) / "probe_c"
        if which_layout(folder, self.name, OURS_FILE, tuple(OFFICIAL_FILES.values())) == OURS:
            return load_groups(folder, self.name, limit, subtasks)
        return load_official(folder, self.name, limit, subtasks)

    def score(self, items: list[Item], sims, *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        return score_rows(items, sims, logit_scale)


BENCHMARK = ProbeC()
