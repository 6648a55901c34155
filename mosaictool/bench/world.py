"""The synthetic world's test (`world`) and validation (`world-val`) splits (docs/stages.md, "world"; docs/evaluate.md).

`mosaictool world --out W` writes `W/test/` and `W/val/` in the real benchmarks' layouts; this
scores whatever of them a split holds, through the very same loaders and metrics: ARO (aro/),
CREPE (crepe/), zero-shot classification (zeroshot/) and, when the Karpathy-style caption file is
there, retrieval. Subtasks are prefixed with their family: `aro/VG-Relation`, `crepe/atom`,
`zeroshot/<task>`, `retrieval/coco`.

Probe-C and Probe-B (Schiappa et al. 2023; families `probe_c`, `probe_b`) and relation in several sentence forms
(family `relforms`, mosaictool.bench.relforms) are scored when the split has them; their rows are reported but stay
out of the headline, which therefore means what it meant before they existed.

Headline: the mean over the compositional scores present — the ARO accuracies and the CREPE
productivity R@1 of atom / swap / negate (a score that is NaN, e.g. VG-Attribution of a very small
world with no attribute pair of >= 25 cases, is left out). Zero-shot and retrieval are left out of it: they measure
what a model keeps (forgetting), not composition.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from mosaictool.bench import aro, crepe, metrics, probe_b, probe_c, relforms, retrieval, zeroshot
from mosaictool.bench.base import HEADLINE, Item, row
from mosaictool.errors import MosaicError

FAMILIES = ["aro", "crepe", "zeroshot", "retrieval", "probe_c", "probe_b", "relforms"]

LAYOUT_TEMPLATE = """\
  manifest.json                        written by `mosaictool world --out W`
  {split}/aro/..., {split}/coco/...      ARO layout (see `aro`)
  {split}/crepe/...                      CREPE layout (see `crepe`)
  {split}/zeroshot/<task>/...            zero-shot layout (see `zeroshot`)
  {split}/probe_c/..., {split}/probe_b/...  Probe-C / Probe-B layouts (see `probe_c`, `probe_b`)
  {split}/relforms/relation_forms.jsonl, images/  relation in several sentence forms, on an image and its twin"""


def _prefixed(items: list[Item], family: str) -> list[Item]:
    return [Item(it.images, it.texts, {**it.meta, "family": family}) for it in items]


def load_split(split_dir: Path, limit: int | None = None, families: list[str] | None = None) -> list[Item]:
    items: list[Item] = []
    wanted = families or FAMILIES
    if "aro" in wanted:
        items += _prefixed(aro.load_subtasks(split_dir, aro.available(split_dir), limit), "aro")
    if "crepe" in wanted:
        items += _prefixed(crepe.load_groups(split_dir, crepe.SUBTASKS, limit, required=False), "crepe")
    if "zeroshot" in wanted:
        items += _prefixed([it for t in zeroshot.tasks(split_dir) for it in zeroshot.load_task(split_dir, t, limit)], "zeroshot")
    if "retrieval" in wanted and (split_dir / retrieval.DATASETS["coco"][0]).is_file():
        items += _prefixed(retrieval.load_dataset(split_dir, "coco", limit), "retrieval")
    # the Probe paper's benchmarks (Schiappa et al. 2023), in worlds made since they were added
    if "probe_c" in wanted and (split_dir / "probe_c" / "probe_c.jsonl").is_file():
        items += _prefixed(probe_c.load_groups(split_dir / "probe_c", "world probe_c", limit), "probe_c")
    if "probe_b" in wanted and (split_dir / "probe_b" / "probe_b.jsonl").is_file():
        items += _prefixed(probe_b.load_records(split_dir / "probe_b", "world probe_b", limit), "probe_b")
    # relation in several sentence forms on an image and its twin, in worlds made since mosaic-world/5
    if "relforms" in wanted and (split_dir / relforms.FILE).is_file():
        items += _prefixed(relforms.load_items(split_dir, "world relforms", limit), "relforms")
    return items


def score_split(items: list[Item], sims, logit_scale: float) -> list[dict]:
    by_family: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        by_family[it.meta["family"]].append(i)
    rows: list[dict] = []
    compositional: list[dict] = []
    for family in FAMILIES:
        idx = by_family.get(family)
        if not idx:
            continue
        fam_items = [items[i] for i in idx]
        fam_sims = _Subset(sims, idx)
        if family == "aro":
            got = aro.score_subtasks(fam_items, fam_sims, logit_scale)
            compositional += [r for r in got if r["metric"] == "accuracy" and r["subtask"] in aro.SUBTASKS]
        elif family == "crepe":
            got = crepe.score_rows(fam_items, fam_sims)
            compositional += [r for r in got if r["metric"] == "R@1" and r["subtask"] in crepe.PROD_TYPES]
        elif family == "zeroshot":
            got = [r for k, it in enumerate(fam_items) for r in zeroshot.score_item(it, fam_sims[k], it.meta["subtask"])]
        elif family == "probe_c":
            got = [r for r in probe_c.score_rows(fam_items, fam_sims, logit_scale) if r["subtask"] != HEADLINE]
        elif family == "probe_b":
            got = [r for r in probe_b.score_rows(fam_items, fam_sims, logit_scale) if r["subtask"] != HEADLINE]
        elif family == "relforms":
            got = relforms.score_rows(fam_items, fam_sims)
        else:
            got = retrieval.score_rows(fam_items, fam_sims)
        rows += [{**r, "subtask": f"{family}/{r['subtask']}"} for r in got]
    # a small world (--eval-scale 0.1) can leave VG-Attribution without a pair of >= 25 cases (NaN):
    # the headline then averages the scores that exist rather than becoming NaN itself
    scored = [r for r in compositional if r["value"] is not None]
    if scored:
        rows.append(row(HEADLINE, "accuracy", metrics.macro_mean(r["value"] for r in scored), sum(r["n"] for r in scored)))
    return rows


class _Subset:
    """sims restricted to some item indices, still computed lazily."""

    def __init__(self, sims, idx: list[int]):
        self.sims, self.idx = sims, idx

    def __len__(self) -> int:
        return len(self.idx)

    def __getitem__(self, k: int):
        return self.sims[self.idx[k]]


class WorldSplit:
    subtasks = FAMILIES

    def __init__(self, name: str, split: str):
        self.name, self.split = name, split
        self.data = ("manifest.json", f"{split}/")  # what it reads under --data-root (api.evaluate)
        self.layout = (f"  (--data-root W = the folder `mosaictool world --out W` wrote; scores W/{split}/)\n"
                       + LAYOUT_TEMPLATE.format(split=split))

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        split_dir = Path(root) / self.split
        if not split_dir.is_dir():
            hint = " (--data-root is the world folder itself, not its split)" if (Path(root) / "aro").is_dir() else ""
            raise MosaicError(f"{self.name}: {split_dir} not found{hint}; create a world with `mosaictool world --out {root}`")
        items = load_split(split_dir, limit, subtasks)
        if not items:
            raise MosaicError(f"{self.name}: no benchmark files under {split_dir}; expected:\n{self.layout}")
        return items

    def item_hits(self, items: list[Item], sims) -> dict[str, np.ndarray]:
        """Per ARO subtask (prefixed aro/) and relforms subtask (prefixed relforms/), every case's outcome: see
        aro.item_hits, relforms.item_hits."""
        out = {}
        for family, hits_of in (("aro", aro.item_hits), ("relforms", relforms.item_hits)):
            idx = [i for i, it in enumerate(items) if it.meta["family"] == family]
            got = hits_of([items[i] for i in idx], _Subset(sims, idx)) if idx else {}
            out.update({f"{family}/{sub}": hits for sub, hits in got.items()})
        return out

    def score(self, items: list[Item], sims, *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        return score_split(items, sims, logit_scale)


BENCHMARK = (WorldSplit("world", "test"), WorldSplit("world-val", "val"))
