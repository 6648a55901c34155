"""What a benchmark module hands the engine: items of images and texts, and its scorer (docs/architecture.md: adding a benchmark).

A benchmark module in `mosaictool/bench/` defines `BENCHMARK`, an object with

    name: str                   registry name, e.g. "sugarcrepe"
    subtasks: list[str]
    layout: str                 expected files under --data-root, shown by `evaluate --list`
    load(root, *, limit=None[, subtasks=None]) -> list[Item]   MosaicError on missing annotations
    score(items, sims[, *, logit_scale=100.0]) -> list[dict]    rows {subtask, metric, value, n}

`sims[i]` is the (len(items[i].images), len(items[i].texts)) matrix of cosine similarities of
L2-normalised embeddings. Two optional extensions, used only when the signature accepts them:
`load(..., subtasks=[...])` restricts loading to those subtasks (`--bench aro:VG-Relation`), and
`score(..., logit_scale=s)` receives the model's exp(logit_scale) (CLIP's temperature), which the
mean confidence μ(c) needs. A row with `subtask == HEADLINE` is the benchmark's headline number,
aggregated the way vl_compo does. `BENCHMARK` may also be a tuple of such objects (world, world-val).
`aliases: tuple[str, ...]` is optional; so is `data: tuple[str, ...]`, what it reads under
--data-root ("coco/" for a folder; default: the folder of its name), which no output may replace;
`open_subtasks = True` means subtasks are found in the data (zero-shot task folders) rather than
fixed. An item whose meta has `ensembles` (lists of indices into its texts) gets one sims column per
ensemble: the cosine with the renormalised mean of those texts' embeddings (CLIP's prompt ensembling
for zero-shot classification). `sims` may be a lazy sequence (each matrix computed when indexed):
index it, don't rely on it being a list.

Accuracies are fractions in [0, 1] (the report prints percent).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

HEADLINE = "headline"


@dataclass(frozen=True)
class ImageRef:
    """An image file, optionally cropped to `box` = PIL crop (left, top, right, bottom).

    `data` holds encoded image bytes for images that live inside another file (Winoground's
    parquet); `path` then names where they came from ("test.parquet:row 3:image_0").
    """

    path: str
    box: tuple[float, float, float, float] | None = None
    data: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Item:
    """One test case: its images and texts; `meta` says which subtask it belongs to, which
    answer is right, and anything the scorer needs (always includes "subtask")."""

    images: list[ImageRef]
    texts: list[str]
    meta: dict = field(default_factory=dict)


def xywh_box(x: float, y: float, w: float, h: float) -> tuple[float, float, float, float]:
    """ARO / CREPE regions (x, y, width, height) as a PIL crop box, exactly (x, y, x+w, y+h)."""
    return (float(x), float(y), float(x) + float(w), float(y) + float(h))


def row(subtask: str, metric: str, value: float, n: int, *, detail: bool = False) -> dict:
    """A result row; `detail` marks a breakdown (per relation, per complexity) that the Markdown
    report and the plot leave out (the JSONL keeps it). A metric that is undefined (NaN: no item
    scored, as with a small --limit) is `value: null`, said by the row itself: JSON has no NaN, and
    records refuse one rather than let it become null unseen."""
    value = float("nan") if value is None else float(value)
    out = {"subtask": subtask, "metric": metric, "value": None if math.isnan(value) else value, "n": int(n)}
    if detail:
        out["detail"] = True
    return out
