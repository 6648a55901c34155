"""CLIP fine-tuning: each image with its caption, open_clip's contrastive loss (ClipLoss)."""

from __future__ import annotations

from mosaictool.methods.base import DemoRow, Method


class Clip(Method):
    name = "clip"
    place = 10
    help = "CLIP fine-tuning: the caption of each image, the symmetric contrastive loss."
    demo_rows = (DemoRow("CLIP"),)


METHOD = Clip
