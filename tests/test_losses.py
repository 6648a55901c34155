"""The contrastive loss against brute-force references written straight from the formulas."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mosaictool.model.losses import MultiPositiveContrastiveLoss
from mosaictool.training.batch import fill_slots


def brute_force(img, pos, pos_mask, neg, neg_mask, scale):
    """Singh et al. (2023), Sec. 3.5, with means, one image and one text at a time."""
    b, kp = pos_mask.shape
    kn = neg_mask.shape[1]
    texts = [(pos[i * kp + k], i) for i in range(b) for k in range(kp) if pos_mask[i, k]]
    all_texts = [t for t, _ in texts] + [neg[i * kn + k] for i in range(b) for k in range(kn) if neg_mask[i, k]]
    i2t_terms = []
    for i in range(b):
        denom = math.log(sum(math.exp(scale * float(img[i] @ t)) for t in all_texts))
        own = [float(img[i] @ t) for t, owner in texts if owner == i]
        if own:
            i2t_terms.append(-sum(scale * s - denom for s in own) / len(own))
    t2i_terms = []
    for t, owner in texts:
        denom = math.log(sum(math.exp(scale * float(img[j] @ t)) for j in range(b)))
        t2i_terms.append(-(scale * float(img[owner] @ t) - denom))
    i2t = sum(i2t_terms) / len(i2t_terms)
    t2i = sum(t2i_terms) / len(t2i_terms)
    return (i2t + t2i) / 2


def random_case(seed, b=5, kp=3, kn=4, d=8, ties=False):
    g = torch.Generator().manual_seed(seed)
    img = F.normalize(torch.randn(b, d, generator=g, dtype=torch.float64), dim=-1)
    pos = F.normalize(torch.randn(b * kp, d, generator=g, dtype=torch.float64), dim=-1)
    neg = F.normalize(torch.randn(b * kn, d, generator=g, dtype=torch.float64), dim=-1)
    pos_mask = torch.rand(b, kp, generator=g) < 0.6
    pos_mask[:, 0] = True  # every image has a positive
    neg_mask = torch.rand(b, kn, generator=g) < 0.5
    neg_mask[1] = False  # an image without any negative
    if ties:
        img[2] = img[0]  # two identical images
        pos[kp] = pos[0]  # two identical positive texts of different images
        if kn:
            neg[:] = neg[0]  # every negative the same
    pos_slots = torch.where(pos_mask.reshape(-1, 1), pos, 0.0)
    neg_slots = torch.where(neg_mask.reshape(-1, 1), neg, 0.0)
    return img, pos_slots, pos_mask, neg_slots, neg_mask


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("kp,kn", [(1, 0), (1, 1), (3, 6), (2, 1)])
def test_matches_brute_force(seed, ties, kp, kn):
    img, pos, pm, neg, nm = random_case(seed, kp=kp, kn=kn, ties=ties)
    scale = torch.tensor(7.3, dtype=torch.float64)
    out = MultiPositiveContrastiveLoss()(img, pos, pm, neg, nm, scale)
    assert float(out["loss"]) == pytest.approx(brute_force(img, pos, pm, neg, nm, 7.3), rel=1e-10, abs=1e-12)
    assert torch.isfinite(out["loss"])


def test_rows_without_negatives_and_all_negatives_empty():
    img, pos, pm, neg, nm = random_case(0, kp=2, kn=3)
    nm[:] = False
    out = MultiPositiveContrastiveLoss()(img, pos, pm, torch.zeros_like(neg), nm, torch.tensor(5.0, dtype=torch.float64))
    assert float(out["loss"]) == pytest.approx(brute_force(img, pos, pm, neg, nm, 5.0), rel=1e-10)


def test_clip_case_equals_open_clip_cliploss():
    from open_clip.loss import ClipLoss

    g = torch.Generator().manual_seed(1)
    img = F.normalize(torch.randn(6, 16, generator=g), dim=-1)
    txt = F.normalize(torch.randn(6, 16, generator=g), dim=-1)
    scale = torch.tensor(20.0)
    ours = MultiPositiveContrastiveLoss()(
        img, txt, torch.ones(6, 1, dtype=torch.bool), txt[:0], torch.zeros(6, 0, dtype=torch.bool), scale
    )["loss"]
    theirs = ClipLoss()(img, txt, scale)
    assert float(ours) == pytest.approx(float(theirs), rel=1e-6)


def test_negclip_case_equals_negclip_formula():
    """NegCLIP: CE over [captions; negatives] for images, CE over images for the captions only."""
    g = torch.Generator().manual_seed(2)
    img = F.normalize(torch.randn(4, 8, generator=g), dim=-1)
    cap = F.normalize(torch.randn(4, 8, generator=g), dim=-1)
    neg = F.normalize(torch.randn(4, 8, generator=g), dim=-1)
    s = 10.0
    li = s * img @ torch.cat([cap, neg]).T
    lt = s * cap @ img.T
    ref = (F.cross_entropy(li, torch.arange(4)) + F.cross_entropy(lt, torch.arange(4))) / 2
    ours = MultiPositiveContrastiveLoss()(
        img, cap, torch.ones(4, 1, dtype=torch.bool), neg, torch.ones(4, 1, dtype=torch.bool), torch.tensor(s)
    )["loss"]
    assert float(ours) == pytest.approx(float(ref), rel=1e-6)


def test_empty_slots_get_no_gradient_and_do_not_matter():
    """Whatever sits in an empty slot, the loss and the other gradients are unchanged."""
    img, pos, pm, neg, nm = random_case(3, kp=3, kn=2)
    loss_fn = MultiPositiveContrastiveLoss()
    scale = torch.tensor(4.0, dtype=torch.float64)
    junk_pos = torch.where(pm.reshape(-1, 1), pos, 0.123)
    junk_neg = torch.where(nm.reshape(-1, 1), neg, -0.7)
    a = loss_fn(img, pos, pm, neg, nm, scale)["loss"]
    junk_pos.requires_grad_(True)
    b = loss_fn(img, junk_pos, pm, junk_neg, nm, scale)["loss"]
    assert float(a) == pytest.approx(float(b.detach()), rel=1e-12)
    b.backward()
    assert torch.all(junk_pos.grad[~pm.reshape(-1)] == 0)


def test_fill_slots_scatters_in_row_major_order():
    mask = torch.tensor([[True, False, True], [False, True, False]])
    feats = torch.arange(6, dtype=torch.float32).view(3, 2).requires_grad_(True)
    slots = fill_slots(feats, mask)
    assert slots.shape == (6, 2)
    assert slots[0].tolist() == [0, 1] and slots[2].tolist() == [2, 3] and slots[4].tolist() == [4, 5]
    assert slots[1].tolist() == [0, 0]
    slots.sum().backward()
    assert feats.grad.tolist() == [[1, 1]] * 3


def test_gradient_matches_autograd_of_brute_force_expression():
    """The vectorised loss's gradient equals that of a loop-built expression (torch, not floats)."""
    img, pos, pm, neg, nm = random_case(5, kp=3, kn=2)
    img = img.clone().requires_grad_(True)
    scale = torch.tensor(3.0, dtype=torch.float64)
    MultiPositiveContrastiveLoss()(img, pos, pm, neg, nm, scale)["loss"].backward()
    ours = img.grad.clone()

    img2 = img.detach().clone().requires_grad_(True)
    b, kp = pm.shape
    kn = nm.shape[1]
    pos_list = [(pos[i * kp + k], i) for i in range(b) for k in range(kp) if pm[i, k]]
    texts = torch.stack([t for t, _ in pos_list] + [neg[i * kn + k] for i in range(b) for k in range(kn) if nm[i, k]])
    i2t = []
    for i in range(b):
        lse = torch.logsumexp(scale * texts @ img2[i], 0)
        own = [scale * t @ img2[i] - lse for t, o in pos_list if o == i]
        i2t.append(-torch.stack(own).mean())
    t2i = [-(scale * t @ img2[o] - torch.logsumexp(scale * img2 @ t, 0)) for t, o in pos_list]
    ((torch.stack(i2t).mean() + torch.stack(t2i).mean()) / 2).backward()
    torch.testing.assert_close(ours, img2.grad, rtol=1e-10, atol=1e-12)


def brute_force_with_ids(img, pos, pos_mask, neg, neg_mask, pos_ids, neg_ids, scale):
    """Equal ids = the same text: P(i) = positive columns whose text i owns; negatives equal to one of
    i's positives leave i's row; images owning a text leave that text's t2i denominator."""
    b, kp = pos_mask.shape
    kn = neg_mask.shape[1]
    pos_cols = [(pos[i * kp + k], int(pos_ids[i, k]), i) for i in range(b) for k in range(kp) if pos_mask[i, k]]
    neg_cols = [(neg[i * kn + k], int(neg_ids[i, k])) for i in range(b) for k in range(kn) if neg_mask[i, k]]
    owned = [{int(pos_ids[i, k]) for k in range(kp) if pos_mask[i, k]} for i in range(b)]
    i2t_terms, t2i_terms = [], []
    for i in range(b):
        columns = [(t, tid, True) for t, tid, _ in pos_cols] + [(t, tid, False) for t, tid in neg_cols if tid not in owned[i]]
        denom = math.log(sum(math.exp(scale * float(img[i] @ t)) for t, _, _ in columns))
        mine = [scale * float(img[i] @ t) - denom for t, tid, is_pos in columns if is_pos and tid in owned[i]]
        if mine:
            i2t_terms.append(-sum(mine) / len(mine))
    for t, tid, owner in pos_cols:
        images = [j for j in range(b) if j == owner or tid not in owned[j]]
        denom = math.log(sum(math.exp(scale * float(img[j] @ t)) for j in images))
        t2i_terms.append(-(scale * float(img[owner] @ t) - denom))
    return (sum(i2t_terms) / len(i2t_terms) + sum(t2i_terms) / len(t2i_terms)) / 2


@pytest.mark.parametrize("seed", range(6))
def test_equal_texts_are_the_same_positive(seed):
    img, pos, pm, neg, nm = random_case(seed, b=5, kp=3, kn=3)
    g = torch.Generator().manual_seed(100 + seed)
    # few distinct texts, so that images share positives and negatives equal other images' positives
    pos_ids = torch.randint(0, 6, pm.shape, generator=g)
    neg_ids = torch.randint(3, 9, nm.shape, generator=g)
    for i in range(5):  # within one image texts are unique (template dedups them)
        pos_ids[i] = torch.randperm(6, generator=g)[:3]
        neg_ids[i] = torch.tensor([x for x in torch.randperm(9, generator=g).tolist() if x not in pos_ids[i].tolist()][:3])
    # equal ids must mean equal features
    bank = F.normalize(torch.randn(9, 8, generator=g, dtype=torch.float64), dim=-1)
    pos = torch.where(pm.reshape(-1, 1), bank[pos_ids.reshape(-1)], 0.0)
    neg = torch.where(nm.reshape(-1, 1), bank[neg_ids.reshape(-1)], 0.0)
    scale = torch.tensor(6.0, dtype=torch.float64)
    out = MultiPositiveContrastiveLoss()(img, pos, pm, neg, nm, scale, pos_ids, neg_ids)
    assert float(out["loss"]) == pytest.approx(brute_force_with_ids(img, pos, pm, neg, nm, pos_ids, neg_ids, 6.0), rel=1e-10)
    distinct = MultiPositiveContrastiveLoss()(img, pos, pm, neg, nm, scale)
    assert float(distinct["loss"]) == pytest.approx(brute_force(img, pos, pm, neg, nm, 6.0), rel=1e-10)
