"""Every GPU path end to end, on the GPU (marker `gpu`; skipped where CUDA is not visible).

    python -m pytest -m gpu tests/test_gpu.py          # on a GPU machine

Every method at every precision, accum-freq, grad checkpointing, hard-image mining, kill -9 +
--resume, torchrun (1 rank; NCCL collectives; 2 ranks where two GPUs are visible), evaluate,
tree-score, wise-ft and `demo --quick`, on the small world the CPU tests build (train_fixtures).
No command gets --device unless the test is about the flag: the default must find the GPU.

Where no GPU is visible (CI) the same tests run on the CPU (fp16 `amp` skipped, bf16 autocast kept,
gloo for NCCL), so that they cannot rot unseen; MOSAICTOOL_GPU_TESTS_ON_CPU=0 skips them instead. On
the CPU they check the tests and the device-independent code, and prove nothing about the GPU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from PIL import Image

import clirun
from clirun import TORCHRUN
from mosaictool.cli import app
from mosaictool.model import openclip
from mosaictool.training import TrainConfig, train
from mosaictool.training.config import PRECISIONS
from train_fixtures import add_fsc_negatives, free_port, make_world, weights, write_tiny_model
from train_fixtures import tiny_config as config

ON_CPU = not torch.cuda.is_available() and os.environ.get("MOSAICTOOL_GPU_TESTS_ON_CPU", "1") != "0"
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available() and not ON_CPU, reason="no CUDA GPU visible"),
]
DEVICE_TYPE = "cpu" if ON_CPU else "cuda"
CUDA_ONLY_PRECISIONS = ("amp",)  # fp16 autocast with a GradScaler: GPU only (bf16 autocast runs on the CPU)


def method_names() -> list[str]:
    try:
        from mosaictool import methods
    except ImportError:
        methods = None
    names = getattr(methods, "names", None)  # the methods registry, once it exists
    return list(names()) if callable(names) else ["clip", "negclip", "mosaiclip"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu-world")
    return add_fsc_negatives(make_world(root, n=16)), write_tiny_model(root)  # fsc-clip's text negatives too


def run_on_device(cfg: TrainConfig, **kw) -> tuple[Path, list[dict]]:
    """Train with the default device; every step checks the weights are on the GPU."""
    logged = []

    def check(step, metrics, model):
        assert next(model.parameters()).device.type == DEVICE_TYPE
        assert all(torch.isfinite(torch.tensor(v)) for k, v in metrics.items() if isinstance(v, float)), metrics
        logged.append(metrics)

    return train(cfg, on_step=check, **kw), logged


# ---- train --------------------------------------------------------------------------------------

@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("method", method_names())
def test_every_method_at_every_precision(world, tmp_path, method, precision):
    if ON_CPU and precision in CUDA_ONLY_PRECISIONS:
        pytest.skip(f"{precision} needs a GPU")
    final, logged = run_on_device(config(world, tmp_path / "run", method=method, precision=precision))
    assert [m["step"] for m in logged] == [1, 2, 3]
    ckpt = openclip.read_checkpoint(final)
    assert ckpt["step"] == 3 and all(torch.isfinite(v).all() for v in ckpt["state_dict"].values() if v.is_floating_point())
    bundle = openclip.load_checkpoint(final, device=f"{DEVICE_TYPE}:0" if DEVICE_TYPE == "cuda" else "cpu")
    tokens = bundle.tokenizer(["a red circle"]).to(next(bundle.model.parameters()).device)
    assert torch.isfinite(bundle.model.encode_text(tokens)).all()


def test_accum_freq_equals_the_big_batch(world, tmp_path):
    """Two micro-batches of 2 = one batch of 4 on the GPU too (fp32; GPU reductions: 1e-4)."""
    big = weights(run_on_device(config(world, tmp_path / "big", method="mosaiclip", steps=2, batch_size=4, grad_clip=None))[0])
    acc = weights(run_on_device(config(world, tmp_path / "acc", method="mosaiclip", steps=2, batch_size=2, accum_freq=2,
                                       grad_clip=None))[0])
    for name in big:
        torch.testing.assert_close(acc[name], big[name], rtol=1e-4, atol=1e-4, msg=name)


def test_grad_checkpointing_and_hard_image_mining(world, tmp_path):
    out = tmp_path / "neg"
    final, _ = run_on_device(config(world, out, method="negclip", hard_images=2, record_hard_images=False,
                                    grad_checkpointing=True,
                                    precision="fp32" if ON_CPU else "amp_bf16", accum_freq=2))
    mined = json.loads((out / "mined_hard_images.json").read_text())
    assert len(mined) == 16 and all(len(n) == 2 and i not in n for i, n in enumerate(mined))
    assert openclip.read_checkpoint(final)["config"]["grad_checkpointing"] is True
    # in fp32, checkpointing recomputes activations: the same weights as without it
    common = dict(method="negclip", hard_images=2, record_hard_images=False, accum_freq=2)
    with_ckpt = weights(run_on_device(config(world, tmp_path / "ck", grad_checkpointing=True, **common))[0])
    without = weights(run_on_device(config(world, tmp_path / "plain", **common))[0])
    for name, value in with_ckpt.items():
        torch.testing.assert_close(value, without[name], rtol=1e-4, atol=1e-5, msg=name)


def test_images_on_device(world, tmp_path):
    """--images-on-device: the images wait on the GPU, a step gathers them there; the same weights as
    the loader's images (fp32; GPU reductions: 1e-5)."""
    common = dict(method="negclip", augment=False, grad_clip=None)
    loader = weights(run_on_device(config(world, tmp_path / "loader", **common))[0])
    on_device = weights(run_on_device(config(world, tmp_path / "device", images_on_device=True, **common))[0])
    for name in loader:
        torch.testing.assert_close(on_device[name], loader[name], rtol=1e-5, atol=1e-5, msg=name)


def test_runs_take_their_steps_together_on_the_gpu(world, tmp_path):
    """train_many: every method's runs of the demo's GPU preset at once, stacked (images on the
    device, shared by the runs; bf16 autocast as a GPU run may use it), each checked on the device
    every step; in fp32 each run's weights are its weights alone up to rounding."""
    from mosaictool.training import ShardCache, train_many

    common = dict(augment=False, images_on_device=True, steps=3)
    cfgs = [config(world, tmp_path / f"{m}-{s}", method=m, seed=s, **common) for m in method_names() for s in range(2)]
    seen = []

    def check(i, step, metrics, model):
        assert next(model.parameters()).device.type == DEVICE_TYPE
        assert all(torch.isfinite(torch.tensor(v)) for k, v in metrics.items() if isinstance(v, float)), metrics
        seen.append((i, step))

    finals = train_many(cfgs, shards=ShardCache(), on_step=check)
    assert sorted(seen) == [(i, step) for i in range(len(cfgs)) for step in (1, 2, 3)]
    for cfg, final in zip(cfgs, finals):
        alone = weights(train(config(world, tmp_path / f"alone-{cfg.method}-{cfg.seed}", method=cfg.method, seed=cfg.seed,
                                     **common)))
        together = weights(final)
        start = openclip.create("tiny", model_config_file=str(world[1]), seed=cfg.seed).model.state_dict()
        diff = torch.cat([(together[k] - alone[k]).flatten() for k in alone]).norm()
        moved = torch.cat([(alone[k] - start[k]).flatten() for k in alone]).norm()
        assert diff / moved < 1e-3, (cfg.method, float(diff / moved))
    bf16 = [config(world, tmp_path / f"bf16-{s}", method="fsc-clip", seed=s, precision="amp_bf16", **common) for s in range(2)]
    assert all(torch.isfinite(v).all() for f in train_many(bf16) for v in weights(f).values() if v.is_floating_point())


@pytest.mark.slow
def test_kill_9_and_resume_on_the_gpu(world, tmp_path):
    steps = dict(method="mosaiclip", steps=8, save_every=2, method_options={"curriculum": True})
    reference, _ = run_on_device(config(world, tmp_path / "ref", **steps))
    out = tmp_path / "crash"
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_gpu import config
        from mosaictool.training import train

        def die(step, metrics, model):
            if step == 5:  # after step 4's checkpoint, mid-run
                os.kill(os.getpid(), signal.SIGKILL)

        train(config(({str(world[0])!r}, {str(world[1])!r}), {str(out)!r}, **{steps!r}), on_step=die)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MOSAICTOOL_GPU_TESTS_ON_CPU": "1" if ON_CPU else "0"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert openclip.read_checkpoint(out / "last.pt")["step"] == 4 and not (out / "final.pt").exists()
    resumed = clirun.run("train", "--resume", out, "-q")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = weights(reference), weights(out / "final.pt")
    for name in a:  # same seeds, same data order, RNG states restored (CUDA's included)
        torch.testing.assert_close(b[name], a[name], rtol=1e-5, atol=1e-5, msg=name)
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == list(range(1, 9))


# ---- torchrun -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_torchrun_one_rank_default_device(world, tmp_path):
    """`torchrun --nproc_per_node 1 -m mosaictool train` with no --device (torch.device('cuda') without an index
    used to crash set_device)."""
    data, model_cfg = world
    proc = subprocess.run([*TORCHRUN, "--nproc_per_node", "1", "--master_port", str(free_port()), "-m", "mosaictool",
                           "train", "--data", str(data), "--model-config", str(model_cfg), "--method", "mosaiclip",
                           "--steps", "2", "--batch-size", "4", "--out", str(tmp_path / "run"), "-q"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == str(tmp_path / "run" / "final.pt")


NCCL_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch
    import torch.distributed as td
    from mosaictool.model import collectives
    from mosaictool.training import distributed as dist

    info = dist.init(None)  # the default device of this rank
    backend = "gloo" if info.device == "cpu" else "nccl"
    if not td.is_initialized():  # one rank: init() needs no group; the collectives below do
        td.init_process_group(backend=backend, init_method="env://")
    leaf = torch.arange(3.0, device=info.device, requires_grad=True)
    gathered = collectives.all_gather_with_grad(leaf * (info.rank + 1))
    gathered.sum().backward()
    flags = collectives.all_gather_no_grad(torch.tensor([True, False], device=info.device))
    total = collectives.all_reduce_sum(torch.tensor([1.0], device=info.device))
    print(json.dumps({"rank": info.rank, "device": info.device, "backend": td.get_backend(),
                      "gathered": gathered.tolist(), "grad": leaf.grad.tolist(), "flags": flags.tolist(), "total": total.item()}))
    td.destroy_process_group()
""")


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [1, 2])
def test_torchrun_nccl_collectives(tmp_path, ranks):
    if ranks > (1 if ON_CPU else torch.cuda.device_count()):
        # two gloo ranks on the CPU: test_distributed.py, test_containment.py and test_fsc_clip.py
        pytest.skip(f"{ranks} ranks need {ranks} GPUs")
    script = tmp_path / "collectives.py"
    script.write_text(NCCL_SCRIPT)
    proc = subprocess.run([*TORCHRUN, "--nproc_per_node", str(ranks), "--master_port", str(free_port()), str(script)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = sorted((json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")), key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == list(range(ranks))
    for r in rows:
        assert r["device"] == ("cpu" if ON_CPU else f"cuda:{r['rank']}")
        assert r["backend"] == ("gloo" if ON_CPU else "nccl")
        assert r["gathered"] == [v * (k + 1) for k in range(ranks) for v in (0.0, 1.0, 2.0)]
        assert r["flags"] == [True, False] * ranks and r["total"] == ranks
        # every rank's loss sums every rank's copy: each rank's own tensor gets the gradient of all of them
        assert r["grad"] == [float((r["rank"] + 1) * ranks)] * 3


# ---- evaluate, tree-score, wise-ft, demo -----------------------------------------------------------

@pytest.fixture(scope="module")
def trained(world, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-trained")
    start = out / "start.pt"
    openclip.save_checkpoint(start, openclip.create("test-tiny", model_config_file=world[1], seed=0))
    final, _ = run_on_device(config(world, out / "run", method="mosaiclip", steps=2, pretrained=str(start), model_config=None,
                                    model="test-tiny"))
    return start, final


def test_evaluate_on_the_gpu(trained, tmp_path, runner):
    (tmp_path / "sugarcrepe").mkdir()
    colours = ["red", "green", "blue"]
    cases = {str(i): {"filename": f"{c}.jpg", "caption": f"a {c} square", "negative_caption": f"a {colours[i - 1]} circle"}
             for i, c in enumerate(colours)}
    (tmp_path / "sugarcrepe" / "add_att.json").write_text(json.dumps(cases))
    (tmp_path / "coco" / "val2017").mkdir(parents=True)
    for c in colours:
        Image.new("RGB", (24, 24), c).save(tmp_path / "coco" / "val2017" / f"{c}.jpg")
    results = {}
    for device in (None, "cuda" if not ON_CPU else "cpu", "cpu"):
        out = tmp_path / f"r-{device}.jsonl"
        args = ["evaluate", "--bench", "sugarcrepe:add_att", "-c", str(trained[1]), "--data-root",
                str(tmp_path), "-o", str(out), "-q"]
        result = runner.invoke(app, args + ([] if device is None else ["--device", device]))
        assert result.exit_code == 0, result.output
        results[device] = [json.loads(x) for x in out.read_text().splitlines()]
    accuracy = {d: [r["value"] for r in rows if r["metric"] == "accuracy"] for d, rows in results.items()}
    assert accuracy[None] == accuracy["cpu"]  # three cases: the same decisions on GPU and CPU


def test_tree_score_on_the_gpu(trained, tmp_path, runner):
    captions = tmp_path / "c.jsonl"
    captions.write_text("".join(json.dumps({"id": str(i), "caption": c}) + "\n" for i, c in enumerate(
        ["a red circle left of a blue square", "the small dog on the big green sofa", "two cats sleep under a wooden table"])))
    rows = {}
    for device in (None, "cpu"):
        out = tmp_path / f"t-{device}.jsonl"
        args = ["tree-score", str(captions), "--checkpoint", str(trained[1]), "-o", str(out), "-q"]
        result = runner.invoke(app, args + ([] if device is None else ["--device", device]))
        assert result.exit_code == 0, result.output
        rows[device] = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["tree"] for r in rows[None]] == [r["tree"] for r in rows["cpu"]]
    for a, b in zip(rows[None], rows["cpu"]):
        assert a["tscore"] == pytest.approx(b["tscore"], abs=1e-3)


def test_wise_ft_on_the_gpu(trained, tmp_path, runner):
    start, final = trained
    args = ["wise-ft", "--zeroshot", str(start), "--finetuned", str(final), "--alpha", "0,0.5,1", "--out", str(tmp_path / "w")]
    result = runner.invoke(app, args + ([] if ON_CPU else ["--device", "cuda"]))
    assert result.exit_code == 0, result.output
    paths = result.stdout.split()
    w0, w1, zs, ft = weights(paths[0]), weights(paths[2]), weights(start), weights(final)
    stored = torch.load(paths[1], weights_only=False)["state_dict"]  # no map_location: as written
    assert {v.device.type for v in stored.values()} == {"cpu"}  # mixed on the GPU, written from the CPU
    for k in zs:
        torch.testing.assert_close(w0[k], zs[k].cpu(), rtol=0, atol=1e-6, msg=k)
        torch.testing.assert_close(w1[k], ft[k].cpu(), rtol=0, atol=1e-6, msg=k)


@pytest.mark.slow
def test_demo_quick_on_the_gpu(tmp_path, runner):
    out, cache = tmp_path / "demo", tmp_path / "cache"
    result = runner.invoke(app, ["demo", "--quick", "--out", str(out), "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.stderr
    assert ("device: cpu" if ON_CPU else "device: cuda:") in result.stderr
    assert (out / "report.md").is_file() and result.stdout.startswith("| method |")
    config = json.loads(next((out / "runs").glob("clip-seed0-*/config.json")).read_text())
    assert config["device"] == ("cpu" if ON_CPU else f"cuda:{torch.cuda.current_device()}")


# ---- LoRA on ViT-B/32 ---------------------------------------------------------------------------


@pytest.mark.slow
def test_lora_vit_b_32_gradients_are_finite_differences():
    """Every adapter of ViT-B/32 (conv1, the attention's in/out projections, the MLPs), on the device:
    autograd's directional derivative of a loss along a random direction of the adapters equals the
    central finite difference (float64, so that the difference is not rounding). peft's own
    MultiheadAttention adapter got this wrong; ours must not, on the GPU's kernels too."""
    import open_clip

    from mosaictool.model import lora

    torch.manual_seed(0)
    model = open_clip.create_model("ViT-B-32", pretrained=None)
    lora.add_lora(model, 4)
    model = model.double().to(DEVICE_TYPE).eval()
    adapters = [p for n, p in model.named_parameters() if p.requires_grad]
    assert adapters and all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # B starts at zero: move it, or half the adapters' gradients are trivially zero
        for p in adapters:
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.device) * 0.02)
    images = torch.randn(2, 3, 224, 224, generator=g, dtype=torch.float64).to(DEVICE_TYPE)
    tokens = open_clip.get_tokenizer("ViT-B-32")(["a red circle left of a blue square", "two yellow circles"]).to(DEVICE_TYPE)
    direction = [torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.device) for p in adapters]

    def loss() -> torch.Tensor:
        image, text = model.encode_image(images, normalize=True), model.encode_text(tokens, normalize=True)
        return (image @ text.T * 10).logsumexp(dim=1).sum()

    model.zero_grad()
    loss().backward()
    analytic = sum((p.grad * d).sum() for p, d in zip(adapters, direction))
    eps = 1e-6
    with torch.no_grad():
        for p, d in zip(adapters, direction):
            p.add_(eps * d)
        up = loss()
        for p, d in zip(adapters, direction):
            p.sub_(2 * eps * d)
        down = loss()
    numeric = (up - down) / (2 * eps)
    assert float(analytic) != 0.0
    assert abs(float(analytic - numeric)) <= 1e-6 * max(1.0, abs(float(numeric))), (float(analytic), float(numeric))
