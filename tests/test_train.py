"""Training end to end on tiny generated data with a tiny model (CPU, seconds)."""

from __future__ import annotations

import json
import random
import signal
from pathlib import Path

import pytest
import torch

from helpers import assert_ok, invoke, snapshot, train_args
from helpers import refused as assert_refused
from mosaictool import methods
from mosaictool.cli import app
from mosaictool.model import openclip
from mosaictool.training import TrainConfig, train
from mosaictool.training.sampler import BatchPlan, SamplerConfig
from train_fixtures import tiny_config as config
from train_fixtures import train_killed_at, weights


@pytest.fixture(scope="module")
def world(tiny_worlds):
    return tiny_worlds(n=12)


def assert_same_weights(a: dict, b: dict, atol: float = 0.0) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=atol, msg=k)


# ---- text sampling and the batch plan ---------------------------------------------------------


def test_select_texts_per_method(world):
    rec = json.loads(Path(world[0]).read_text().splitlines()[0])
    rng = random.Random(0)

    def select_texts(record, method, rng, max_pos=1, max_neg=1, **options):
        m = methods.create(method, {**options, "max_pos": max_pos, "max_neg": max_neg} if method == "mosaiclip" else options)
        chosen = m.select(record, rng, max_pos, max_neg)
        return chosen.pos, chosen.neg

    assert select_texts(rec, "clip", rng) == ([rec["caption"]], [])
    pos, neg = select_texts(rec, "negclip", rng)
    assert pos == [rec["caption"]] and len(neg) == 1
    assert neg[0] in {n["text"] for n in rec["texts"]["negatives"] if n["transform"].startswith("negclip")}
    graph_negs = {n["text"] for n in rec["texts"]["negatives"] if n["kind"] == "graph"}
    all_pos = [p["text"] for p in rec["texts"]["positives"]]
    for seed in range(20):
        pos, neg = select_texts(rec, "mosaiclip", random.Random(seed), max_pos=3, max_neg=6)
        assert 1 <= len(pos) <= 3 and len(set(pos)) == len(pos) and set(pos) <= set(all_pos)
        assert set(neg) == graph_negs  # only 4 graph negatives exist: all of them fit
        pos1, neg1 = select_texts(rec, "mosaiclip", random.Random(seed), max_pos=1, max_neg=1)
        assert pos1 == [rec["caption"]] and len(neg1) == 1 and neg1[0] in graph_negs  # one slot: the caption
    only_obj = select_texts(rec, "mosaiclip", random.Random(1), max_pos=3, max_neg=1, category_probs={"obj": 1.0})
    assert only_obj[1] == [f"{rec['texts']['negatives'][2]['text']}"]


def test_curriculum_slots():
    mosaic = methods.create("mosaiclip", {"max_pos": 3, "max_neg": 6, "curriculum": True, "curriculum_split": 0.5})
    assert mosaic.slots(4, 10) == (1, 1) and mosaic.slots(5, 10) == (3, 6)
    assert methods.create("mosaiclip").slots(0, 10) == (3, 6)  # no curriculum by default
    assert methods.create("clip").slots(0, 10) == (1, 0)
    assert methods.create("negclip").slots(0, 10) == (1, 1)


def test_plan_global_batch_does_not_depend_on_world_size():
    clip = methods.create("clip")
    one = BatchPlan(20, SamplerConfig(method=clip, batch_size=4, seed=3), rank=0, world_size=1, start=0, stop=12)
    two = [BatchPlan(20, SamplerConfig(method=clip, batch_size=2, seed=3), rank=r, world_size=2, start=0, stop=12)
           for r in range(2)]
    for g in range(12):
        assert one.micro_batch(g) == two[0].micro_batch(g) + two[1].micro_batch(g)
    epoch0 = [spec[0] for g in range(5) for spec in one.micro_batch(g)]
    assert len(set(epoch0)) == 20  # an epoch visits every record once


# ---- the loop -----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["clip", "negclip", "mosaiclip"])
def test_methods_train_and_write_a_loadable_checkpoint(world, tmp_path, method):
    options = {"curriculum": True} if method == "mosaiclip" else {}
    final = train(config(world, tmp_path / "run", method=method, method_options=options))
    assert final == tmp_path / "run" / "final.pt"
    bundle = openclip.load_checkpoint(final)
    meta = bundle.meta["checkpoint"]
    assert meta["config"]["method"] == method and meta["step"] == 3 and meta["config"]["lr"] == 5e-4
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2, 3]
    assert all(m.keys() >= {"loss", "lr", "samples_per_s", "texts_per_image"} for m in lines)
    per_image = {m["texts_per_image"] for m in lines}
    if method == "clip":
        assert per_image == {1.0}
    elif method == "negclip":
        assert per_image == {2.0}  # caption + one negative, for anchors and their hard images alike
    else:
        assert lines[0]["texts_per_image"] == 2.0 and lines[-1]["texts_per_image"] > 2.0  # curriculum stage 2
    assert not (tmp_path / "run" / "last.pt").exists()


def test_same_seed_same_weights_and_workers_do_not_matter(world, tmp_path):
    a = train(config(world, tmp_path / "a", method="mosaiclip", steps=2))
    b = train(config(world, tmp_path / "b", method="mosaiclip", steps=2, num_workers=2))
    assert_same_weights(weights(a), weights(b))


def first_step_gradients(cfg: TrainConfig) -> tuple[float, dict]:
    seen = {}

    def grab(step, metrics, model):
        if step == 1:
            seen["loss"] = metrics["loss"]
            seen["grads"] = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    train(cfg, on_step=grab)
    return seen["loss"], seen["grads"]


def test_accumulation_equals_the_big_batch(world, tmp_path):
    """Two micro-batches of 2 give the loss and gradients of one batch of 4 (same images, same texts)."""
    loss_big, big = first_step_gradients(config(world, tmp_path / "big", method="mosaiclip", steps=1,
                                                batch_size=4, grad_clip=None))
    loss_acc, acc = first_step_gradients(
        config(world, tmp_path / "acc", method="mosaiclip", steps=1, batch_size=2, accum_freq=2, grad_clip=None)
    )
    assert loss_acc == pytest.approx(loss_big, rel=1e-5)
    assert big.keys() == acc.keys() and "logit_scale" in big
    for name in big:
        torch.testing.assert_close(acc[name], big[name], rtol=1e-5, atol=1e-5, msg=name)


def test_lock_towers_grad_checkpointing_and_bf16(world, tmp_path):
    start = openclip.create("test-tiny", model_config_file=world[1], seed=0).model.state_dict()
    after = weights(train(config(world, tmp_path / "img", method="negclip", steps=2, lock_image=True,
                                 grad_checkpointing=True)))
    assert all(torch.equal(start[k], after[k]) for k in start if k.startswith("visual."))
    assert not torch.equal(start["text_projection"], after["text_projection"])
    after = weights(train(config(world, tmp_path / "txt", method="mosaiclip", steps=2, lock_text=True, precision="bf16")))
    assert torch.equal(start["text_projection"], after["text_projection"])
    assert torch.equal(start["token_embedding.weight"], after["token_embedding.weight"])
    assert not torch.equal(start["visual.proj"], after["visual.proj"])


def test_images_on_device_gives_the_same_weights(world, tmp_path, monkeypatch):
    """--images-on-device (every image decoded once into one tensor on the device, batches gathered
    there) trains the same weights as images decoded by the loader; the loader then decodes none."""
    from mosaictool.errors import MosaicError
    from mosaictool.training import loader

    common = dict(method="negclip", steps=3, augment=False)
    plain = weights(train(config(world, tmp_path / "loader", **common)))
    decoded = []
    real = loader.TrainDataset._decode
    monkeypatch.setattr(loader.TrainDataset, "_decode", lambda self, i, rng: decoded.append(i) or real(self, i, rng))
    on_device = weights(train(config(world, tmp_path / "device", images_on_device=True, **common)))
    assert_same_weights(plain, on_device)
    assert sorted(decoded) == list(range(12))  # each image once, up front
    with pytest.raises(MosaicError, match="needs --no-augment"):
        train(config(world, tmp_path / "aug", images_on_device=True))


def test_fp16_amp_is_refused_on_the_cpu_and_bf16_autocast_runs(world, tmp_path):
    from mosaictool.errors import MosaicError

    with pytest.raises(MosaicError, match="amp .fp16. needs a GPU"):
        train(config(world, tmp_path / "fp16", device="cpu", precision="amp"))
    final = train(config(world, tmp_path / "bf16", device="cpu", precision="amp_bf16", steps=1))
    assert all(torch.isfinite(v).all() for v in weights(final).values() if v.is_floating_point())


def test_pretrained_weights_file_and_mined_hard_images(world, tmp_path):
    bundle = openclip.create("test-tiny", model_config_file=world[1], seed=7)
    weights_file = tmp_path / "start.pt"
    torch.save(bundle.model.state_dict(), weights_file)
    out = tmp_path / "ft"
    final = train(config(world, out, method="negclip", pretrained=str(weights_file), hard_images=2,
                         record_hard_images=False, steps=1))
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["lr"] == 1e-5 and cfg["pretrained"] == str(weights_file)
    mined = json.loads((out / "mined_hard_images.json").read_text())
    assert len(mined) == 12 and all(len(n) == 2 and i not in n for i, n in enumerate(mined))
    assert openclip.read_checkpoint(final)["step"] == 1
    # a mosaictool checkpoint as the starting point: architecture and activation come from it
    again = train(config(world, tmp_path / "ft2", method="clip", pretrained=str(final), model_config=None,
                         model="test-tiny", steps=1))
    assert openclip.read_checkpoint(again)["model_name"] == "test-tiny"


def test_mined_hard_images_skip_the_same_picture_under_another_caption(world, tmp_path):
    """The demo gives every image two captions (two records, the same bytes): the copy is the
    closest image there is, but its caption is true of the anchor, so it is never mined."""
    from mosaictool.training.data import mine_hard_images
    from mosaictool.training.traindata import TrainData
    from mosaictool.training.transform import ImagePrep, ImageTransform

    data, model_cfg = world
    records = [json.loads(line) for line in Path(data).read_text().splitlines()]
    twice = tmp_path / "twice.jsonl"  # the shared world stays as it is
    twice.write_text("".join(json.dumps(r) + "\n" + json.dumps({**r, "id": r["id"] + "-plain", "caption": "x"}) + "\n"
                             for r in records))
    loaded = TrainData.load(str(twice), method=methods.create("negclip", {}), image_root=str(Path(data).parent))
    bundle = openclip.create("test-tiny", model_config_file=model_cfg, seed=7)
    prep = ImagePrep.of(bundle)
    mined = mine_hard_images(loaded, bundle.model, ImageTransform(prep.size, augment=False), prep.mean, prep.std, k=3,
                             device="cpu")
    picture = [i // 2 for i in range(len(loaded))]
    assert len(mined) == 2 * len(records)
    assert all(len(n) == 3 and picture[i] not in {picture[j] for j in n} for i, n in enumerate(mined))
    assert mined[0] == mined[1]  # one picture, one list of neighbours


@pytest.mark.slow
def test_resume_after_kill_9_gives_the_same_final_weights(world, tmp_path):
    steps = dict(method="mosaiclip", steps=8, save_every=2, method_options={"curriculum": True})
    reference = train(config(world, tmp_path / "ref", **steps))

    out = tmp_path / "crash"
    proc = train_killed_at(config(world, out, **steps), step=5)  # after step 4's checkpoint, mid-run
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert openclip.read_checkpoint(out / "last.pt")["step"] == 4 and not (out / "final.pt").exists()

    final = train(TrainConfig(data="", out=str(out), quiet=True), resume=True)
    assert_same_weights(weights(reference), weights(final))
    logged = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert logged == list(range(1, 9))


# ---- the command line ---------------------------------------------------------------------


def test_cli_train_and_resume_errors(world, runner, tmp_path):
    data, model_cfg = world
    out = tmp_path / "cli"
    args = ["train", "--data", str(data), "--out", str(out), "--model-config", str(model_cfg), "--batch-size", "4",
            "--steps", "1", "--method", "mosaiclip", "--category-probs", "obj=1,attr=1,rel=1", "-q"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out / "final.pt")
    again = runner.invoke(app, args)
    assert again.exit_code == 1 and "already holds a run" in again.stderr
    done = runner.invoke(app, ["train", "--resume", str(out)])
    assert done.exit_code == 1 and "already finished" in done.stderr
    bad = runner.invoke(app, ["train", "--data", str(data), "--out", str(tmp_path / "x"), "--method", "fancy"])
    assert bad.exit_code == 1 and "choose one of clip, negclip, mosaiclip" in bad.stderr
    probs = runner.invoke(app, ["train", "--data", str(data), "--out", str(tmp_path / "y"), "--method", "mosaiclip",
                                "--category-probs", "obj"])
    assert probs.exit_code == 1 and "name=weight" in probs.stderr
    other = runner.invoke(app, ["train", "--data", str(data), "--out", str(tmp_path / "y"), "--max-pos", "2"])
    assert other.exit_code == 1 and "--max-pos belong to another method" in other.stderr
    big = runner.invoke(app, ["train", "--data", str(data), "--out", str(tmp_path / "z"), "--model-config",
                              str(model_cfg), "--batch-size", "64"])
    assert big.exit_code == 1 and "lower --batch-size" in big.stderr
    assert not list((tmp_path / "z").glob("*.pt"))


def test_missing_images_are_reported_or_skipped(world, tmp_path, runner):
    data, model_cfg = world
    lines = Path(data).read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    rec = json.loads(lines[0])
    rec["id"], rec["image"] = "ghost", "images/nope.png"
    broken.write_text("\n".join(lines + [json.dumps(rec)]) + "\n")
    args = ["train", "--data", str(broken), "--image-root", str(Path(data).parent), "--model-config", str(model_cfg),
            "--batch-size", "4", "--steps", "1", "-q"]
    fail = runner.invoke(app, args + ["--out", str(tmp_path / "a")])
    assert fail.exit_code == 1 and "nope.png" in fail.stderr and "--skip-bad" in fail.stderr
    ok = runner.invoke(app, args + ["--out", str(tmp_path / "b"), "--skip-bad"])
    assert ok.exit_code == 0, ok.output
    assert "skipped 1 bad record" in ok.stderr


def test_trimmed_text_forward_equals_open_clip_encode_text(world):
    """Cutting tokens after the longest text changes neither features nor gradients (causal mask)."""
    from mosaictool.training.batch import ContrastiveForward

    bundle = openclip.create("test-tiny", model_config_file=world[1], seed=0)
    tokens = bundle.tokenizer(["a red circle", "a blue square left of a yellow circle", "x"])
    assert int((tokens != 0).sum(1).max()) < tokens.shape[1]
    images = torch.randn(2, 3, 32, 32)
    forward = ContrastiveForward(bundle.model)
    assert forward.trim
    ours = forward(images, tokens)
    (ours[1] * torch.arange(32.0)).sum().backward()
    ours_grad = {n: p.grad.clone() for n, p in bundle.model.named_parameters() if p.grad is not None}
    bundle.model.zero_grad()
    reference = bundle.model.encode_text(tokens, normalize=True)
    (reference * torch.arange(32.0)).sum().backward()
    torch.testing.assert_close(ours[1], reference, rtol=1e-5, atol=1e-6)
    for name, grad in ours_grad.items():
        if not name.startswith("visual."):
            reference_grad = bundle.model.get_parameter(name).grad
            scale = reference_grad.abs().max().item()
            torch.testing.assert_close(grad, reference_grad, rtol=1e-4, atol=1e-5 * scale + 1e-8, msg=name)


def test_two_local_cpu_ranks_train_the_one_process_batch(world, tmp_path):
    """The demo pretrains its base in two one-thread gloo ranks: the same global batch as one
    process (features gathered), so the same losses and, up to summation order, the same weights."""
    from mosaictool.training.launch import train_in_local_ranks

    one = train(config(world, tmp_path / "one", method="clip", steps=3, record_hard_images=True, log_every=1))
    two = train_in_local_ranks(config(world, tmp_path / "two", method="clip", steps=3, record_hard_images=True, log_every=1), 2)
    losses = [[json.loads(line)["loss"] for line in (Path(p).parent / "metrics.jsonl").read_text().splitlines()]
              for p in (one, two)]
    assert len(losses[0]) == 3 and losses[0] == pytest.approx(losses[1], abs=1e-5)
    assert_same_weights(weights(one), weights(two), atol=1e-5)


def test_local_ranks_refuse_a_batch_they_cannot_split(world, tmp_path):
    from mosaictool.errors import MosaicError
    from mosaictool.training.launch import train_in_local_ranks

    with pytest.raises(MosaicError, match="does not split into 2 ranks"):
        train_in_local_ranks(config(world, tmp_path / "odd", batch_size=3), 2)


def test_mosaiclip_without_containment_trains_on_equal_texts_only(world, tmp_path):
    """The ablation --no-containment: the batch carries no sub-graph keys, so the loss's P(i) is
    each image's own texts plus equal texts of other images."""
    assert methods.create("mosaiclip").uses_subgraph_keys
    assert not methods.create("mosaiclip", {"containment": False}).uses_subgraph_keys
    with_keys = first_step_gradients(config(world, tmp_path / "keys", method="mosaiclip", steps=1))
    without = first_step_gradients(config(world, tmp_path / "nokeys", method="mosaiclip", steps=1,
                                          method_options={"containment": False}))
    assert without[0] != pytest.approx(with_keys[0])  # the positives differ (the fixture's scenes share sub-graphs)


# --- bad input (moved from test_bad_input.py) ---

def test_training_records_empty_or_too_few(case, tiny_world):
    empty = case.file("empty.jsonl", "")
    case.freeze()
    assert_refused(invoke(train_args(empty, case.dst / "run")), f"{empty}: no usable training records")
    assert_refused(invoke(train_args(tiny_world, case.dst / "run", "--batch-size", "64")),
                   "8 training records are fewer than one global batch", "--batch-size")
    case.untouched()


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(case, tiny_world):
    import torch

    from mosaictool.model import openclip

    run = case.dst / "run"
    # --lr 30 with warmup: finite for a few steps (here 3), then the weights blow up
    result = invoke(train_args(tiny_world, run, "--steps", "10", "--save-every", "1", "--lr", "30", "--warmup", "4",
                               "--grad-clip", "0"))
    line = assert_refused(result, "(not finite), training stopped", "--lr")
    step = int(line.split("step ", 1)[1].split(":", 1)[0])
    assert not (run / "final.pt").exists() and not [p for p in run.iterdir() if p.name.startswith(".")]
    if "last good checkpoint" in line:
        kept = openclip.read_checkpoint(run / "last.pt")
        assert f"(step {kept['step']})" in line and kept["step"] <= step - 2  # its next loss was finite
        assert all(torch.isfinite(v).all() for v in kept["state_dict"].values() if v.is_floating_point())
        # the message's way out works: a new run from it with a lower --lr
        assert_ok(invoke(train_args(tiny_world, case.dst / "again", "--pretrained", run / "last.pt", "--lr", "1e-4")))
    else:
        assert "no checkpoint was written yet" in line and not (run / "last.pt").exists()
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == list(range(1, step))


@pytest.mark.parametrize("flag, value", [("--lr", "nan"), ("--lr", "inf"), ("--lr", "-1"), ("--wd", "nan")])
def test_bad_numbers_refused_before_training(case, tiny_world, flag, value):
    assert_refused(invoke(train_args(tiny_world, case.dst / "run", flag, value)), f"{flag} ", "must be")
    assert snapshot(case.dst) == {}


def test_resume_from_a_truncated_last_checkpoint_falls_back(case, tiny_world):
    import torch

    from mosaictool.model import openclip

    run = case.dst / "run"
    args = train_args(tiny_world, run, "--steps", "6", "--save-every", "2")
    assert_ok(invoke(args))
    reference = openclip.read_checkpoint(run / "final.pt")["state_dict"]
    assert sorted(p.name for p in run.iterdir()) == ["config.json", "final.pt", "metrics.jsonl"]
    # the same run stopped after step 4 (last.pt = step 4, last.prev.pt = step 2), last.pt then cut short
    crashed = case.dst / "crashed"
    with pytest.raises(KeyboardInterrupt):  # on_step is not a flag: stop it like Ctrl-C would
        from mosaictool.training import TrainConfig, train

        def stop(step, metrics, model):
            if step == 5:
                raise KeyboardInterrupt

        train(TrainConfig(data=str(tiny_world), out=str(crashed), batch_size=4, steps=6, save_every=2, augment=False,
                          device="cpu", quiet=True), on_step=stop)
    assert openclip.read_checkpoint(crashed / "last.prev.pt")["step"] == 2
    blob = (crashed / "last.pt").read_bytes()
    (crashed / "last.pt").write_bytes(blob[: len(blob) // 3])
    result = invoke(["train", "--resume", crashed, "-q"])
    assert_ok(result)
    assert "last.pt: truncated or corrupt" in result.stderr and "last.prev.pt (step 2)" in result.stderr
    resumed = openclip.read_checkpoint(crashed / "final.pt")["state_dict"]
    assert all(torch.equal(reference[k], resumed[k]) for k in reference)  # bit-exact
    assert sorted(p.name for p in crashed.iterdir()) == ["config.json", "final.pt", "metrics.jsonl"]
    assert [json.loads(x)["step"] for x in (crashed / "metrics.jsonl").read_text().splitlines()] == list(range(1, 7))

