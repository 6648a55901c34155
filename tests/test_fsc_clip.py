"""FSC-CLIP's loss terms against brute-force references written from Oh et al. 2024's equations, and
2 gloo ranks = 1 process for the whole loss and its gradients."""

from __future__ import annotations

import dataclasses
import math
import os

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
    from train_fixtures import free_port, spawned_rank

    torch.multiprocessing.spawn(spawned_rank, args=(_worker, world, free_port(), out, local_loss), nprocs=world)
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
    from mosaictool.errors import MosaicError
    from mosaictool.training import train
    from train_fixtures import make_world, write_tiny_model

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

    data, model_cfg = _fsc_world(tmp_path)  # puts tests/ on sys.path
    from train_fixtures import lora_reference_weights

    trained = {}
    final = train(_config(data, model_cfg, tmp_path / "run", lora=2, lr=1e-2, steps=1),
                  on_step=lambda step, metrics, model: trained.update(model=model))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1]
    assert all(m.keys() >= {"loss", "clip", "hn_global", "hn_local"} and m["hn_local"] > 0 for m in lines)
    assert lines[0]["neg_per_image"] > 0
    base = openclip.create("test-tiny", model_config_file=str(model_cfg), seed=0).model.state_dict()
    merged = _state(final)
    assert merged.keys() == base.keys()  # no adapter key left
    reference = lora_reference_weights(base, trained["model"], 2)  # every adapted weight W + B A / rank
    for k in base:
        torch.testing.assert_close(merged[k], reference[k], msg=lambda m: f"{k}: {m}")
    changed = [k for k in base if not torch.equal(base[k], merged[k])]
    assert "transformer.resblocks.0.mlp.c_fc.weight" in changed and "visual.conv1.weight" in changed
    assert "visual.transformer.resblocks.0.attn.out_proj.weight" in changed
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


# ---- against the authors' code ---------------------------------------------------------------
# A transcription of ytaek-oh/fsc-clip src/training/losses/loss.py at commit
# 604015db3f009a8f7485f1fb7e21d8343c67664a, one process (world_size 1, no gather), in their input
# format: text features [B captions; the filled HN slots, compacted, type-major (slot k of image b is
# row k * B + b of neg_text_masks)], token features and attn masks likewise.


def official_fill_empty_negatives(neg_text_features, neg_mask):
    """ClipLoss._fill_empty_negatives, loss.py:212-222."""
    new_neg_shape = (neg_mask.size(0), )
    if neg_text_features.ndim > 1:
        new_neg_shape += neg_text_features.shape[1:]
    new_neg_text_features = torch.zeros(new_neg_shape, device=neg_text_features.device, dtype=neg_text_features.dtype)
    new_neg_text_features[neg_mask > 0] = neg_text_features
    return new_neg_text_features


def official_focal_loss_with_nsr(logits, labels, gamma=2.0, label_smoothing=0.1, valid_neg_mask=None):
    """_focal_loss_with_nsr, loss.py:77-105 (reduction "mean"). Their target is float32 (`.float()`)."""
    num_cls_per_row = valid_neg_mask.sum(dim=-1) + 1
    num_batch, num_cls = logits.size(0), logits.size(1)
    labels_2d = torch.zeros((num_batch, num_cls), device=logits.device).float()
    labels_2d[:, 0] = (1.0 - label_smoothing) + label_smoothing / num_cls_per_row
    labels_2d[:, 1:] = label_smoothing / num_cls_per_row.unsqueeze(-1)
    labels_2d[:, 1:] *= valid_neg_mask
    celoss_2d = -1.0 * torch.nn.functional.log_softmax(logits, dim=-1)
    celoss_2d *= torch.pow(1.0 - torch.exp(-celoss_2d), gamma)
    return torch.sum(labels_2d * celoss_2d, dim=-1).mean()


def official_clip_loss(image_features, text_features, logit_scale):
    """ClipLoss.forward, loss.py:282-291 with get_logits 249-259 and get_ground_truth 238-247: arange labels."""
    logits_per_img = logit_scale * image_features @ text_features.T
    logits_per_txt = logit_scale * text_features @ image_features.T
    labels = torch.arange(logits_per_img.shape[0])
    F = torch.nn.functional
    return (F.cross_entropy(logits_per_img, labels) + F.cross_entropy(logits_per_txt, labels)) / 2


def official_per_token_visual_patches(image_tokens, text_tokens):
    """Local_HNLoss.get_per_token_visual_patches, loss.py:393-416 (sim_normalizer "minmax", no sparsify)."""
    sim_map = torch.einsum("btd,bpd->btp", text_tokens, image_tokens).detach()
    sim_max = sim_map.max(dim=-1, keepdim=True)[0]
    sim_min = sim_map.min(dim=-1, keepdim=True)[0]
    sim_map = (sim_map - sim_min) / (sim_max - sim_min)
    sim_map = sim_map / sim_map.sum(dim=-1, keepdim=True)
    image_tokens = torch.einsum("btp,bpd->btd", sim_map, image_tokens)
    return torch.nn.functional.normalize(image_tokens, dim=-1)


def official_aggregated_local_score(image_tokens, text_tokens, attn_mask, logit_scale):
    """Local_HNLoss.get_aggregated_local_score, loss.py:418-432."""
    text_tokens = torch.nn.functional.normalize(text_tokens, dim=-1)
    batch_size, context_len = image_tokens.shape[:2]
    local_sim = logit_scale * torch.einsum("bd,bd->b", image_tokens.reshape(batch_size * context_len, -1),
                                           text_tokens.reshape(batch_size * context_len, -1)).view(batch_size, context_len)
    additive_attn_mask = torch.where(attn_mask > 0, 0., float("-inf"))
    return torch.logsumexp(local_sim + additive_attn_mask, dim=1)


def official_fsc_clip_loss(image_features, image_tokens, text_features, text_tokens, attn_mask, neg_text_masks,
                           logit_scale, *, neg_loss_weight, local_neg_weight, gamma, smoothing):
    """Local_HNLoss.forward (loss.py:434-525) over Global_HNLoss.forward (319-376), world_size 1;
    the dict train.py sums into the loss: clip_loss, clip_neg_loss, local_neg_loss (weighted)."""
    lbs = image_features.shape[0]
    neg_loss_fn = lambda lg, lb, valid_neg_mask: official_focal_loss_with_nsr(  # noqa: E731 (build_neg_loss, 108-122)
        lg, lb, gamma=gamma, label_smoothing=smoothing, valid_neg_mask=valid_neg_mask)
    total = {}
    # Global_HNLoss.forward
    text_feats, neg_text_features = text_features[:lbs], text_features[lbs:]
    neg_text_features = official_fill_empty_negatives(neg_text_features, neg_text_masks)
    total["clip_loss"] = official_clip_loss(image_features, text_feats, logit_scale)
    neg_text_features = torch.stack(neg_text_features.split(lbs, dim=0), dim=1)
    neg_logits_per_img = logit_scale * torch.einsum(
        "bkd,bld->bkl", image_features.unsqueeze(1), torch.cat((text_feats.unsqueeze(1), neg_text_features), dim=1)
    ).squeeze(1)
    neg_labels = torch.zeros(lbs, dtype=torch.long)
    valid_neg_mask = torch.stack(neg_text_masks.split(lbs, dim=0), dim=1)
    valid_neg_weight = torch.any(valid_neg_mask > 0, dim=1)
    total["clip_neg_loss"] = neg_loss_weight * neg_loss_fn(
        neg_logits_per_img[valid_neg_weight], neg_labels[valid_neg_weight], valid_neg_mask=valid_neg_mask[valid_neg_weight])
    # Local_HNLoss.forward, 469-521
    text_tokens, neg_text_tokens = text_tokens[:lbs], text_tokens[lbs:]
    attn_mask, neg_attn_mask = attn_mask[:lbs], attn_mask[lbs:]
    new_image_tokens = official_per_token_visual_patches(image_tokens, text_tokens)
    pos_local_scores = official_aggregated_local_score(new_image_tokens, text_tokens, attn_mask, logit_scale)
    neg_chunk_sizes = [neg_mask.sum().item() for neg_mask in neg_text_masks.split(lbs, dim=0)]
    neg_local_score_list = []
    for _neg_text_masks, _neg_text_tokens, _neg_attn_mask in zip(
            neg_text_masks.split(lbs, dim=0), neg_text_tokens.split(neg_chunk_sizes, dim=0),
            neg_attn_mask.split(neg_chunk_sizes, dim=0)):
        _image_tokens = image_tokens[_neg_text_masks > 0]
        neg_img_tokens = official_per_token_visual_patches(_image_tokens, _neg_text_tokens)
        neg_local_score_list.append(
            official_aggregated_local_score(neg_img_tokens, _neg_text_tokens, _neg_attn_mask, logit_scale))
    neg_local_score_list = torch.cat(neg_local_score_list, dim=0)
    neg_local_score_list = official_fill_empty_negatives(neg_local_score_list, neg_text_masks)
    neg_local_score_list = torch.stack(neg_local_score_list.split(lbs, dim=0), dim=1)
    neg_logits = torch.cat((pos_local_scores.unsqueeze(1), neg_local_score_list), dim=1)
    total["local_neg_loss"] = local_neg_weight * neg_loss_fn(
        neg_logits[valid_neg_weight], neg_labels[valid_neg_weight], valid_neg_mask=valid_neg_mask[valid_neg_weight])
    return total


def to_official_format(x):
    """Our slot layout (B, K, ...) -> their inputs: captions then the filled slots, type-major."""
    b, k = x["neg_mask"].shape
    flat = x["neg_mask"].T.reshape(-1)  # neg_text_masks: row k * B + b
    def filled(t):  # (B, K, ...) -> the filled slots in their order
        return t.transpose(0, 1).reshape(b * k, *t.shape[2:])[flat]
    return dict(image_features=x["image"], image_tokens=x["patches"],
                text_features=torch.cat([x["pos"], filled(x["neg"])]),
                text_tokens=torch.cat([x["pos_tok"], filled(x["neg_tok"])]),
                attn_mask=torch.cat([x["pos_tok_mask"], filled(x["neg_tok_mask"])]).long(),
                neg_text_masks=flat.long(), logit_scale=x["scale"])


def hn_per_image_inputs(counts=(3, 0, 1, 1, 3, 2), seed=0, w=5, p=7, d=8):
    """make_inputs with the issue's HN counts per image (K = 3), filled slots not always first, no ties
    (their min-max normalisation divides by zero on a tie)."""
    k = 3
    x = make_inputs(seed, b=len(counts), k=k, w=w, p=p, d=d, ties=False)
    rng = torch.Generator().manual_seed(seed + 1)
    x["neg_mask"] = torch.zeros(len(counts), k, dtype=torch.bool)
    for i, n in enumerate(counts):
        x["neg_mask"][i, torch.randperm(k, generator=rng)[:n]] = True
    return x


@pytest.mark.parametrize("gamma,beta", [(2.0, 0.02), (1.0, 0.3)])
@pytest.mark.parametrize("seed", [0, 1])
def test_loss_and_gradients_equal_the_authors_code(seed, gamma, beta):
    """HN texts per image [3, 0, 1, 1, 3, 2], B = 6, K = 3, float64: every term and every gradient of
    our default (--empty-hn-slots zero) equals the transcription above; --empty-hn-slots drop does not.
    (Tolerance 1e-7: their smoothed target is float32, loss.py:90.)"""
    x = hn_per_image_inputs(seed=seed)
    kw = dict(lambda_global=0.5, lambda_local=0.2, focal_gamma=gamma, label_smoothing=beta)
    ours = run_module(x, **kw)
    theirs = official_fsc_clip_loss(**to_official_format(x), neg_loss_weight=0.5, local_neg_weight=0.2, gamma=gamma,
                                    smoothing=beta)
    their_total = sum(theirs.values())
    torch.testing.assert_close(ours["clip"], theirs["clip_loss"], rtol=1e-12, atol=0)
    torch.testing.assert_close(0.5 * ours["hn_global"], theirs["clip_neg_loss"], rtol=1e-7, atol=0)
    torch.testing.assert_close(0.2 * ours["hn_local"], theirs["local_neg_loss"], rtol=1e-7, atol=0)
    torch.testing.assert_close(ours["loss"], their_total, rtol=1e-7, atol=0)
    g_ours, g_theirs = grads(ours["loss"], x), grads(their_total, x)
    for name in GRAD_KEYS:
        torch.testing.assert_close(g_ours[name], g_theirs[name], rtol=1e-6, atol=1e-9, msg=name)
    drop = run_module(x, empty_hn_slots="drop", **kw)
    assert abs(0.5 * drop["hn_global"].item() - theirs["clip_neg_loss"].item()) > 1e-3


class _StubTowers(torch.nn.Module):
    """ContrastiveForward's outputs without a model: fixed image and patch features, and text features
    from the token ids (equal texts: equal features), as batch_features reads them."""

    def __init__(self, b, p=7, d=8, vocab=40, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.image = unit(b, d, g=g).float()
        self.patches = torch.randn(b, p, d, generator=g)
        self.embedding = torch.randn(vocab, d, generator=g)

    def text(self, tokens):
        token_f = self.embedding[tokens]
        pooled = (token_f * (tokens != 0)[..., None]).sum(1)
        return torch.nn.functional.normalize(pooled, dim=-1), token_f

    def forward(self, images, tokens, dense=False):
        text_f, token_f = self.text(tokens)
        out = (self.image, text_f, torch.tensor(1 / 0.07))
        return out + (self.patches, token_f) if dense else out


def test_equal_captions_are_labelled_by_position_as_in_the_authors_code(tmp_path):
    """Two images with the same caption: the training loop's path (the resolved TrainConfig's
    merge_equal_texts -> batch_features -> the method's loss) gives the authors' loss, whose CLIP term
    labels captions by position (arange; transcription above); merging equal texts would not."""
    from mosaictool import methods
    from mosaictool.model.text_ids import text_id
    from mosaictool.training import TrainConfig
    from mosaictool.training.batch import Batch, batch_features

    cfg = TrainConfig(data=str(tmp_path / "d"), out=str(tmp_path / "o"), method="fsc-clip").resolved()
    assert cfg.merge_equal_texts is False
    method = methods.create(cfg.method, cfg.method_options)
    # captions as token ids (0: padding); images 0 and 2 have the same caption
    captions = torch.tensor([[1, 5, 6, 2, 0], [1, 7, 8, 9, 2], [1, 5, 6, 2, 0], [1, 10, 11, 2, 0]])
    hn = {(0, 0): [1, 6, 5, 2, 0], (1, 0): [1, 9, 8, 7, 2], (1, 1): [1, 12, 8, 9, 2], (3, 2): [1, 11, 13, 2, 0]}
    b, k = 4, 3
    neg_mask = torch.zeros(b, k, dtype=torch.bool)
    for i, j in hn:
        neg_mask[i, j] = True
    neg_tokens = torch.tensor([hn[i, j] for i, j in sorted(hn)])  # row-major, as the collate stores them
    ids = lambda rows: torch.tensor([text_id(" ".join(map(str, r.tolist()))) for r in rows])  # noqa: E731
    neg_ids = torch.zeros(b, k, dtype=torch.long)
    neg_ids[neg_mask] = ids(neg_tokens)
    batch = Batch(images=torch.zeros(b, 3, 2, 2, dtype=torch.uint8), pos_tokens=captions,
                  pos_mask=torch.ones(b, 1, dtype=torch.bool), neg_tokens=neg_tokens, neg_mask=neg_mask,
                  is_hard=torch.zeros(b, dtype=torch.bool), indices=torch.arange(b), pos_ids=ids(captions)[:, None],
                  neg_ids=neg_ids)
    towers = _StubTowers(b)
    noise = torch.randn(b, towers.image.shape[1], generator=torch.Generator().manual_seed(3))
    towers.image = torch.nn.functional.normalize(towers.text(captions)[0] + 0.3 * noise, dim=-1)  # near its caption
    loss_fn = method.make_loss()

    def ours(text_ids):
        feats = batch_features(towers, batch, mean=(0.5,) * 3, std=(0.5,) * 3, device="cpu", text_ids=text_ids,
                               dense=method.dense)
        return loss_fn(feats)

    got, merged = ours(cfg.merge_equal_texts), ours(True)
    # their inputs: captions, then the filled slots type-major; attn_mask = (text > 0) without the
    # start token (their open_clip model.py:331-333, same commit)
    flat = neg_mask.T.reshape(-1)
    neg_by_type = torch.stack([torch.tensor(hn.get((i, j), [0] * 5)) for j in range(k) for i in range(b)])[flat]
    tokens = torch.cat([captions, neg_by_type])
    text_f, token_f = towers.text(tokens)
    attn_mask = (tokens > 0).long()
    attn_mask[:, 0] = 0
    theirs = official_fsc_clip_loss(towers.image, towers.patches, text_f, token_f, attn_mask, flat.long(),
                                    torch.tensor(1 / 0.07), neg_loss_weight=0.5, local_neg_weight=0.2, gamma=2.0,
                                    smoothing=0.02)
    torch.testing.assert_close(got["clip"], theirs["clip_loss"], rtol=1e-6, atol=0)
    torch.testing.assert_close(got["loss"], sum(theirs.values()), rtol=1e-6, atol=0)
    assert abs(merged["clip"].item() - theirs["clip_loss"].item()) > 1e-3  # merging equal captions is another loss


# ---- the paper's recipe ------------------------------------------------------------------------


@pytest.mark.parametrize("recipe,lr,lora_rank", [("paper", 5e-6, 0), ("paper-lora", 5e-5, 4)])
def test_recipes_are_the_authors_settings(tmp_path, recipe, lr, lora_rank):
    """The authors' COCO scripts (fsc-clip README.md "Training Scripts" at 604015d: lr 5e-6, or 5e-5 with
    --lora-rank 4; wd 0.1, 5 epochs, warmup 50, batch 256) with their parser's defaults (src/training/
    params.py:307-313, 503: --precision amp, --grad-clip-norm None) and their open_clip's crop scale
    (src/open_clip/transform.py:69: (0.9, 1.0)); fields given explicitly win."""
    from mosaictool.training import TrainConfig, with_recipe

    cfg = TrainConfig(data=str(tmp_path / "d"), out=str(tmp_path / "o"), method="fsc-clip")
    got = with_recipe(cfg, recipe).resolved()
    assert (got.recipe, got.lr, got.lora, got.batch_size, got.epochs, got.warmup, got.wd) == \
        (recipe, lr, lora_rank, 256, 5, 50, 0.1)
    assert got.grad_clip is None and got.precision == "amp" and got.crop_scale == (0.9, 1.0)
    assert (got.optimizer, got.beta1, got.beta2, got.eps) == ("adamw", 0.9, 0.98, 1e-6)
    assert got.merge_equal_texts is False and got.method_options["empty_hn_slots"] == "zero"
    mine = dataclasses.replace(cfg, lr=1e-4, grad_clip=2.0, method_options={"lambda_global": 1.0})
    got = with_recipe(mine, recipe, given={"lr", "grad_clip"}).resolved()
    assert (got.lr, got.grad_clip, got.method_options["lambda_global"], got.batch_size) == (1e-4, 2.0, 1.0, 256)


@pytest.mark.parametrize("recipe,lr,lora_rank", [("paper", 5e-6, 0), ("paper-lora", 5e-5, 4)])
def test_train_recipe_sets_the_authors_settings_and_explicit_flags_win(monkeypatch, tmp_path, recipe, lr, lora_rank):
    """`train --method fsc-clip --recipe paper[-lora]` applies the recipe above; flags given on the
    command line win over it."""
    from typer.testing import CliRunner

    import mosaictool.training.loop
    from mosaictool.cli import app

    seen = []
    monkeypatch.setattr(mosaictool.training.loop, "train", lambda cfg, **kw: seen.append(cfg) or "final.pt")
    base = ["train", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o"), "--method", "fsc-clip", "--recipe", recipe]
    result = CliRunner().invoke(app, base)
    assert result.exit_code == 0, result.output
    cfg = seen[-1]
    assert (cfg.recipe, cfg.lr, cfg.lora, cfg.batch_size, cfg.epochs, cfg.warmup, cfg.wd) == \
        (recipe, lr, lora_rank, 256, 5, 50, 0.1)
    assert cfg.grad_clip is None and cfg.precision == "amp" and tuple(cfg.crop_scale) == (0.9, 1.0)
    assert cfg.method_options["lambda_global"] == 0.5 and cfg.method_options["label_smoothing"] == 0.02
    result = CliRunner().invoke(app, base + ["--lr", "1e-4", "--grad-clip", "2", "--batch-size", "8", "--precision", "fp32",
                                             "--lambda-global", "1.0", "--crop-scale", "0.5,1"])
    assert result.exit_code == 0, result.output
    cfg = seen[-1]
    assert (cfg.lr, cfg.grad_clip, cfg.batch_size, cfg.precision, tuple(cfg.crop_scale)) == (1e-4, 2.0, 8, "fp32", (0.5, 1.0))
    assert cfg.method_options["lambda_global"] == 1.0 and cfg.epochs == 5  # the recipe still sets what was not given
