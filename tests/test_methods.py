"""The methods registry (mosaictool.methods): what each method takes from a record and its loss.

The PINNED_* constants were produced by the code before methods moved out of model/train.py and
model/data.py (commit fc8a7bb): they pin that the move changed no text draw, loss or gradient.
The loss formulas themselves are checked against brute-force references in test_losses.py.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from mosaictool import methods
from mosaictool.model.train import TrainConfig, train

from train_fixtures import make_world, write_tiny_model  # noqa: E402

PROBS = {"obj": 0.2, "attr": 0.4, "rel": 0.4}
# (method, options) -> sha256[:16] of the texts drawn for the 12 records of make_world(n=12) with
# random.Random(f"pin:{index}")
PINNED_SELECTION = [
    ("clip", {}, "11e57da5d48bb7b7"),
    ("negclip", {}, "e0c887a4206bd2bf"),
    ("mosaiclip", {"max_pos": 4, "max_neg": 6, "category_probs": PROBS}, "042245a034432a26"),
    ("mosaiclip", {"max_pos": 2, "max_neg": 3, "category_probs": PROBS}, "cdeb8b54ff6b89f0"),
]
# (method, options) -> first-step loss, sum |grad| and sum grad^2 over all parameters (tiny model,
# batch 4, seed 0, fp32, no clipping); max_pos 4 = every positive of make_world's records
PINNED_STEP = [
    ("clip", {}, (1.7175012826919556, 3848.852772858463, 9423.135197288102)),
    ("negclip", {}, (2.8908843994140625, 2725.181845258871, 5577.870355898915)),
    ("mosaiclip", {"max_pos": 4, "category_probs": PROBS}, (2.6130154132843018, 1722.842008489077, 1673.5346199331484)),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    return make_world(root, n=12), write_tiny_model(root)


def draws(records, method: str, options: dict) -> list:
    m = methods.create(method, options)
    kp, kn = options.get("max_pos", 1), options.get("max_neg", int(method != "clip"))
    return [list(m.select(r, random.Random(f"pin:{i}"), kp, kn).__dict__.values()) for i, r in enumerate(records)]


@pytest.mark.parametrize("method,options,digest", PINNED_SELECTION)
def test_text_draws_are_pinned(world, method, options, digest):
    records = [json.loads(line) for line in Path(world[0]).read_text().splitlines()]
    out = [list(map(list, d)) for d in draws(records, method, options)]
    assert hashlib.sha256(json.dumps(out).encode()).hexdigest()[:16] == digest


@pytest.mark.parametrize("method,options,expected", PINNED_STEP)
def test_first_step_loss_and_gradients_are_pinned(world, tmp_path, method, options, expected):
    seen = {}

    def grab(step, metrics, model):
        grads = [p.grad.double() for p in model.parameters() if p.grad is not None]
        seen["value"] = (metrics["loss"], float(sum(g.abs().sum() for g in grads)), float(sum((g * g).sum() for g in grads)))

    data, model_cfg = world
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), model_config=str(model_cfg), batch_size=4, steps=1,
                      warmup=1, quiet=True, grad_clip=None, method=method, method_options=options)
    train(cfg, on_step=grab)
    assert seen["value"] == pytest.approx(expected, rel=1e-5)
