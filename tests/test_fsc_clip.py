"""FSC-CLIP's loss terms against brute-force references written from seed 002's equations, and
2 gloo ranks = 1 process for the whole loss and its gradients."""

from __future__ import annotations

import math
import os
import socket

import pytest
import torch

from mosaictool.methods.fsc_clip_loss import FSCCLIPLoss, focal_hn_loss, hn_logits_local

# ---- brute-force references: one image, one text, one token at a time --------------------------


def ref_clip(v, t, scale):
    """Eq. 2 and its reciprocal over the B captions."""
    b = v.shape[0]
    sg = [[torch.exp(scale * torch.dot(v[i], t[j])) for j in range(b)] for i in range(b)]
    i2t = -sum(torch.log(sg[i][i] / sum(sg[i][j] for j in range(b))) for i in range(b)) / b
    t2i = -sum(torch.log(sg[i][i] / sum(sg[j][i] for j in range(b))) for i in range(b)) / b
    return (i2t + t2i) / 2


def ref_s_local(patches, tokens, mask, scale):
    """Eq. 6-8 for one image (P, D) and one text (W, D)."""
    total = 0.0
    for w in range(tokens.shape[0]):
        if not mask[w]:
            continue
        t = tokens[w]
        s = [float(torch.dot(t, patches[p])) for p in range(patches.shape[0])]  # weights: no gradient
        lo, hi = min(s), max(s)
        a = [(x - lo) / (hi - lo) if hi > lo else 1.0 for x in s]
        v_hat = sum(a[p] * patches[p] for p in range(len(a))) / sum(a)
        cos = torch.dot(v_hat, t) / (v_hat.norm() * t.norm())
        total = total + torch.exp(cos * scale)
    return total


def ref_focal(scores, gamma, beta, n_empty=0):
    """Eq. 9-10 for one image: scores = [S(I, T), S(I, T~^1), ...] (similarities, not logs) of its
    filled slots; n_empty empty slots in the softmax with S = exp(0) = 1 and target 0 (the authors' rule)."""
    k = len(scores) - 1
    z = sum(scores) + n_empty
    out = 0.0
    for j, s in enumerate(scores):
        p = s / z
        y = (1 - beta) * (j == 0) + beta / (1 + k)
        out = out - (1 - p) ** gamma * y * torch.log(p)
    return out


def ref_total(x, lg, ll, gamma, beta, empty="zero"):
    v, t, neg, mask, scale = x["image"], x["pos"], x["neg"], x["neg_mask"], x["scale"]
    clip = ref_clip(v, t, scale)
    g_terms, l_terms = [], []
    for i in range(v.shape[0]):
        ks = [k for k in range(mask.shape[1]) if mask[i, k]]
        if not ks:
            continue  # no HN: out of both HN losses
        n_empty = mask.shape[1] - len(ks) if empty == "zero" else 0
        sg = [torch.exp(scale * torch.dot(v[i], t[i]))] + [torch.exp(scale * torch.dot(v[i], neg[i, k])) for k in ks]
        g_terms.append(ref_focal(sg, gamma, beta, n_empty))
        sl = [ref_s_local(x["patches"][i], x["pos_tok"][i], x["pos_tok_mask"][i], scale)]
        sl += [ref_s_local(x["patches"][i], x["neg_tok"][i, k], x["neg_tok_mask"][i, k], scale) for k in ks]
        l_terms.append(ref_focal(sl, gamma, beta, n_empty))
    hn_g = sum(g_terms) / max(len(g_terms), 1)
    hn_l = sum(l_terms) / max(len(l_terms), 1)
    return {"loss": clip + lg * hn_g + ll * hn_l, "clip": clip, "hn_global": hn_g, "hn_local": hn_l}


# ---- random inputs ---------------------------------------------------------------------------


def unit(*shape, g):
    return torch.nn.functional.normalize(torch.randn(*shape, generator=g, dtype=torch.float64), dim=-1)


def make_inputs(seed=0, b=6, k=3, w=5, p=7, d=8, ties=True):
    g = torch.Generator().manual_seed(seed)
    x = {
        "image": unit(b, d, g=g),
        "pos": unit(b, d, g=g),
        "neg": unit(b, k, d, g=g),
        "neg_mask": torch.rand(b, k, generator=g) < 0.6,
        "scale": torch.tensor(1 / 0.07, dtype=torch.float64).log().exp(),
        "patches": torch.randn(b, p, d, generator=g, dtype=torch.float64),
        "pos_tok": torch.randn(b, w, d, generator=g, dtype=torch.float64),
        "pos_tok_mask": torch.rand(b, w, generator=g) < 0.7,
        "neg_tok": torch.randn(b, k, w, d, generator=g, dtype=torch.float64),
        "neg_tok_mask": torch.rand(b, k, w, generator=g) < 0.7,
    }
    x["neg_mask"][0] = False  # an image without HN (masked out of the HN losses)
    x["neg_mask"][1] = True  # one with all K
    x["neg_mask"][2] = torch.tensor([True] + [False] * (k - 1))  # one with a single HN
    x["pos_tok_mask"][:, 0] = True
    x["neg_tok_mask"][:, :, 0] = True
    if ties:
        x["patches"][3] = x["patches"][3, :1].clone()  # every patch alike: max = min for all tokens
        if k > 1:  # two equal HN texts: tied logits
            x["neg"][1, 1] = x["neg"][1, 0]
            x["neg_tok"][1, 1] = x["neg_tok"][1, 0]
            x["neg_tok_mask"][1, 1] = x["neg_tok_mask"][1, 0]
        x["patches"][4, 2] = x["patches"][4, 5]  # two equal patches
    for key in ("image", "pos", "neg", "scale", "patches", "pos_tok", "neg_tok"):
        x[key] = x[key].clone().requires_grad_(True)
    return x


def run_module(x, **kw):
    loss = FSCCLIPLoss(**kw)
    return loss.compute(x["image"], x["pos"], x["neg"], x["neg_mask"], x["scale"], x["patches"], x["pos_tok"],
                        x["pos_tok_mask"], x["neg_tok"], x["neg_tok_mask"])


GRAD_KEYS = ("image", "pos", "neg", "scale", "patches", "pos_tok", "neg_tok")


def grads(value, x):
    gs = torch.autograd.grad(value, [x[k] for k in GRAD_KEYS], allow_unused=True)
    return {k: torch.zeros_like(x[k]) if gr is None else gr for k, gr in zip(GRAD_KEYS, gs)}


# ---- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("empty", ["zero", "drop"])
@pytest.mark.parametrize("seed,k", [(0, 3), (1, 1), (2, 4)])
@pytest.mark.parametrize("gamma,beta", [(2.0, 0.02), (0.0, 0.0), (1.0, 0.3)])
def test_every_term_and_gradient_matches_the_equations(seed, k, gamma, beta, empty):
    x = make_inputs(seed, k=k)
    kw = dict(lambda_global=0.5, lambda_local=0.2, focal_gamma=gamma, label_smoothing=beta, empty_hn_slots=empty)
    got = run_module(x, **kw)
    want = ref_total(x, 0.5, 0.2, gamma, beta, empty)
    for name in ("clip", "hn_global", "hn_local", "loss"):
        torch.testing.assert_close(got[name], want[name], rtol=1e-9, atol=1e-9, msg=name)
    g_got, g_want = grads(got["loss"], x), grads(want["loss"], x)
    for name in GRAD_KEYS:
        torch.testing.assert_close(g_got[name], g_want[name], rtol=1e-7, atol=1e-9, msg=name)
        assert torch.isfinite(g_got[name]).all()


def test_hn_texts_are_not_in_the_clip_denominator():
    x = make_inputs(0)
    base = run_module(x)["clip"]
    x2 = dict(x, neg=unit(*x["neg"].shape, g=torch.Generator().manual_seed(9)))
    assert run_module(x2)["clip"].item() == pytest.approx(base.item(), rel=1e-12)
    assert run_module(x2)["hn_global"].item() != pytest.approx(run_module(x)["hn_global"].item())


@pytest.mark.parametrize("empty", ["zero", "drop"])
def test_what_sits_in_empty_slots_changes_nothing(empty):
    x = make_inputs(0)
    got = run_module(x, empty_hn_slots=empty)
    x["neg"].data[0] = 5.0  # image 0 has no HN: whatever sits in its slots is ignored
    x["neg_tok"].data[0] = -3.0
    x["neg"].data[2, 1:] = 7.0  # image 2's empty slots: logit 0 (zero) or out of the softmax (drop), whatever they hold
    x["neg_tok"].data[2, 1:] = 2.0
    again = run_module(x, empty_hn_slots=empty)
    assert again["hn_global"].item() == pytest.approx(got["hn_global"].item(), rel=1e-12)
    assert again["hn_local"].item() == pytest.approx(got["hn_local"].item(), rel=1e-12)
    g = grads(again["loss"], x)
    assert g["neg"][0].abs().max() == 0 and g["neg"][2, 1:].abs().max() == 0 and g["neg_tok"][2, 1:].abs().max() == 0


def test_empty_slot_rules_differ_and_a_bad_rule_is_refused():
    from mosaictool import methods
    from mosaictool.errors import MosaicError

    x = make_inputs(0)
    zero, drop = run_module(x, empty_hn_slots="zero"), run_module(x, empty_hn_slots="drop")
    # an extra exp(0) in every denominator with empty slots: lower p for the filled texts, a higher loss
    assert zero["hn_global"].item() > drop["hn_global"].item() + 1e-6
    assert zero["hn_local"].item() > drop["hn_local"].item() + 1e-6
    assert zero["clip"].item() == drop["clip"].item()
    assert methods.create("fsc-clip").opts["empty_hn_slots"] == "zero"  # the authors' rule is the default
    with pytest.raises(MosaicError, match="--empty-hn-slots 'none': choose zero or drop"):
        methods.create("fsc-clip", {"empty_hn_slots": "none"})


def test_no_hn_in_the_batch_gives_plain_clip():
    x = make_inputs(0)
    x["neg_mask"] = torch.zeros_like(x["neg_mask"])
    got = run_module(x)
    assert got["hn_global"].item() == 0 and got["hn_local"].item() == 0
    torch.testing.assert_close(got["loss"], ref_clip(x["image"], x["pos"], x["scale"]))


def test_focal_loss_special_cases():
    """gamma 0 and beta 0: cross entropy of the caption; ties: log(1 + K)."""
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    ce = focal_hn_loss(logits, mask, gamma=0.0, smoothing=0.0, empty_slots="drop")
    assert ce[0].item() == pytest.approx(-torch.log_softmax(logits[0, :3], 0)[0].item())
    assert ce[1].item() == pytest.approx(math.log(4))
    # the authors' rule: the empty slot (logit -1 here) counts with logit 0
    ce_zero = focal_hn_loss(logits, mask, gamma=0.0, smoothing=0.0, empty_slots="zero")
    assert ce_zero[0].item() == pytest.approx(-torch.log_softmax(torch.tensor([2.0, 1.0, 0.5, 0.0]), 0)[0].item())
    # uniform target (beta = 1) on a tie: every text has p = y = 1/(1+K)
    tie = focal_hn_loss(logits[1:], mask[1:], gamma=2.0, smoothing=1.0)
    assert tie.item() == pytest.approx(4 * (0.75 ** 2) * 0.25 * math.log(4))


def test_local_score_ties_and_padding():
    """All patches alike: v^_w is that patch whatever the token; padding tokens do not count."""
    g = torch.Generator().manual_seed(0)
    patch = torch.randn(1, 1, 8, generator=g, dtype=torch.float64)
    patches = patch.expand(1, 5, 8)
    tokens = torch.randn(1, 1, 3, 8, generator=g, dtype=torch.float64)
    mask = torch.tensor([[[True, True, False]]])
    got = hn_logits_local(patches, tokens, mask, torch.tensor(10.0, dtype=torch.float64))
    cos = torch.nn.functional.cosine_similarity(tokens[0, 0, :2], patch[0], dim=-1)
    assert got.item() == pytest.approx(torch.logsumexp(10 * cos, 0).item())


# ---- distributed -----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _half(x, rank, world):
    b = x["image"].shape[0] // world
    part = {k: (v[rank * b:(rank + 1) * b] if v.ndim and k != "scale" else v).detach().clone() for k, v in x.items()}
    for key in GRAD_KEYS:
        part[key].requires_grad_(True)
    return part


def _worker(rank, world, port, out, local_loss):
    os.environ.update(WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    from mosaictool.training import distributed

    info = distributed.init("cpu", timeout_s=120)  # a failed rank must not leave the other waiting 30 min
    part = _half(make_inputs(0, b=8), rank, world)
    terms = run_module(part, local_loss=local_loss, rank=rank, world_size=world)
    terms["loss"].backward()
    result = {"terms": {k: v.item() for k, v in terms.items()}, "grads": {k: part[k].grad for k in GRAD_KEYS}}
    torch.save(result, f"{out}.{rank}")
    distributed.shutdown(info)


@pytest.mark.slow  # two spawned processes that import torch: ~10 s of CPU each
@pytest.mark.parametrize("local_loss", [False, True])
def test_two_gloo_ranks_equal_one_process(tmp_path, local_loss):
    """Logged terms averaged over ranks = the 1-process terms; each rank's gradients / world size (what
    DDP's averaging makes of them) = the 1-process gradients of its half of the batch."""
    world, out = 2, str(tmp_path / "rank")
    torch.multiprocessing.spawn(_worker, args=(world, _free_port(), out, local_loss), nprocs=world)
    ranks = [torch.load(f"{out}.{r}") for r in range(world)]
    x = make_inputs(0, b=8)
    single = run_module(x)
    single_grads = grads(single["loss"], x)
    for name, value in single.items():
        mean = sum(r["terms"][name] for r in ranks) / world
        assert mean == pytest.approx(value.item(), rel=1e-9), name
    b = x["image"].shape[0] // world
    for name in GRAD_KEYS:
        if name == "scale":
            got = sum(r["grads"]["scale"] for r in ranks) / world
            torch.testing.assert_close(got, single_grads["scale"], rtol=1e-7, atol=1e-9)
            continue
        for r, rank in enumerate(ranks):
            torch.testing.assert_close(rank["grads"][name] / world, single_grads[name][r * b:(r + 1) * b],
                                       rtol=1e-7, atol=1e-9, msg=f"{name} rank {r}")


# ---- training end to end (tiny model, CPU) ---------------------------------------------------


def _fsc_world(folder, n=8, without_hn=(1,)):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from train_fixtures import add_fsc_negatives, make_world, write_tiny_model

    return add_fsc_negatives(make_world(folder / "w", n=n), without_hn=without_hn), write_tiny_model(folder)


def _config(data, model_cfg, out, **kw):
    from mosaictool.training import TrainConfig

    base = dict(data=str(data), out=str(out), model_config=str(model_cfg), batch_size=4, steps=2, warmup=1,
                quiet=True, method="fsc-clip")
    return TrainConfig(**{**base, **kw})


def _state(path):
    from mosaictool.model import openclip

    return openclip.read_checkpoint(path)["state_dict"]


def test_missing_hn_kinds_name_negate_text(tmp_path):
    """make_world's records have negclip swaps only: fsc-clip refuses them, naming the kinds that are
    missing and the stage that adds them, before any run folder is written. (The first test here to
    build a model: it pays open_clip's import.)"""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from train_fixtures import make_world, write_tiny_model

    from mosaictool.errors import MosaicError
    from mosaictool.training import train

    data, model_cfg = make_world(tmp_path / "w", n=4), write_tiny_model(tmp_path)
    with pytest.raises(MosaicError, match=r"replace, shuffle hard-negative texts.*negate --text negclip,replace,shuffle"):
        train(_config(data, model_cfg, tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_trains_with_lora_into_plain_open_clip_weights(tmp_path):
    """--lora 2: only adapters train, every FSC-CLIP term is logged, and final.pt holds plain open_clip
    weights (the adapters merged) that load strictly and that wise-ft mixes with the starting model."""
    import json

    from mosaictool.model import openclip, wise_ft
    from mosaictool.training import train

    data, model_cfg = _fsc_world(tmp_path)
    final = train(_config(data, model_cfg, tmp_path / "run", lora=2, lr=1e-2, steps=1))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1]
    assert all(m.keys() >= {"loss", "clip", "hn_global", "hn_local"} and m["hn_local"] > 0 for m in lines)
    assert lines[0]["neg_per_image"] > 0
    base = openclip.create("test-tiny", model_config_file=str(model_cfg), seed=0).model.state_dict()
    merged = _state(final)
    assert merged.keys() == base.keys()  # no adapter key left
    changed = [k for k in base if not torch.equal(base[k], merged[k])]
    assert "transformer.resblocks.0.mlp.c_fc.weight" in changed and "visual.conv1.weight" in changed
    assert not any(k.endswith(("bias", "logit_scale")) or ".ln_" in k for k in changed)  # frozen: LoRA on weights only
    bundle = openclip.load_checkpoint(final)  # strict
    assert bundle.meta["checkpoint"]["config"]["lora"] == 2
    start = tmp_path / "start.pt"
    openclip.save_checkpoint(start, openclip.create("test-tiny", model_config_file=str(model_cfg), seed=0))
    (half,) = wise_ft.wise_ft(str(start), str(final), [0.5], out=tmp_path / "wise")
    key = "transformer.resblocks.0.mlp.c_fc.weight"
    torch.testing.assert_close(_state(half)[key], (base[key] + merged[key]) / 2)


@pytest.mark.slow  # ~15 s: a reference run, a run killed mid-way, its resumption
@pytest.mark.parametrize("lora_rank", [0, 2])
def test_resume_after_kill_9_gives_the_same_final_weights(tmp_path, lora_rank):
    import json
    import signal

    from mosaictool.training import TrainConfig, train

    data, model_cfg = _fsc_world(tmp_path)  # puts tests/ on sys.path
    from train_fixtures import train_killed_at

    kw = dict(steps=6, save_every=2, lora=lora_rank)
    reference = train(_config(data, model_cfg, tmp_path / "ref", **kw))
    out = tmp_path / "crash"
    proc = train_killed_at(_config(data, model_cfg, out, **kw), step=3)  # after step 2's checkpoint, mid-run
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not (out / "final.pt").exists()
    final = train(TrainConfig(data="", out=str(out), quiet=True), resume=True)
    a, b = _state(reference), _state(final)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == list(range(1, 7))
