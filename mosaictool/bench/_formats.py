"""The entries of the benchmarks' annotation files, as typed schemas (mosaictool.records' machinery):
what each loader reads, strict types, a bad entry one line naming the file and the entry.

Private (leading underscore), so the registry does not look for a BENCHMARK here.
"""

from __future__ import annotations

import math
import posixpath
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field
from typing_extensions import NotRequired, TypedDict

from mosaictool.bench._files import bad_record
from mosaictool.errors import RecordError
from mosaictool.records import Contract, NonEmpty, checker, kind_of, rule_error


def _inside(what: str):
    """A path the loader joins under --data-root: relative, and no `..` that climbs out of it (an
    annotation file must not make evaluate read /etc/passwd)."""

    def check(value: str) -> str:
        norm = posixpath.normpath(value.replace("\\", "/"))
        if posixpath.isabs(norm) or norm == ".." or norm.startswith("../") or "\0" in value:
            raise rule_error(f"expected {what} inside --data-root, got {value!r}")
        return value

    return AfterValidator(check)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise rule_error(f"expected a non-empty string, got {value!r}")
    return value


Text = Annotated[NonEmpty, AfterValidator(_not_blank)]  # a caption: an empty one is no test of anything
RelPath = Annotated[NonEmpty, _inside("a relative path")]
ImageId = Annotated[NonEmpty, _inside("an image id")]
Coordinate = Annotated[float, Field(allow_inf_nan=False)]  # a JSON number (an integer too), finite
Extent = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # a box's width or height: a crop of it must hold pixels
Captions = Text | Annotated[list[Text], Field(min_length=1)]


class _VGCase(TypedDict):
    """What both of ARO's Visual Genome files hold per case: a region and its true and false caption."""

    image_path: RelPath
    bbox_x: Coordinate
    bbox_y: Coordinate
    bbox_w: Extent
    bbox_h: Extent
    true_caption: Text
    false_caption: Text


class VGRelation(_VGCase):
    """aro/visual_genome_relation.json (ARO's VG_Relation)."""

    relation_name: str


class VGAttribution(_VGCase):
    """aro/visual_genome_attribution.json (ARO's VG_Attribution): the attribute pair names the group."""

    attributes: Annotated[list[str], Field(min_length=2, max_length=2)]


class Karpathy(TypedDict):
    """BLIP's Karpathy test files (ARO's COCO-Order / Flickr30k-Order, retrieval)."""

    image: RelPath
    caption: Captions


class SugarCrepeCase(TypedDict):
    filename: RelPath
    caption: Text
    negative_caption: Text


class ValseVotes(TypedDict):
    caption: int


class ValseRecord(TypedDict):
    """valse/data/<instrument>.json, one record (the fields scoring reads)."""

    image_file: RelPath
    caption: Text
    foil: Text
    mturk: ValseVotes


class VLChecklistCase(TypedDict):
    """One [image, {POS, NEG}] of a VL-CheckList file, as {image, POS, NEG}."""

    image: RelPath
    POS: Annotated[list[Text], Field(min_length=1)]
    NEG: Annotated[list[Text], Field(min_length=1)]


class EqBenPair(TypedDict):
    image0: RelPath
    caption0: Captions
    image1: RelPath
    caption1: Captions


class WhatsUpControlled(TypedDict):
    image_path: RelPath
    caption_options: Annotated[list[Text], Field(min_length=4, max_length=4)]


class WhatsUpQA(TypedDict):
    """A COCO-QA / VG-QA [image_id, right caption, wrong caption], as an object."""

    image_id: int | ImageId
    right: Text
    wrong: Text


class WinogroundExample(TypedDict):
    """winoground/data/examples.jsonl, one line (image fields are file stems under images/)."""

    id: int | str
    image_0: RelPath
    image_1: RelPath
    caption_0: Text
    caption_1: Text
    collapsed_tag: Literal["Object", "Relation", "Both"]


class WinogroundRow(TypedDict):
    """A row of the Hugging Face parquet: the images are embedded (checked where read)."""

    id: int | str
    image_0: Any
    image_1: Any
    caption_0: Text
    caption_1: Text
    collapsed_tag: Literal["Object", "Relation", "Both"]


class CrepeRegion(TypedDict):
    """A CREPE CSV row, its region's numbers parsed (`crepe_region`)."""

    image_id: ImageId
    x: Coordinate
    y: Coordinate
    width: Extent
    height: Extent
    caption: Text


class ProbeCGroup(TypedDict):
    """probe_c/probe_c.jsonl (ours). `mosaictool probe build` writes image paths relative to the file's
    folder, which may climb out of it to the user's COCO / VG images: not RelPath."""

    id: str | int
    split: str
    images: Annotated[list[NonEmpty], Field(min_length=2, max_length=2)]
    texts: Annotated[list[Text], Field(min_length=2, max_length=2)]
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


class ProbeRTexts(TypedDict):
    R1: Text
    R2: Text
    R3: Text
    O1: Text
    O3: Text


class ProbeRGroup(TypedDict):
    """probe_r/probe_r.jsonl (ours)."""

    id: str | int
    image: NonEmpty
    subject_images: list[NonEmpty]
    texts: ProbeRTexts


def _contract(fields: type) -> Contract:
    return Contract(fields.__name__, fields)


VG_RELATION, VG_ATTRIBUTION, KARPATHY = _contract(VGRelation), _contract(VGAttribution), _contract(Karpathy)
SUGARCREPE, CREPE_REGION = _contract(SugarCrepeCase), _contract(CrepeRegion)
PROBE_C, PROBE_B, PROBE_R = _contract(ProbeCGroup), _contract(ProbeBRecord), _contract(ProbeRGroup)
VALSE, VL_CHECKLIST, EQBEN = _contract(ValseRecord), _contract(VLChecklistCase), _contract(EqBenPair)
WHATSUP_CONTROLLED, WHATSUP_QA = _contract(WhatsUpControlled), _contract(WhatsUpQA)
WINOGROUND_JSONL, WINOGROUND_PARQUET = _contract(WinogroundExample), _contract(WinogroundRow)


def check_entry(contract: Contract, entry, bench: str, path: Path, where: str) -> None:
    """MosaicError naming `path`, the entry (`where`: "entry 3", "case '12'") and the field when
    `entry` does not follow `contract`."""
    try:
        checker(contract)(entry)
    except RecordError as e:
        raise bad_record(bench, path, where, str(e)) from None


def check_text(value, bench: str, path: Path, where: str) -> str:
    """One caption read outside a schema (a CSV cell, an ImageCoDe description)."""
    if not isinstance(value, str) or not value.strip():
        shown = repr(value) if isinstance(value, str) else kind_of(value)
        raise bad_record(bench, path, where, f"expected a non-empty string, got {shown}")
    return value


def check_inside(value: str, bench: str, path: Path, where: str, what: str = "an image id") -> str:
    """A file name or folder read outside a schema (a CSV cell, a JSON key), checked as RelPath is."""
    norm = posixpath.normpath(value.replace("\\", "/"))
    if not value or posixpath.isabs(norm) or norm == ".." or norm.startswith("../") or "\0" in value:
        raise bad_record(bench, path, where, f"expected {what} inside --data-root, got {value!r}")
    return value


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
