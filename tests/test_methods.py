"""The methods registry (mosaictool.methods): what each method takes from a record and its loss.

The PINNED_* constants were produced by the code before methods moved out of model/train.py and
model/data.py (commit fc8a7bb): they pin that the move changed no text draw, loss or gradient, on
records without sub-graph keys (make_world(keys=False)). KEYED_* pin the same on records with keys
(issue 13): clip and negclip ignore keys (their values are the keyless ones); mosaiclip's draws
leave out negatives true of their image and its loss takes P(i) by containment, so its values differ.
The loss formulas themselves are checked against brute-force references in test_losses.py and
test_containment.py.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from mosaictool import methods
from mosaictool.training import TrainConfig, train

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
# batch 4, seed 0, fp32, no clipping); max_pos 4 = every positive of make_world's records. mosaiclip's
# are pinned with loss_weighting "mean", the loss they were taken with; "paper" is checked against its
# formula in test_containment.py
PINNED_STEP = [
    ("clip", {}, (1.7175012826919556, 3848.852772858463, 9423.135197288102)),
    ("negclip", {}, (2.8908843994140625, 2725.181845258871, 5577.870355898915)),
    ("mosaiclip", {"max_pos": 4, "category_probs": PROBS, "loss_weighting": "mean"}, (2.6130154132843018, 1722.842008489077, 1673.5346199331484)),
]
KEYED_SELECTION = PINNED_SELECTION[:2] + [
    ("mosaiclip", {"max_pos": 4, "max_neg": 6, "category_probs": PROBS}, "96904e699d9e6e14"),
    ("mosaiclip", {"max_pos": 2, "max_neg": 3, "category_probs": PROBS}, "2fba4c2ad99c11f3"),
]
# mosaiclip with max_pos 4 samples every positive of make_world's records: equal texts already say
# what containment says, the values are the keyless ones. With max_pos 2 the unsampled sub-graphs
# count (keyless: 2.2437679767608643, 1432.3708457451316, 1229.0058553581318).
KEYED_STEP = PINNED_STEP[:2] + [
    ("mosaiclip", {"max_pos": 4, "category_probs": PROBS, "loss_weighting": "mean"}, PINNED_STEP[2][2]),
    ("mosaiclip", {"max_pos": 2, "category_probs": PROBS, "loss_weighting": "mean"}, (2.1476922035217285, 1404.848776525564, 1111.567023850472)),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    return make_world(root, n=12, keys=False), write_tiny_model(root)


@pytest.fixture(scope="module")
def keyed_world(tmp_path_factory):
    root = tmp_path_factory.mktemp("keyed")
    return make_world(root, n=12), write_tiny_model(root)


def draws(records, method: str, options: dict) -> list:
    m = methods.create(method, options)
    kp, kn = options.get("max_pos", 1), options.get("max_neg", int(method != "clip"))
    chosen = [m.select(r, random.Random(f"pin:{i}"), kp, kn) for i, r in enumerate(records)]
    return [[c.pos, c.neg] for c in chosen]


def digest_of_draws(world, method, options) -> str:
    records = [json.loads(line) for line in Path(world[0]).read_text().splitlines()]
    return hashlib.sha256(json.dumps(draws(records, method, options)).encode()).hexdigest()[:16]


@pytest.mark.parametrize("method,options,digest", PINNED_SELECTION)
def test_text_draws_are_pinned(world, method, options, digest):
    assert digest_of_draws(world, method, options) == digest


@pytest.mark.parametrize("method,options,digest", KEYED_SELECTION)
def test_text_draws_with_subgraph_keys_are_pinned(keyed_world, method, options, digest):
    assert digest_of_draws(keyed_world, method, options) == digest


@pytest.mark.parametrize("method,options,expected", PINNED_STEP)
def test_first_step_loss_and_gradients_are_pinned(world, tmp_path, method, options, expected):
    assert first_step(world, tmp_path, method, options) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("method,options,expected", KEYED_STEP)
def test_first_step_with_subgraph_keys_is_pinned(keyed_world, tmp_path, method, options, expected):
    assert first_step(keyed_world, tmp_path, method, options) == pytest.approx(expected, rel=1e-5)


def first_step(world, tmp_path, method, options) -> tuple[float, float, float]:
    """First-step loss, sum |grad| and sum grad^2 over all parameters."""
    seen = {}

    def grab(step, metrics, model):
        grads = [p.grad.double() for p in model.parameters() if p.grad is not None]
        seen["value"] = (metrics["loss"], float(sum(g.abs().sum() for g in grads)), float(sum((g * g).sum() for g in grads)))

    data, model_cfg = world
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), model_config=str(model_cfg), batch_size=4, steps=1,
                      warmup=1, quiet=True, grad_clip=None, method=method, method_options=options)
    train(cfg, on_step=grab)
    return seen["value"]


# ---- the registry and its hooks ---------------------------------------------------------------


def test_registry_names_options_and_errors():
    from mosaictool.errors import MosaicError

    assert {"clip", "negclip", "mosaiclip"} <= set(methods.names())
    m = methods.create("mosaiclip", {"max_pos": 2, "category_probs": "obj=1,attr=0,rel=0"})
    assert m.opts["max_pos"] == 2 and m.opts["max_neg"] == 6 and m.opts["category_probs"] == {"obj": 1.0, "attr": 0.0, "rel": 0.0}
    with pytest.raises(MosaicError, match="--max-pos belong to another method"):
        methods.create("clip", {"max_pos": 2})
    with pytest.raises(MosaicError, match="choose one of clip"):
        methods.get("nope")
    with pytest.raises(MosaicError, match="--curriculum-split"):
        methods.create("mosaiclip", {"curriculum_split": 2.0})
    with pytest.raises(MosaicError, match="--loss-weighting 'sum': choose paper or mean"):
        methods.create("mosaiclip", {"loss_weighting": "sum"})
    assert methods.create("mosaiclip").make_loss().weighting == "paper"  # seed 000 Sec. 3.5's sums
    options = methods.all_options()
    assert options["max_pos"][1] == ["mosaiclip"]


def test_every_method_option_is_a_train_flag(runner):
    from mosaictool.cli import app

    out = runner.invoke(app, ["train", "--help"]).stdout
    for name in methods.names():
        assert f"{name}:" in out  # the METHODS list
        for opt in methods.get(name).options:
            assert opt.flag in out


def test_old_config_json_with_top_level_options_resumes(world, tmp_path):
    """Runs written before the registry stored mosaiclip's flags at the top level of config.json."""
    from mosaictool.training.checkpoints import resume_state

    out = tmp_path / "old"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"data": "x", "out": str(out), "method": "mosaiclip", "max_pos": 2,
                                                 "curriculum": True, "category_probs": PROBS}))
    cfg, state = resume_state(TrainConfig(data="", out=str(out)), out)
    assert state is None and cfg.method_options == {"max_pos": 2, "curriculum": True, "category_probs": PROBS}


def test_dense_features_and_joining_micro_batches(world):
    """Method.dense asks the forward pass for projected patch tokens and per-token text features:
    the pooled features are their normalised class / end tokens; Features.cat pads W."""
    import open_clip
    import torch

    from mosaictool.model import openclip
    from mosaictool.training.batch import ContrastiveForward, Features, batch_features
    from mosaictool.training.data import BatchPlan, ImageTransform, SamplerConfig, TrainData, TrainDataset

    data, model_cfg = world
    bundle = openclip.create("test-tiny", model_config_file=str(model_cfg), seed=0)
    m = methods.create("mosaiclip", {"max_pos": 2, "max_neg": 2})
    records = TrainData.load(str(data), method=m)
    cfg = SamplerConfig(method=m, batch_size=3, seed=0)
    plan = BatchPlan(len(records), cfg, rank=0, world_size=1, start=0, stop=2)
    dataset = TrainDataset(records, cfg, ImageTransform(32), bundle.tokenizer)
    pp = open_clip.get_model_preprocess_cfg(bundle.model)
    forward = ContrastiveForward(bundle.model)
    parts = []
    for g in range(2):
        batch = dataset.collate([dataset[s] for s in plan.micro_batch(g)])
        plain = batch_features(forward, batch, mean=pp["mean"], std=pp["std"], device="cpu")
        f = batch_features(forward, batch, mean=pp["mean"], std=pp["std"], device="cpu", dense=True)
        d = f.dense
        torch.testing.assert_close(f.image, plain.image)
        torch.testing.assert_close(f.pos, plain.pos)
        assert d.patches.shape == (3, 16, 32)  # 32x32 image, patch 8: 16 patches of the 32-d joint space
        assert d.pos_tokens.shape[:2] == d.pos_token_mask.shape == (6, d.pos_tokens.shape[1])
        for slot in range(6):
            n = int(d.pos_token_mask[slot].sum())
            assert n == (int(batch.pos_tokens[int(batch.pos_mask.reshape(-1)[:slot].sum())].ne(0).sum())
                         if batch.pos_mask.reshape(-1)[slot] else 0)
            if n:  # argmax pooling: the end token (the last one) is the pooled feature
                torch.testing.assert_close(torch.nn.functional.normalize(d.pos_tokens[slot, n - 1], dim=-1), f.pos[slot])
            else:
                assert not d.pos_tokens[slot].any()
        parts.append(f)
    joined = Features.cat(parts, parts[0].logit_scale)
    width = max(p.dense.pos_tokens.shape[1] for p in parts)
    assert joined.image.shape[0] == 6 and joined.dense.pos_tokens.shape == (12, width, 32)
    assert joined.dense.pos_token_mask.sum() == sum(p.dense.pos_token_mask.sum() for p in parts)
    torch.testing.assert_close(joined.pos_ids, torch.cat([p.pos_ids for p in parts]))


def test_mosaiclip_text_negatives_variant_draws_the_caption_level_negatives_only():
    """The ablation `--negatives text`: the record's text negatives in the graph ones' place, each with
    the positive it perturbs (the caption); the paper's default draws graph negatives only."""
    import random

    from mosaictool.errors import MosaicError

    record = {"id": "r", "caption": "a red star above a blue cross", "texts": {
        "positives": [{"text": "a red star above a blue cross", "kind": "caption"}, {"text": "a red star", "kind": "object"}],
        "negatives": [
            {"text": "a blue star", "kind": "graph", "category": "obj", "positive": 1, "key": "star[blue]"},
            {"text": "a blue cross above a red star", "kind": "text", "category": "rel", "transform": "negclip:np", "positive": 0},
            {"text": "a red star above a green cross", "kind": "text", "category": "attr", "transform": "replace:att", "positive": 0},
        ]}}
    graph = methods.create("mosaiclip").select(record, random.Random(0), 3, 6)
    text = methods.create("mosaiclip", {"negatives": "text"}).select(record, random.Random(0), 3, 6)
    assert graph.neg == ["a blue star"]
    assert sorted(text.neg) == ["a blue cross above a red star", "a red star above a green cross"]
    assert text.pos[0] == "a red star above a blue cross"
    with pytest.raises(MosaicError, match="--negatives 'both': choose graph, text or negclip"):
        methods.create("mosaiclip", {"negatives": "both"})
    # `--negatives negclip`: NegCLIP's own draw, the swap only (the replace text is not one)
    negclip = methods.create("mosaiclip", {"negatives": "negclip", "max_pos": 1, "max_neg": 1}).select(record, random.Random(0), 1, 1)
    assert negclip.pos == ["a red star above a blue cross"] and negclip.neg == ["a blue cross above a red star"]
