"""EqBen (Wangt-CN/EqBen): Winoground-style pairs with a *visual*-minimal change (video frames,
Kubric and Stable Diffusion renders): two images, two captions, each caption matches one image.

Rules (`Wangt-CN/EqBen`, `evaluate_eqben_locally.py`): the Winoground text / image / group scores
(strict comparisons, a tie is wrong) per subset. vl_compo's headline is the mean of the group
scores over (ag, youcook2, gebc, the mean of the 3 kubric subsets, sd).

Annotations are the per-subset files the official `eqben_utils` loaders read, all in one shape
at the bottom: dicts {image0, caption0, image1, caption1}. eqbenag nests them as
video -> subject -> [pairs] with caption lists (the first caption is used, as officially);
youcook2 / gebc as video -> [pairs]; kubric and sd as a flat list.

YouCook2 frames are `.npy` arrays in BGR order; the engine must read them like the official
toolkit (`Image.fromarray(np.load(p)[:, :, [2, 1, 0]])`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import bad_record, chosen, headline, mean_row, read_json, require_files
from mosaictool.bench._formats import EQBEN, check_entry
from mosaictool.bench.base import ImageRef, Item, row

SUBSETS = ["eqbenag", "eqbenyoucook2", "eqbengebc", "eqbenkubric_loc", "eqbenkubric_attr", "eqbenkubric_cnt", "eqbensd"]
KUBRIC = ["eqbenkubric_loc", "eqbenkubric_attr", "eqbenkubric_cnt"]
PAIR_KEYS = ("image0", "caption0", "image1", "caption1")

LAYOUT = """\
  eqben/annotations/<subset>.json           subset = eqbenag, eqbenyoucook2, eqbengebc, eqbenkubric_{loc,attr,cnt}, eqbensd;
                                            each the official per-subset annotation: {image0, caption0, image1, caption1}
                                            pairs (eqbenag: video -> subject -> [pairs], captions as lists;
                                            youcook2/gebc: video -> [pairs]; kubric/sd: [pairs])
  eqben/images/<image0 path>                the image tree the annotation paths are relative to (youcook2: .npy frames)
  Winoground text/image/group per subset (strict); headline = mean group of ag, youcook2, gebc, kubric (mean of 3), sd"""


def _pairs(node, path: Path, where: str):
    """Every {image0, caption0, image1, caption1} dict under a nest of dicts and lists, in order."""
    if isinstance(node, dict) and "image0" in node:
        check_entry(EQBEN, node, "eqben", path, where or "the top")
        yield node, where
    elif isinstance(node, dict):
        for key, child in node.items():
            yield from _pairs(child, path, f"{where}/{key}")
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from _pairs(child, path, f"{where}[{i}]")
    else:
        raise bad_record("eqben", path, where, "expected image/caption pairs, lists or dicts of them")


def _caption(value) -> str:
    return value[0] if isinstance(value, list) else value  # eqbenag: the first caption (checked: EQBEN)


class EqBen:
    name = "eqben"
    subtasks = SUBSETS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """One item per pair, in file order; `limit` = at most that many per subset."""
        names = chosen(self.subtasks, subtasks, self.name)
        base = Path(root) / "eqben"
        require_files([base / "annotations" / f"{n}.json" for n in names], self.name, self.layout)
        items = []
        for sub in names:
            path = base / "annotations" / f"{sub}.json"
            for n, (pair, where) in enumerate(_pairs(read_json(path, self.name), path, "")):
                if limit is not None and n >= limit:
                    break
                images = [ImageRef(str(base / "images" / pair[k])) for k in ("image0", "image1")]
                texts = [_caption(pair[k]) for k in ("caption0", "caption1")]
                items.append(Item(images, texts, {"subtask": sub}))
        return items

    def score(self, items: list[Item], sims: list[np.ndarray]) -> list[dict]:
        by_sub: dict[str, list[np.ndarray]] = {}
        for item, s in zip(items, sims):
            by_sub.setdefault(item.meta["subtask"], []).append(np.asarray(s, dtype=np.float64))
        rows, group = [], {}
        for sub in SUBSETS:
            if sub in by_sub:
                acc = metrics.winoground_accuracy(by_sub[sub])
                scored = [row(sub, k, v, len(by_sub[sub])) for k, v in acc.items()]
                rows += scored
                group[sub] = next(r for r in scored if r["metric"] == "group")
        kubric = mean_row("eqbenkubric", "group", [group[k] for k in KUBRIC]) if all(k in group for k in KUBRIC) else None
        if kubric:
            rows.append(kubric)
        parts = [group.get("eqbenag"), group.get("eqbenyoucook2"), group.get("eqbengebc"), kubric, group.get("eqbensd")]
        return rows + headline("group", parts)


BENCHMARK = EqBen()
