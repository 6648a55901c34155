"""MosaiCLIP (Singh et al. 2023, Sec. 3.5-3.6, App. H.1): per image up to --max-pos positive texts (the
caption and its sub-graphs) and --max-neg graph negatives, with the coarse-to-fine contrastive loss
(mosaictool.model.losses), optionally after a curriculum stage with at most one of each.

Filling the slots: negatives are drawn as (positive, negative) pairs, a category (obj/attr/rel) at
a time with probabilities --category-probs (App. B); a drawn pair brings its positive along while there
is room. The caption holds the first positive slot of every image (the coarse end of coarse-to-fine:
the paper does not say whether the caption is always a positive; here it is, so no draw of pairs can
leave it out); remaining positive slots are filled with other positives at random. Curriculum stage 1
"first fine-tunes the model while sampling (at max) a single positive and negative sub-graph per
image" (Singh et al. 2023, Sec. 3.6): one drawn pair, the negative with the very positive it perturbs
(the caption when no negative is left to draw). --max-pos 1 without the curriculum is the caption alone
with a negative of any pair (the demo's "− sub-graph positives" ablation). Stage 2 samples up to
--max-pos positive and --max-neg negative sub-graphs (App. H.1: 3 and 6). Every draw comes from the
rng the loader seeds by (seed, epoch, record): a record whose texts hold more candidates than slots
gets other sub-graphs in another epoch. A negative whose key is one of the image's `subgraph_keys` is
true of the image and never drawn. Each chosen text comes with its key (Selection.pos_keys /
neg_keys): the loss's P(i) is every batch positive whose sub-graph is in the image's graph (Sec. 3.5).
"""

from __future__ import annotations

import math
import random

from mosaictool.errors import MosaicError, RecordError
from mosaictool.methods.base import DemoRow, Method, Option, Selection, caption_of, require_negatives
from mosaictool.methods.negclip import negclip_negative
from mosaictool.model.text_ids import holds_key, record_key_ids

DEFAULT_CATEGORY_PROBS = {"obj": 0.15, "attr": 0.425, "rel": 0.425}  # Singh et al. 2023, App. H.1: p_attr = p_rel
# What Singh et al. 2023, App. H.1 tuned on the ARO val set: "We vary p1 in {0, 0.08, 0.15}" (p_obj, with p_attr =
# p_rel), and "sampling a maximum of 3 positive and 6 negative sub-graphs per image [...] gives the best result on the
# ARO validation set", candidates not named: the paper's caps and one step either side at their 1:2 ratio.
TUNED_P_OBJ = (0.0, 0.08, 0.15)
TUNED_CAPS = ((2, 4), (3, 6), (4, 8))
_PROBS_EXAMPLE = "obj=0.15,attr=0.425,rel=0.425"


def parse_category_probs(text: str) -> dict[str, float]:
    """Relative weights of the negatives' categories (obj, attr, rel; one absent weighs 0): each
    named once, none empty, their sum > 0 (an all-zero set would be drawn uniformly, not as asked)."""
    probs: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        name, sep, value = (s.strip() for s in part.partition("="))
        if name in probs:
            raise MosaicError(f"--category-probs {text!r}: {name} is given twice")
        if name and name not in DEFAULT_CATEGORY_PROBS:
            raise MosaicError(f"--category-probs {text!r}: unknown category {name!r}; choose from {', '.join(DEFAULT_CATEGORY_PROBS)}")
        try:
            probs[name] = float(value)
        except ValueError:
            sep = ""
        if not sep or not 0 <= probs.get(name, -1) < math.inf:  # NaN and inf too; an empty item has no '='
            raise MosaicError(f"--category-probs {text!r}: expected name=weight pairs like {_PROBS_EXAMPLE}")
    if not sum(probs.values()) > 0:
        raise MosaicError(f"--category-probs {text!r}: the weights sum to 0; give at least one category a weight > 0")
    return probs


def format_category_probs(probs: dict[str, float]) -> str:
    return ",".join(f"{k}={v:g}" for k, v in probs.items())


NEGATIVES = ("graph", "text", "negclip", "graph+negclip")
POSITIVES = ("all", "no-objects")


class MosaiClip(Method):
    name = "mosaiclip"
    place = 30
    help = "MosaiCLIP: the caption + sub-graph positives and graph negatives, coarse-to-fine loss."
    options = (
        Option("max_pos", int, 3, "mosaiclip: positive texts per image at most (1: the caption only)."),
        Option("max_neg", int, 6, "mosaiclip: graph negatives per image at most."),
        Option("category_probs", str, dict(DEFAULT_CATEGORY_PROBS), "mosaiclip: sampling weights of negative categories.",
               parse=parse_category_probs, format=format_category_probs),
        Option("curriculum", bool, False, "mosaiclip: stage 1 with one positive-negative pair per image (Sec. 3.6), "
               "then the full --max-pos / --max-neg."),
        Option("curriculum_split", float, 0.5, "mosaiclip: fraction of the steps spent in curriculum stage 1."),
        Option("negatives", str, "graph", "mosaiclip: graph (the paper's: perturbed scene graphs) | text (an ablation, not the "
               "paper's: the caption-level text negatives of `negate --text`, NegCLIP's and FSC-CLIP's, in their place) | "
               "negclip (NegCLIP's own: one of the caption's swaps, drawn as --method negclip draws it; with --max-pos 1 "
               "--max-neg 1 --no-containment --loss-weighting mean this is NegCLIP's training, step for step) | "
               "graph+negclip (a test of the paper's mechanism: NegCLIP's swap first, then graph negatives in the other "
               "--max-neg slots)."),
        Option("positives", str, "all", "mosaiclip: all (the paper's: the caption and its sub-graph texts) | no-objects (a "
               "test of the paper's mechanism: sub-graph texts of one object left out, as they are true of a caption and of "
               "its swap alike; the negatives that perturb them stay, unpaired). Example: --positives no-objects."),
        Option("containment", bool, True, "mosaiclip: P(i) by sub-graph containment (the paper's: a text is a positive of "
               "every image of the batch whose scene graph contains its sub-graph); off: of the images that have that very "
               "text (an ablation)."),
        Option("loss_weighting", str, "paper", "mosaiclip: paper (Sec. 3.5's sums: t2i, one term per positive text, "
               "weighs ~|P(i)| times i2t; both divided by the images) | mean (each direction averaged)."),
        Option("denominators", str, "masked", "mosaiclip: masked (a negative text true of an image, by its sub-graph key, "
               "leaves that image's i2t denominator, and an image holding a positive text's sub-graph leaves that text's "
               "t2i denominator) | all (every text and every image, as Sec. 3.5's equations write them). Example: "
               "--denominators all."),
    )
    # without its curriculum it is an ablation (demo --ablate, "− curriculum"), not a row of the table;
    # its tuning as Singh et al. 2023, App. H.1 did it on ARO's val set (TUNED_P_OBJ, TUNED_CAPS)
    demo_rows = (DemoRow("MosaiCLIP", {"curriculum": True}, wise=True, tuning=(
        ("p_obj", tuple({"category_probs": {"obj": p, "attr": round((1 - p) / 2, 6), "rel": round((1 - p) / 2, 6)}}
                        for p in TUNED_P_OBJ)),
        ("caps", tuple({"max_pos": pos, "max_neg": neg} for pos, neg in TUNED_CAPS)))),)

    @property
    def uses_subgraph_keys(self) -> bool:  # the loss's P(i) by containment, unless --no-containment
        return self.opts["containment"]

    def validate(self) -> None:
        if self.opts["max_pos"] < 1 or self.opts["max_neg"] < 0:
            raise MosaicError("--max-pos must be at least 1 and --max-neg at least 0")
        if not 0 <= self.opts["curriculum_split"] <= 1:
            raise MosaicError("--curriculum-split is a fraction of the steps, between 0 and 1")
        if self.opts["negatives"] not in NEGATIVES:
            raise MosaicError(f"--negatives {self.opts['negatives']!r}: choose {', '.join(NEGATIVES)}")
        if self.opts["positives"] not in POSITIVES:
            raise MosaicError(f"--positives {self.opts['positives']!r}: choose {', '.join(POSITIVES)}")
        if self.opts["loss_weighting"] not in ("paper", "mean"):
            raise MosaicError(f"--loss-weighting {self.opts['loss_weighting']!r}: choose paper or mean")
        if self.opts["denominators"] not in ("masked", "all"):
            raise MosaicError(f"--denominators {self.opts['denominators']!r}: choose masked or all")

    def make_loss(self, *, local_loss: bool = False, rank: int = 0, world_size: int = 1):
        from mosaictool.model.losses import ContrastiveLoss

        return ContrastiveLoss(local_loss=local_loss, rank=rank, world_size=world_size, weighting=self.opts["loss_weighting"],
                               denominators=self.opts["denominators"])

    def check_record(self, record: dict) -> None:
        texts = record.get("texts")
        if texts is not None and not isinstance(texts, dict):
            raise RecordError("'texts' must be an object {positives, negatives} as `template` writes it")
        if caption_of(record) is None and not (texts or {}).get("positives"):
            raise RecordError("no caption (a 'caption' field or a caption positive in 'texts')")

    def _is_negative(self, negative: dict) -> bool:
        kind = {"negclip": "text", "graph+negclip": "graph"}.get(self.opts["negatives"], self.opts["negatives"])
        return negative.get("kind") == kind

    def check_data(self, records, source):
        return require_negatives(self, records, source, self._is_negative, self.opts["negatives"])

    def slots(self, step: int, total_steps: int) -> tuple[int, int]:
        max_pos, max_neg = self.opts["max_pos"], self.opts["max_neg"]
        if self.opts["curriculum"] and step < int(self.opts["curriculum_split"] * total_steps):
            return min(1, max_pos), min(1, max_neg)
        return max_pos, max_neg

    def _positive_entries(self, record: dict) -> tuple[list[dict], dict[int, int]]:
        """The record's positive entries this method draws from, and each kept entry's index among them by its index
        in the record (what a negative's `positive` field points at)."""
        entries = (record.get("texts") or {}).get("positives") or [{"text": caption_of(record)}]
        kept = list(range(len(entries)))
        if self.opts["positives"] == "no-objects":
            kept = [i for i, e in enumerate(entries) if e.get("kind") != "object"] or [0]
        return [entries[i] for i in kept], {old: new for new, old in enumerate(kept)}

    def select(self, record: dict, rng: random.Random, kp: int, kn: int) -> Selection:
        texts = record.get("texts") or {}
        entries, new_index = self._positive_entries(record)
        positives = [p["text"] for p in entries]
        implied = record_key_ids(record)
        category_probs = self.opts["category_probs"]
        by_category: dict[str, list[tuple[int | None, str, str | None]]] = {}
        for n in texts.get("negatives") or []:
            if self._is_negative(n) and not holds_key(implied, n.get("key")):
                pair = (new_index.get(n.get("positive")), n["text"], n.get("key"))
                by_category.setdefault(n.get("category") or "other", []).append(pair)
        # Curriculum stage 1 (one slot of each where --max-pos allows more): "sampling (at max) a single
        # positive and negative sub-graph per image" (Singh et al. 2023, Sec. 3.6), a drawn pair, the
        # negative with the positive it perturbs. --max-pos 1 is the caption alone, with a negative of any pair.
        one_pair = kp == 1 < self.opts["max_pos"]
        caption_only = kp == 1 and not one_pair
        # Stage 2 keeps the caption, the coarsest of the coarse-to-fine positives, in every image's set;
        # drawn pairs bring their sub-graphs into the other slots.
        has_caption = entries[0].get("kind", "caption") == "caption"
        chosen_pos: list[int] = [0] if caption_only or (has_caption and kp > 1) else []
        chosen_neg: list[tuple[str, str | None]] = []
        if self.opts["negatives"] in ("negclip", "graph+negclip"):
            chosen_neg = [(text, None) for text in negclip_negative(record, rng)] if kn > 0 else []
            if self.opts["negatives"] == "negclip":
                by_category = {}
        while len(chosen_neg) < kn and by_category:
            cats = sorted(by_category)
            weights = [category_probs.get(c, 0.0) for c in cats]
            if sum(weights) <= 0:
                weights = [1.0] * len(cats)
            cat = rng.choices(cats, weights)[0]
            pool = by_category[cat]
            pos_index, text, key = pool.pop(rng.randrange(len(pool)))
            if not pool:
                del by_category[cat]
            if (not caption_only and pos_index is not None and 0 <= pos_index < len(positives)
                    and pos_index not in chosen_pos):
                if len(chosen_pos) >= kp:
                    continue  # no room for the positive this negative perturbs
                chosen_pos.append(pos_index)
            chosen_neg.append((text, key))
        # the slots left: the caption (or first positive) first, then other positives at random; in stage 1
        # the pair's positive, or the caption where no negative came (nor one of a known positive)
        rest = [i for i in range(len(positives)) if i not in chosen_pos]
        if rest and rest[0] == 0:
            first, others = rest[:1], rest[1:]
        else:
            first, others = [], rest
        room = max(0, kp - len(chosen_pos))
        if room > len(first):  # drawn only when some of them are taken: a full selection draws nothing more
            rng.shuffle(others)
        chosen_pos.extend((first + others)[:room])
        return Selection([positives[i] for i in chosen_pos], [t for t, _ in chosen_neg],
                         [entries[i].get("key") for i in chosen_pos], [k for _, k in chosen_neg])


METHOD = MosaiClip
