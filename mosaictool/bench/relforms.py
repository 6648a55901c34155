"""The world's relation items in several sentence forms (family `relforms` of `world` / `world-val`).

`W/<split>/relforms/relation_forms.jsonl` (written by `mosaictool world`, mosaictool.world.splits):
per line an image where object A is <rel> object B and its twin (A and B trade cells, so B is <rel>
A there), and for each form the caption (true of the image) and its swap (true of the twin):
copular "the A is <rel> the B" (VG-Relation's and the plain captions' form), subgraph "a A <rel> a B"
(MosaiCLIP's sub-graph text), and two forms no train text uses, fronted "<rel> the B is the A" and
with "a B with a A <rel> it". `held_out`: the forms no train text uses; `prior`: for each image,
whether its true relation is the one the world's placement priors favour for the two shapes (agree /
violate / neutral). The forms are read from the file, in its order.

One item per (record, form), images [image, twin] and texts [caption, swap], so s[k, k] is the
match. Rows, every comparison strict (a tie is wrong, as ARO's VG-Relation and Winoground count it):
- `relforms/<form>` accuracy: per image, the true text scores above the other (2 cases per record);
  text / image / group: Winoground's scores (Thrush et al. 2022) on the 2x2 matrix
  (metrics.winoground_scores); `relforms/<form>/<prior class>`: accuracy over the images of that class.
- `relforms/held-out` (the held-out forms together, each (record, form) a case): accuracy, text,
  image, `relforms/held-out-group` group, and `relforms/held-out-<prior class>` accuracy;
  `relforms/trained`, `relforms/trained-group`, `relforms/trained-<prior class>` the same for the
  forms train texts use (copular and sub-graph: NegCLIP's swaps and MosaiCLIP's sub-graph texts are
  in one each, so pooled neither method's form weighs more).
A reader blind to the image scores 0 on text, image and group (its scores do not change with the
image, so a pair it gets right on one image it gets wrong on the other) and exactly 50 on accuracy
over agree and violate images together, whatever prior it knows.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import json_value, read_text
from mosaictool.bench.base import ImageRef, Item, row
from mosaictool.errors import MosaicError

FILE = "relforms/relation_forms.jsonl"
FIELDS = ("id", "images", "forms", "held_out", "prior")
PRIOR_CLASSES = ("agree", "violate", "neutral")
HELD_OUT = "held-out"
TRAINED = "trained"


def load_items(split_dir: Path, name: str, limit: int | None = None) -> list[Item]:
    """One Item per (record, form), in the file's order; meta["held_out"]: whether no train text uses the form;
    `limit` = records."""
    path = split_dir / FILE
    folder = path.parent
    items = []
    records = 0
    for lineno, line in enumerate(read_text(path, name).splitlines(), 1):
        if not line.strip():
            continue
        if limit is not None and records >= limit:
            break
        rec = json_value(line, f"{name}: {path}:{lineno}", hint="make the world again")
        missing = [k for k in FIELDS if not isinstance(rec, dict) or k not in rec]
        if missing:
            raise MosaicError(f"{name}: {path}:{lineno}: missing field(s) {', '.join(missing)}; make the world again")
        forms = rec["forms"]
        if (not isinstance(forms, dict) or len(rec["images"]) != 2 or len(rec["prior"]) != 2
                or any(not isinstance(t, list) or len(t) != 2 for t in forms.values())):
            raise MosaicError(f"{name}: {path}:{lineno}: expected 2 images, 2 prior classes and 2 texts per form; "
                              "make the world again")
        images = [ImageRef(str(folder / p)) for p in rec["images"]]
        for form in forms:
            items.append(Item(images, list(forms[form]), {"subtask": form, "prior": list(rec["prior"]), "id": rec["id"],
                                                          "held_out": form in rec["held_out"]}))
        records += 1
    return items


def _image_hits(s: np.ndarray) -> list[bool]:
    """Per image k of the pair: its own text (k) scores strictly above the other one."""
    return [bool(s[0, 0] > s[0, 1]), bool(s[1, 1] > s[1, 0])]


def _cases(items: list[Item], sims) -> dict[str, dict]:
    """Per form: the 2x2 matrices, the per-image hits and their prior classes, in item order."""
    out: dict[str, dict] = defaultdict(lambda: {"matrices": [], "hits": [], "prior": []})
    for k, it in enumerate(items):
        s = np.asarray(sims[k], dtype=np.float64)
        got = out[it.meta["subtask"]]
        got["matrices"].append(s)
        got["hits"] += _image_hits(s)
        got["prior"] += it.meta["prior"]
    return out


def _pools(items: list[Item]) -> dict[str, list[str]]:
    """The forms pooled under each name, in item order: held-out (no train text uses them) and trained (the
    others); an empty pool is left out."""
    held_out = {it.meta["subtask"]: it.meta["held_out"] for it in items}
    pools = {HELD_OUT: [f for f, held in held_out.items() if held], TRAINED: [f for f, held in held_out.items() if not held]}
    return {name: forms for name, forms in pools.items() if forms}


def _forms(items: list[Item]) -> list[str]:
    return list(dict.fromkeys(it.meta["subtask"] for it in items))


def _pooled(cases: dict[str, dict], forms) -> dict:
    return {key: [x for f in forms for x in cases[f][key]] for key in ("matrices", "hits", "prior")}


def _rows(name: str, got: dict, group_name: str | None = None, prior_name: str | None = None) -> list[dict]:
    hits, prior, matrices = np.array(got["hits"], dtype=bool), got["prior"], got["matrices"]
    rows = [row(name, "accuracy", float(hits.mean()) if hits.size else float("nan"), hits.size)]
    wino = metrics.winoground_accuracy(matrices)
    for key in ("text", "image", "group"):
        rows.append(row(name if key != "group" or group_name is None else group_name, key, wino[key], len(matrices)))
    for cls in PRIOR_CLASSES:
        mask = np.array([p == cls for p in prior], dtype=bool)
        sub = f"{name}/{cls}" if prior_name is None else f"{prior_name}-{cls}"
        rows.append(row(sub, "accuracy", float(hits[mask].mean()) if mask.any() else float("nan"), int(mask.sum()),
                        detail=prior_name is None))
    return rows


def score_rows(items: list[Item], sims) -> list[dict]:
    """Rows per form (prior split as detail rows), for the held-out forms together and for the trained ones."""
    cases = _cases(items, sims)
    rows = [r for form in _forms(items) for r in _rows(form, cases[form])]
    for pool, forms in _pools(items).items():
        rows += _rows(pool, _pooled(cases, forms), group_name=f"{pool}-group", prior_name=pool)
    return rows


def item_hits(items: list[Item], sims) -> dict[str, np.ndarray]:
    """Every case's outcome, keyed like the rows whose mean it is: `<form>`, `held-out` and `trained`
    (accuracy, 2 images per record and form), `held-out-group` and `trained-group` (group, one per record
    and form of the pool), `<pool>-<prior class>` (accuracy over that class's images)."""
    cases = _cases(items, sims)
    out = {form: np.array(cases[form]["hits"], dtype=bool) for form in _forms(items)}
    for pool, forms in _pools(items).items():
        pooled = _pooled(cases, forms)
        hits = np.array(pooled["hits"], dtype=bool)
        out[pool] = hits
        out[f"{pool}-group"] = np.array([metrics.winoground_scores(m)["group"] for m in pooled["matrices"]], dtype=bool)
        for cls in PRIOR_CLASSES:
            out[f"{pool}-{cls}"] = hits[np.array([p == cls for p in pooled["prior"]], dtype=bool)]
    return out
