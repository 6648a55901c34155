"""The entries of the annotation files the builders and `import coco` read (Visual Genome's objects /
attributes / relationships.json, COCO instances and captions, Karpathy's dataset_coco.json), as typed
schemas (mosaictool.records' machinery): strict types, so a string where a list belongs is refused
rather than read letter by letter, and a bad entry is one line naming the file, the entry and the field."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field
from typing_extensions import NotRequired, TypedDict

from mosaictool.errors import MosaicError, RecordError
from mosaictool.records import Contract, NonEmpty, checker, rule_error

ImageId = int | NonEmpty  # a key only: VG and COCO use integers, some re-exports strings
Number = Annotated[float, Field(allow_inf_nan=False)]
Size = Annotated[int, Field(gt=0)]


class VGNamed(TypedDict, total=False):
    """A VG object: `name` (VG 1.0) or `names` (1.2+; the first is read)."""

    name: str
    names: Annotated[list[str], Field(min_length=1)]


class VGRelationship(TypedDict):
    predicate: str
    subject: VGNamed
    object: VGNamed


class VGRelationshipsEntry(TypedDict):
    image_id: ImageId
    relationships: list[dict[str, Any]]  # each checked as VGRelationship, to name its index


class VGObjectsEntry(TypedDict):
    image_id: ImageId
    objects: list[VGNamed]


class VGAttributed(TypedDict):
    attributes: NotRequired[list[str] | None]


class VGAttributesEntry(TypedDict):
    image_id: NotRequired[ImageId]
    attributes: NotRequired[list[VGAttributed] | None]


class VGPredicate(TypedDict):
    predicate: NotRequired[str | None]


class VGPredicatesEntry(TypedDict):
    image_id: NotRequired[ImageId]
    relationships: NotRequired[list[VGPredicate] | None]


class VGObjectNamesEntry(TypedDict):
    image_id: NotRequired[ImageId]
    objects: NotRequired[list[VGNamed] | None]


class CocoCategory(TypedDict):
    id: int
    name: NonEmpty


class CocoImage(TypedDict):
    id: ImageId
    file_name: NonEmpty
    width: Size
    height: Size


class CocoRLE(TypedDict):
    counts: list[Annotated[int, Field(ge=0)]] | str
    size: Annotated[list[Size], Field(min_length=2, max_length=2)]


def _pairs(polygon: list[float]) -> list[float]:
    if len(polygon) % 2:
        raise rule_error(f"expected x, y pairs (an even count of numbers), got {len(polygon)} numbers")
    return polygon


# Under 3 points a polygon is a line or a point: real COCO-format files hold a few (Detectron filters them
# out); decode_mask leaves them out rather than refusing the file.
Polygon = Annotated[list[Number], AfterValidator(_pairs)]


def _box_sides(box: list[float]) -> list[float]:
    if box[2] < 0 or box[3] < 0:  # a zero side is a degenerate box real files hold, not a malformed one
        raise rule_error(f"expected [x, y, width, height] with width and height >= 0, got {box}")
    return box


Box = Annotated[list[Number], Field(min_length=4, max_length=4), AfterValidator(_box_sides)]


class CocoAnnotation(TypedDict):
    image_id: ImageId
    category_id: int
    segmentation: Annotated[list[Polygon], Field(min_length=1)] | CocoRLE
    bbox: Box
    iscrowd: NotRequired[Annotated[int, Field(ge=0, le=1)]]


class CocoCaptionFile(TypedDict):
    images: list[dict[str, Any]]  # each checked as CocoCaptionImage, to name its index
    annotations: list[dict[str, Any]]  # each checked as CocoCaption


class CocoCaptionImage(TypedDict):
    id: ImageId
    file_name: NonEmpty


class CocoCaption(TypedDict):
    id: int | NonEmpty
    image_id: ImageId
    caption: NonEmpty


class KarpathyFile(TypedDict):
    images: list[dict[str, Any]]  # each checked as KarpathyImage


class KarpathySentence(TypedDict):
    raw: NonEmpty
    sentid: int


class KarpathyImage(TypedDict):
    """An image of Karpathy's dataset_coco.json (Karpathy & Fei-Fei 2015's splits): `filepath` is COCO
    2014's folder (train2014, val2014); `restval` is the part of val2014 the split adds to training."""

    cocoid: int
    split: Literal["train", "val", "test", "restval"]
    filename: NonEmpty
    filepath: NotRequired[str]
    sentences: list[dict[str, Any]]  # each checked as KarpathySentence


def _contract(fields: type) -> Contract:
    return Contract(fields.__name__, fields)


VG_RELATIONSHIPS_ENTRY, VG_RELATIONSHIP, VG_OBJECTS_ENTRY = (
    _contract(VGRelationshipsEntry), _contract(VGRelationship), _contract(VGObjectsEntry))
VG_OBJECT_NAMES, VG_ATTRIBUTES, VG_PREDICATES = _contract(VGObjectNamesEntry), _contract(VGAttributesEntry), _contract(VGPredicatesEntry)
COCO_CATEGORY, COCO_IMAGE, COCO_ANNOTATION = _contract(CocoCategory), _contract(CocoImage), _contract(CocoAnnotation)
COCO_CAPTION_FILE, COCO_CAPTION_IMAGE, COCO_CAPTION = _contract(CocoCaptionFile), _contract(CocoCaptionImage), _contract(CocoCaption)
KARPATHY_FILE, KARPATHY_IMAGE, KARPATHY_SENTENCE = _contract(KarpathyFile), _contract(KarpathyImage), _contract(KarpathySentence)


def check_entry(contract: Contract, entry, path, where: str, what: str) -> None:
    """MosaicError naming `path`, the entry and the field when `entry` does not follow `contract`."""
    try:
        checker(contract)(entry)
    except RecordError as e:
        raise MosaicError(f"{path}: {where}: {e} (not {what})") from None
