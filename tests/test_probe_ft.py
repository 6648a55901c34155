"""The Probe paper's fine-tuning loss (seed 004 Sec. 5) against a brute-force reference."""

from __future__ import annotations

import random

import pytest
import torch

from mosaictool.methods.probe_ft import ProbeFTLoss, choose_swap


def _unit(*shape):
    return torch.nn.functional.normalize(torch.randn(*shape, dtype=torch.float64), dim=-1)


def _clip_with_negatives(x, t, negs, scale):
    """CLIP's symmetric loss on pairs (x_i, t_i); `negs` = list of (owner, feature) in the i2t denominators."""
    b = x.shape[0]
    texts = torch.cat([t, torch.stack([f for _, f in negs])]) if negs else t
    i2t = sum(-torch.log_softmax(scale * texts @ x[i], 0)[i] for i in range(b)) / b
    t2i = sum(-torch.log_softmax(scale * x @ t[i], 0)[i] for i in range(b)) / b
    return (i2t + t2i) / 2


def brute_force(x, pos, pos_mask, neg, neg_mask, scale, margin, w_itm, w_c):
    b = x.shape[0]
    y = pos[:, 0]
    p = torch.stack([pos[i, 1] if pos_mask[i, 1] else y[i] for i in range(b)])
    hinge_img = [max(0.0, margin - float(x[i] @ p[i]) + float(x[i] @ neg[i, 0])) for i in range(b) if neg_mask[i, 0]]
    hinge_cap = [max(0.0, margin - float(y[i] @ x[i]) + float(y[i] @ x[j])) for i in range(b) for j in range(b) if j != i]
    itm = (sum(hinge_img) / len(hinge_img) + sum(hinge_cap) / len(hinge_cap)) / 2
    negs = [(i, neg[i, 0]) for i in range(b) if neg_mask[i, 0]]
    c = (_clip_with_negatives(x, y, negs, scale) + _clip_with_negatives(x, p, negs, scale)) / 2
    return w_itm * itm + w_c * float(c), itm, float(c)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loss_equals_brute_force(seed):
    torch.manual_seed(seed)
    b, kp, kn, d = 5, 2, 1, 8
    x, pos, neg = _unit(b, d), _unit(b, kp, d), _unit(b, kn, d)
    pos_mask = torch.tensor([[True, True], [True, False], [True, True], [True, False], [True, True]])
    neg_mask = torch.tensor([[True], [True], [False], [True], [False]])
    pos = pos * pos_mask[..., None]  # empty slots are zero, as fill_slots leaves them
    neg = neg * neg_mask[..., None]
    scale = torch.tensor(10.0, dtype=torch.float64)
    loss = ProbeFTLoss(margin=0.3, itm_weight=0.7, contrastive_weight=1.3)
    got = loss(x, pos.reshape(b * kp, d), pos_mask, neg.reshape(b * kn, d), neg_mask, scale)
    total, itm, c = brute_force(x, pos, pos_mask, neg, neg_mask, 10.0, 0.3, 0.7, 1.3)
    assert float(got["itm"]) == pytest.approx(itm, rel=1e-9)
    assert float(got["contrastive"]) == pytest.approx(c, rel=1e-9)
    assert float(got["loss"]) == pytest.approx(total, rel=1e-9)


def test_a_wide_margin_between_prompt_and_swap_costs_nothing():
    x = torch.eye(3, dtype=torch.float64)
    pos = torch.stack([x, x], dim=1).reshape(6, 3)  # caption = prompt = the image's own direction
    neg = -x  # the swap points away
    out = ProbeFTLoss(margin=0.5)(x, pos, torch.ones(3, 2, dtype=torch.bool), neg, torch.ones(3, 1, dtype=torch.bool), torch.tensor(1.0))
    assert float(out["itm_image"]) == 0.0 and float(out["itm_caption"]) == 0.0


def test_gradients_flow_to_both_towers():
    torch.manual_seed(0)
    x = _unit(4, 6).requires_grad_()
    pos = _unit(8, 6).requires_grad_()
    neg = _unit(4, 6).requires_grad_()
    out = ProbeFTLoss()(x, pos, torch.ones(4, 2, dtype=torch.bool), neg, torch.ones(4, 1, dtype=torch.bool), torch.tensor(5.0))
    out["loss"].backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in (x, pos, neg))


def test_choose_swap_takes_only_predicate_and_composition_swaps():
    texts = {"positives": [{"text": "a man riding a horse"}, {"text": "man riding horse"}],
             "negatives": [{"text": "horse riding man", "positive": 1, "transform": "f_rel:swap"},
                           {"text": "man eating horse", "positive": 1, "transform": "f_rel:replace_relation"},
                           {"text": "a man riding a big horse", "positive": 0, "transform": "negclip:ADJ"}]}
    assert choose_swap(texts, random.Random(0)) == (1, 1)
    assert choose_swap({"positives": [], "negatives": []}, random.Random(0)) is None
