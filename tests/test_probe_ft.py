"""The Probe paper's fine-tuning loss (Schiappa et al. 2023, Sec. 5) against a brute-force reference."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from mosaictool import methods
from mosaictool.methods.probe_ft import DEFAULTS, choose_swap
from mosaictool.methods.probe_ft_loss import ProbeFTLoss
from train_fixtures import make_world, write_tiny_model


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
    got = loss.compute(x, pos.reshape(b * kp, d), pos_mask, neg.reshape(b * kn, d), neg_mask, scale)
    total, itm, c = brute_force(x, pos, pos_mask, neg, neg_mask, 10.0, 0.3, 0.7, 1.3)
    assert float(got["itm"]) == pytest.approx(itm, rel=1e-9)
    assert float(got["contrastive"]) == pytest.approx(c, rel=1e-9)
    assert float(got["loss"]) == pytest.approx(total, rel=1e-9)


def test_a_wide_margin_between_prompt_and_swap_costs_nothing():
    x = torch.eye(3, dtype=torch.float64)
    pos = torch.stack([x, x], dim=1).reshape(6, 3)  # caption = prompt = the image's own direction
    neg = -x  # the swap points away
    out = ProbeFTLoss(**{**DEFAULTS, "margin": 0.5}).compute(x, pos, torch.ones(3, 2, dtype=torch.bool), neg,
                                                             torch.ones(3, 1, dtype=torch.bool), torch.tensor(1.0))
    assert float(out["itm_image"]) == 0.0 and float(out["itm_caption"]) == 0.0


def test_gradients_flow_to_both_towers():
    torch.manual_seed(0)
    x = _unit(4, 6).requires_grad_()
    pos = _unit(8, 6).requires_grad_()
    neg = _unit(4, 6).requires_grad_()
    out = ProbeFTLoss(**DEFAULTS).compute(x, pos, torch.ones(4, 2, dtype=torch.bool), neg,
                                          torch.ones(4, 1, dtype=torch.bool), torch.tensor(5.0))
    out["loss"].backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in (x, pos, neg))


def test_choose_swap_takes_only_predicate_and_composition_swaps():
    texts = {"positives": [{"text": "a man riding a horse"}, {"text": "man riding horse"}],
             "negatives": [{"text": "horse riding man", "positive": 1, "transform": "f_rel:swap"},
                           {"text": "man eating horse", "positive": 1, "transform": "f_rel:replace_relation"},
                           {"text": "a man riding a big horse", "positive": 0, "transform": "negclip:ADJ"}]}
    assert choose_swap(texts, random.Random(0)) == (1, 1)
    assert choose_swap({"positives": [], "negatives": []}, random.Random(0)) is None


def test_select_fills_caption_prompt_and_swap(tmp_path):
    records = [json.loads(x) for x in make_world(tmp_path, n=2).read_text().splitlines()]
    method = methods.create("probe-ft")
    assert method.slots(0, 10) == (2, 1)
    sel = method.select(records[0], random.Random(0), 2, 1)
    texts = records[0]["texts"]
    # the fixture's only predicate / composition swaps: f_obj of positive 1, f_rel:replace_relation of positive 3
    assert (sel.pos[1], sel.neg[0]) in {(texts["positives"][1]["text"], texts["negatives"][2]["text"]),
                                        (texts["positives"][3]["text"], texts["negatives"][5]["text"])}
    assert sel.pos[0] == records[0]["caption"]
    assert method.select(records[0], random.Random(0), 2, 1) == sel  # deterministic from the rng
    plain = {**records[0], "texts": {"positives": texts["positives"], "negatives": texts["negatives"][:2]}}
    assert method.select(plain, random.Random(0), 2, 1).pos == [records[0]["caption"]]
    from mosaictool.errors import MosaicError

    with pytest.raises(MosaicError, match="predicate- or composition-swap negatives for --method probe-ft"):
        method.check_data([plain], "x.jsonl")
    with pytest.raises(MosaicError, match="--margin"):
        methods.create("probe-ft", {"margin": -1})


@pytest.mark.slow  # ~6 s: three steps of a tiny model
def test_trains_with_the_papers_sgd(tmp_path):
    """probe-ft trains end to end with --optimizer sgd; the updates are SGD's with momentum and L2 weight
    decay: w3 = w2 - lr_3 (mu buf_2 + g_3 + wd w2), buf_2 = (w1 - w2) / lr_2 (no decay on biases)."""
    from mosaictool.model import openclip
    from mosaictool.training import TrainConfig, train

    seen = {}

    def grab(step, metrics, model):
        params = dict(model.named_parameters())
        seen[step] = {n: (params[n].detach().clone(), params[n].grad.detach().clone(), metrics["lr"]) for n in WATCHED}

    data, model_cfg = make_world(tmp_path / "w", n=8), write_tiny_model(tmp_path)
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), model_config=str(model_cfg), batch_size=4, steps=3,
                      warmup=0, quiet=True, grad_clip=None, optimizer="sgd", momentum=0.5, lr=0.05, wd=0.01,
                      method="probe-ft", method_options={"margin": 0.3})
    final = train(cfg, on_step=grab)
    for name, wd in zip(WATCHED, (0.01, 0.0)):
        w1, _, _ = seen[1][name]
        w2, _, lr2 = seen[2][name]
        w3, g3, lr3 = seen[3][name]
        buf3 = 0.5 * (w1 - w2) / lr2 + g3 + wd * w2
        torch.testing.assert_close(w3, w2 - lr3 * buf3, rtol=1e-4, atol=1e-6, msg=name)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2, 3]
    assert all(m.keys() >= {"loss", "itm", "itm_image", "itm_caption", "contrastive"} for m in lines)
    assert all(m["itm_image"] > 0 for m in lines) and lines[0]["texts_per_image"] == 3.0  # caption, prompt, swap
    assert all(torch.isfinite(torch.tensor(m["loss"])) for m in lines)
    saved = openclip.load_checkpoint(final).meta["checkpoint"]["config"]
    assert saved["method"] == "probe-ft" and saved["method_options"]["margin"] == 0.3 and saved["optimizer"] == "sgd"


WATCHED = ("transformer.resblocks.0.mlp.c_fc.weight", "transformer.resblocks.0.mlp.c_fc.bias")


def test_optimizer_flags_are_checked():
    from mosaictool.errors import MosaicError
    from mosaictool.training import TrainConfig

    with pytest.raises(MosaicError, match="--optimizer 'lbfgs'"):
        TrainConfig(data="x", out="y", optimizer="lbfgs").resolved()
    with pytest.raises(MosaicError, match="--momentum 1.0"):
        TrainConfig(data="x", out="y", optimizer="sgd", momentum=1.0).resolved()


# ---- the paper's recipe and RelComp's synonym positives ---------------------------------


PAPER_APP_B = {"optimizer": "sgd", "lr": 1e-3, "momentum": 0.9, "wd": 1e-4, "batch_size": 128, "epochs": 40}


@pytest.mark.parametrize("recipe,lock_image,lock_text", [("paper", False, False), ("paper-text", True, False),
                                                         ("paper-vision", False, True)])
def test_recipes_are_app_b(tmp_path, recipe, lock_image, lock_text):
    """Schiappa et al. (2023), App. B: "stochastic gradient descent with a cosine learning rate scheduler ... 40 epochs
    ... batch size of 128, learning rate of .001, momentum 0.9, weight decay of .0001" (no warmup, no
    clipping named; our schedule is cosine after the warmup); (T) / (V) freeze the other tower. Fields
    given explicitly win."""
    import dataclasses

    from mosaictool.training import TrainConfig, with_recipe

    cfg = TrainConfig(data=str(tmp_path / "d"), out=str(tmp_path / "o"), method="probe-ft")
    got = with_recipe(cfg, recipe).resolved()
    assert {k: getattr(got, k) for k in PAPER_APP_B} == PAPER_APP_B
    assert (got.recipe, got.warmup, got.grad_clip, got.lock_image, got.lock_text) == (recipe, 0, None, lock_image, lock_text)
    assert got.method_options["synonym_positives"] is True
    mine = dataclasses.replace(cfg, lr=5e-4, epochs=2, method_options={"synonym_positives": False})
    got = with_recipe(mine, recipe, given={"lr", "epochs"}).resolved()
    assert (got.lr, got.epochs, got.batch_size, got.optimizer) == (5e-4, 2, 128, "sgd")
    assert got.method_options["synonym_positives"] is False


def test_train_recipe_paper_from_the_command_line(monkeypatch, tmp_path):
    """`train --method probe-ft --recipe paper` sets App. B's values; an explicit --lr (and others) wins."""
    from typer.testing import CliRunner

    import mosaictool.training.loop
    from mosaictool.cli import app

    seen = []
    monkeypatch.setattr(mosaictool.training.loop, "train", lambda cfg, **kw: seen.append(cfg) or "final.pt")
    base = ["train", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o"), "--method", "probe-ft", "--recipe", "paper"]
    result = CliRunner().invoke(app, base)
    assert result.exit_code == 0, result.output
    assert {k: getattr(seen[-1], k) for k in PAPER_APP_B} == PAPER_APP_B and seen[-1].warmup == 0 and seen[-1].grad_clip is None
    result = CliRunner().invoke(app, base + ["--lr", "3e-4", "--batch-size", "16", "--no-synonym-positives"])
    assert result.exit_code == 0, result.output
    cfg = seen[-1]
    assert (cfg.lr, cfg.batch_size, cfg.epochs, cfg.optimizer, cfg.momentum, cfg.wd) == (3e-4, 16, 40, "sgd", 0.9, 1e-4)
    assert cfg.method_options["synonym_positives"] is False


def _synonym_groups() -> dict[str, set[str]]:
    """Attribute -> its synonym group, read from the shipped vocab/synonyms.tsv here (heads chained)."""
    import csv

    path = Path(__file__).resolve().parents[1] / "vocab" / "synonyms.tsv"
    with open(path, encoding="utf-8") as f:
        head = {r["name"]: r["head"] for r in csv.DictReader(f, delimiter="\t") if r["kind"] == "attributes"}

    def top(w):
        while w in head:
            w = head[w]
        return w

    groups: dict[str, set[str]] = {}
    for w in head:
        groups.setdefault(top(w), {top(w)}).add(w)
    return {w: g for g in groups.values() for w in g}


LARGE_BED = {"caption": "A large bed with white sheets and blankets.",
             "texts": {"positives": [{"text": "A large bed with white sheets and blankets."}, {"text": "large bed"}],
                       "negatives": [{"text": "tiny bed", "positive": 1, "transform": "f_obj", "from": "large", "to": "tiny"}]}}


def test_composition_positives_take_a_synonym_as_relcomp():
    """Sec. 5 / Fig. 9: anchor "A large bed ...", positive "A giant bed ..." (compositions replaced by
    synonyms), negative "A tiny bed ..." (by antonyms). p is the swapped attribute's synonym, every
    synonym of the group drawn, never the word itself; predicate swaps and --no-synonym-positives keep p."""
    from mosaictool.methods.probe_ft import synonym_positive

    method = methods.create("probe-ft")
    group = _synonym_groups()["large"]
    got = {method.select(LARGE_BED, random.Random(seed), 2, 1).pos[1] for seed in range(60)}
    assert got == {f"{w} bed" for w in group - {"large"}} and len(got) >= 2
    sel = method.select(LARGE_BED, random.Random(0), 2, 1)
    assert sel.pos[0] == LARGE_BED["caption"] and sel.neg == ["tiny bed"]
    plain = methods.create("probe-ft", {"synonym_positives": False})
    assert plain.select(LARGE_BED, random.Random(0), 2, 1).pos == [LARGE_BED["caption"], "large bed"]
    rel = {"transform": "f_rel:replace_relation", "from": "riding", "to": "eating", "positive": 0}
    assert synonym_positive("man riding horse", rel, random.Random(0)) == "man riding horse"
    att = {"transform": "replace:att", "from": "large", "to": "tiny"}
    assert synonym_positive("a big dog", att, random.Random(0)) == "a big dog"  # the attribute is not in p
    assert synonym_positive("A LARGE dog, large", att, random.Random(0)).split()[1] in group - {"large"}
    assert "red" not in _synonym_groups()  # an attribute without synonyms: p unchanged
    assert synonym_positive("a red car", {"transform": "f_obj", "from": "red", "to": "blue"}, random.Random(0)) == "a red car"


# --- bad input (moved from test_bad_values.py) ---

def test_probe_ft_reads_the_swapped_attribute_of_a_slimmed_record(tmp_path):
    """Training keeps a slim copy of each record: the negative's `from` (the attribute an attribute
    swap replaced), which probe-ft's synonym positives read, must survive it."""
    from PIL import Image

    from mosaictool import methods
    from mosaictool.training.traindata import TrainData

    Image.new("RGB", (8, 8), "red").save(tmp_path / "a.png")
    negative = {"text": "a tiny bed", "kind": "graph", "positive": 1, "transform": "f_attr:replace", "from": "large",
                "to": "tiny"}
    record = {"id": 1, "image": "a.png", "caption": "a large bed", "texts": {
        "positives": [{"text": "a large bed", "kind": "caption"}, {"text": "a large bed", "kind": "object"}],
        "negatives": [negative]}}
    (tmp_path / "r.jsonl").write_text(json.dumps(record) + "\n")
    data = TrainData.load(str(tmp_path / "r.jsonl"), method=methods.create("probe-ft", {}))
    assert data.records[0]["texts"]["negatives"][0]["from"] == "large"

