"""What a training method is: the texts it takes from a record, how it fills the batch's slots, and
its loss. `mosaictool train` and the training loop only talk to this interface; one module per
method (clip.py, negclip.py, mosaiclip.py, ...) defines a subclass and names it `METHOD`.

A method is built from its options (a dict, TrainConfig.method_options): `Method(options)` fills
the defaults of `options` and validates them; every other call reads `self.opts`. It must pickle
(DataLoader workers get a copy) and be deterministic: all randomness comes from the rng it is given.

Interface (override what differs from the defaults):

    name, help              the --method value and its one-line description
    place                   its place in the lists of methods (--help, the demo's table rows)
    options                 its own flags: Option(name, type, default, help, parse, format)
    demo_rows               the rows it adds to `mosaictool demo`'s table: DemoRow(label, options, wise, tuning)
    recipes                 named recipes of its paper (`train --recipe NAME`): name -> TrainConfig
                            fields ("method_options": its own options); flags given explicitly win
    merge_equal_texts       the default of --merge-equal-texts: equal texts of a batch are one text
    stage_hint              the pipeline that writes the texts it needs (used in errors)
    check_record(record)    raise RecordError when one record is unusable (read_records skips or stops)
    check_data(records, source) -> str | None
                            raise MosaicError when no record is usable; else an optional note
    slots(step, total_steps) -> (Kp, Kn)
                            positive / negative slots per image at an optimizer step
    select(record, rng, kp, kn) -> Selection
                            the texts (at most kp positives, kn negatives) one image brings
    dense                   True when the loss needs DenseFeatures (patch and token features)
    uses_subgraph_keys      True when the batch carries sub-graph keys (record `subgraph_keys`, the
                            Selection's pos_keys / neg_keys) for the loss's P(i) by containment
    make_loss(local_loss=, rank=, world_size=) -> nn.Module
                            forward(features: mosaictool.training.batch.Features) -> dict of named
                            scalar terms, "loss" the total; every term is logged to metrics.jsonl
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mosaictool.errors import MosaicError, RecordError

PIPELINE = "mosaictool parse | decompose | negate | template"


_TYPE_WORDS = {int: "a whole number", float: "a number", bool: "true or false", str: "text"}


def _of_type(value: Any, tp: type) -> bool:
    """`value` fits an option of type `tp` (a bool is no number; a whole number is a number)."""
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, tp) and (tp is bool or not isinstance(value, bool))


@dataclass(frozen=True)
class Option:
    """One method flag: `--name-with-dashes` on `mosaictool train`, `name` in method_options.

    `type` is int, float, bool or str. A structured value (a dict, a list) is a str flag with
    `parse` (flag text -> stored value) and `format` (stored value -> flag text)."""

    name: str
    type: type
    default: Any
    help: str
    parse: Callable[[str], Any] | None = None
    format: Callable[[Any], str] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def from_flag(self, value: Any) -> Any:
        return self.parse(value) if self.parse is not None and isinstance(value, str) else value

    def flag_default(self) -> Any:
        return self.format(self.default) if self.format is not None else self.default


@dataclass(frozen=True)
class DemoRow:
    """A row of `mosaictool demo`'s table: its label and the method options it trains with; `wise`:
    the demo also draws its WiSE-FT curve (all weights, seed 0); `tuning`: the knobs its paper tuned on
    validation data besides the learning rate, each (name, the method options of each of its values),
    which `demo --select-on-val` searches with the lr (mosaictool.demo.tuning)."""

    label: str
    options: Mapping[str, Any] = field(default_factory=dict)
    wise: bool = False
    tuning: tuple[tuple[str, tuple[Mapping[str, Any], ...]], ...] = ()


@dataclass
class Selection:
    """The texts one image brings to a batch: positives first-slot-first, negatives likewise; with
    the canonical sub-graph key of each (`texts.*.key`, None: no key) for methods that use them."""

    pos: list[str]
    neg: list[str] = field(default_factory=list)
    pos_keys: list[str | None] | None = None
    neg_keys: list[str | None] | None = None


class Method:
    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    place: ClassVar[int] = 100
    options: ClassVar[tuple[Option, ...]] = ()
    demo_rows: ClassVar[tuple[DemoRow, ...]] = ()
    stage_hint: ClassVar[str] = PIPELINE
    uses_hard_images: ClassVar[bool] = False  # the default of --record-hard-images
    uses_subgraph_keys: ClassVar[bool] = False  # P(i) by sub-graph containment in the loss (mosaiclip)
    recipes: ClassVar[Mapping[str, Mapping[str, Any]]] = {}  # `train --recipe NAME`: the paper's settings
    merge_equal_texts: ClassVar[bool] = True  # the default of TrainConfig.merge_equal_texts for this method

    def __init__(self, options: Mapping[str, Any] | None = None):
        given = dict(options or {})
        known = {o.name: o for o in self.options}
        unknown = sorted(set(given) - set(known))
        if unknown:
            flags = ", ".join("--" + u.replace("_", "-") for u in unknown)
            allowed = ", ".join(o.flag for o in self.options) or "none"
            raise MosaicError(f"--method {self.name}: {flags} belong to another method (its own options: {allowed})")
        for o in self.options:  # from Python, "3" or 2.5 for a whole number, or 1 for true, would pass unseen
            if o.parse is None and o.name in given and not _of_type(given[o.name], o.type):
                raise MosaicError(f"{o.flag} {given[o.name]!r}: must be {_TYPE_WORDS[o.type]}, not {type(given[o.name]).__name__}")
        self.opts: dict[str, Any] = {o.name: o.from_flag(given.get(o.name, o.default)) for o in self.options}
        for o in self.options:  # NaN passes every `< 0` test a validate() makes; inf is no weight either
            if o.type is float and not (isinstance(self.opts[o.name], (int, float)) and math.isfinite(self.opts[o.name])):
                raise MosaicError(f"{o.flag} {self.opts[o.name]}: must be a finite number")
        self.validate()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.opts})"

    def validate(self) -> None:
        """Raise MosaicError naming the flag when an option value is unusable."""

    # ---- data ----------------------------------------------------------------------------

    def check_record(self, record: dict) -> None:
        texts = record.get("texts")
        if texts is not None and not isinstance(texts, dict):
            raise RecordError("'texts' must be an object {positives, negatives} as `template` writes it")
        if caption_of(record) is None:
            raise RecordError("no caption (a 'caption' field or a caption positive in 'texts')")

    def check_data(self, records: Sequence[dict], source: str) -> str | None:
        return None

    def slots(self, step: int, total_steps: int) -> tuple[int, int]:
        return 1, 0

    def select(self, record: dict, rng: random.Random, kp: int, kn: int) -> Selection:
        return Selection([caption_of(record)])

    # ---- model ---------------------------------------------------------------------------

    @property
    def dense(self) -> bool:
        return False

    def make_loss(self, *, local_loss: bool = False, rank: int = 0, world_size: int = 1):
        from mosaictool.model.losses import ContrastiveLoss

        return ContrastiveLoss(local_loss=local_loss, rank=rank, world_size=world_size)


# ---- helpers shared by methods ------------------------------------------------------------------


def caption_of(record: dict) -> str | None:
    caption = record.get("caption")
    if isinstance(caption, str) and caption:
        return caption
    positives = (record.get("texts") or {}).get("positives") or []
    if positives and positives[0].get("kind") == "caption":
        return positives[0]["text"]
    return None


def count_with_negatives(records: Sequence[dict], accept: Callable[[dict], bool]) -> int:
    """How many records have at least one `texts.negatives` entry that `accept`s."""
    return sum(any(accept(n) for n in (r.get("texts") or {}).get("negatives") or []) for r in records)


def require_negatives(method: Method, records: Sequence[dict], source: str, accept: Callable[[dict], bool],
                      what: str) -> str | None:
    """The usual check_data: refuse data where no record has a negative `what`; note the records without."""
    n = count_with_negatives(records, accept)
    if n == 0:
        raise MosaicError(
            f"{source}: no record has {what} negatives for --method {method.name}; build them with "
            f"`{method.stage_hint}`, or train with --method clip"
        )
    if n < len(records):
        return f"{len(records) - n} of {len(records)} records have no negatives for {method.name}"
    return None
