"""SPEC (wjpoom/SPEC): controlled generated images probing size, position, existence and count;
6 subsets, each with an image-to-text and a text-to-image file.

Official rules (`wjpoom/SPEC`, `spec/models/clip_wrapper.py`):
- image2text: one query image, its candidate texts; text2image: one query text, its candidate
  images; correct iff argmax over the candidates == label (torch.argmax: the first maximum wins,
  "argmax-first");
- per subset i2t and t2i accuracy; the reported figure is the unweighted mean over the 6 subsets
  (OpenAI ViT-B/32: i2t 33.39, t2i 30.55). Not part of vl_compo's comp_avg.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import bad_record, chosen, headline, read_json, require_files
from mosaictool.bench.base import ImageRef, Item, row

SUBSETS = ["absolute_size", "relative_size", "absolute_spatial", "relative_spatial", "existence", "count"]
DIRECTIONS = {"i2t": "image2text.json", "t2i": "text2image.json"}

LAYOUT = """\
  spec/<subset>/image2text.json         [{query: image path, keys: [texts], label}]
  spec/<subset>/text2image.json         [{query: text, keys: [image paths], label}]
  spec/<subset>/<image path>            image paths are relative to the subset folder (data.zip from HF wjpoom/SPEC)
  subset = absolute_size, relative_size, absolute_spatial, relative_spatial, existence, count
  i2t / t2i accuracy = argmax == label (first maximum wins); headline = unweighted mean over the 6 subsets"""


class Spec:
    name = "spec"
    subtasks = SUBSETS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """Per subset, the image2text then the text2image cases in file order; `limit` = per file."""
        names = chosen(self.subtasks, subtasks, self.name)
        base = Path(root) / "spec"
        require_files([base / n / f for n in names for f in DIRECTIONS.values()], self.name, self.layout)
        items = []
        for sub in names:
            for direction, filename in DIRECTIONS.items():
                path = base / sub / filename
                records = read_json(path, self.name)
                if not isinstance(records, list):
                    raise bad_record(self.name, path, "top level", "expected a JSON list of {query, keys, label}")
                for i, rec in enumerate(records[:limit] if limit is not None else records):
                    items.append(self._item(sub, direction, rec, base / sub, path, i))
        return items

    def _item(self, sub: str, direction: str, rec, subset_dir: Path, path: Path, i: int) -> Item:
        try:
            query, keys, label = rec["query"], list(rec["keys"]), int(rec["label"])
        except (KeyError, TypeError, ValueError) as e:
            raise bad_record(self.name, path, f"item {i}", f"expected {{query, keys, label}} ({e!r})") from e
        if not 0 <= label < len(keys):
            raise bad_record(self.name, path, f"item {i}", f"label {label} outside the {len(keys)} keys")
        meta = {"subtask": sub, "direction": direction, "label": label}
        if direction == "i2t":
            return Item([ImageRef(str(subset_dir / query))], keys, meta)
        return Item([ImageRef(str(subset_dir / k)) for k in keys], [query], meta)

    def score(self, items: list[Item], sims: list[np.ndarray]) -> list[dict]:
        hits: dict[tuple[str, str], list[bool]] = {}
        for item, s in zip(items, sims):
            s = np.asarray(s, dtype=np.float64)
            candidates = s[0] if item.meta["direction"] == "i2t" else s[:, 0]
            ok = metrics.choice_correct(candidates[None, :], item.meta["label"], tie="argmax-first")[0]
            hits.setdefault((item.meta["subtask"], item.meta["direction"]), []).append(bool(ok))
        rows = []
        per_direction: dict[str, list[dict | None]] = {d: [] for d in DIRECTIONS}
        for sub in SUBSETS:
            for direction in DIRECTIONS:
                h = hits.get((sub, direction))
                if h:
                    rows.append(row(sub, f"{direction}_accuracy", float(np.mean(h)), len(h)))
                per_direction[direction].append(rows[-1] if h else None)
        for direction, parts in per_direction.items():
            rows += headline(f"{direction}_accuracy", parts)
        return rows


BENCHMARK = Spec()
