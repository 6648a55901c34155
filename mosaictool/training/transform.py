"""A run's images: their size and normalisation (ImagePrep), and decode + (random) crop + resize
with a generator per sample, never the global RNG (ImageTransform)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import torch

from mosaictool.images import open_image

# What Pillow raises for a file that is not an image, truncated or corrupt
UNREADABLE_IMAGE = (OSError, SyntaxError, ValueError)


@dataclass(frozen=True)
class ImagePrep:
    """The model's image size and normalisation (images travel as uint8 and are normalised per batch)."""

    size: int
    mean: tuple
    std: tuple

    @staticmethod
    def size_of(model_cfg: dict) -> int:
        """The square side a model's images are prepared at, from its open_clip config."""
        size = model_cfg["vision_cfg"].get("image_size", 224)
        return size[0] if isinstance(size, (list, tuple)) else size

    @classmethod
    def of(cls, bundle) -> "ImagePrep":
        import open_clip

        pp = open_clip.get_model_preprocess_cfg(bundle.model)
        return cls(cls.size_of(bundle.meta["model_cfg"]), pp.get("mean", open_clip.OPENAI_DATASET_MEAN),
                   pp.get("std", open_clip.OPENAI_DATASET_STD))


@dataclass
class ImageTransform:
    size: int
    augment: bool = True
    scale: tuple[float, float] = (0.8, 1.0)  # random-resized-crop as in open_clip's fine-tuning aug
    ratio: tuple[float, float] = (3 / 4, 4 / 3)

    def __call__(self, data: bytes, rng: random.Random) -> torch.Tensor:
        """uint8 (3, size, size); normalisation happens once per batch."""
        from PIL import Image

        from mosaictool.images import image_to_rgb

        with open_image(data) as im:  # its declared size checked before decoding
            im.draft("RGB", (self.size, self.size))
            im = image_to_rgb(im)
            w, h = im.size
            box = self._crop_box(w, h, rng) if self.augment else _center_square(w, h)
            im = im.resize((self.size, self.size), Image.Resampling.BICUBIC, box=box)
        return torch.from_numpy(np.asarray(im).copy()).permute(2, 0, 1)

    def _crop_box(self, w: int, h: int, rng: random.Random) -> tuple[float, float, float, float]:
        area = w * h
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target = area * rng.uniform(*self.scale)
            aspect = math.exp(rng.uniform(*log_ratio))
            cw = math.sqrt(target * aspect)
            ch = math.sqrt(target / aspect)
            if cw <= w and ch <= h:
                left = rng.uniform(0, w - cw)
                top = rng.uniform(0, h - ch)
                return (left, top, left + cw, top + ch)
        return _center_square(w, h)


def _center_square(w: int, h: int) -> tuple[float, float, float, float]:
    side = min(w, h)
    left, top = (w - side) / 2, (h - side) / 2
    return (left, top, left + side, top + side)
