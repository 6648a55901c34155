"""The entries of the benchmarks' annotation files, as typed schemas (mosaictool.records' machinery):
what each loader reads, strict types, a bad entry one line naming the file and the entry.

Private (leading underscore), so the registry does not look for a BENCHMARK here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from mosaictool.bench._files import bad_record
from mosaictool.errors import RecordError
from mosaictool.records import Contract, NonEmpty, checker, kind_of

Coordinate = Annotated[float, Field(allow_inf_nan=False)]  # a JSON number (an integer too), finite
Extent = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # a box's width or height: a crop of it must hold pixels
Captions = str | Annotated[list[str], Field(min_length=1)]


class _VGCase(TypedDict):
    """What both of ARO's Visual Genome files hold per case: a region and its true and false caption."""

    image_path: NonEmpty
    bbox_x: Coordinate
    bbox_y: Coordinate
    bbox_w: Extent
    bbox_h: Extent
    true_caption: str
    false_caption: str


class VGRelation(_VGCase):
    """aro/visual_genome_relation.json (ARO's VG_Relation)."""

    relation_name: str


class VGAttribution(_VGCase):
    """aro/visual_genome_attribution.json (ARO's VG_Attribution): the attribute pair names the group."""

    attributes: Annotated[list[str], Field(min_length=2, max_length=2)]


class Karpathy(TypedDict):
    """BLIP's Karpathy test files (ARO's COCO-Order / Flickr30k-Order, retrieval)."""

    image: NonEmpty
    caption: Captions


class SugarCrepeCase(TypedDict):
    filename: NonEmpty
    caption: str
    negative_caption: str


class CrepeRegion(TypedDict):
    """A CREPE CSV row, its region's numbers parsed (`crepe_region`)."""

    image_id: NonEmpty
    x: Coordinate
    y: Coordinate
    width: Extent
    height: Extent
    caption: str


class ProbeCGroup(TypedDict):
    """probe_c/probe_c.jsonl (ours)."""

    id: str | int
    split: str
    images: Annotated[list[NonEmpty], Field(min_length=2, max_length=2)]
    texts: Annotated[list[str], Field(min_length=2, max_length=2)]
    category: NotRequired[str | None]


class ProbeBViews(TypedDict):
    x0: NonEmpty
    x0_patch: NonEmpty
    x1: NonEmpty


class ProbeBRecord(TypedDict):
    """probe_b/probe_b.jsonl (ours)."""

    id: str | int
    split: Literal["MR", "R"]
    filler: str
    images: ProbeBViews
    labels: list[str]
    target: str | None


def _contract(fields: type) -> Contract:
    return Contract(fields.__name__, fields)


VG_RELATION, VG_ATTRIBUTION, KARPATHY = _contract(VGRelation), _contract(VGAttribution), _contract(Karpathy)
SUGARCREPE, CREPE_REGION = _contract(SugarCrepeCase), _contract(CrepeRegion)
PROBE_C, PROBE_B = _contract(ProbeCGroup), _contract(ProbeBRecord)


def check_entry(contract: Contract, entry, bench: str, path: Path, where: str) -> None:
    """MosaicError naming `path`, the entry (`where`: "entry 3", "case '12'") and the field when
    `entry` does not follow `contract`."""
    if not isinstance(entry, dict):
        raise bad_record(bench, path, where, f"expected an object, got {kind_of(entry)}")
    try:
        checker(contract)(entry)
    except RecordError as e:
        raise bad_record(bench, path, where, str(e)) from None


def check_list(data, bench: str, path: Path) -> list:
    """The top of a file that holds a list of entries."""
    if not isinstance(data, list):
        raise bad_record(bench, path, "the top", f"expected a list of entries, got {kind_of(data)}")
    return data


def crepe_region(row: dict, path: Path, line: int) -> dict:
    """A CREPE CSV row with its x, y, width, height as numbers, checked (CSV holds only text)."""
    parsed = dict(row)
    for column in ("x", "y", "width", "height"):
        text = row.get(column)
        try:
            parsed[column] = float(text)
        except (TypeError, ValueError):
            raise bad_record("crepe", path, f"line {line}", f"{column}: expected a number, got {text!r}") from None
        if not math.isfinite(parsed[column]):
            raise bad_record("crepe", path, f"line {line}", f"{column}: expected a finite number, got {text!r}")
    check_entry(CREPE_REGION, parsed, "crepe", path, f"line {line}")
    return parsed
