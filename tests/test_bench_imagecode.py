"""ImageCoDe: the loader on the real valid_data.json (2,302 descriptions in 1,039 sets: 430 static,
1,872 video), the int(k) image order, missing or incomplete sets reported as missing images, top-1
with its tie rule, the micro headline, and one engine run with placeholder images."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mosaictool.bench import get
from mosaictool.bench.base import HEADLINE, ImageRef, Item
from mosaictool.bench.engine import drop_missing
from mosaictool.bench.imagecode import BENCHMARK
from mosaictool.errors import MosaicError

VIDEO_FRAMES = [3, 10, 27, 100, 2, 45, 9, 61, 88, 14]  # sorted by int: 2 3 9 10 14 27 45 61 88 100


@pytest.fixture(scope="module")
def root(real_benchmarks, tmp_path_factory) -> Path:
    r = tmp_path_factory.mktemp("imagecode_root")
    (r / "imagecode" / "data").mkdir(parents=True)
    (r / "imagecode" / "data" / "valid_data.json").symlink_to(real_benchmarks / "imagecode" / "data" / "valid_data.json")
    return r


def _make_set(set_dir: Path, numbers) -> None:
    from PIL import Image

    set_dir.mkdir(parents=True, exist_ok=True)
    for k in numbers:
        Image.new("RGB", (8, 8), (k % 256, 0, 0)).save(set_dir / f"img{k}.jpg")


def test_registered():
    assert get("imagecode") is BENCHMARK
    assert BENCHMARK.subtasks == ["videos", "static"]


def test_real_valid_split_counts(root):
    items = BENCHMARK.load(root)
    assert len(items) == 2302
    assert Counter(it.meta["subtask"] for it in items) == {"videos": 1872, "static": 430}
    assert len({it.meta["set"] for it in items}) == 1039
    assert all(0 <= it.meta["target"] < 10 and len(it.texts) == 1 for it in items)
    assert all(it.texts[0] == it.texts[0].strip() for it in items)
    assert Counter(it.meta["subtask"] for it in BENCHMARK.load(root, limit=5)) == {"videos": 5, "static": 5}
    assert {it.meta["subtask"] for it in BENCHMARK.load(root, subtasks=["static"])} == {"static"}


def test_images_sorted_by_frame_number_and_missing_sets_reported(root, tmp_path, real_benchmarks):
    data = json.loads((real_benchmarks / "imagecode" / "data" / "valid_data.json").read_text())
    video = next(d for d in data if "open-images" not in d)
    r = tmp_path
    (r / "imagecode" / "data").mkdir(parents=True)
    (r / "imagecode" / "data" / "valid_data.json").write_text(json.dumps({video: data[video]}))
    items = BENCHMARK.load(r)
    assert len(items[0].images) == 1 and "found 0 of 10" in items[0].images[0].path
    with pytest.raises(MosaicError, match=r"1 image file\(s\) missing"):
        drop_missing(items, skip=False, where="imagecode")

    _make_set(r / "imagecode" / "image-sets" / video, VIDEO_FRAMES[:9])  # incomplete
    assert "found 9 of 10" in BENCHMARK.load(r)[0].images[0].path

    _make_set(r / "imagecode" / "image-sets" / video, VIDEO_FRAMES)
    items = BENCHMARK.load(r)
    names = [Path(ref.path).name for ref in items[0].images]
    assert names == [f"img{k}.jpg" for k in sorted(VIDEO_FRAMES)]
    assert drop_missing(items, skip=False, where="imagecode")[1].paths == []


def _case(sub: str, target: int, column) -> tuple[Item, np.ndarray]:
    item = Item([ImageRef(f"{i}.jpg") for i in range(10)], ["d"], {"subtask": sub, "set": "s", "target": target})
    return item, np.asarray(column, dtype=float)[:, None]


def test_top1_ties_go_to_the_lowest_index():
    tie = [0.5, 0.1, 0.1, 0.1, 0.1, 0.5, 0.1, 0.1, 0.1, 0.1]
    cases = [_case("videos", 0, tie), _case("videos", 5, tie), _case("static", 3, np.eye(10)[3]),
             _case("static", 3, np.eye(10)[4])]
    rows = {(r["subtask"], r["metric"]): r for r in BENCHMARK.score(*map(list, zip(*cases)))}
    assert rows[("videos", "accuracy")]["value"] == 0.5
    assert rows[("static", "accuracy")]["value"] == 0.5
    assert rows[(HEADLINE, "accuracy")] == {"subtask": HEADLINE, "metric": "accuracy", "value": 0.5, "n": 4}


def test_headline_is_the_micro_accuracy():
    cases = [_case("videos", 1, np.eye(10)[1])] * 3 + [_case("static", 1, np.eye(10)[2])]
    rows = {(r["subtask"], r["metric"]): r["value"] for r in BENCHMARK.score(*map(list, zip(*cases)))}
    assert rows[("videos", "accuracy")] == 1.0 and rows[("static", "accuracy")] == 0.0
    assert rows[(HEADLINE, "accuracy")] == 0.75
    only_video = BENCHMARK.score(*map(list, zip(*cases[:3])))
    assert all(r["subtask"] != HEADLINE for r in only_video)


def test_end_to_end_with_placeholder_images(root):
    from mosaictool.bench.engine import EngineOptions, evaluate
    from mosaictool.model.openclip import create

    items = BENCHMARK.load(root, limit=1)
    for it in items:
        _make_set(Path(it.images[0].path).parent.parent / it.meta["set"],
                  VIDEO_FRAMES if it.meta["subtask"] == "videos" else range(10))
    bundle = create("mosaic-tiny", None, seed=0)
    rows = list(evaluate([(BENCHMARK, None)], [("tiny", bundle)], root, EngineOptions(limit=1, quiet=True)))
    assert {(r["subtask"], r["n"]) for r in rows} == {("videos", 1), ("static", 1), (HEADLINE, 2)}
