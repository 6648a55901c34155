"""CREPE (Ma et al. 2023): systematicity and productivity, image-to-text ranking with hard negatives.

Scored as `RAIVNLab/CREPE` does: the image region (x, y, width, height) of a
Visual Genome image against [caption] + hard negatives; the rank of the caption (1-based; a tie is
broken by list order, so the caption, first, wins it) gives R@1/3/5/10 and mean / median / std
rank. Features are L2-normalised (the post-e4836ac behaviour). Rows per file: productivity
`<type>/complexity_<c>` for type in atom/swap/negate, systematicity
`syst/<seen|unseen>_compounds_in_<dataset>/<atom|comp|combined>`. A CSV row whose hard-negative
list is empty is not a ranking case; such rows are counted in `cases_without_negatives`.

The summary rows `atom`, `swap`, `negate` (what vl_compo reports as crepe::{atom,swap,negate}) are
R@1 averaged over the complexities present — vl_compo's code is unreleased, so this reduction is
our reading; the headline is their mean.
"""

from __future__ import annotations

import ast
import csv
import io
from collections import defaultdict
from pathlib import Path

from mosaictool.bench import metrics
from mosaictool.bench._files import bad_record, read_text
from mosaictool.bench._formats import crepe_region
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row, xywh_box
from mosaictool.errors import MosaicError

PROD_TYPES = ["atom", "swap", "negate"]
COMPLEXITIES = range(4, 13)
SYST_SPLITS = [f"{s}_compounds_in_{d}" for s in ("seen", "unseen") for d in ("laion", "cc12m", "yfcc")]
SYST_TYPES = ["atom", "comp", "combined"]
SUBTASKS = ["productivity", "systematicity"]
RANK_KS = (1, 3, 5, 10)

LAYOUT = """\
  crepe/prod_hard_negatives/{atom,swap,negate}/prod_vg_hard_negs_{type}_complexity_{4..12}.csv
                                       image_id, x, y, width, height, caption, hard_negs (Python list literal)
  crepe/syst_vg_hard_negs_{seen,unseen}_compounds_in_{laion,cc12m,yfcc}.csv
                                       image_id, region_id, x, y, width, height, caption, valid_hard_negs_{atom,comp,combined}
  crepe/VG_100K/<image_id>.jpg         Visual Genome images (fallback crepe/VG_100K_2/), cropped to (x, y, width, height)"""


def prod_file(root: Path, kind: str, complexity: int) -> Path:
    return root / "crepe" / "prod_hard_negatives" / kind / f"prod_vg_hard_negs_{kind}_complexity_{complexity}.csv"


def syst_file(root: Path, split: str) -> Path:
    return root / "crepe" / f"syst_vg_hard_negs_{split}.csv"


def image_path(root: Path, image_id: str) -> str:
    first = root / "crepe" / "VG_100K" / f"{image_id}.jpg"
    second = root / "crepe" / "VG_100K_2" / f"{image_id}.jpg"
    return str(second if not first.is_file() and second.is_file() else first)


def _image_id(value: str) -> str:
    value = value.strip()
    try:
        return str(int(float(value)))
    except ValueError:
        return value


def _negatives(path: Path, line: int, column: str, text: str) -> list[str]:
    try:
        value = ast.literal_eval(text) if text.strip() else []
    except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
        raise bad_record("crepe", path, f"line {line}", f"{column}: expected a Python list literal of strings ({e})") from None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        raise bad_record("crepe", path, f"line {line}", f"{column}: expected a list of non-empty strings, got {text[:60]!r}")
    return list(value)


def _read_csv(path: Path, list_columns: list[str], subtask_of: dict[str, str], limit: int | None) -> list[Item]:
    """Items from one CREPE CSV: one per (row, list column); an empty list gives an item marked
    `no_negatives`, counted by the scorer instead of ranked."""
    items = []
    root = path.parents[3] if "prod_hard_negatives" in path.parts else path.parents[1]
    with io.StringIO(read_text(path, "crepe"), newline="") as f:
        reader = csv.DictReader(f)
        need = ["image_id", "x", "y", "width", "height", "caption", *list_columns]
        missing = [c for c in need if c not in (reader.fieldnames or [])]
        if missing:
            raise MosaicError(f"{path}: missing column(s) {', '.join(missing)} (CREPE's format)")
        for line, rec in enumerate(reader, start=2):
            region = crepe_region(rec, path, line)
            box = xywh_box(region["x"], region["y"], region["width"], region["height"])
            ref = ImageRef(image_path(root, _image_id(rec["image_id"])), box)
            for column in list_columns:
                negs = _negatives(path, line, column, rec[column])
                meta = {"subtask": subtask_of[column], **({} if negs else {"no_negatives": True})}
                items.append(Item(images=[ref], texts=[rec["caption"], *negs], meta=meta))
            if limit and len(items) >= limit:
                break
    return items


def load_productivity(root: Path, limit: int | None = None) -> list[Item]:
    items = []
    for kind in PROD_TYPES:
        for c in COMPLEXITIES:
            path = prod_file(root, kind, c)
            if path.is_file():
                items += _read_csv(path, ["hard_negs"], {"hard_negs": f"{kind}/complexity_{c}"}, limit)
    return items


def load_systematicity(root: Path, limit: int | None = None) -> list[Item]:
    items = []
    for split in SYST_SPLITS:
        path = syst_file(root, split)
        if path.is_file():
            columns = {f"valid_hard_negs_{t}": f"syst/{split}/{t}" for t in SYST_TYPES}
            items += _read_csv(path, list(columns), columns, limit)
    return items


def load_groups(root: Path, groups: list[str], limit: int | None = None, *, required: bool = True) -> list[Item]:
    items = []
    for group in groups:
        got = (load_productivity if group == "productivity" else load_systematicity)(root, limit)
        if not got and required:
            raise MosaicError(f"crepe: no {group} files under {root / 'crepe'}; expected:\n{LAYOUT}")
        items += got
    return items


def score_rows(items: list[Item], sims, prefix: str = "") -> list[dict]:
    by_sub: dict[str, list[int]] = defaultdict(list)
    empty = 0
    for i, it in enumerate(items):
        if it.meta.get("no_negatives"):
            empty += 1
        else:
            by_sub[it.meta["subtask"]].append(i)
    rows = []
    r1_by_type: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for sub in sorted(by_sub, key=_subtask_order):
        ranks = [metrics.rank_of(sims[i][0], 0) for i in by_sub[sub]]
        m = metrics.rank_metrics(ranks, RANK_KS)
        kind = sub.split("/")[0]
        # productivity is summarised per type below; systematicity's R@1 per split is a main number
        rows += [row(prefix + sub, name, value, len(ranks), detail=kind in PROD_TYPES or name != "R@1") for name, value in m.items()]
        if kind in PROD_TYPES:
            r1_by_type[kind].append((m["R@1"], len(ranks)))
    for kind in PROD_TYPES:
        if r1_by_type[kind]:
            rows.append(row(prefix + kind, "R@1", metrics.macro_mean(v for v, _ in r1_by_type[kind]), sum(n for _, n in r1_by_type[kind])))
    if empty:
        rows.append(row(prefix + "*", "cases_without_negatives", empty, empty))
    return rows


def _subtask_order(sub: str):
    parts = sub.split("/")
    if parts[0] in PROD_TYPES:
        return (0, PROD_TYPES.index(parts[0]), int(parts[1].split("_")[1]))
    return (1, SYST_SPLITS.index(parts[1]), SYST_TYPES.index(parts[2]))


def headline(rows: list[dict], prefix: str = "") -> dict | None:
    got = [r for r in rows if r["subtask"] in {prefix + k for k in PROD_TYPES} and r["metric"] == "R@1"]
    if len(got) != len(PROD_TYPES):
        return None
    return row(prefix + HEADLINE, "R@1", metrics.macro_mean(r["value"] for r in got), sum(r["n"] for r in got))


class Crepe:
    name = "crepe"
    subtasks = SUBTASKS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        root = Path(root)
        if subtasks:
            return load_groups(root, subtasks, limit)
        items = load_groups(root, SUBTASKS, limit, required=False)
        if not items:
            raise MosaicError(f"crepe: no CREPE files under {root / 'crepe'}; expected:\n{LAYOUT}")
        return items

    def score(self, items: list[Item], sims) -> list[dict]:
        rows = score_rows(items, sims)
        head = headline(rows)
        return rows + ([head] if head else [])


BENCHMARK = Crepe()
