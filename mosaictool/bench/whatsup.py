"""What'sUp (amitakamath/whatsup_vlms): spatial relations. Controlled sets A (real photos) and B
(CLEVR renders): one image, 4 captions differing only in the preposition; COCO-QA and VG-QA with
one or two objects: one image, the right and the wrong caption.

Official rules (`amitakamath/whatsup_vlms`, `dataset_zoo/aro_datasets.py`):
- correct iff argmax over the captions == 0 (numpy argmax: a tie picks index 0, so ties count
  correct);
- controlled sets also report pair accuracy (left & right both correct, and on & under for A /
  in-front & behind for B, per object pair; divided by N/2) and set accuracy (all 4 of an object
  pair correct; divided by N/4). The object pair of `<obj1>_<prep>_<obj2>.jpeg` is
  (name.split('_')[0], name.split('_')[-1][:-5]) and its slot name.split('_')[1], as officially;
- per-preposition accuracy (subtask `<subtask>/<preposition>`);
- vl_compo's headline: plain mean of the 6 subtask accuracies.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import bad_record, chosen, headline, read_json, require_files
from mosaictool.bench._formats import WHATSUP_CONTROLLED, WHATSUP_QA, check_entry
from mosaictool.bench.base import ImageRef, Item, row
from mosaictool.records import kind_of

# subtask -> annotation file under ROOT/whatsup/
FILES = {
    "WhatsUp_A": "controlled_images_dataset.json",
    "WhatsUp_B": "controlled_clevr_dataset.json",
    "COCO_QA_ONE": "coco_qa_one_obj.json",
    "COCO_QA_TWO": "coco_qa_two_obj.json",
    "VG_QA_ONE": "vg_qa_one_obj.json",
    "VG_QA_TWO": "vg_qa_two_obj.json",
}
CONTROLLED = {"WhatsUp_A": ("on", "under"), "WhatsUp_B": ("in-front", "behind")}

LAYOUT = """\
  whatsup/controlled_images_dataset.json        A: [{image_path, caption_options: [4 captions, first right]}]
  whatsup/controlled_clevr_dataset.json         B: same format
  whatsup/controlled_images/, whatsup/controlled_clevr/
                                                their images: image_path "data/controlled_images/x.jpeg" is read as
                                                whatsup/controlled_images/x.jpeg (a leading "data/" = whatsup/)
  whatsup/{coco,vg}_qa_{one,two}_obj.json       [[image_id, right caption, wrong caption], ...]
  whatsup/val2017/<image_id:012d>.jpg           COCO val2017 images (COCO-QA)
  whatsup/vg_images/<image_id>.jpg              Visual Genome images (VG-QA)
  correct iff argmax == 0 (ties correct); A/B also pair and set accuracy; headline = mean of the 6 accuracies"""


def controlled_preposition(subtask: str, image_path: str) -> str:
    """The official per-preposition label of a controlled image (checked in this order)."""
    if "left_of" in image_path:
        return "left_of"
    if "right_of" in image_path:
        return "right_of"
    if subtask == "WhatsUp_A":
        return "on" if "_on_" in image_path else "under"
    return "in-front_of" if "_in-front_of_" in image_path else "behind"


def controlled_key(image_path: str) -> tuple[tuple[str, str], str]:
    """(object pair, slot) exactly as the official evaluate_scores derives them."""
    name = image_path.split("/")[-1]
    parts = name.split("_")
    return (parts[0], parts[-1][:-5]), parts[1]


def qa_preposition(subtask: str, caption: str) -> str:
    if subtask.endswith("_ONE"):
        return caption.split()[-1]
    for needle, label in (("left of", "left"), ("right of", "right")):
        if needle in caption:
            return label
    if subtask == "COCO_QA_TWO":
        return "above" if "above" in caption else "below"
    if "front of" in caption:
        return "front"
    return "behind" if "behind" in caption else "top"


def _image_path(base: Path, image_path: str) -> Path:
    rel = image_path[len("data/"):] if image_path.startswith("data/") else image_path
    return base / rel


class WhatsUp:
    name = "whatsup"
    subtasks = list(FILES)
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """Every test case in file order; `limit` = at most that many per subtask."""
        names = chosen(self.subtasks, subtasks, self.name)
        base = Path(root) / "whatsup"
        require_files([base / FILES[n] for n in names], self.name, self.layout)
        items = []
        for sub in names:
            path = base / FILES[sub]
            records = read_json(path, self.name)
            if not isinstance(records, list):
                raise bad_record(self.name, path, "top level", "expected a JSON list")
            for i, rec in enumerate(records[:limit] if limit is not None else records):
                items.append(self._item(sub, rec, base, path, i))
        return items

    def _item(self, sub: str, rec, base: Path, path: Path, i: int) -> Item:
        if sub in CONTROLLED:
            check_entry(WHATSUP_CONTROLLED, rec, self.name, path, f"item {i}")
            image_path, captions = rec["image_path"], list(rec["caption_options"])
            pair, slot = controlled_key(image_path)
            meta = {"subtask": sub, "preposition": controlled_preposition(sub, image_path), "pair": pair, "slot": slot}
            return Item([ImageRef(str(_image_path(base, image_path)))], captions, meta)
        if not (isinstance(rec, list) and len(rec) == 3):
            shape = f"a list of {len(rec)}" if isinstance(rec, list) else kind_of(rec)
            raise bad_record(self.name, path, f"item {i}", f"expected a list [image_id, right caption, wrong caption], got {shape}")
        check_entry(WHATSUP_QA, dict(zip(("image_id", "right", "wrong"), rec)), self.name, path, f"item {i}")
        image_id, right, wrong = rec
        image = base / (f"val2017/{str(image_id).zfill(12)}.jpg" if sub.startswith("COCO") else f"vg_images/{image_id}.jpg")
        return Item([ImageRef(str(image))], [right, wrong], {"subtask": sub, "preposition": qa_preposition(sub, right)})

    def score(self, items: list[Item], sims: list[np.ndarray], *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        by_sub: dict[str, list[tuple[Item, np.ndarray]]] = defaultdict(list)
        for item, s in zip(items, sims):
            by_sub[item.meta["subtask"]].append((item, np.asarray(s, dtype=np.float64)[0]))
        rows, accs = [], []
        for sub in self.subtasks:
            if sub not in by_sub:
                accs.append(None)
                continue
            cases = by_sub[sub]
            scores = np.stack([s for _, s in cases])
            correct = metrics.choice_correct(scores, 0, tie="argmax-first")
            accs.append(row(sub, "accuracy", correct.mean(), len(cases)))
            rows.append(accs[-1])
            rows.append(row(sub, "mu_c", metrics.mean_confidence(scores, 0, logit_scale), len(cases)))
            if sub in CONTROLLED:
                rows += self._pair_and_set(sub, [it for it, _ in cases], correct)
            preps = np.array([it.meta["preposition"] for it, _ in cases])
            for prep in sorted(set(preps.tolist())):
                mask = preps == prep
                rows.append(row(f"{sub}/{prep}", "accuracy", correct[mask].mean(), int(mask.sum()), detail=True))
        return rows + headline("accuracy", accs)

    @staticmethod
    def _pair_and_set(sub: str, items: list[Item], correct: np.ndarray) -> list[dict]:
        first, second = CONTROLLED[sub]
        slots: dict[tuple, dict[str, bool]] = defaultdict(lambda: {"left": False, "right": False, first: False, second: False})
        for item, ok in zip(items, correct):
            slots[item.meta["pair"]][item.meta["slot"]] = bool(ok)
        pair_correct = sum((d["left"] and d["right"]) + (d[first] and d[second]) for d in slots.values())
        set_correct = sum(sum(d.values()) == 4 for d in slots.values())
        n = len(items)
        return [row(sub, "pair_accuracy", pair_correct / (n / 2), n), row(sub, "set_accuracy", set_correct / (n / 4), n)]


BENCHMARK = WhatsUp()
