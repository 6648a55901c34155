"""MosaiCLIP's P(i) by sub-graph containment (Singh et al. 2023, Sec. 3.5) against a brute-force reference
written from the paper's formula, in one process and on 2 gloo ranks; the keys' way from records
(JSONL and shards) to the batch; curriculum stage 1 = one positive-negative pair."""

from __future__ import annotations

import json
import os
import random
from itertools import combinations
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from mosaictool import methods
from mosaictool.model.losses import MultiPositiveContrastiveLoss
from mosaictool.model.text_ids import text_id
from train_fixtures import free_port, spawned_rank

INPUTS = ("img", "pos", "pm", "neg", "nm", "scale", "pos_ids", "neg_ids", "image_keys", "pos_keys", "neg_keys")
GRAD_KEYS = ("img", "pos", "neg", "scale")


# ---- the reference ------------------------------------------------------------------------------


def reference(x: dict, weighting: str = "mean", denominators: str = "masked") -> torch.Tensor:
    """Singh et al. (2023), Sec. 3.5, with means, one image and one text at a time over explicit sets:

    G_i   = the key set of image i; key(t) = 0 for a text without a key
    P(i)  = {positive texts t : key(t) in G_i, or t equals one of i's own positive texts}
    i2t   = mean_i -1/|P(i)| sum_{k in P(i)} log exp(s u_i.v_k) / sum_{j in D(i)} exp(s u_i.v_j),
            D(i) = every positive text + the negatives t with neither key(t) in G_i nor t equal to one of i's
    t2i   = mean over positive texts t (owner o) of -log exp(s u_o.v_t) / sum_{j in E(t)} exp(s u_j.v_t),
            E(t) = {o} + the images j with neither key(t) in G_j nor t equal to one of j's texts
    loss  = (i2t + t2i) / 2
    weighting "paper": the paper's sums, sum_i i2t_i and sum_t t2i_t, each divided by the number of
    images with a positive (so t2i weighs |P| times i2t, as in the paper, at a batch-free scale).
    denominators "all": the equations' sums as written, D(i) = every text, E(t) = every image.
    """
    img, pos, neg, s = x["img"], x["pos"], x["neg"], x["scale"]
    b, kp = x["pm"].shape
    kn = x["nm"].shape[1]
    G = [{int(k) for k in x["image_keys"][i] if int(k) != 0} for i in range(b)]
    positives = [(pos[i * kp + k], int(x["pos_ids"][i, k]), int(x["pos_keys"][i, k]), i)
                 for i in range(b) for k in range(kp) if x["pm"][i, k]]
    negatives = [(neg[i * kn + k], int(x["neg_ids"][i, k]), int(x["neg_keys"][i, k]))
                 for i in range(b) for k in range(kn) if x["nm"][i, k]]
    owned = [{tid for _, tid, _, o in positives if o == i} for i in range(b)]

    def true_of(i, tid, key):
        return (key != 0 and key in G[i]) or tid in owned[i]

    def masked(i, tid, key):
        return denominators == "masked" and true_of(i, tid, key)

    i2t = []
    for i in range(b):
        denominator = [v for v, _, _, _ in positives] + [v for v, tid, key in negatives if not masked(i, tid, key)]
        lse = torch.logsumexp(s * torch.stack(denominator) @ img[i], 0)
        P = [v for v, tid, key, _ in positives if true_of(i, tid, key)]
        if P:
            i2t.append(-torch.stack([s * v @ img[i] - lse for v in P]).mean())
    t2i = []
    for v, tid, key, o in positives:
        images = [j for j in range(b) if j == o or not masked(j, tid, key)]
        t2i.append(-(s * v @ img[o] - torch.logsumexp(s * img[images] @ v, 0)))
    if weighting == "paper":
        return (torch.stack(i2t).sum() + torch.stack(t2i).sum()) / len(i2t) / 2
    return (torch.stack(i2t).mean() + torch.stack(t2i).mean()) / 2


def make_case(seed: int, b: int = 8, kp: int = 3, kn: int = 3, d: int = 8) -> dict:
    """Random images over 5 atoms; a key = a set of 1 or 2 atoms (nested: {a} inside {a, b}); an
    image's key set = every such subset of its atoms (image 1 has no keys: an old record), in a
    row with zeros and a duplicate in random places. A bank of 10 texts (a quarter without key)
    gives the slots: equal texts across images (same id, key and features), empty slots, image 2
    without negatives."""
    g = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    code = {}

    def key_of(atoms) -> int:
        return code.setdefault(frozenset(atoms), 1000 + len(code))

    atoms = [set(rng.sample(range(5), rng.randint(1, 3))) for _ in range(b)]
    rows = []
    for i in range(b):
        keys = [] if i == 1 else [key_of(c) for r in (1, 2) for c in combinations(sorted(atoms[i]), r)]
        keys += keys[:1] + [0] * rng.randint(0, 3)
        rng.shuffle(keys)
        rows.append(keys)
    width = max(map(len, rows))
    image_keys = torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long)

    n_bank = 10
    bank_keys = [0 if rng.random() < 0.25 else key_of(rng.sample(range(5), rng.randint(1, 2))) for _ in range(n_bank)]
    bank = F.normalize(torch.randn(n_bank, d, generator=g, dtype=torch.float64), dim=-1)
    pm = torch.rand(b, kp, generator=g) < 0.7
    pm[:, 0] = True
    nm = torch.rand(b, kn, generator=g) < 0.6
    nm[2] = False
    pos_idx = torch.zeros(b, kp, dtype=torch.long)
    neg_idx = torch.zeros(b, kn, dtype=torch.long)
    for i in range(b):  # within one image texts are unique (template dedups them)
        order = rng.sample(range(n_bank), kp + kn)
        pos_idx[i], neg_idx[i] = torch.tensor(order[:kp]), torch.tensor(order[kp:])
    keys = torch.tensor(bank_keys)

    def slots(idx, mask):
        return (torch.where(mask.reshape(-1, 1), bank[idx.reshape(-1)], 0.0), torch.where(mask, idx + 1, 0),
                torch.where(mask, keys[idx], 0))

    pos, pos_ids, pos_keys = slots(pos_idx, pm)
    neg, neg_ids, neg_keys = slots(neg_idx, nm)
    img = F.normalize(torch.randn(b, d, generator=g, dtype=torch.float64), dim=-1)
    img[3] = img[0]  # two identical images
    return {"img": img, "pos": pos, "pm": pm, "neg": neg, "nm": nm, "scale": torch.tensor(5.5, dtype=torch.float64),
            "pos_ids": pos_ids, "neg_ids": neg_ids, "image_keys": image_keys, "pos_keys": pos_keys,
            "neg_keys": neg_keys}


def run_loss(x: dict, **kw) -> dict:
    return MultiPositiveContrastiveLoss(**kw)(*(x[k] for k in INPUTS))


def grads(value: torch.Tensor, x: dict) -> dict:
    inputs = [x[k] for k in GRAD_KEYS]
    out = torch.autograd.grad(value, inputs, allow_unused=True, materialize_grads=True)
    return dict(zip(GRAD_KEYS, out))


def leafs(x: dict) -> dict:
    x = {k: v.detach().clone() for k, v in x.items()}
    for k in GRAD_KEYS:
        x[k].requires_grad_(True)
    return x


# ---- the loss -----------------------------------------------------------------------------------


@pytest.mark.parametrize("denominators", ["masked", "all"])
@pytest.mark.parametrize("weighting", ["mean", "paper"])
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kp,kn", [(3, 3), (1, 1), (2, 0)])
def test_loss_and_gradients_match_the_paper_formula(seed, kp, kn, weighting, denominators):
    x = leafs(make_case(seed, kp=kp, kn=kn))
    ours = run_loss(x, weighting=weighting, denominators=denominators)["loss"]
    ref = reference(x, weighting, denominators)
    assert ours.item() == pytest.approx(ref.item(), rel=1e-10)
    ours_grads, ref_grads = grads(ours, x), grads(ref, x)
    for name in GRAD_KEYS:
        torch.testing.assert_close(ours_grads[name], ref_grads[name], rtol=1e-9, atol=1e-12, msg=name)


def test_containment_moves_texts_between_positives_and_denominators():
    """The case the equal-text rule missed: "a star" inside image 1's "a red star" graph."""
    star, red_star, cross = 11, 12, 13
    g = torch.Generator().manual_seed(0)
    unit = lambda n: F.normalize(torch.randn(n, 4, generator=g, dtype=torch.float64), dim=-1)  # noqa: E731
    x = {"img": unit(2), "pos": unit(2), "pm": torch.ones(2, 1, dtype=torch.bool), "neg": unit(2),
         "nm": torch.ones(2, 1, dtype=torch.bool), "scale": torch.tensor(3.0, dtype=torch.float64),
         "pos_ids": torch.tensor([[1], [2]]),  # image 0: "a star"; image 1: "a red star"
         "neg_ids": torch.tensor([[3], [4]]),  # image 0: "a cross"; image 1: "a star" said differently
         "pos_keys": torch.tensor([[star], [red_star]]), "neg_keys": torch.tensor([[cross], [star]]),
         "image_keys": torch.tensor([[star, 0], [red_star, star]])}
    with_keys = float(run_loss(x)["loss"])
    assert with_keys == pytest.approx(float(reference(x)), rel=1e-10)
    plain = float(MultiPositiveContrastiveLoss()(*(x[k] for k in INPUTS[:8]))["loss"])
    assert with_keys != pytest.approx(plain, rel=1e-6)  # the keys change P(1), D(1) and E("a star")
    no_keys = {**x, "image_keys": torch.zeros(2, 0, dtype=torch.long)}
    assert float(run_loss(no_keys)["loss"]) == pytest.approx(plain, rel=1e-12)  # keyless: the equal-text loss


def test_masked_denominators_differ_from_the_equations_exactly_where_a_text_is_true_of_another_image():
    """Two images, one positive and one negative each. With keys no text shares with the other image the
    masked loss is the equations' (denominators="all") to the bit; a negative of image 1 true of image 0
    changes i2t only (image 0's row), a positive of image 0 true of image 1 changes t2i too (its column)."""
    a, b, c, d = 21, 22, 23, 24
    g = torch.Generator().manual_seed(1)
    unit = lambda n: F.normalize(torch.randn(n, 4, generator=g, dtype=torch.float64), dim=-1)  # noqa: E731
    base = {"img": unit(2), "pos": unit(2), "pm": torch.ones(2, 1, dtype=torch.bool), "neg": unit(2),
            "nm": torch.ones(2, 1, dtype=torch.bool), "scale": torch.tensor(3.0, dtype=torch.float64),
            "pos_ids": torch.tensor([[1], [2]]), "neg_ids": torch.tensor([[3], [4]]),
            "pos_keys": torch.tensor([[a], [b]]), "neg_keys": torch.tensor([[c], [d]]),
            "image_keys": torch.tensor([[a, 0], [b, 0]])}

    def both(x):
        return [{k: float(v) for k, v in run_loss(x, denominators=rule).items()} for rule in ("masked", "all")]

    masked, literal = both(base)
    assert masked == literal  # nothing shared: the same loss, term by term
    negative_shared = {**base, "image_keys": torch.tensor([[a, d], [b, 0]])}  # image 1's negative is true of image 0
    masked, literal = both(negative_shared)
    assert masked["i2t"] != literal["i2t"] and masked["t2i"] == literal["t2i"]
    assert masked["i2t"] < literal["i2t"]  # a term fewer in image 0's denominator
    positive_shared = {**base, "image_keys": torch.tensor([[a, 0], [b, a]])}  # image 0's positive is true of image 1
    masked, literal = both(positive_shared)
    assert masked["t2i"] != literal["t2i"]
    for x in (negative_shared, positive_shared):
        for rule in ("masked", "all"):
            assert float(run_loss(x, denominators=rule)["loss"]) == pytest.approx(float(reference(x, denominators=rule)), rel=1e-12)


# ---- 2 gloo ranks = 1 process ---------------------------------------------------------------------


def _half(x: dict, rank: int, world: int) -> dict:
    """Rank `rank`'s images and their slots; key rows cut to this half's widest (+ 2 zero columns on
    rank 1), so the ranks' K differ."""
    b = x["img"].shape[0] // world
    kp, kn = x["pm"].shape[1], x["nm"].shape[1]
    part = {}
    for k, v in x.items():
        per_slot = {"pos": kp, "neg": kn}.get(k)
        if k == "scale":
            part[k] = v
        elif per_slot is not None:
            part[k] = v[rank * b * per_slot:(rank + 1) * b * per_slot]
        else:
            part[k] = v[rank * b:(rank + 1) * b]
    rows = [[int(k) for k in row if k != 0] for row in part["image_keys"]]
    width = max(map(len, rows)) + 2 * rank
    part["image_keys"] = torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long)
    return leafs(part)


def _worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    from mosaictool.training import distributed

    info = distributed.init("cpu", timeout_s=60)
    result = {}
    for local_loss in (False, True):
        part = _half(make_case(3), rank, world)
        terms = run_loss(part, local_loss=local_loss, rank=rank, world_size=world)
        result[local_loss] = {"terms": {k: v.item() for k, v in terms.items()}, "grads": grads(terms["loss"], part),
                              "width": part["image_keys"].shape[1]}
    torch.save(result, f"{out}.{rank}")
    distributed.shutdown(info)


@pytest.mark.slow  # two spawned processes importing torch: ~8 s of CPU
def test_two_gloo_ranks_equal_one_process(tmp_path):
    """Global and --local-loss: the terms averaged over ranks are the 1-process terms; each rank's
    gradients / world size (DDP's average) are the 1-process gradients of its half of the batch."""
    world, out = 2, str(tmp_path / "rank")
    torch.multiprocessing.spawn(spawned_rank, args=(_worker, world, free_port(), out), nprocs=world)
    ranks = [torch.load(f"{out}.{r}") for r in range(world)]
    x = leafs(make_case(3))
    single = run_loss(x)
    single_grads = grads(single["loss"], x)
    assert single["loss"].item() == pytest.approx(reference(x).item(), rel=1e-10)
    b = x["img"].shape[0] // world
    slots = {"img": 1, "pos": x["pm"].shape[1], "neg": x["nm"].shape[1]}
    for local_loss in (False, True):
        assert ranks[0][local_loss]["width"] != ranks[1][local_loss]["width"]  # padded to one width when gathered
        for name, value in single.items():
            mean = sum(r[local_loss]["terms"][name] for r in ranks) / world
            assert mean == pytest.approx(value.item(), rel=1e-9), (name, local_loss)
        got = sum(r[local_loss]["grads"]["scale"] for r in ranks) / world
        torch.testing.assert_close(got, single_grads["scale"], rtol=1e-7, atol=1e-9)
        for name, n in slots.items():
            for r, rank in enumerate(ranks):
                torch.testing.assert_close(rank[local_loss]["grads"][name] / world,
                                           single_grads[name][r * b * n:(r + 1) * b * n], rtol=1e-7, atol=1e-9,
                                           msg=f"{name} rank {r} local_loss={local_loss}")


# ---- records -> batch -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tiny_worlds):
    return tiny_worlds(n=8)


def _no_tokens(texts: list[str]) -> torch.Tensor:
    return torch.zeros(len(texts), 16, dtype=torch.long)


def _batches(spec: str, method: str) -> list:
    """Two micro-batches of 4 anchors + 4 hard images, through TrainData / BatchPlan / TrainDataset."""
    from mosaictool.training.loader import TrainDataset
    from mosaictool.training.sampler import BatchPlan, SamplerConfig
    from mosaictool.training.traindata import TrainData
    from mosaictool.training.transform import ImageTransform

    m = methods.create(method)
    data = TrainData.load(spec, method=m)
    cfg = SamplerConfig(method=m, batch_size=4, seed=0, use_hard=True)
    plan = BatchPlan(len(data), cfg, rank=0, world_size=1, start=0, stop=2, hard=data.hard)
    dataset = TrainDataset(data, cfg, ImageTransform(32), _no_tokens)
    return [dataset.collate([dataset[s] for s in plan.micro_batch(g)]) for g in range(2)]


def test_batch_keys_are_the_records_keys_from_jsonl_and_shards(world, tmp_path):
    from mosaictool.stages.shard import write_shards
    from mosaictool.training.batch import Features

    data, _ = world
    by_index = [json.loads(line) for line in Path(data).read_text().splitlines()]
    key_of_text = {text_id(t["text"]): t["key"] for r in by_index for side in ("positives", "negatives")
                   for t in r["texts"][side]}
    write_shards(by_index, out=tmp_path / "shards", image_root=Path(data).parent, shard_size=5)
    from_jsonl = _batches(str(data), "mosaiclip")
    from_shards = _batches(str(tmp_path / "shards"), "mosaiclip")
    for batch, other in zip(from_jsonl, from_shards):
        for field in ("image_keys", "pos_keys", "neg_keys", "pos_ids", "neg_ids"):
            torch.testing.assert_close(getattr(batch, field), getattr(other, field))
        for row, index in enumerate(batch.indices.tolist()):
            record = by_index[index]
            got = {int(k) for k in batch.image_keys[row] if k != 0}
            assert got == {text_id(k) for k in record["subgraph_keys"]} and len(got) == len(record["subgraph_keys"])
            for ids, keys in ((batch.pos_ids, batch.pos_keys), (batch.neg_ids, batch.neg_keys)):
                for tid, key in zip(ids[row].tolist(), keys[row].tolist()):
                    expected = key_of_text[tid] if tid else None
                    assert key == (text_id(expected) if expected else 0)
            assert not set(batch.neg_keys[row].tolist()) & got  # no negative true of its image (slim records too)
        assert batch.neg_keys.eq(0).logical_and(batch.neg_mask).sum() == 0  # mosaiclip: graph negatives only, all keyed
    one = torch.tensor(1.0)
    joined = Features.cat([Features(image=b.images, pos=b.images, pos_mask=b.pos_mask, neg=b.images, neg_mask=b.neg_mask,
                                    logit_scale=one, image_keys=b.image_keys, pos_keys=b.pos_keys, neg_keys=b.neg_keys)
                           for b in from_jsonl], one)
    width = max(b.image_keys.shape[1] for b in from_jsonl)
    assert joined.image_keys.shape == (16, width)  # --accum-freq: rows joined, zero-padded to the widest
    for j, b in enumerate(from_jsonl):
        rows = joined.image_keys[8 * j:8 * (j + 1)]
        assert torch.equal(rows[:, :b.image_keys.shape[1]], b.image_keys) and not rows[:, b.image_keys.shape[1]:].any()
    for method in ("clip", "negclip"):  # their loss stays the equal-text one: no keys in their batches
        batch = _batches(str(data), method)[0]
        assert batch.image_keys is None and batch.pos_keys is None and batch.neg_keys is None


# ---- curriculum stage 1 -----------------------------------------------------------------------------


def test_stage_one_is_one_positive_negative_pair_and_never_a_true_negative(world):
    """Curriculum stage 1 samples "(at max) a single positive and negative sub-graph per image" (Singh et
    al. 2023, Sec. 3.6): the negative comes with the positive it perturbs (here a sub-graph, not the
    caption); --max-pos 1 without the curriculum stays the caption alone."""
    records = [json.loads(line) for line in Path(world[0]).read_text().splitlines()]
    m = methods.create("mosaiclip", {"curriculum": True, "curriculum_split": 0.5})
    caption_only = methods.create("mosaiclip", {"max_pos": 1, "max_neg": 1})
    assert m.slots(0, 10) == (1, 1) and m.slots(5, 10) == (3, 6)  # App. H.1: 3 positives, 6 negatives
    entailed = sub_graph_positives = 0
    for seed in range(10):
        for i, rec in enumerate(records):
            positives = rec["texts"]["positives"]
            chosen = m.select(rec, random.Random(f"{seed}:{i}"), 1, 1)
            assert len(chosen.pos) == 1 and len(chosen.neg) == 1 and chosen.neg_keys[0] not in rec["subgraph_keys"]
            graph_negs = {n["text"]: n for n in rec["texts"]["negatives"] if n["kind"] == "graph"}
            perturbed = positives[graph_negs[chosen.neg[0]]["positive"]]
            assert chosen.pos == [perturbed["text"]] and chosen.pos_keys == [perturbed["key"]]
            assert graph_negs[chosen.neg[0]]["key"] == chosen.neg_keys[0]
            sub_graph_positives += chosen.pos != [rec["caption"]]
            entailed += any(n["key"] in rec["subgraph_keys"] for n in graph_negs.values())
            assert caption_only.select(rec, random.Random(f"{seed}:{i}"), 1, 1).pos == [rec["caption"]]
            full = m.select(rec, random.Random(f"{seed}:{i}"), 3, 6)
            keys = set(rec["subgraph_keys"])
            assert not set(full.neg_keys) & keys and set(full.pos_keys) <= keys
    assert entailed > 0  # some records have a negative true of their image ("a blue circle" beside one)
    assert sub_graph_positives > 0  # make_world's graph negatives perturb sub-graphs, never the caption
