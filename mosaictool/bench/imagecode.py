"""ImageCoDe (McGill-NLP/imagecode): pick, from 10 near-identical images (video frames or static
pictures), the one a description was written for. Validation split (the test labels are hidden).

Official rules (`McGill-NLP/imagecode`, `baselines/clip/zero_shot.py`):
- the set's images are `<set dir>/*.jpg` sorted by int(k) of `img<k>.jpg` (video sets use frame
  numbers, not 0-9); the description's key is an index into that sorted list;
- top-1: correct iff the target image has the highest similarity to the (stripped) description.
  The official code ranks with numpy argsort of -similarities, which on 10 elements is an
  insertion sort and so keeps the lowest index among ties: "argmax-first";
- reported as overall, video and static accuracy (sets named `open-images-*` are static). vl_compo
  reports `imagecode::videos` and `imagecode::static`; its headline is the micro accuracy over all
  2,302 descriptions.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import bad_record, chosen, read_json, require_files
from mosaictool.bench._formats import check_inside, check_text
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row
from mosaictool.records import kind_of

IMAGES_PER_SET = 10
_NUMBERED = re.compile(r"img(\d+)\.jpg")
SUBTASKS = ["videos", "static"]

LAYOUT = """\
  imagecode/data/valid_data.json              {image set dir: {"<index>": description}}
  imagecode/image-sets/<set dir>/img<k>.jpg   10 per set (image-sets.zip from Zenodo); sorted by int(k)
  top-1 over the 10 images (ties: lowest index); sets named open-images-* are static, the rest video"""


def subtask_of(set_dir: str) -> str:
    return "static" if "open-images" in set_dir else "videos"


def set_images(set_dir: Path) -> list[ImageRef]:
    """The set's 10 images in the official order. A missing or incomplete folder becomes one
    reference to a path that does not exist, so the engine reports it like any missing image."""
    numbered = [(int(m.group(1)), p) for p in set_dir.glob("img*.jpg") if (m := _NUMBERED.fullmatch(p.name))] if set_dir.is_dir() else []
    files = [p for _, p in sorted(numbered)]
    if len(files) != IMAGES_PER_SET:
        return [ImageRef(str(set_dir / f"img*.jpg (found {len(files)} of {IMAGES_PER_SET})"))]
    return [ImageRef(str(p)) for p in files]


class ImageCoDe:
    name = "imagecode"
    subtasks = SUBTASKS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """One item per description, in file order; `limit` = at most that many per subtask."""
        wanted = chosen(self.subtasks, subtasks, self.name)
        path = Path(root) / "imagecode" / "data" / "valid_data.json"
        require_files([path], self.name, self.layout)
        data = read_json(path, self.name)
        if not isinstance(data, dict):
            raise bad_record(self.name, path, "top level", "expected {image set dir: {index: description}}")
        image_root = Path(root) / "imagecode" / "image-sets"
        counts = dict.fromkeys(SUBTASKS, 0)
        items = []
        for set_dir, descriptions in data.items():
            check_inside(set_dir, self.name, path, f"set {set_dir!r}", "an image set folder")
            if not isinstance(descriptions, dict):
                raise bad_record(self.name, path, f"set {set_dir!r}", f"expected an object, got {kind_of(descriptions)}")
            sub = subtask_of(set_dir)
            if sub not in wanted or (limit is not None and counts[sub] >= limit):
                continue
            images = set_images(image_root / set_dir)
            for idx, text in descriptions.items():
                if limit is not None and counts[sub] >= limit:
                    break
                try:
                    target = int(idx)
                except ValueError as e:
                    raise bad_record(self.name, path, f"set {set_dir!r}", f"image index {idx!r} is not an integer") from e
                if not 0 <= target < IMAGES_PER_SET:
                    raise bad_record(self.name, path, f"set {set_dir!r}", f"image index {target} outside 0-{IMAGES_PER_SET - 1}")
                check_text(text, self.name, path, f"set {set_dir!r}: {idx}")
                items.append(Item(images, [text.strip()], {"subtask": sub, "set": set_dir, "target": target}))
                counts[sub] += 1
        return items

    def score(self, items: list[Item], sims: list[np.ndarray]) -> list[dict]:
        hits: dict[str, list[bool]] = {s: [] for s in SUBTASKS}
        for item, s in zip(items, sims):
            column = np.asarray(s, dtype=np.float64)[:, 0]  # the 10 images' scores for the description
            hits[item.meta["subtask"]].append(bool(metrics.choice_correct(column[None, :], item.meta["target"], tie="argmax-first")[0]))
        rows = [row(sub, "accuracy", float(np.mean(h)), len(h)) for sub, h in hits.items() if h]
        if all(hits.values()):
            everything = [x for h in hits.values() for x in h]
            rows.append(row(HEADLINE, "accuracy", float(np.mean(everything)), len(everything)))
        return rows


BENCHMARK = ImageCoDe()
