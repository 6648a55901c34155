"""SugarCrepe (Hsieh et al. 2023): 7 subsets of COCO val2017 images with a hard negative caption.

Scored as `RAIVNLab/sugar-crepe` main_eval.py does: correct iff
score(image, caption) > score(image, negative_caption) — strict, a tie is wrong (CLIP_benchmark's
argmax would count it right). Accuracy per subset, μ(c) beside it. Headline (vl_compo): mean of
the replace / swap / add category micro-averages (count-weighted; swap_obj has 245 cases since the
Nov 2023 fix, so its keys are not contiguous).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import bad_record, read_json
from mosaictool.bench._formats import SUGARCREPE, check_entry
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row
from mosaictool.errors import MosaicError
from mosaictool.records import kind_of

SUBTASKS = ["add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj"]
CATEGORIES = {"replace": ["replace_att", "replace_obj", "replace_rel"], "swap": ["swap_att", "swap_obj"], "add": ["add_att", "add_obj"]}
IMAGE_DIR = "coco/val2017"

LAYOUT = """\
  sugarcrepe/{add_att,add_obj,replace_att,replace_obj,replace_rel,swap_att,swap_obj}.json
                                       (or sugarcrepe/data/..., the repo's layout) dict key -> {filename, caption, negative_caption}
  coco/val2017/<filename>              COCO 2017 val images"""


def annotation_path(root: Path, subset: str) -> Path:
    direct = root / "sugarcrepe" / f"{subset}.json"
    repo_layout = root / "sugarcrepe" / "data" / f"{subset}.json"
    return repo_layout if not direct.is_file() and repo_layout.is_file() else direct


def load_subset(root: Path, subset: str, limit: int | None = None) -> list[Item]:
    path = annotation_path(root, subset)
    if not path.is_file():
        raise MosaicError(f"sugarcrepe: {path} not found; get it from github.com/RAIVNLab/sugar-crepe (data/{subset}.json) "
                          "or check --data-root")
    data = read_json(path, "sugarcrepe")
    if not isinstance(data, dict):
        raise bad_record("sugarcrepe", path, "the top", f"expected an object of cases by key, got {kind_of(data)}")
    items = []
    for key, rec in data.items():
        check_entry(SUGARCREPE, rec, "sugarcrepe", path, f"case {key!r}")
        items.append(
            Item(
                images=[ImageRef(str(root / IMAGE_DIR / rec["filename"]))],
                texts=[rec["caption"], rec["negative_caption"]],
                meta={"subtask": subset, "key": key},
            )
        )
        if limit and len(items) >= limit:
            break
    return items


class SugarCrepe:
    name = "sugarcrepe"
    subtasks = SUBTASKS
    layout = LAYOUT
    # what it reads under --data-root: an output there must not replace one of them (api.evaluate)
    data = ("sugarcrepe/", "coco/")

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        return [it for s in subtasks or SUBTASKS for it in load_subset(Path(root), s, limit)]

    def score(self, items: list[Item], sims: list[np.ndarray], *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        by_sub: dict[str, list[int]] = defaultdict(list)
        for i, it in enumerate(items):
            by_sub[it.meta["subtask"]].append(i)
        rows, acc = [], {}
        for sub in SUBTASKS:
            if sub not in by_sub:
                continue
            scores = np.stack([sims[i][0] for i in by_sub[sub]])
            acc[sub] = (metrics.choice_accuracy(scores, 0, tie="strict"), len(scores))
            rows.append(row(sub, "accuracy", acc[sub][0], len(scores)))
            rows.append(row(sub, "mu_c", metrics.mean_confidence(scores, 0, logit_scale), len(scores)))
        category = {}
        for cat, subs in CATEGORIES.items():
            got = [acc[s] for s in subs if s in acc]
            if got:
                category[cat] = (metrics.micro_mean(*zip(*got)), sum(n for _, n in got))
                rows.append(row(cat, "accuracy", *category[cat]))
        if acc:
            rows.append(row("overall", "accuracy", metrics.micro_mean(*zip(*acc.values())), sum(n for _, n in acc.values())))
        if set(acc) == set(SUBTASKS):
            rows.append(row(HEADLINE, "accuracy", metrics.macro_mean(v for v, _ in category.values()), sum(n for _, n in acc.values())))
        return rows


BENCHMARK = SugarCrepe()
