"""NegCLIP (Yuksekgonul et al. 2023, Sec. 5): the caption plus one caption-level hard negative text per image (a
swap of `negate --text negclip`, else any text negative) in the image->text denominators. Hard
images (NegCLIP's nearest-neighbour images) are training-loop options of every method."""

from __future__ import annotations

import random

from mosaictool.methods.base import DemoRow, Method, Selection, caption_of, require_negatives


def _is_text_negative(negative: dict) -> bool:
    return negative.get("kind") == "text"


def negclip_negative(record: dict, rng: random.Random) -> list[str]:
    """NegCLIP's hard negative of a record: one of its swaps (`negate --text negclip`), else any
    caption-level text negative, drawn uniformly; none when it has neither."""
    negatives = (record.get("texts") or {}).get("negatives") or []
    text_negs = [n["text"] for n in negatives if _is_text_negative(n)]
    swaps = [n["text"] for n in negatives if _is_text_negative(n) and str(n.get("transform", "")).startswith("negclip")]
    pool = swaps or text_negs
    return [rng.choice(pool)] if pool else []


class NegClip(Method):
    name = "negclip"
    place = 20
    help = "NegCLIP: the caption + one swapped-caption negative per image (and hard images)."
    demo_rows = (DemoRow("NegCLIP"),)
    stage_hint = "mosaictool negate --text negclip (then template)"
    uses_hard_images = True

    def check_data(self, records, source):
        return require_negatives(self, records, source, _is_text_negative, "caption-level text")

    def slots(self, step, total_steps):
        return 1, 1

    def select(self, record: dict, rng: random.Random, kp: int, kn: int) -> Selection:
        return Selection([caption_of(record)], negclip_negative(record, rng) if kn > 0 else [])


METHOD = NegClip
