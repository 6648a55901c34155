"""The methods registry (mosaictool.methods): what each method takes from a record and its loss.

Each method's draws are checked against what it must take (CLIP the caption, NegCLIP the caption and
one swap, MosaiCLIP up to --max-pos positives and --max-neg graph negatives, never a negative true of
its image); the first training step is deterministic, invariant where a method ignores sub-graph keys,
and NegCLIP's negatives enlarge CLIP's loss. The loss formulas themselves are checked against
brute-force references in test_losses.py and test_containment.py.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from clirun import refused_run
from mosaictool import methods
from mosaictool.errors import MosaicError
from mosaictool.methods.mosaiclip import parse_category_probs
from mosaictool.training import TrainConfig, train

PROBS = {"obj": 0.2, "attr": 0.4, "rel": 0.4}
SELECTIONS = [
    ("clip", {}),
    ("negclip", {}),
    ("mosaiclip", {"max_pos": 4, "max_neg": 6, "category_probs": PROBS}),
    ("mosaiclip", {"max_pos": 2, "max_neg": 3, "category_probs": PROBS}),
]
# max_pos 4 = every positive of make_world's records; loss_weighting "mean" as the default "paper"
# is checked against its formula in test_containment.py
STEPS = [
    ("clip", {}),
    ("negclip", {}),
    ("mosaiclip", {"max_pos": 4, "category_probs": PROBS, "loss_weighting": "mean"}),
    ("mosaiclip", {"max_pos": 3, "category_probs": PROBS, "loss_weighting": "mean"}),
]


@pytest.fixture(scope="module")
def world(tiny_worlds):
    return tiny_worlds(n=12, keys=False)


@pytest.fixture(scope="module")
def keyed_world(tiny_worlds):
    """The same records as `world`, with their sub-graph keys."""
    return tiny_worlds(n=12)


def records_of(world) -> list[dict]:
    return [json.loads(line) for line in Path(world[0]).read_text().splitlines()]


def draws(records, method: str, options: dict, seed: str = "draw") -> list:
    m = methods.create(method, options)
    kp, kn = options.get("max_pos", 1), options.get("max_neg", int(method != "clip"))
    chosen = [m.select(r, random.Random(f"{seed}:{i}"), kp, kn) for i, r in enumerate(records)]
    return [[c.pos, c.neg] for c in chosen]


@pytest.mark.parametrize("method,options", SELECTIONS)
def test_text_draws_are_what_the_method_takes(world, method, options):
    records = records_of(world)
    drawn = draws(records, method, options)
    assert drawn == draws(records, method, options)  # the same random stream, the same texts
    for record, (pos, neg) in zip(records, drawn):
        positives = [p["text"] for p in record["texts"]["positives"]]
        negatives = {n["text"]: n for n in record["texts"]["negatives"]}
        if method in ("clip", "negclip"):
            assert pos == [record["caption"]]
        if method == "clip":
            assert neg == []
        elif method == "negclip":  # one swap of the caption
            assert len(neg) == 1 and negatives[neg[0]]["transform"].startswith("negclip")
        else:
            assert 1 <= len(pos) <= options["max_pos"] and len(neg) <= options["max_neg"]
            assert len(set(pos)) == len(pos) and set(pos) <= set(positives)
            assert pos[0] == record["caption"]  # in every positive set, whatever pairs the draw brings
            assert all(negatives[t]["kind"] == "graph" for t in neg)
            # a drawn negative brings the positive it perturbs along
            assert all(positives[negatives[t]["positive"]] in pos for t in neg)
            if options["max_pos"] >= len(positives):
                assert sorted(pos) == sorted(positives)
    if method != "clip":  # another random stream draws other texts somewhere
        assert draws(records, method, options, seed="other") != drawn


@pytest.mark.parametrize("method,options", SELECTIONS)
def test_text_draws_with_subgraph_keys(world, keyed_world, method, options):
    """CLIP and NegCLIP ignore keys; MosaiCLIP never draws a negative true of its image (its key is one
    of the image's sub-graphs), which it does draw when the records carry no keys."""
    keyless, keyed = records_of(world), records_of(keyed_world)
    assert [r["caption"] for r in keyless] == [r["caption"] for r in keyed]
    if method != "mosaiclip":
        assert draws(keyed, method, options) == draws(keyless, method, options)
        return
    true_of_image = [{n["text"] for n in r["texts"]["negatives"] if n["key"] in r["subgraph_keys"]} for r in keyed]
    assert any(true_of_image)
    drawn_true = {"keyed": 0, "keyless": 0}
    for seed in range(20):
        for name, records in (("keyed", keyed), ("keyless", keyless)):
            for true, (_, neg) in zip(true_of_image, draws(records, method, options, seed=str(seed))):
                drawn_true[name] += len(true & set(neg))
    assert drawn_true["keyed"] == 0 and drawn_true["keyless"] > 0


def test_texts_are_redrawn_each_epoch_from_the_records_pool(world):
    """App. H.1 samples 3 positive and 6 negative sub-graphs per image "during fine-tuning": an image's
    texts come from a generator seeded by (seed, epoch, record), so where the record's pool is larger
    than the slots another epoch draws other texts, and the same (seed, epoch, record) the same ones."""
    from mosaictool.training.loader import TrainDataset
    from mosaictool.training.sampler import SamplerConfig
    from mosaictool.training.traindata import TrainData
    from mosaictool.training.transform import ImageTransform

    def texts(seed: int, epoch: int) -> list:
        m = methods.create("mosaiclip", {"max_pos": 2, "max_neg": 2})
        dataset = TrainDataset(TrainData.load(str(world[0]), method=m), SamplerConfig(method=m, batch_size=4, seed=seed),
                               ImageTransform(32), tokenizer=None, with_images=False)
        return [(s["pos"], s["neg"]) for s in (dataset[(i, epoch, 2, 2, False)] for i in range(len(dataset)))]

    first = texts(0, 0)
    assert texts(0, 0) == first  # the same (seed, epoch, record): the same texts
    for other in (texts(0, 1), texts(1, 0)):
        assert any(a != b for a, b in zip(first, other))  # 4 positives and 6 negatives a record for 2 + 2 slots


_STEPS: dict = {}


def first_step(world, tmp_path, method, options) -> tuple[float, float, float]:
    """First-step loss, sum |grad| and sum grad^2 over all parameters (tiny model, batch 4, seed 0,
    fp32, no clipping)."""
    seen = {}

    def grab(step, metrics, model):
        grads = [p.grad.double() for p in model.parameters() if p.grad is not None]
        seen["value"] = (metrics["loss"], float(sum(g.abs().sum() for g in grads)), float(sum((g * g).sum() for g in grads)))

    data, model_cfg = world
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), model_config=str(model_cfg), batch_size=4, steps=1,
                      warmup=1, quiet=True, grad_clip=None, method=method, method_options=options)
    train(cfg, on_step=grab)
    return seen["value"]


@pytest.fixture(scope="module")
def steps(world, keyed_world, tmp_path_factory) -> dict:
    """first_step of every STEPS entry on the keyless and the keyed records, each run once."""
    out = {}
    for i, (method, options) in enumerate(STEPS):
        for name, w in (("keyless", world), ("keyed", keyed_world)):
            out[i, name] = first_step(w, tmp_path_factory.mktemp(f"{method}-{name}"), method, options)
    return out


@pytest.mark.slow
def test_first_step_is_deterministic(world, tmp_path, steps):
    for i in (0, 2):  # CLIP, MosaiCLIP: a second run gives the same loss and gradients, bit for bit
        assert first_step(world, tmp_path / str(i), *STEPS[i]) == steps[i, "keyless"]


@pytest.mark.slow
def test_first_step_has_a_finite_loss_and_gradients(steps):
    import math

    for (i, name), (loss, abs_sum, sq_sum) in steps.items():
        assert math.isfinite(loss) and loss > 0, (STEPS[i], name)
        assert math.isfinite(sq_sum) and abs_sum > 0 and sq_sum > 0, (STEPS[i], name)


@pytest.mark.slow
def test_negclip_negatives_enlarge_the_clip_loss(steps):
    """Same images, captions and weights: NegCLIP only adds a negative per image to the image->text
    denominators, so its loss is CLIP's plus something positive."""
    assert steps[1, "keyless"][0] > steps[0, "keyless"][0]


@pytest.mark.slow
def test_subgraph_keys_change_only_what_containment_changes(steps):
    """CLIP and NegCLIP ignore keys: the same step. MosaiCLIP with every positive sampled (max_pos 4):
    equal texts already say what containment says, the same step; with max_pos 3 (the caption and two
    sub-graphs) the unsampled sub-graphs contained in an image count in its P(i), another step."""
    for i in (0, 1, 2):
        assert steps[i, "keyed"] == pytest.approx(steps[i, "keyless"], rel=1e-6), STEPS[i]
    assert steps[3, "keyed"] != pytest.approx(steps[3, "keyless"], rel=1e-3)


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
    assert methods.create("mosaiclip").make_loss().weighting == "paper"  # Singh et al. 2023, Sec. 3.5's sums
    with pytest.raises(MosaicError, match="--denominators 'none': choose masked or all"):
        methods.create("mosaiclip", {"denominators": "none"})
    assert methods.create("mosaiclip").make_loss().mask_denominators
    assert not methods.create("mosaiclip", {"denominators": "all"}).make_loss().mask_denominators
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
    from mosaictool.training.loader import TrainDataset
    from mosaictool.training.sampler import BatchPlan, SamplerConfig
    from mosaictool.training.traindata import TrainData
    from mosaictool.training.transform import ImageTransform

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
            {"text": "a blue cross above a red star", "kind": "text", "category": "rel",
             "transform": "negclip:np", "positive": 0},
            {"text": "a red star above a green cross", "kind": "text", "category": "attr",
             "transform": "replace:att", "positive": 0},
        ]}}
    graph = methods.create("mosaiclip").select(record, random.Random(0), 3, 6)
    text = methods.create("mosaiclip", {"negatives": "text"}).select(record, random.Random(0), 3, 6)
    assert graph.neg == ["a blue star"]
    assert sorted(text.neg) == ["a blue cross above a red star", "a red star above a green cross"]
    assert text.pos[0] == "a red star above a blue cross"
    with pytest.raises(MosaicError, match="--negatives 'both': choose graph, text, negclip, graph\\+negclip"):
        methods.create("mosaiclip", {"negatives": "both"})
    # `--negatives negclip`: NegCLIP's own draw, the swap only (the replace text is not one)
    negclip = methods.create("mosaiclip", {"negatives": "negclip", "max_pos": 1, "max_neg": 1})
    negclip = negclip.select(record, random.Random(0), 1, 1)
    assert negclip.pos == ["a red star above a blue cross"] and negclip.neg == ["a blue cross above a red star"]
    # the mechanism's tests: NegCLIP's swap added before the graph negatives; one-object positives left out
    both = methods.create("mosaiclip", {"negatives": "graph+negclip"}).select(record, random.Random(0), 3, 6)
    assert both.neg == ["a blue cross above a red star", "a blue star"]
    assert both.pos == ["a red star above a blue cross", "a red star"]
    no_objects = methods.create("mosaiclip", {"positives": "no-objects"}).select(record, random.Random(0), 3, 6)
    assert no_objects.pos == ["a red star above a blue cross"] and no_objects.neg == ["a blue star"]  # kept, unpaired
    with pytest.raises(MosaicError, match="--positives 'none': choose all, no-objects"):
        methods.create("mosaiclip", {"positives": "none"})


# --- bad input (moved from test_bad_folders.py) ---

@pytest.mark.parametrize("text, message", [
    ("obj=1,obj=2", "obj is given twice"),
    ("obj=1,,attr=1", "expected name=weight pairs"),
    ("obj=1,attr=1,", "expected name=weight pairs"),
    ("", "expected name=weight pairs"),
    ("obj=1,foo=1", "unknown category 'foo'"),
    ("obj=0,attr=0,rel=0", "sum to 0"),
    ("obj=nan,attr=1", "expected name=weight pairs"),
])
def test_category_probs_that_mean_nothing(text, message):
    with pytest.raises(MosaicError, match="--category-probs") as e:
        parse_category_probs(text)
    assert message in str(e.value)


def test_category_probs_that_stay_allowed():
    assert parse_category_probs("obj = 1, attr=2") == {"obj": 1.0, "attr": 2.0}
    assert parse_category_probs("obj=0.15,attr=0.425,rel=0.425")["rel"] == 0.425


def test_category_probs_on_the_command_line(tmp_path):
    refused_run(["train", "--data", tmp_path, "--out", tmp_path / "r", "--method", "mosaiclip", "--category-probs", "obj=1,obj=2"],
            "--category-probs", "given twice")
    assert not (tmp_path / "r").exists()

