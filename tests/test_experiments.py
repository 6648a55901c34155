"""The demo's experiments (mosaictool.demo.experiments): the ablation, the ladder from NegCLIP to
MosaiCLIP and the tower split; their statistics on fake outcomes, and the ladder's exact rungs on
real training."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mosaictool.demo import experiments
from mosaictool.demo.config import METHODS, DemoConfig
from mosaictool.demo.experiments import Context, ablate, common, ladder, towers
from mosaictool.training import train
from train_fixtures import tiny_config, weights


def _context(tmp_path, **cfg) -> Context:
    return Context(DemoConfig(device="cpu", **cfg), tmp_path, tmp_path, tmp_path, tmp_path, tmp_path)


def _fake_training(monkeypatch, accuracy):
    """finetune_all and evaluate_all replaced: every run "trains" a path naming its row, and scores
    hits drawn at accuracy(label, column) on 400 shared cases per column."""
    trained = []

    def fake_finetune(cfg, shards, base, out, rows=None, lock=None, shard_cache=None):
        trained.extend((label, method, dict(options), cfg.finetune_lr, cfg.hard_images, lock) for label, method, options in rows)
        return {label: [Path(f"{label}|{s}") for s in range(cfg.seeds)] for label, _, _ in rows}

    def fake_evaluate(models, world, bench, **kwargs):
        assert bench in ("world-val", "world")
        rng = np.random.default_rng(0)
        difficulty = {sub: rng.random(400) for sub in ("aro/VG-Relation", "aro/COCO-Order", "aro/VG-Attribution")}
        out = []
        for name, path in models:
            label = str(path).split("|")[0]
            for sub, col in (("aro/VG-Relation", "relation"), ("aro/COCO-Order", "order"), ("aro/VG-Attribution", "attribute")):
                hits = (difficulty[sub] < accuracy(label, col)) ^ (rng.random(400) < 0.03)
                out.append({"model": name, "subtask": sub, "metric": "hits", "hits": "".join("1" if h else "0" for h in hits)})
                out.append({"model": name, "subtask": sub, "metric": "micro_accuracy" if col == "attribute" else "accuracy",
                            "value": float(hits.mean())})
            out.append({"model": name, "subtask": "zeroshot/colour", "metric": "top1", "value": 0.9 + 0.001 * rng.random()})
            out.append({"model": name, "subtask": "headline", "metric": "accuracy", "value": 0.4})
        return out

    monkeypatch.setattr(common, "finetune_all", fake_finetune)
    monkeypatch.setattr(common, "evaluate_all", fake_evaluate)
    return trained


def test_registry_names_and_errors():
    assert {"ablate", "ladder", "towers"} <= set(experiments.names())
    with pytest.raises(Exception, match="choose from"):
        experiments.get("nope")


def test_ablation_trains_each_variant_at_mosaiclips_lr(tmp_path, monkeypatch):
    trained = _fake_training(monkeypatch, lambda label, col: 0.5 if ("max-pos 1" in label and col == "relation") else 0.7)
    ctx = _context(tmp_path, seeds=3)
    section = ablate.run(ctx)
    assert {lr for *_, lr, _, _ in trained} == {ctx.cfg.lr_for("MosaiCLIP")} and {m for _, m, *_ in trained} == {"mosaiclip"}
    assert [label for label, *_ in trained if "hard images" not in label] == [
        f"ablation {name}" for name, _, hard in ablate.ABLATIONS if hard is None]
    assert {label for label, _, _, _, hard, _ in trained if hard == "all"} == {
        "ablation + hard images (NegCLIP's batch; not the paper's)"}
    table = (tmp_path / "ablation.md").read_text().strip()
    row = next(line for line in table.splitlines() if "max-pos 1" in line)
    relation = row.split(" | ")[3]
    assert relation.startswith("-2") or relation.startswith("-1"), row  # about -20 points
    assert table in section.text and "Holm" in section.text


def test_ladder_ends_are_the_table_rows_and_the_middle_shares_one_lr(tmp_path):
    ctx = _context(tmp_path)
    rungs = ladder.variants(ctx)
    rows = {label: (method, options) for label, method, options in METHODS}
    oracle, negclip, last = rungs[0], rungs[ladder.FROM], rungs[-1]
    # NegCLIP's hard images: the twins (an oracle), then mined as its paper mined them (the table's row), then none
    assert (oracle.method, oracle.options, oracle.hard_images, oracle.hard_image_source) == (
        *rows["NegCLIP"], None, "twin-oracle")
    assert (negclip.label, negclip.method, negclip.options, negclip.hard_images, negclip.hard_image_source) == (
        "NegCLIP", *rows["NegCLIP"], None, "mined")
    assert (rungs[2].method, rungs[2].options, rungs[2].hard_images) == (*rows["NegCLIP"], "none")
    assert (last.label, last.method, last.options, last.hard_images) == ("MosaiCLIP", *rows["MosaiCLIP"], None)
    assert {v.lr for v in rungs if v.lr is not None} == {ctx.cfg.lr_for("NegCLIP")} == {ctx.cfg.lr_for("MosaiCLIP")}
    assert all(v.hard_images == "none" for v in rungs[2:-1])
    # every rung changes its predecessor's training, one named change at a time
    settings = [(v.method, tuple(sorted(v.options.items())), v.hard_images, v.hard_image_source) for v in rungs]
    assert len(set(settings)) == len(settings)
    with pytest.raises(Exception, match="one learning rate"):
        ladder.run(_context(tmp_path, finetune_lr=None, row_lrs={"NegCLIP": 1e-4, "MosaiCLIP": 2e-4}))


def test_ladder_ends_train_in_the_table_rows_run_folders(tmp_path, monkeypatch):
    """finetune_all names a run folder by its label and its settings' digest: the ladder's ends land in
    the table's NegCLIP and MosaiCLIP folders, so they are the same runs (bit for bit: not retrained)."""
    import mosaictool.training as training
    import mosaictool.training.data as training_data
    from mosaictool.demo.finetune import finetune_all

    recipe = tmp_path / "shards.recipe.json"
    recipe.write_text("{}")
    base = tmp_path / "base.pt"
    base.write_bytes(b"base")
    seen = []
    monkeypatch.setattr(training, "train_many", lambda tcs, shards=None: [seen.append(tc.out) or Path(tc.out) / "final.pt"
                                                                          for tc in tcs])
    monkeypatch.setattr(training.ShardCache, "decode", lambda self, spec, size: False)
    monkeypatch.setattr(training_data, "mine_for", lambda tc, shards=None: (SimpleNamespace(records=[{"id": "a"}]), [[]]))
    cfg = DemoConfig(device="cpu", seeds=1, parallel_runs=1)
    table = finetune_all(cfg, tmp_path / "shards", base, tmp_path)
    ctx = Context(cfg, tmp_path / "shards", tmp_path, base, tmp_path, tmp_path)
    monkeypatch.setattr(common, "finetune_all", finetune_all)
    rungs = ladder.variants(ctx)
    runs = common.finetune_variants(ctx, rungs)
    assert runs["NegCLIP"] == table["NegCLIP"] and runs["MosaiCLIP"] == table["MosaiCLIP"]
    # the oracle rung is NegCLIP with the twins: a run of its own
    oracle = rungs[0].name
    assert runs[oracle] != table["NegCLIP"] and not set(runs[oracle]) & {p for finals in table.values() for p in finals}


@pytest.fixture(scope="module")
def world(tiny_worlds):
    return tiny_worlds(n=12)


def _weights(world, out: Path, method: str, options: dict) -> dict:
    cfg = tiny_config(world, out, steps=4, method=method, method_options=options, record_hard_images=False, seed=3)
    return weights(train(cfg))


@pytest.mark.slow
def test_negclip_inside_mosaiclips_method_trains_the_same_weights(world, tmp_path):
    """Rung 3 re-expresses rung 2: NegCLIP's training (caption + its swap, no hard images) run by
    mosaiclip's code with --max-pos 1 --max-neg 1 --negatives negclip --no-containment --loss-weighting
    mean gives the same weights, bit for bit, after 4 steps."""
    rung1 = _weights(world, tmp_path / "negclip", "negclip", {})
    rung2 = _weights(world, tmp_path / "mosaiclip", "mosaiclip", ladder._NEGCLIP_IN_MOSAICLIP)
    assert rung1.keys() == rung2.keys()
    assert all(torch.equal(rung1[k], rung2[k]) for k in rung1)
    # and the next rung does change the training: the test can fail
    rung3 = _weights(world, tmp_path / "graph", "mosaiclip", {**ladder._NEGCLIP_IN_MOSAICLIP, "negatives": "graph"})
    assert not all(torch.equal(rung2[k], rung3[k]) for k in rung2)


def negclip_authors_loss(image, captions, negatives, logit_scale):
    """A transcription of NegCLIP's ClipLoss (vinid/neg_clip, src/open_clip/loss.py, one process): the
    text features are [captions; hard negatives], image->text logits over all of them, text->image
    logits of the captions only, cross-entropy with arange labels, the mean of the two."""
    texts = torch.cat([captions, negatives])
    logits_per_image = logit_scale * image @ texts.T
    logits_per_text = logit_scale * texts @ image.T
    labels = torch.arange(image.shape[0])
    return (torch.nn.functional.cross_entropy(logits_per_image, labels)
            + torch.nn.functional.cross_entropy(logits_per_text[: len(logits_per_image)], labels)) / 2


@pytest.mark.parametrize("weighting", ["mean", "paper"])
def test_negclip_loss_is_the_coarse_to_fine_loss_with_one_positive_and_one_negative(weighting):
    from mosaictool.model.losses import MultiPositiveContrastiveLoss

    g = torch.Generator().manual_seed(0)
    b, d = 6, 16
    feats = [torch.nn.functional.normalize(torch.randn(b, d, generator=g), dim=-1).requires_grad_() for _ in range(3)]
    scale = torch.tensor(20.0)
    ours = MultiPositiveContrastiveLoss(weighting=weighting)(
        feats[0], feats[1], torch.ones(b, 1, dtype=torch.bool), feats[2], torch.ones(b, 1, dtype=torch.bool), scale)["loss"]
    theirs_feats = [f.detach().clone().requires_grad_() for f in feats]
    theirs = negclip_authors_loss(*theirs_feats, scale)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
    ours.backward()
    theirs.backward()
    for a, t in zip(feats, theirs_feats):
        assert torch.allclose(a.grad, t.grad, atol=1e-7)


def test_ladder_steps_add_up_to_the_whole_gap_and_draw_the_waterfall(tmp_path, monkeypatch):
    # each rung after the first loses 2 relation points; NegCLIP's text towers measured by a stub
    names = [name for name, *_ in ladder.RUNGS]

    def accuracy(label, col):
        k = ladder.FROM if label == "NegCLIP" else len(names) - 1 if label == "MosaiCLIP" else int(label.split()[-1])
        return 0.8 - 0.02 * k if col == "relation" else 0.5

    trained = _fake_training(monkeypatch, accuracy)
    monkeypatch.setattr(ladder, "measure_text_towers", lambda ctx, runs: {
        "base": {"relation": 0.99, "order": 0.98, "attribute": 0.9, "tree-score": 1.0},
        **{name: {"relation": 0.9, "order": 0.95, "attribute": 0.8, "tree-score": 1.5} for name in runs}})
    section = ladder.run(_context(tmp_path, seeds=3))
    assert [label for label, *_ in trained][:1] == ["NegCLIP"] or "NegCLIP" in [label for label, *_ in trained]
    table = (tmp_path / "ladder.md").read_text()
    assert (tmp_path / "ladder.png").stat().st_size > 1000
    assert table.strip() in section.text
    gap = next(line for line in table.splitlines() if line.startswith("The whole gap"))
    whole = float(gap.split("relation ")[1].split(" ")[0])
    summed = float(gap.split(f"rungs {ladder.FROM + 1}-{len(names) - 1} sum ")[1].split(")")[0])
    # the gap runs from the table's NegCLIP (mined hard images) to MosaiCLIP; the oracle's step is apart
    assert whole == summed and whole == pytest.approx(-2 * (len(names) - 1 - ladder.FROM), abs=3)
    assert float(gap.split("(rung 0 to 1): relation ")[1].split(",")[0]) == pytest.approx(-2 * ladder.FROM, abs=3)
    assert f"| {len(names) - 1}. MosaiCLIP |" in table and "| base (before fine-tuning) |" in table


def test_towers_lock_one_tower_per_setting(tmp_path, monkeypatch):
    trained = _fake_training(monkeypatch, lambda label, col: 0.7 if "MosaiCLIP" in label and "text tower" in label else 0.6)
    section = towers.run(_context(tmp_path, seeds=3))
    locks = {(label, lock) for label, *_, lock in trained}
    assert locks == {("NegCLIP", None), ("MosaiCLIP", None), ("NegCLIP (text tower only)", "image"),
                     ("MosaiCLIP (text tower only)", "image"), ("NegCLIP (image tower only)", "text"),
                     ("MosaiCLIP (image tower only)", "text")}
    line = next(x for x in section.text.splitlines() if x.startswith("| text tower only"))
    assert "+10" in line or "+9" in line or "+11" in line  # MosaiCLIP's 10 points when only its text tower trains


def test_teaching_control_has_the_papers_shape(tmp_path, monkeypatch):
    """NegCLIP must beat the base (one model, paired with each seed) and CLIP on relation and order."""
    from mosaictool.demo.experiments import teach

    monkeypatch.setattr(teach, "pretrain_base", lambda cfg, shards, world, out, twins, name: Path(f"{name}|base"))
    monkeypatch.setattr(teach, "finetune_all", lambda cfg, shards, base, out, rows=None, shard_cache=None: {
        label: [Path(f"{label}|{s}") for s in range(cfg.seeds)] for label, _, _ in rows})
    levels = {"base-teach": 0.6, "CLIP": 0.6, "NegCLIP": 0.75, "MosaiCLIP": 0.7}
    _fake_training(monkeypatch, lambda label, col: levels[label])
    monkeypatch.setattr(teach, "score", lambda ctx, runs, prefix, split: common.score(ctx, runs, prefix, split))
    section = teach.run(_context(tmp_path, seeds=5, split="val"))
    assert "teaching control passed" in section.text
    assert "relation vs base +" in section.text and "order vs CLIP +" in section.text
    levels["NegCLIP"] = 0.6  # no effect: the control fails
    assert "teaching control FAILED" in teach.run(_context(tmp_path, seeds=5, split="val")).text


def test_efficiency_subsets_keep_both_captions_of_a_scene_and_scale_the_steps(tmp_path, monkeypatch):
    from mosaictool.demo.experiments import efficiency

    ids = [f"train-{i:06d}" for i in range(2000)]
    share = sum(efficiency.kept(i, 0.3) for i in ids) / len(ids)
    assert share == pytest.approx(0.3, abs=0.04)
    assert all(efficiency.kept(i, 0.3) == efficiency.kept(i + "-plain", 0.3) for i in ids)
    assert all(efficiency.kept(i, 0.5) for i in ids if efficiency.kept(i, 0.3))  # nested subsets
    steps = []
    monkeypatch.setattr(efficiency, "subset_shards", lambda ctx, f: Path(f"shards-{f}"))
    monkeypatch.setattr(efficiency, "finetune_all", lambda cfg, shards, base, out, rows=None, shard_cache=None: steps.append(
        (rows[0][0], cfg.finetune_steps, str(shards))) or {rows[0][0]: [Path(f"{rows[0][0]}|{s}") for s in range(cfg.seeds)]})
    _fake_training(monkeypatch, lambda label, col: 0.7)
    efficiency.run(_context(tmp_path, seeds=3, split="val"))
    assert steps == [("NegCLIP", 400, str(tmp_path)), ("efficiency MosaiCLIP 0.3x", 120, "shards-0.3"),
                     ("efficiency MosaiCLIP 0.5x", 200, "shards-0.5"), ("efficiency MosaiCLIP 1x", 400, "shards-1.0")]


def test_claims_experiment_gathers_every_regime(tmp_path, monkeypatch):
    from mosaictool.analysis.stats import seed_paired
    from mosaictool.demo.claims import Claim
    from mosaictool.demo.experiments import claims

    ran = []

    class Fake:
        def __init__(self, name):
            self.name = name

        def run(self, ctx):
            ran.append((self.name, ctx.claims))
            return experiments.Section(self.name, f"{self.name} body", claims=[
                Claim("w", self.name, "+", "a − b", self.name, seed_paired([0.7, 0.71, 0.72], [0.6, 0.6, 0.61]))],
                control="" if self.name == "scratch" else f"{self.name} control line")

    monkeypatch.setattr(claims, "get", Fake)
    monkeypatch.setattr(claims, "table_claims", lambda ctx: [])
    section = claims.run(_context(tmp_path, seeds=3))
    assert ran == [(name, True) for name in claims.REGIMES]
    assert len(section.claims) == len(claims.REGIMES)
    text = (tmp_path / "claims.md").read_text()
    assert text.startswith("# The paper's claims on the world (test split)") and "teach body" in section.text
    assert all(f"{name} " in text for name in claims.REGIMES)  # each regime's wall time
    controls, table = text.split("| # |")  # every regime's control is stated before the first verdict
    assert "- **preservation (the table)**: POSITIVE CONTROL" in controls  # the test context has no table rows
    assert all(f"- **{name}**: {name} control line" in controls for name in claims.REGIMES if name != "scratch")
    assert "- **scratch**: none stated" in controls
    # a regime without a control of its own is vouched for by the table's, which was not run here
    assert all(c.control == {"relation": False, "order": False} for c in section.claims)
    assert "**uninformative: control failed**" in table and "**holds**" not in table
    assert "### Controls (not findings)" in section.text and "\n## " not in section.text


def test_noisy_regime_measures_each_methods_drop(tmp_path, monkeypatch):
    from mosaictool.demo.experiments import noisy

    monkeypatch.setattr(noisy, "noisy_data", lambda ctx: (tmp_path, tmp_path / "noisy-texts.jsonl", "audit table"))
    monkeypatch.setattr(noisy, "varied_shards", lambda texts, world, folder: folder)
    monkeypatch.setattr(noisy, "finetune_all", lambda cfg, shards, base, out, rows=None: {
        label: [Path(f"{label}|{s}") for s in range(cfg.seeds)] for label, _, _ in rows})
    levels = {"clean NegCLIP": 0.8, "noisy NegCLIP": 0.6, "clean MosaiCLIP": 0.7, "noisy MosaiCLIP": 0.68}
    _fake_training(monkeypatch, lambda label, col: levels[label])
    section = noisy.run(_context(tmp_path, seeds=5))
    negclip_drop, mosaiclip_drop = section.claims
    assert negclip_drop.result.diff == pytest.approx(0.2, abs=0.03)  # NegCLIP loses 20 points
    assert mosaiclip_drop.result.diff == pytest.approx(0.02, abs=0.03)  # MosaiCLIP loses 2
    # "a > 10% hit" and "similar performance": 10% of each clean arm's ARO accuracy (about 0.8 and 0.7)
    assert negclip_drop.test == "superiority" and negclip_drop.margin == pytest.approx(0.08, abs=0.01)
    assert mosaiclip_drop.test == "equivalence" and mosaiclip_drop.margin == pytest.approx(0.07, abs=0.01)
    assert negclip_drop.family == mosaiclip_drop.family
    assert "audit table" in section.text


@pytest.mark.slow
def test_text_tower_measures_read_the_worlds_cases(tmp_path, tiny_worlds):
    """The ladder's text-only measures on a real (tiny) world and checkpoint: a finite cosine for every
    case column and a tree-score."""
    import math

    from mosaictool.world.generate import generate_world

    world = tmp_path / "world"
    generate_world(world, train=20, seed=0, image_size=64, eval_scale=0.02)
    final = train(tiny_config(tiny_worlds(n=8), tmp_path / "run", steps=1))
    ctx = Context(DemoConfig(device="cpu"), tmp_path, tmp_path, final, world, tmp_path)
    measured = ladder.text_tower_measures(ctx, {"run": [final]}, "val")
    [m] = measured["run"]
    assert set(m) == {"relation", "order", "attribute", "tree-score"} and all(math.isfinite(v) for v in m.values())


def test_shapley_values_are_the_mean_marginal_effect_over_every_order():
    from itertools import permutations

    from mosaictool.demo.experiments import attribution

    k = 4
    rng = np.random.default_rng(11)
    cells = attribution.cells(k)
    values = rng.random(len(cells))
    value_of = dict(zip(cells, values))
    brute = np.zeros(k)
    for order in permutations(range(k)):
        on = [False] * k
        for f in order:
            before = value_of[tuple(on)]
            on[f] = True
            brute[f] += value_of[tuple(on)] - before
    brute /= math.factorial(k)
    got = attribution.shapley(values)
    assert got == pytest.approx(brute)
    assert got.sum() == pytest.approx(values[-1] - values[0])  # they add up to the whole gap
    # trailing axes (seeds, cases) ride along
    stacked = attribution.shapley(np.stack([values, 2 * values], axis=1))
    assert stacked[:, 1] == pytest.approx(2 * brute)


def test_attribution_cells_run_from_negclip_in_mosaiclips_method_to_the_table_row(tmp_path):
    from mosaictool.demo.experiments import attribution

    ctx = _context(tmp_path)
    cells = attribution.variants(ctx)
    assert len(cells) == 2 ** len(attribution.FACTORS)
    rows = {label: (method, options) for label, method, options in METHODS}
    none, every = cells[0], cells[-1]
    assert (every.label, every.method, every.options, every.hard_images) == ("MosaiCLIP", *rows["MosaiCLIP"], None)
    rung = next(v for v in ladder.variants(ctx) if v.name == "NegCLIP in MosaiCLIP's method")
    assert (none.method, none.options, none.hard_images) == (rung.method, rung.options, "all")  # with NegCLIP's hard images
    settings = [(v.method, tuple(sorted(v.options.items())), v.hard_images) for v in cells]
    assert len(set(settings)) == len(settings)
    assert {v.lr for v in cells[:-1]} == {ctx.cfg.lr_for("NegCLIP")} == {ctx.cfg.lr_for("MosaiCLIP")}


def test_attribution_recovers_additive_effects_and_adds_up(tmp_path, monkeypatch):
    from mosaictool.demo.experiments import attribution

    effects = np.array([-0.06, +0.02, -0.04, 0.0])  # relation points per change, additive

    def accuracy(label, col):
        k = len(attribution.cells()) - 1 if label == "MosaiCLIP" else int(label.split()[-1])
        on = np.array(attribution.cells()[k], dtype=float)
        return 0.7 + float(on @ effects) if col == "relation" else 0.5

    _fake_training(monkeypatch, accuracy)
    section = attribution.run(_context(tmp_path, seeds=3))
    table = (tmp_path / "attribution.md").read_text()
    assert table.strip() in section.text
    rel = [line.split("|")[2] for line in table.splitlines() if line.startswith("| ") and "[" in line]
    got = [float(cell.split("[")[0]) for cell in rel]
    assert got == pytest.approx(100 * effects, abs=1.5)  # shared cases: the drawn difficulty cancels
    gap = next(line for line in table.splitlines() if line.startswith("| **the whole gap**"))
    assert float(gap.split("|")[2]) == pytest.approx(sum(got), abs=0.11)


def test_role_distance_is_the_swaps_distance_as_a_share_of_another_relations(monkeypatch):
    from mosaictool.analysis import text_separation
    from mosaictool.bench.base import ImageRef, Item

    items = [Item([ImageRef("x.png")], ["the b is above the a", "the a is above the b"], {"group": "above", "correct": 1}),
             Item([ImageRef("y.png")], ["the d is to the right of the c", "the c is to the right of the d"],
                  {"group": "to the right of", "correct": 1})]

    def features(swap_angle, other_angle):
        def fake(bundle, texts, batch_size=256):
            out = {}
            for t in texts:
                true = t in ("the a is above the b", "the c is to the right of the d")
                swapped = t in ("the b is above the a", "the d is to the right of the c")
                angle = 0.0 if true else swap_angle if swapped else other_angle
                out[t] = np.array([np.cos(angle), np.sin(angle)])
            return out
        return fake

    monkeypatch.setattr(text_separation, "text_features", features(0.0, 0.5))  # the swap is the caption to the tower
    assert text_separation.role_distance(None, items) == pytest.approx(0.0)
    monkeypatch.setattr(text_separation, "text_features", features(0.5, 0.5))  # as far as another relation
    assert text_separation.role_distance(None, items) == pytest.approx(1.0)
    # the same angles in a tower that draws everything closer give the same share
    monkeypatch.setattr(text_separation, "text_features", features(0.1, 0.2))
    near = text_separation.role_distance(None, items)
    monkeypatch.setattr(text_separation, "text_features", features(0.05, 0.1))
    assert text_separation.role_distance(None, items) == pytest.approx(near, rel=0.01)
    bad = [Item([ImageRef("x.png")], ["the b is near the a", "the a is near the b"], {"group": "near", "correct": 1})]
    with pytest.raises(ValueError, match="does not say 'near'"):
        text_separation.role_distance(None, bad)


def test_mechanism_trains_two_falsifying_runs_and_judges_each_prediction(tmp_path, monkeypatch):
    from mosaictool.demo.experiments import mechanism

    relation = {"NegCLIP": 0.75, "MosaiCLIP": 0.65, "mechanism 0": 0.72, "mechanism 1": 0.65}

    def accuracy(label, col):
        return relation[label] if col == "relation" else 0.5

    trained = _fake_training(monkeypatch, accuracy)
    distances = {"base": [0.6], "NegCLIP": [0.30, 0.33, 0.28, 0.31, 0.29], "MosaiCLIP": [0.10, 0.11, 0.09, 0.12, 0.10],
                 mechanism.NO_OBJECTS: [0.25, 0.28, 0.26, 0.27, 0.24], mechanism.WITH_SWAP: [0.02, 0.035, 0.025, 0.03, 0.02]}
    monkeypatch.setattr(mechanism, "role_distances", lambda ctx, runs: distances)
    section = mechanism.run(_context(tmp_path, seeds=5))
    options = {label: opts for label, _, opts, *_ in trained}
    assert options["mechanism 0"] == {"curriculum": True, "positives": "no-objects"}
    assert options["mechanism 1"] == {"curriculum": True, "negatives": "graph+negclip"}
    table = (tmp_path / "mechanism.md").read_text()
    assert table.strip() in section.text
    verdicts = {line.split("|")[1].strip(): line.split("|")[-2].strip() for line in table.splitlines() if line.count("|") == 6}
    assert verdicts["MosaiCLIP's role distance is below NegCLIP's"] == "holds"
    assert verdicts[f"{mechanism.NO_OBJECTS}: role distance above MosaiCLIP's"] == "holds"
    assert verdicts[f"{mechanism.NO_OBJECTS}: relation above MosaiCLIP's"] == "holds"
    assert verdicts[f"{mechanism.WITH_SWAP}: role distance above MosaiCLIP's"] == "contradicted"
    assert verdicts[f"{mechanism.WITH_SWAP}: relation above MosaiCLIP's"] == "not detected"
