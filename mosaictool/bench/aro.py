"""ARO (Yuksekgonul et al. 2023): VG-Relation, VG-Attribution, COCO-Order, Flickr30k-Order.

Scored as `mertyg/vision-language-models-are-bows` scores them (`main_aro.py`, `dataset_zoo/aro_datasets.py`):
- VG-Relation / VG-Attribution: one image cropped to its box (x, y, x+w, y+h), options
  [false_caption, true_caption]; the prediction is argmax, so a tie picks the false caption and
  counts wrong. VG-Relation = mean of per-relation accuracies without the notebook's 157 excluded
  relations; VG-Attribution = mean of per-attribute-pair accuracies over pairs with >= 25 cases.
- COCO-Order / Flickr30k-Order: one case per caption; options = pre_caption of the caption and of
  its four order perturbations (run on the raw caption); argmax == 0, so a tie counts right.
Headline (vl_compo): mean of the four.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from mosaictool.bench import _formats, metrics
from mosaictool.bench._files import read_json
from mosaictool.bench._formats import check_entry, check_list
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row, xywh_box
from mosaictool.errors import MosaicError

VG_RELATION, VG_ATTRIBUTION, COCO_ORDER, FLICKR_ORDER = "VG-Relation", "VG-Attribution", "COCO-Order", "Flickr30k-Order"
SUBTASKS = [VG_RELATION, VG_ATTRIBUTION, COCO_ORDER, FLICKR_ORDER]
ANNOTATIONS = {
    VG_RELATION: "aro/visual_genome_relation.json",
    VG_ATTRIBUTION: "aro/visual_genome_attribution.json",
    COCO_ORDER: "aro/coco_karpathy_test.json",
    FLICKR_ORDER: "aro/flickr30k_test.json",
}
IMAGE_DIRS = {VG_RELATION: "aro/images", VG_ATTRIBUTION: "aro/images", COCO_ORDER: "coco", FLICKR_ORDER: "flickr30k"}
MIN_ATTRIBUTE_GROUP = 25
MAX_WORDS = 30
ORDER_SEED = 1  # main_aro.py: seed_all(1)

LAYOUT = """\
  aro/visual_genome_relation.json      list of {image_path, bbox_x, bbox_y, bbox_w, bbox_h, true_caption, false_caption, relation_name}
  aro/visual_genome_attribution.json   same fields with attributes: [a1, a2]
  aro/images/<image_path>              VG images (vgr_vga_images.zip), cropped to the bbox
  aro/coco_karpathy_test.json          BLIP Karpathy test: list of {image, caption: [...]}
  coco/<image>                         e.g. coco/val2014/COCO_val2014_000000391895.jpg
  aro/flickr30k_test.json              list of {image, caption: [...]}
  flickr30k/<image>                    e.g. flickr30k/flickr30k-images/1007129816.jpg"""


@cache
def excluded_relations() -> frozenset[str]:
    """The 157 relations the ARO notebook drops before the VG-Relation macro accuracy."""
    text = resources.files("mosaictool.bench").joinpath("data/aro_vg_relation_excluded_relations.json").read_text()
    return frozenset(json.loads(text))


def pre_caption(caption: str, max_words: int = MAX_WORDS) -> str:
    """ARO/BLIP caption normalisation: lower-case, some punctuation to spaces, first `max_words` words."""
    caption = re.sub(r"([.!\"()*#:;~])", " ", caption.lower())
    caption = re.sub(r"\s{2,}", " ", caption).rstrip("\n").strip(" ")
    return " ".join(caption.split(" ")[:max_words])


def load_vg(root: Path, subtask: str, limit: int | None = None) -> list[Item]:
    path = root / ANNOTATIONS[subtask]
    data = check_list(read_json(path, "aro"), "aro", path)
    key = "relation_name" if subtask == VG_RELATION else "attributes"
    contract = _formats.VG_RELATION if subtask == VG_RELATION else _formats.VG_ATTRIBUTION
    images = root / IMAGE_DIRS[subtask]
    items = []
    for i, rec in enumerate(data[:limit] if limit else data):
        check_entry(contract, rec, "aro", path, f"entry {i}")
        box = xywh_box(rec["bbox_x"], rec["bbox_y"], rec["bbox_w"], rec["bbox_h"])
        group = rec[key] if subtask == VG_RELATION else f"{rec[key][0]}_{rec[key][1]}"
        items.append(
            Item(
                images=[ImageRef(str(images / rec["image_path"]), box)],
                texts=[rec["false_caption"], rec["true_caption"]],
                meta={"subtask": subtask, "group": group, "correct": 1},
            )
        )
    return items


def load_order(root: Path, subtask: str, limit: int | None = None) -> list[Item]:
    from mosaictool.bench._order import OrderPerturber

    path = root / ANNOTATIONS[subtask]
    data = check_list(read_json(path, "aro"), "aro", path)
    images = root / IMAGE_DIRS[subtask]
    cases = []
    for i, rec in enumerate(data):
        check_entry(_formats.KARPATHY, rec, "aro", path, f"entry {i}")
        captions = rec["caption"] if isinstance(rec["caption"], list) else [rec["caption"]]
        for caption in captions:
            cases.append((str(images / rec["image"]), caption))
            if limit and len(cases) >= limit:
                break
        if limit and len(cases) >= limit:
            break
    perturbed = OrderPerturber(seed=ORDER_SEED).perturb_all([c for _, c in cases])
    return [
        Item(images=[ImageRef(image)], texts=[pre_caption(caption)] + [pre_caption(p) for p in perts],
             meta={"subtask": subtask, "correct": 0})
        for (image, caption), perts in zip(cases, perturbed)
    ]


def available(root: Path) -> list[str]:
    return [s for s in SUBTASKS if (root / ANNOTATIONS[s]).is_file()]


def load_subtasks(root: Path, subtasks: list[str], limit: int | None = None) -> list[Item]:
    items: list[Item] = []
    for sub in subtasks:
        items += load_vg(root, sub, limit) if sub in (VG_RELATION, VG_ATTRIBUTION) else load_order(root, sub, limit)
    return items


def _by_subtask(items: list[Item]) -> dict[str, list[int]]:
    by_sub: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        by_sub[it.meta["subtask"]].append(i)
    return by_sub


def _hits(sub: str, scores: np.ndarray) -> np.ndarray:
    """Per case: is the true caption the model's choice (VG: option 1, the ARO files' order; Order:
    option 0; ties go to the first maximum, as the authors' argmax)."""
    return metrics.choice_correct(scores, 1 if sub in (VG_RELATION, VG_ATTRIBUTION) else 0, tie="argmax-first")


def item_hits(items: list[Item], sims: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per subtask, every case's outcome (bool, in the items' order): what paired tests over cases
    compare between two models (micro_accuracy / Order's accuracy are their means)."""
    by_sub = _by_subtask(items)
    return {sub: _hits(sub, np.stack([sims[i][0] for i in by_sub[sub]])) for sub in SUBTASKS if by_sub.get(sub)}


def score_subtasks(items: list[Item], sims: list[np.ndarray], logit_scale: float, prefix: str = "") -> list[dict]:
    """Rows per ARO subtask (prefixed with `prefix` for the world bench), without the headline."""
    by_sub = _by_subtask(items)
    rows = []
    for sub in SUBTASKS:
        idx = by_sub.get(sub)
        if not idx:
            continue
        scores = np.stack([sims[i][0] for i in idx])
        name = prefix + sub
        hits = _hits(sub, scores)
        if sub in (VG_RELATION, VG_ATTRIBUTION):
            per_group: dict[str, list[bool]] = defaultdict(list)
            for i, h in zip(idx, hits):
                per_group[items[i].meta["group"]].append(bool(h))
            if sub == VG_RELATION:
                kept = {g: v for g, v in per_group.items() if g not in excluded_relations()}
            else:
                kept = {g: v for g, v in per_group.items() if len(v) >= MIN_ATTRIBUTE_GROUP}
            macro = metrics.macro_mean(np.mean(v) for v in kept.values())
            rows.append(row(name, "accuracy", macro, sum(len(v) for v in kept.values())))
            rows.append(row(name, "micro_accuracy", hits.mean(), len(idx)))
            rows.append(row(name, "mu_c", metrics.mean_confidence(scores, 1, logit_scale), len(idx)))
            rows.append(row(name, "groups_kept", len(kept), len(per_group)))
            rows += [row(f"{name}/{g}", "accuracy", np.mean(per_group[g]), len(per_group[g]), detail=True) for g in sorted(per_group)]
        else:
            rows.append(row(name, "accuracy", float(hits.mean()), len(idx)))
            rows.append(row(name, "mu_c", metrics.mean_confidence(scores, 0, logit_scale), len(idx)))
    return rows


def headline(rows: list[dict], prefix: str = "") -> dict | None:
    acc = {r["subtask"]: r for r in rows if r["metric"] == "accuracy" and r["subtask"] in {prefix + s for s in SUBTASKS}}
    if not acc:
        return None
    return row(prefix + HEADLINE if prefix else HEADLINE, "accuracy", metrics.macro_mean(r["value"] for r in acc.values()),
               sum(r["n"] for r in acc.values()))


class Aro:
    name = "aro"
    subtasks = SUBTASKS
    layout = LAYOUT
    # what it reads under --data-root: an output there must not replace one of them (api.evaluate)
    data = ("aro/", "coco/", "flickr30k/")

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        root = Path(root)
        if subtasks is None:
            missing = [ANNOTATIONS[s] for s in SUBTASKS if s not in available(root)]
            if missing:
                raise MosaicError(
                    f"aro: missing under {root}: {', '.join(missing)}; download them (see `evaluate --list`) "
                    f"or pick the subtasks you have, e.g. --bench aro:{'+'.join(available(root)) or 'VG-Relation'}"
                )
            subtasks = SUBTASKS
        for s in subtasks:
            if not (root / ANNOTATIONS[s]).is_file():
                raise MosaicError(f"aro: {root / ANNOTATIONS[s]} not found "
                                  "(expected layout: see `mosaictool evaluate --list`; check --data-root)")
        return load_subtasks(root, subtasks, limit)

    def item_hits(self, items: list[Item], sims: list[np.ndarray]) -> dict[str, np.ndarray]:
        return item_hits(items, sims)

    def score(self, items: list[Item], sims: list[np.ndarray], *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        rows = score_subtasks(items, sims, logit_scale)
        present = {it.meta["subtask"] for it in items}
        if present == set(SUBTASKS):
            rows.append(headline(rows))
        return rows


BENCHMARK = Aro()
