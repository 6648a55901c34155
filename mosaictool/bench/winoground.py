"""Winoground (facebook/winoground): two images and two captions with the same words in another
order; each caption matches one image. 400 examples.

Official rules (Thrush et al. 2022; the scores EqBen's `cal_wino_score` computes), s(caption, image):
- text  = s(c0,i0) > s(c1,i0) and s(c1,i1) > s(c0,i1)
- image = s(c0,i0) > s(c0,i1) and s(c1,i1) > s(c1,i0)
- group = text and image; every comparison strict, so a tie is wrong.
vl_compo's headline is group. Rows per `collapsed_tag` (Object, Relation, Both) are the subtasks.

Two forms of the data are read: the original `data/examples.jsonl` + `images/` (image stems, read as
`<stem>.png`), and the Hugging Face parquet (`data/test-00000-of-00001.parquet`, images embedded),
whichever is present (the jsonl first). RGBA images are converted to RGB by the engine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import bad_record, chosen, json_value, read_text
from mosaictool.bench._formats import WINOGROUND_JSONL, WINOGROUND_PARQUET, check_entry
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row
from mosaictool.errors import MosaicError

TAGS = ["Object", "Relation", "Both"]

LAYOUT = """\
  either the original release:
    winoground/data/examples.jsonl           one example per line (id, image_0, image_1, caption_0, caption_1, tag, collapsed_tag, ...)
    winoground/data/images/<image_0>.png     images.zip unpacked (image fields are stems, e.g. ex_0_img_0)
  or the Hugging Face parquet:
    winoground/data/test-00000-of-00001.parquet   images embedded
  text/image/group scores, strict comparisons; subtasks = collapsed_tag (Object, Relation, Both)"""


def _jsonl_records(path: Path) -> list[dict]:
    records = []
    for lineno, line in enumerate(read_text(path, "winoground").splitlines(), 1):
        if not line.strip():
            continue
        records.append(json_value(line, f"winoground: {path}:{lineno}", hint="download examples.jsonl again"))
    return records


def _parquet_records(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except Exception as e:  # pyarrow raises several types for damaged files
        raise MosaicError(f"winoground: cannot read {path} ({e}); download the parquet file again") from e


def _image_bytes(value, path: Path, where: str) -> bytes:
    """The HF `Image` feature is stored as {bytes, path}; plain binary columns are accepted too."""
    data = value.get("bytes") if isinstance(value, dict) else value
    if not isinstance(data, (bytes, bytearray)):
        raise bad_record("winoground", path, where, "image column holds no encoded image bytes")
    return bytes(data)


class Winoground:
    name = "winoground"
    subtasks = TAGS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """One item per example in file order; `limit` = at most that many per collapsed_tag."""
        wanted = chosen(self.subtasks, subtasks, self.name)
        data = Path(root) / "winoground" / "data"
        jsonl = data / "examples.jsonl"
        parquets = sorted(data.glob("test-*.parquet"))
        if jsonl.is_file():
            records, source = _jsonl_records(jsonl), jsonl
        elif parquets:
            records, source = [r for p in parquets for r in _parquet_records(p)], parquets[0]
        else:
            raise MosaicError(f"winoground: neither {jsonl} nor {data}/test-*.parquet found; expected layout:\n{self.layout}")
        counts = dict.fromkeys(TAGS, 0)
        items, first = [], {}
        for i, rec in enumerate(records):
            where = f"line {i + 1}" if source == jsonl else f"row {i}"
            check_entry(WINOGROUND_JSONL if source == jsonl else WINOGROUND_PARQUET, rec, self.name, source, where)
            if rec["id"] in first:
                raise bad_record(self.name, source, where, f"id {rec['id']!r} repeats {first[rec['id']]}")
            first[rec["id"]] = where
            tag = rec["collapsed_tag"]
            if tag not in wanted or (limit is not None and counts[tag] >= limit):
                continue
            if source == jsonl:
                images = [ImageRef(str(data / "images" / f"{rec[k]}.png")) for k in ("image_0", "image_1")]
            else:
                images = [ImageRef(f"{source}:row {i}:{k}", data=_image_bytes(rec[k], source, where)) for k in ("image_0", "image_1")]
            items.append(Item(images, [rec["caption_0"], rec["caption_1"]], {"subtask": tag, "id": rec["id"]}))
            counts[tag] += 1
        return items

    def score(self, items: list[Item], sims: list[np.ndarray]) -> list[dict]:
        by_tag: dict[str, list[np.ndarray]] = {}
        for item, s in zip(items, sims):
            by_tag.setdefault(item.meta["subtask"], []).append(np.asarray(s, dtype=np.float64))
        rows = []
        for tag in TAGS:
            if tag in by_tag:
                acc = metrics.winoground_accuracy(by_tag[tag])
                rows += [row(tag, k, v, len(by_tag[tag]), detail=True) for k, v in acc.items()]
        every = [m for tag in TAGS for m in by_tag.get(tag, [])]
        overall = metrics.winoground_accuracy(every)
        rows += [row("all", k, v, len(every)) for k, v in overall.items()]
        if all(tag in by_tag for tag in TAGS):
            rows.append(row(HEADLINE, "group", overall["group"], len(every)))
        return rows


BENCHMARK = Winoground()
