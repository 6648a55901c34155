"""VALSE (Heidelberg-NLP/VALSE): one image, its caption and a foil that changes one linguistic
phenomenon; 11 instruments in 7 groups.

Official rules (Parcalabescu et al. 2022, `Heidelberg-NLP/VALSE`):
- only records with `mturk.caption >= 2` are valid (annotators judged the caption right);
- CLIP-style models are scored by acc_r: correct iff s(img, caption) > s(img, foil), strict, so a
  tie counts wrong;
- vl_compo's headline is the plain mean of 7 instrument groups: existence; plurals; counting (mean
  of 3); relations; actions (mean of 2); coreference (mean of 2); foil-it.

Image folders follow VALSE's `config.py` (relative to ROOT/valse/), except FOIL-it, whose COCO
val2014 images are shared with COCO-Order (ROOT/coco/val2014/).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import bad_record, chosen, headline, mean_row, read_json, require_files
from mosaictool.bench._formats import VALSE, check_entry
from mosaictool.bench.base import ImageRef, Item, row

# instrument -> (annotation file under ROOT/valse/data/, image folder relative to ROOT)
INSTRUMENTS: dict[str, str] = {
    "existence": "valse/data/visual7w/images",
    "plurals": "valse/data/plurals/test_images",
    "counting-hard": "valse/data/visual7w/images",
    "counting-small-quant": "valse/data/visual7w/images",
    "counting-adversarial": "valse/data/visual7w/images",
    "relations": "valse/data/relations/test_images",
    "action-replacement": "valse/data/actions/images_512",
    "actant-swap": "valse/data/actions/images_512",
    "coreference-standard": "valse/data/coref/release_too_many_is_this_in_color/images",
    "coreference-hard": "valse/data/coref/release_v18/test_images",
    "foil-it": "coco/val2014",
}

# vl_compo's 7 groups; single-instrument groups are reported under the instrument's name
GROUPS: dict[str, list[str]] = {
    "existence": ["existence"],
    "plurals": ["plurals"],
    "counting": ["counting-hard", "counting-small-quant", "counting-adversarial"],
    "relations": ["relations"],
    "actions": ["action-replacement", "actant-swap"],
    "coreference": ["coreference-standard", "coreference-hard"],
    "foil-it": ["foil-it"],
}

MIN_CAPTION_VOTES = 2

LAYOUT = """\
  valse/data/<instrument>.json               the 11 files of VALSE's data/ folder (dict id -> record)
  images, by instrument (VALSE config.py folders):
    existence, counting-*                    valse/data/visual7w/images/<image_file>
    plurals                                  valse/data/plurals/test_images/<image_file>
    relations                                valse/data/relations/test_images/<image_file>
    action-replacement, actant-swap          valse/data/actions/images_512/<image_file>  (SWiG)
    coreference-standard                     valse/data/coref/release_too_many_is_this_in_color/images/<image_file>
    coreference-hard                         valse/data/coref/release_v18/test_images/<image_file>
    foil-it                                  coco/val2014/<image_file>  (COCO val2014, shared with COCO-Order)
  only records with mturk.caption >= 2 are scored; metric acc_r = s(img,caption) > s(img,foil), tie wrong"""


class Valse:
    name = "valse"
    subtasks = list(INSTRUMENTS)
    layout = LAYOUT
    # what it reads under --data-root: an output there must not replace one of them (api.evaluate)
    data = ("valse/", "coco/")

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """Valid records (mturk.caption >= 2) of each instrument, in file order; `limit` = at most
        that many per instrument."""
        root = Path(root)
        names = chosen(self.subtasks, subtasks, self.name)
        require_files([root / "valse" / "data" / f"{n}.json" for n in names], self.name, self.layout)
        items: list[Item] = []
        for inst in names:
            path = root / "valse" / "data" / f"{inst}.json"
            records = read_json(path, self.name)
            if not isinstance(records, dict):
                raise bad_record(self.name, path, "top level", "expected a JSON object id -> record")
            image_dir = root / INSTRUMENTS[inst]
            kept = 0
            for key, rec in records.items():
                if limit is not None and kept >= limit:
                    break
                check_entry(VALSE, rec, self.name, path, f"record {key!r}")
                votes, image_file, caption, foil = rec["mturk"]["caption"], rec["image_file"], rec["caption"], rec["foil"]
                if votes < MIN_CAPTION_VOTES:
                    continue
                items.append(Item([ImageRef(str(image_dir / image_file))], [caption, foil], {"subtask": inst, "id": key}))
                kept += 1
        return items

    def score(self, items: list[Item], sims: list[np.ndarray], *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        by_inst: dict[str, list[np.ndarray]] = {}
        for item, s in zip(items, sims):
            by_inst.setdefault(item.meta["subtask"], []).append(np.asarray(s, dtype=np.float64)[0])
        rows: list[dict] = []
        acc: dict[str, dict] = {}
        for inst in self.subtasks:
            if inst not in by_inst:
                continue
            scores = np.stack(by_inst[inst])  # (n, 2): caption, foil
            acc[inst] = row(inst, "accuracy", metrics.choice_accuracy(scores, 0, tie="strict"), len(scores))
            rows.append(acc[inst])
            rows.append(row(inst, "mu_c", metrics.mean_confidence(scores, 0, logit_scale), len(scores)))
        group_rows: list[dict | None] = []
        for group, members in GROUPS.items():
            if not all(m in acc for m in members):
                group_rows.append(None)
                continue
            if len(members) == 1:
                group_rows.append(acc[members[0]])
            else:
                g = mean_row(group, "accuracy", [acc[m] for m in members])
                rows.append(g)
                group_rows.append(g)
        return rows + headline("accuracy", group_rows)


BENCHMARK = Valse()
