"""Drawing scenes with Pillow, fast: shape masks and texture fills are made once and pasted.

A mask is drawn at 4× and downsampled (anti-aliased edges); a texture fill is a canvas-sized image
of the colour with its pattern, anchored to the canvas so neighbouring objects' stripes line up. An
object is one `paste(fill.crop(box), box, mask)`. Pure function of the scene: same scene, same pixels.
"""

from __future__ import annotations

import io
import math
from functools import lru_cache

from PIL import Image, ImageDraw

from mosaictool.world.vocab import BACKGROUND, RGB

SUPERSAMPLE = 4


def _shape_polygon(shape: str, n: int) -> list[tuple[float, float]] | None:
    c = n / 2
    if shape == "triangle":
        return [(c, 0.04 * n), (0.98 * n, 0.94 * n), (0.02 * n, 0.94 * n)]
    if shape == "diamond":
        return [(c, 0), (n, c), (c, n), (0, c)]
    if shape == "star":
        pts = []
        for k in range(10):
            r = c if k % 2 == 0 else 0.42 * c
            a = -math.pi / 2 + k * math.pi / 5
            pts.append((c + r * math.cos(a), c + 0.06 * n + r * math.sin(a)))
        return pts
    if shape == "cross":
        a, b = 0.34 * n, 0.66 * n
        return [(a, 0), (b, 0), (b, a), (n, a), (n, b), (b, b), (b, n), (a, n), (a, b), (0, b), (0, a), (a, a)]
    return None


@lru_cache(maxsize=None)
def shape_mask(shape: str, side: int) -> Image.Image:
    n = side * SUPERSAMPLE
    big = Image.new("L", (n, n), 0)
    draw = ImageDraw.Draw(big)
    if shape == "circle":
        draw.ellipse((0, 0, n - 1, n - 1), fill=255)
    elif shape == "square":
        draw.rectangle((0.08 * n, 0.08 * n, 0.92 * n, 0.92 * n), fill=255)
    else:
        draw.polygon(_shape_polygon(shape, n), fill=255)
    return big.resize((side, side), Image.Resampling.LANCZOS)


def _shade(rgb: tuple[int, int, int], f: float) -> tuple[int, int, int]:
    return tuple(int(v * f) for v in rgb)


@lru_cache(maxsize=None)
def texture_fill(colour: str, texture: str, image_size: int) -> Image.Image:
    rgb = RGB[colour]
    fill = Image.new("RGB", (image_size, image_size), rgb)
    if texture == "solid":
        return fill
    dark = _shade(rgb, 0.4)
    draw = ImageDraw.Draw(fill)
    if texture == "striped":  # diagonal, so stripes say nothing about left/right or up/down
        for k in range(-image_size, 2 * image_size, 4):
            draw.line((k, 0, k + image_size, image_size), fill=dark, width=2)
    else:  # dotted
        for y in range(1, image_size, 4):
            for x in range(1 + (y // 4 % 2) * 2, image_size, 4):
                draw.rectangle((x, y, x + 1, y + 1), fill=dark)
    return fill


def render(scene: dict) -> Image.Image:
    size = scene["image_size"]
    canvas = Image.new("RGB", (size, size), BACKGROUND)
    for obj in scene["objects"]:
        x0, y0, x1, y1 = obj["bbox"]
        box = (x0, y0, x1, y1)
        canvas.paste(texture_fill(obj["colour"], obj["texture"], size).crop(box), box, shape_mask(obj["shape"], x1 - x0))
    return canvas


def encode(image: Image.Image, fmt: str) -> bytes:
    """Image bytes with fixed encoder settings (no metadata, no timestamps): byte-identical reruns."""
    buf = io.BytesIO()
    if fmt == "png":
        image.save(buf, format="PNG", compress_level=6, optimize=False)
    elif fmt == "jpg":
        image.save(buf, format="JPEG", quality=95, subsampling=0, optimize=False)
    else:
        raise ValueError(fmt)
    return buf.getvalue()
