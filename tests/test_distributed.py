"""Two gloo processes on CPU = one process on the same global batch (loss and gradients, 1e-5)."""

from __future__ import annotations

import os
import subprocess

import pytest
import torch

import clirun
from clirun import TORCHRUN
from train_fixtures import free_port, make_world, spawned_rank, write_tiny_model

METHODS = ("mosaiclip", "negclip")


def first_step(rank: int, world: int, data: str, model_cfg: str, local_loss: bool, method: str) -> dict:
    """Loss and gradients of one step of the real pieces: plan -> dataset -> collate -> (DDP) model
    forward -> slot features -> loss -> backward."""
    import open_clip

    from mosaictool import methods
    from mosaictool.model import openclip
    from mosaictool.training.batch import ContrastiveForward, batch_features
    from mosaictool.training.distributed import DistInfo, mean_over_ranks
    from mosaictool.training.loader import TrainDataset
    from mosaictool.training.sampler import BatchPlan, SamplerConfig
    from mosaictool.training.traindata import TrainData
    from mosaictool.training.transform import ImageTransform

    bundle = openclip.create("test-tiny", model_config_file=model_cfg, seed=0)
    model = ContrastiveForward(bundle.model)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    pp = open_clip.get_model_preprocess_cfg(bundle.model)
    m = methods.create(method)
    records = TrainData.load(data, method=m)
    records.resolve_record_hard_images()
    cfg = SamplerConfig(method=m, batch_size=4 // world, seed=1, use_hard=method == "negclip")
    plan = BatchPlan(len(records), cfg, rank=rank, world_size=world, start=0, stop=1, hard=records.hard)
    dataset = TrainDataset(records, cfg, ImageTransform(32), bundle.tokenizer)
    batch = dataset.collate([dataset[spec] for spec in plan.micro_batch(0)])
    loss_fn = m.make_loss(local_loss=local_loss, rank=rank, world_size=world)
    feats = batch_features(model, batch, mean=pp["mean"], std=pp["std"], device="cpu")
    loss = loss_fn(feats)["loss"]
    loss.backward()
    info = DistInfo(rank=rank, world_size=world)
    return {
        "loss": mean_over_ranks(loss.item(), info),
        "grads": {n: p.grad.clone() for n, p in bundle.model.named_parameters() if p.grad is not None},
    }


def _worker(rank: int, world: int, port: int, data: str, model_cfg: str, out: str) -> None:
    os.environ.update(WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    from mosaictool.training import distributed

    info = distributed.init("cpu", timeout_s=120)  # a failed rank must not leave the other waiting 30 min
    results = {
        (method, local): first_step(rank, world, data, model_cfg, local, method)
        for method in METHODS
        for local in (False, True)
    }
    if rank == 0:
        torch.save(results, out)
    distributed.shutdown(info)


@pytest.mark.slow
def test_two_gloo_ranks_equal_one_process(tmp_path):
    """Both loss modes (global, --local-loss), MosaiCLIP's multi-positive slots and NegCLIP's hard images."""
    data, model_cfg = make_world(tmp_path, n=8), write_tiny_model(tmp_path)
    out = tmp_path / "ranks.pt"
    torch.multiprocessing.spawn(spawned_rank, args=(_worker, 2, free_port(), str(data), str(model_cfg), str(out)), nprocs=2)
    results = torch.load(out)
    assert len(results) == 2 * len(METHODS)
    for (method, local_loss), two in results.items():
        single = first_step(0, 1, str(data), str(model_cfg), False, method)
        assert two["loss"] == pytest.approx(single["loss"], rel=1e-5), (method, local_loss)
        assert two["grads"].keys() == single["grads"].keys()
        for name, grad in single["grads"].items():
            torch.testing.assert_close(two["grads"][name], grad, rtol=1e-5, atol=1e-5,
                                       msg=f"{name} ({method}, local_loss={local_loss})")


@pytest.mark.slow
def test_torchrun_end_to_end_matches_one_process(tmp_path):
    """The real command under torchrun (2 gloo ranks × 2 images) ends where 1 process × 4 images does."""
    data, model_cfg = make_world(tmp_path, n=8), write_tiny_model(tmp_path)
    common = ["--data", str(data), "--model-config", str(model_cfg), "--method", "mosaiclip", "--steps", "2",
              "--warmup", "1", "--lr", "1e-6", "--device", "cpu", "-q"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    two = subprocess.run([*TORCHRUN, "--nproc_per_node", "2", "--master_port", str(free_port()), "-m", "mosaictool",
                          "train", "--out", str(tmp_path / "two"), "--batch-size", "2", "--local-loss", *common],
                         capture_output=True, text=True, env=env, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    one = clirun.run("train", "--out", tmp_path / "one", "--batch-size", "4", *common, env=env, timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    from mosaictool.model import openclip

    a = openclip.read_checkpoint(tmp_path / "two" / "final.pt")
    b = openclip.read_checkpoint(tmp_path / "one" / "final.pt")
    for name, value in b["state_dict"].items():
        torch.testing.assert_close(a["state_dict"][name], value, rtol=0, atol=1e-5, msg=name)
    assert a["config"]["local_loss"] is True


def _torchrun(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen([*TORCHRUN, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


@pytest.mark.slow
def test_two_nodes_equal_one_node_of_two_ranks(tmp_path):
    """Two torchrun "nodes" on localhost (1 rank each, c10d rendezvous, as a SLURM job of 2 nodes starts them)
    end with the weights of one node running 2 ranks at the same global batch: the same ranks see the same
    data, and gloo's all-reduce of 2 ranks is one addition, exact whatever order it runs in, so the
    weights are bit-identical (torch.equal), not merely close. The data are WebDataset shards."""
    import mosaictool

    world = make_world(tmp_path, n=8)
    shards = tmp_path / "shards"
    mosaictool.shard(world, out=shards, image_root=tmp_path, shard_size=3)
    model_cfg = write_tiny_model(tmp_path)
    common = ["-m", "mosaictool", "train", "--data", str(shards), "--model-config", str(model_cfg), "--method", "mosaiclip",
              "--steps", "3", "--warmup", "1", "--batch-size", "2", "--device", "cpu", "-q"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    port = free_port()
    nodes = [_torchrun(["--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node), "--rdzv-backend", "c10d",
                        "--rdzv-endpoint", f"localhost:{port}", "--rdzv-id", "two-nodes", *common, "--out",
                        str(tmp_path / "nodes")], env) for node in (0, 1)]
    outputs = [node.communicate(timeout=300)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], "\n".join(out[-3000:] for out in outputs)
    one = subprocess.run([*TORCHRUN, "--nproc-per-node", "2", "--master-port", str(free_port()), *common, "--out",
                          str(tmp_path / "node")], capture_output=True, text=True, env=env, timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    from mosaictool.model import openclip

    two_nodes = openclip.read_checkpoint(tmp_path / "nodes" / "final.pt")["state_dict"]
    one_node = openclip.read_checkpoint(tmp_path / "node" / "final.pt")["state_dict"]
    start = openclip.create("test-tiny", model_config_file=str(model_cfg), seed=0).model.state_dict()
    assert two_nodes.keys() == one_node.keys()
    assert any(not torch.equal(one_node[name], start[name]) for name in start)  # the runs trained: the test can fail
    for name, value in one_node.items():
        assert torch.equal(two_nodes[name], value), name
