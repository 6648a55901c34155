"""Images as users hold them (mosaictool.images): unusual ones (16-bit, greyscale with alpha, 1x10000,
animated, EXIF-rotated, CMYK, palette) read the same way by shard, train and evaluate; broken, special
(FIFO, folder, device) and decompression-bomb images refused with one line naming the record, or
skipped with --skip-bad."""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from helpers import assert_ok, copy_world, invoke, invoke_within, refused, refuses_then_skips, snapshot, train_args
from helpers import refused as assert_refused

# --- bad input (moved from test_bad_images.py) ---

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


# --- bad input (moved from test_bad_input.py) ---

def _odd_image(kind: str, path: Path) -> tuple[int, int, int]:
    """Write an unusual but valid image; returns the RGB colour it must decode to."""
    from PIL import Image

    if kind == "cmyk":
        Image.new("CMYK", (40, 40), (0, 255, 0, 0)).save(path, "JPEG", quality=100)
        return (255, 0, 255)
    if kind == "16bit":
        Image.new("I;16", (40, 40), 30000).save(path, "PNG")
        return (117, 117, 117)  # 30000 / 257, not PIL's clip to white
    if kind == "palette-alpha":
        im = Image.new("P", (40, 40), 1)
        im.putpalette([0, 0, 0, 200, 20, 20] + [0, 0, 0] * 254)
        im.save(path, "PNG", transparency=0)
        return (200, 20, 20)
    if kind == "1x1":
        Image.new("RGB", (1, 1), (9, 90, 200)).save(path, "PNG")
        return (9, 90, 200)
    raise ValueError(kind)


def _bad_image(kind: str, path: Path, good: bytes) -> str:
    """Write a broken image (or none); returns the words the error must hold."""
    if kind == "missing":
        return "image not found"
    if kind == "zero-byte":
        path.write_bytes(b"")
        return "not an image file"
    if kind == "truncated":
        path.write_bytes(good[: len(good) // 2])
        return "truncated"
    if kind == "not-an-image":
        path.write_text("this is a caption, not a PNG")
        return "not an image file"
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["cmyk", "16bit", "palette-alpha", "1x1"])
def test_unusual_images_are_converted(case, tiny_world, kind):
    import random

    from mosaictool.training.transform import ImageTransform

    name = f"odd.{'jpg' if kind == 'cmyk' else 'png'}"
    colour = _odd_image(kind, case.src / name)
    pixels = ImageTransform(32, augment=False)((case.src / name).read_bytes(), random.Random(0))
    assert pixels.shape == (3, 32, 32)
    assert [round(float(pixels[c].float().mean())) for c in range(3)] == pytest.approx(colour, abs=3)
    data = copy_world(tiny_world, case, {3: name})
    shutil.move(case.src / name, case.src / "images" / name)
    case.freeze()
    assert_ok(invoke(["shard", data, "--image-root", case.src, "--out", case.dst / "shards", "-q"]))
    assert json.loads((case.dst / "shards" / "sizes.json").read_text()) == {"000000.tar": 8}
    assert_ok(invoke(train_args(case.dst / "shards", case.dst / "run")))
    assert (case.dst / "run" / "final.pt").is_file()
    assert snapshot(case.src) == case._before


@pytest.mark.parametrize("kind", ["missing", "zero-byte", "truncated", "not-an-image"])
def test_bad_image_in_shard(case, tiny_world, kind):
    words = _bad_image(kind, case.src / "bad.png", (tiny_world.parent / "images" / "000.png").read_bytes())
    data = copy_world(tiny_world, case, {3: "../bad.png"})
    case.freeze()
    assert_refused(invoke(["shard", data, "--image-root", case.src, "--out", case.dst / "shards", "-q"]),
                   f"{data}: record 'img-3'", words, "bad.png", "--skip-bad")
    case.untouched()
    result = invoke(["shard", data, "--image-root", case.src, "--out", case.dst / "shards", "-q", "--skip-bad"])
    assert_ok(result)
    assert "skipped 1 bad record(s)" in result.stderr and "img-3" in result.stderr
    assert json.loads((case.dst / "shards" / "sizes.json").read_text()) == {"000000.tar": 7}
    assert snapshot(case.src) == case._before


@pytest.mark.parametrize("kind", ["missing", "zero-byte", "truncated", "not-an-image"])
def test_bad_image_in_training_records(case, tiny_world, kind):
    words = _bad_image(kind, case.src / "bad.png", (tiny_world.parent / "images" / "000.png").read_bytes())
    data = copy_world(tiny_world, case, {3: "../bad.png"})
    case.freeze()
    line = assert_refused(invoke(train_args(data, case.dst / "run")), "bad.png", "record 'img-3'", words)
    assert "--skip-bad" in line or "shard --skip-bad" in line
    assert snapshot(case.src) == case._before
    # found before training: no run folder; found while decoding: the run folder holds no checkpoint
    run = case.dst / "run"
    assert not run.exists() or sorted(p.name for p in run.iterdir()) in (["config.json"], ["config.json", "metrics.jsonl"])


# --- bad input (moved from test_bad_values.py) ---

SC_ENTRY = {"filename": "a.jpg", "caption": "a red cup", "negative_caption": "a blue cup"}


def bomb_png(width: int = 30000, height: int = 30000) -> bytes:
    """A PNG of a few dozen bytes that declares width x height pixels (a decompression bomb)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def special_image(kind: str, path: Path) -> tuple[Path, str]:
    """Make `path` a bad image of `kind`; -> (the path the record names, words the error holds)."""
    import os

    if kind == "bomb":
        path.write_bytes(bomb_png())
        return path, "declares more than 89478485 pixels"
    if kind == "bomb-1.5x":  # between Pillow's warning and its error
        path.write_bytes(bomb_png(12000, 11000))
        return path, "declares more than 89478485 pixels"
    if kind == "fifo":
        os.mkfifo(path)
        return path, "is a named pipe (FIFO), not an image file"
    if kind == "folder":
        path.mkdir()
        return path, "is a folder, not an image file"
    if kind == "device":
        return Path("/dev/zero"), "/dev/zero is a character device, not an image file"
    raise ValueError(kind)


IMAGE_KINDS = ["bomb", "bomb-1.5x", "fifo", "folder", "device"]


@pytest.fixture
def world_copy(tmp_path):
    from train_fixtures import make_world

    data = make_world(tmp_path / "in", n=8)
    return data, tmp_path / "out"


def with_bad_image(data: Path, kind: str) -> tuple[Path, str]:
    path, words = special_image(kind, data.parent / "images" / "bad.png")
    records = [json.loads(x) for x in data.read_text().splitlines()]
    records[3]["image"] = str(path) if kind == "device" else "images/bad.png"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    return data, words


@pytest.mark.parametrize("kind", IMAGE_KINDS)
def test_shard_refuses_or_skips_special_and_huge_images(world_copy, kind):
    data, out = world_copy
    data, words = with_bad_image(data, kind)
    fifo = data.parent / "images" / "bad.png" if kind == "fifo" else None
    shard = ["shard", data, "--image-root", data.parent, "--out", out / "shards", "-q"]
    shard += ["--allow-outside-root"] * (kind == "device")  # /dev/zero lies outside the root: refused for that first
    refuses_then_skips(shard, out / "shards", data, words, run=lambda args: invoke_within(args, 60, fifo))
    assert json.loads((out / "shards" / "sizes.json").read_text()) == {"000000.tar": 7}


@pytest.mark.parametrize("kind", IMAGE_KINDS)
def test_train_refuses_or_skips_special_and_huge_images(world_copy, kind):
    data, out = world_copy
    data, words = with_bad_image(data, kind)
    args = ["train", "--data", data, "--out", out / "run", "--batch-size", "4", "--steps", "1", "--model", "mosaic-micro",
            "--device", "cpu", "-q", *["--allow-outside-root"] * (kind == "device")]
    refuses_then_skips(args, out / "run", data, words)


def test_image_transform_refuses_a_bomb_inside_a_shard():
    """Images read from a shard (written by other tools) are size-checked before decoding too."""
    import random

    from mosaictool.images import ImageError
    from mosaictool.training.transform import ImageTransform

    with pytest.raises(ImageError, match="declares more than"):
        ImageTransform(32, augment=False)(bomb_png(), random.Random(0))


@pytest.mark.parametrize("kind", ["bomb", "folder"])
def test_evaluate_refuses_a_bomb_or_a_folder_as_a_benchmark_image(run_folder, tmp_path, kind):
    root = tmp_path / "bench"
    (root / "sugarcrepe").mkdir(parents=True)
    (root / "coco" / "val2017").mkdir(parents=True)
    _, words = special_image(kind, root / "coco" / "val2017" / "a.png")
    (root / "sugarcrepe" / "add_att.json").write_text(json.dumps({"0": SC_ENTRY, "1": {**SC_ENTRY, "filename": "a.png"}}))
    import shutil

    shutil.copy(Path(run_folder[2]).parent / "images" / "000.png", root / "coco" / "val2017" / "a.jpg")
    before = snapshot(tmp_path)
    if kind == "folder":  # not a file: counted with the missing images, which --skip-missing skips
        refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "-d", root, "-c", run_folder[1], "-o", tmp_path / "r.jsonl"]),
                "1 image file(s) missing", "a.png")
    else:
        refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "-d", root, "-c", run_folder[1], "-o", tmp_path / "r.jsonl"]),
                "a.png", words)
    assert snapshot(tmp_path) == before

