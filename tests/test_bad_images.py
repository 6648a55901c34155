"""Images the existing cases (tests/test_bad_input.py, tests/test_bad_values.py) leave out, through
shard and train: unusual but valid ones (16-bit RGB, LA, 1x10000, animated GIF, EXIF-rotated JPEG)
convert to RGB the same way every time; bad ones (a truncated JPEG, a text file named .jpg, a 0-byte
.jpg, a symlink loop) are one line naming the image, skippable with --skip-bad, nothing written."""

from __future__ import annotations

import io
import json
import os
import random
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from test_bad_values import invoke, refused, refuses_then_skips, snapshot


def _rgb16_png(path: Path) -> None:
    """A 16-bit-per-channel RGB PNG (Pillow writes none): (60000, 30000, 0) everywhere."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\0" + struct.pack(">HHH", 60000, 30000, 0) * 20 for _ in range(20))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 20, 20, 16, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def odd_image(kind: str, path: Path) -> tuple[int, int, int]:
    """Write an unusual but valid image; -> the RGB colour it decodes to."""
    if kind == "rgb16":
        _rgb16_png(path)
        return (233, 117, 0)  # the high byte of each channel
    if kind == "la":
        Image.new("LA", (20, 20), (100, 128)).save(path, "PNG")
        return (100, 100, 100)
    if kind == "1x10000":
        Image.new("RGB", (1, 10000), (10, 200, 10)).save(path, "PNG")
        return (10, 200, 10)
    if kind == "animated-gif":  # the first frame
        frames = [Image.new("P", (20, 20), i) for i in range(3)]
        for f in frames:
            f.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255] + [0] * 759)
        frames[0].save(path, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
        return (255, 0, 0)
    if kind == "exif-rotated":  # pixels as stored: open_clip's preprocessing ignores the orientation tag too
        im = Image.new("RGB", (40, 20), (10, 10, 200))
        exif = im.getexif()
        exif[0x0112] = 6
        im.save(path, "JPEG", exif=exif, quality=95)
        return (10, 10, 200)
    raise ValueError(kind)


def bad_image(kind: str, path: Path) -> str:
    """Write a bad image; -> the words the error holds."""
    if kind == "truncated-jpeg":
        data = io.BytesIO()
        Image.new("RGB", (64, 64), (200, 10, 10)).save(data, "JPEG")
        path.write_bytes(data.getvalue()[: len(data.getvalue()) // 2])
        return "corrupt image"
    if kind == "text-as-jpg":
        path.write_text("a red cube left of a blue ball")
        return "not an image file"
    if kind == "zero-byte-jpg":
        path.write_bytes(b"")
        return "not an image file"
    if kind == "symlink-loop":
        os.symlink(path.name, path)
        return "Too many levels of symbolic links"
    raise ValueError(kind)


EXT = {"animated-gif": "gif", "exif-rotated": "jpg", "truncated-jpeg": "jpg", "text-as-jpg": "jpg", "zero-byte-jpg": "jpg"}
ODD = ["rgb16", "la", "1x10000", "animated-gif", "exif-rotated"]
BAD = ["truncated-jpeg", "text-as-jpg", "zero-byte-jpg", "symlink-loop"]


@pytest.fixture
def world(tmp_path):
    from train_fixtures import make_world

    return make_world(tmp_path / "in", n=8), tmp_path / "out"


def with_image(data: Path, kind: str, make) -> tuple[Path, object]:
    name = f"odd.{EXT.get(kind, 'png')}"
    result = make(kind, data.parent / "images" / name)
    records = [json.loads(x) for x in data.read_text().splitlines()]
    records[3]["image"] = f"images/{name}"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    return data.parent / "images" / name, result


@pytest.mark.parametrize("kind", ODD)
def test_unusual_images_convert_to_rgb_the_same_way_every_time(world, kind):
    from mosaictool.training.transform import ImageTransform

    data, out = world
    path, colour = with_image(data, kind, odd_image)
    pixels = [ImageTransform(32, augment=False)(path.read_bytes(), random.Random(0)) for _ in range(2)]
    assert pixels[0].shape == (3, 32, 32) and bool((pixels[0] == pixels[1]).all())
    assert [round(float(pixels[0][c].float().mean())) for c in range(3)] == pytest.approx(colour, abs=3)
    before = snapshot(data.parent)
    shard = invoke(["shard", data, "--image-root", data.parent, "--out", out / "shards", "-q"])
    assert shard.exit_code == 0, shard.stderr
    assert json.loads((out / "shards" / "sizes.json").read_text()) == {"000000.tar": 8}
    assert snapshot(data.parent) == before


@pytest.mark.parametrize("kind", ODD)
def test_train_reads_unusual_images(world, kind):
    data, out = world
    with_image(data, kind, odd_image)
    result = invoke(["train", "--data", data, "--out", out / "run", "--batch-size", "4", "--steps", "1", "--model", "mosaic-micro",
                     "--device", "cpu", "-q"])
    assert result.exit_code == 0, result.stderr
    assert (out / "run" / "final.pt").is_file()


@pytest.mark.parametrize("kind", BAD)
def test_shard_refuses_or_skips_a_bad_image(world, kind):
    data, out = world
    _, words = with_image(data, kind, bad_image)
    shard = ["shard", data, "--image-root", data.parent, "--out", out / "shards", "-q"]
    refuses_then_skips(shard, out / "shards", data, "odd.", words)
    assert json.loads((out / "shards" / "sizes.json").read_text()) == {"000000.tar": 7}


@pytest.mark.parametrize("kind", BAD)
def test_train_refuses_or_skips_a_bad_image(world, kind):
    data, out = world
    _, words = with_image(data, kind, bad_image)
    args = ["train", "--data", data, "--out", out / "run", "--batch-size", "4", "--steps", "1", "--model", "mosaic-micro",
            "--device", "cpu", "-q"]
    refuses_then_skips(args, out / "run", data, "odd.", words)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny model's final.pt (one step) and the world it trained on."""
    from mosaictool.training import TrainConfig, train
    from train_fixtures import make_world, write_tiny_model

    root = tmp_path_factory.mktemp("run")
    data = make_world(root / "world", n=8)
    final = train(TrainConfig(data=str(data), out=str(root / "run"), model_config=str(write_tiny_model(root)), batch_size=4,
                              steps=1, quiet=True, device="cpu"))
    return Path(final), data


def _sugarcrepe(tmp_path: Path, finished, kind: str, make) -> tuple[Path, object]:
    """A one-subset SugarCrepe whose second case shows an image of `kind` (the first a good one)."""
    import shutil

    root = tmp_path / "bench"
    (root / "sugarcrepe").mkdir(parents=True)
    (root / "coco" / "val2017").mkdir(parents=True)
    name = f"odd.{EXT.get(kind, 'png')}"
    result = make(kind, root / "coco" / "val2017" / name)
    case = {"filename": "a.jpg", "caption": "a red cup", "negative_caption": "a blue cup"}
    (root / "sugarcrepe" / "add_att.json").write_text(json.dumps({"0": case, "1": {**case, "filename": name}}))
    shutil.copy(finished[1].parent / "images" / "000.png", root / "coco" / "val2017" / "a.jpg")
    return root, result


@pytest.mark.parametrize("kind", ODD)
def test_evaluate_reads_unusual_images_the_same_way_every_time(finished, tmp_path, kind):
    root, _ = _sugarcrepe(tmp_path, finished, kind, odd_image)
    args = ["evaluate", "-b", "sugarcrepe:add_att", "-d", root, "-c", finished[0], "--device", "cpu", "-q"]
    first, second = invoke(args + ["-o", tmp_path / "a.jsonl"]), invoke(args + ["-o", tmp_path / "b.jsonl"])
    assert first.exit_code == 0 and second.exit_code == 0, first.stderr
    rows = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert rows and rows[0]["n"] == 2
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()


@pytest.mark.parametrize("kind", BAD)
def test_evaluate_refuses_a_bad_benchmark_image(finished, tmp_path, kind):
    root, _ = _sugarcrepe(tmp_path, finished, kind, bad_image)
    before = snapshot(tmp_path)
    result = invoke(["evaluate", "-b", "sugarcrepe:add_att", "-d", root, "-c", finished[0], "--device", "cpu", "-q",
                     "-o", tmp_path / "r.jsonl"])
    line = refused(result, "odd.")
    assert "cannot read image" in line or "missing" in line, line
    assert snapshot(tmp_path) == before
