"""train_many: runs that take their steps together train the weights each trains alone (to float
rounding), write the run folders `train` writes, resume, and leave what cannot be stacked to `train`.
StackedCLIP's forward and gradients are each model's own."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import torch

from mosaictool import methods
from mosaictool.errors import MosaicError
from mosaictool.model import openclip
from mosaictool.model.stacked import StackedCLIP, supports
from mosaictool.training import train, train_many
from mosaictool.training.batch import ContrastiveForward
from train_fixtures import add_fsc_negatives, make_world, tiny_config, weights, write_tiny_model

# |w_together - w_alone| / |w_alone - w_start| after a few steps: measured 1e-5 to 7e-5 (float32; the
# batched matmuls sum in another order, and AdamW's normalised step turns rounding of a near-zero
# gradient into a visible move), the same size as one run on 1 thread against the same run on 2
TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("multirun")
    # record 3 without text negatives: seeds that draw it bring fewer texts than others
    return add_fsc_negatives(make_world(root / "w", n=16), without_hn=(3,)), write_tiny_model(root)


config = functools.partial(tiny_config, steps=5, lr=5e-4)


def distance(a: dict, b: dict, start: dict) -> float:
    """|a - b| / |b - start| over every weight."""
    diff = torch.cat([(a[k] - b[k]).flatten() for k in b]).norm()
    moved = torch.cat([(b[k] - start[k]).flatten() for k in b]).norm()
    return float(diff / moved)


def start_weights(world, seed: int) -> dict:
    return openclip.create("tiny", model_config_file=str(world[1]), seed=seed).model.state_dict()


@pytest.mark.parametrize("method", methods.names())
def test_every_method_trains_the_weights_it_trains_alone(world, tmp_path, method):
    cfgs = [config(world, tmp_path / f"many{s}", method=method, seed=s) for s in range(3)]
    texts: dict[int, list[int]] = {}
    finals = train_many(cfgs, on_step=lambda i, step, m, model: texts.setdefault(i, []).append(m["texts_per_image"]))
    assert [Path(f) for f in finals] == [Path(c.out) / "final.pt" for c in cfgs]
    for s, (cfg, final) in enumerate(zip(cfgs, finals)):
        alone = train(config(world, tmp_path / f"alone{s}", method=method, seed=s))
        assert distance(weights(final), weights(alone), start_weights(world, s)) < TOLERANCE
        lines = [json.loads(line) for line in (Path(cfg.out) / "metrics.jsonl").read_text().splitlines()]
        alone_lines = [json.loads(line) for line in (alone.parent / "metrics.jsonl").read_text().splitlines()]
        assert [line["step"] for line in lines] == [1, 2, 3, 4, 5]
        assert [line["texts_per_image"] for line in lines] == [line["texts_per_image"] for line in alone_lines]
        assert lines[0]["loss"] == pytest.approx(alone_lines[0]["loss"], rel=1e-5)  # the same first batch and weights
    if method in ("mosaiclip", "fsc-clip"):  # the runs brought different numbers of texts to one step
        assert any(len({texts[i][k] for i in texts}) > 1 for k in range(5))


def test_one_config_or_one_that_cannot_share_trains_as_train_does(world, tmp_path, monkeypatch):
    from mosaictool.training import multirun

    stacked = []
    real = multirun.train_stacked
    monkeypatch.setattr(multirun, "train_stacked", lambda runs, *a: stacked.append(len(runs)) or real(runs, *a))
    alone = weights(train(config(world, tmp_path / "alone", method="negclip", seed=1)))
    [single] = train_many([config(world, tmp_path / "single", method="negclip", seed=1)])
    assert all(torch.equal(alone[k], weights(single)[k]) for k in alone)  # bit for bit: it is train()
    lora_alone = weights(train(config(world, tmp_path / "lora-alone", lora=2, seed=2)))
    finals = train_many([config(world, tmp_path / "lora", lora=2, seed=2), config(world, tmp_path / "a", seed=3),
                         config(world, tmp_path / "b", seed=4, batch_size=3), config(world, tmp_path / "c", seed=5)])
    assert all(torch.equal(lora_alone[k], weights(finals[0])[k]) for k in lora_alone)
    alone_b = weights(train(config(world, tmp_path / "b-alone", seed=4, batch_size=3)))  # its own batch: alone
    assert all(torch.equal(alone_b[k], weights(finals[2])[k]) for k in alone_b)
    alone_c = weights(train(config(world, tmp_path / "c-alone", seed=5)))
    assert distance(weights(finals[3]), alone_c, start_weights(world, 5)) < TOLERANCE
    assert stacked == [2]  # a and c took their steps together


def test_checkpoints_resume_and_a_lone_resume_of_a_stacked_run(world, tmp_path):
    cfgs = [config(world, tmp_path / f"run{s}", method="mosaiclip", seed=s, steps=6, save_every=3) for s in range(2)]

    def stop(i, step, metrics, model):
        if step == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_many(cfgs, on_step=stop)
    for cfg in cfgs:
        last = openclip.read_checkpoint(Path(cfg.out) / "last.pt")
        assert last["step"] == 3 and last["optimizer"]["state"]
        assert not (Path(cfg.out) / "final.pt").exists()
    resumed = train_many([config(world, c.out) for c in cfgs], resume=True)
    whole = train_many([config(world, tmp_path / f"whole{s}", method="mosaiclip", seed=s, steps=6, save_every=3)
                        for s in range(2)])
    for s, (a, b) in enumerate(zip(resumed, whole)):
        assert distance(weights(a), weights(b), start_weights(world, s)) < TOLERANCE
        assert not (Path(a).parent / "last.pt").exists()
        lines = (Path(a).parent / "metrics.jsonl").read_text().splitlines()
        assert [json.loads(line)["step"] for line in lines] == [1, 2, 3, 4, 5, 6]
        assert openclip.load_checkpoint(a).meta["checkpoint"]["config"]["seed"] == s  # what evaluate / wise-ft read
    # a stacked run's last.pt is a lone run's: `train --resume` continues it alone
    with pytest.raises(KeyboardInterrupt):
        train_many([config(world, tmp_path / "solo", method="mosaiclip", seed=0, steps=6, save_every=3),
                    config(world, tmp_path / "other", method="mosaiclip", seed=1, steps=6, save_every=3)], on_step=stop)
    solo = train(config(world, tmp_path / "solo"), resume=True)
    assert distance(weights(solo), weights(whole[0]), start_weights(world, 0)) < TOLERANCE


def test_a_failing_run_stops_with_its_folder_named(world, tmp_path):
    cfgs = [config(world, tmp_path / f"run{s}", seed=s, lr=1e30, grad_clip=None) for s in range(2)]
    with pytest.raises(MosaicError, match=r"run\d: step \d+: the (loss|gradient)"):
        train_many(cfgs)
    with pytest.raises(MosaicError, match="two runs would write"):
        train_many([config(world, tmp_path / "same", seed=0), config(world, tmp_path / "same", seed=1)])


def test_a_note_about_the_data_is_printed_once_not_once_per_run(world, tmp_path, caplog):
    train_many([config(world, tmp_path / f"run{s}", method="negclip", seed=s, steps=1) for s in range(3)])
    notes = [message for message in caplog.messages if message.startswith("note:")]
    assert notes == ["note: 1 of 16 records have no negatives for negclip"]
    caplog.clear()
    train(config(world, tmp_path / "alone", method="negclip", steps=1))  # a lone run still says it
    assert "note: 1 of 16 records have no negatives for negclip" in caplog.messages


def _models(world, n: int, **kw):
    return [openclip.create("tiny", model_config_file=str(world[1]), seed=s, **kw).model.double() for s in range(n)]


def test_stacked_forward_and_gradients_are_each_models_own(world):
    """In float64 (no rounding to hide behind): unequal numbers and lengths of texts per run, text
    groups, dense features, the last block at the pooled position only, the embedding's lazy rows."""
    models = _models(world, 3)
    assert supports(models[0]) is None
    tokenizer = openclip.create("tiny", model_config_file=str(world[1])).tokenizer
    texts = [tokenizer(t) for t in (["a red circle left of a blue square", "a circle", "red"],
                                    ["a blue square"],
                                    ["a b c d e f g h i j", "red", "a red", "square", "blue circle"])]
    images = torch.randn(3, 4, 3, 32, 32, dtype=torch.float64)
    for dense, groups in (([False] * 3, None), ([True, False, True], [[0, 2], [1]]), ([True] * 3, [[2, 0], [1]])):
        stack = StackedCLIP(models, lazy_rows=True)
        optimizer = torch.optim.AdamW([p for _, p, _ in stack.named_leaves()])
        stack.use_tokens(texts, optimizer)
        out = stack.forward(images, texts, text_groups=groups, dense=dense)
        loss = sum(out.image[r][:, 0].sum() + out.texts[r][:, 1].sum() + out.logit_scale[r]
                   + (out.patches[r].sum() + out.tokens[r].sum() if dense[r] else 0) for r in range(3))
        loss.backward()
        for r, model in enumerate(models):
            model.zero_grad()
            own = ContrastiveForward(model)(images[r], texts[r], dense[r])
            own_loss = own[0][:, 0].sum() + own[1][:, 1].sum() + own[2] + (own[3].sum() + own[4].sum() if dense[r] else 0)
            own_loss.backward()
            torch.testing.assert_close(out.image[r], own[0], rtol=0, atol=1e-12)
            torch.testing.assert_close(out.texts[r], own[1], rtol=0, atol=1e-12)
            if dense[r]:
                torch.testing.assert_close(out.patches[r], own[3], rtol=0, atol=1e-12)
                torch.testing.assert_close(out.tokens[r], own[4], rtol=0, atol=1e-12)
            else:
                assert out.patches is None or out.patches[r] is None
            for name, p in model.named_parameters():
                grad = stack.leaves[name].grad[r]
                if name == "token_embedding.weight":  # only the rows a text used are trainable
                    full = torch.zeros_like(p)
                    full[stack.active] = grad
                    grad = full
                torch.testing.assert_close(grad, p.grad, rtol=0, atol=1e-11, msg=name)


def test_lazy_embedding_rows_are_adamw_on_the_whole_table(world):
    """Rows joining late, each with its pending weight decay and zero moments: after several AdamW
    steps every row equals dense AdamW over the whole table (float64)."""
    tokenizer = openclip.create("tiny", model_config_file=str(world[1])).tokenizer
    batches = [["a red circle"], ["a blue square left of a circle"], ["green"], ["a red circle"]]
    finals = []
    for lazy in (True, False):
        models = _models(world, 2)
        stack = StackedCLIP(models, lazy_rows=lazy)
        optimizer = torch.optim.AdamW([p for _, p, _ in stack.named_leaves()], lr=1e-2, weight_decay=0.1)
        images = torch.randn(2, 2, 3, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        for step, words in enumerate(batches):
            texts = [tokenizer(words), tokenizer(words[::-1] + ["x"])]
            stack.use_tokens(texts, optimizer)
            optimizer.zero_grad(set_to_none=True)
            out = stack.forward(images, texts)
            sum(o.sum() for o in out.texts).backward()
            optimizer.step()
            stack.after_step(1e-2, 0.1)
        finals.append([stack.state_dict(r) for r in range(2)])
        if lazy:
            state = stack.optimizer_state(optimizer, 1)["token_embedding.weight"]
            assert state["exp_avg"].shape == models[0].token_embedding.weight.shape
    start = _models(world, 2)
    for r, (lazy_run, dense_run) in enumerate(zip(*finals)):
        table = "token_embedding.weight"
        torch.testing.assert_close(lazy_run[table], dense_run[table], rtol=1e-12, atol=1e-15)
        # elsewhere only rounding differs (the decay's product, one ulp of a float64), which AdamW's
        # normalised step makes visible where the gradient is zero but for rounding (the key bias)
        assert distance(lazy_run, dense_run, start[r].state_dict()) < 1e-8


def test_models_stacking_refuses(world):
    model = _models(world, 1)[0]
    model.set_grad_checkpointing(True)
    assert "checkpoints activations" in supports(model)
    from open_clip import CustomTextCLIP

    custom = CustomTextCLIP.__new__(CustomTextCLIP)
    assert supports(custom) is not None
