"""`shard` writes WebDataset shards that `train` reads exactly like the JSONL + images they came from."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
import torch

import mosaictool
from helpers import assert_ok, invoke, snapshot, train_args
from helpers import refused as assert_refused
from mosaictool import methods
from mosaictool.cli import app
from mosaictool.model import openclip
from mosaictool.training import TrainConfig, train
from mosaictool.training.traindata import TrainData
from train_fixtures import make_world, write_tiny_model


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    root = tmp_path_factory.mktemp("shard")
    data = make_world(root / "w", n=12)
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["shard", str(data), "--image-root", str(data.parent), "--out",
                                      str(root / "shards"), "--shard-size", "5", "-q"])
    assert result.exit_code == 0, result.output
    return data, root / "shards"


def test_layout_sizes_and_members(sharded):
    data, shards = sharded
    assert sorted(p.name for p in shards.iterdir()) == ["000000.tar", "000001.tar", "000002.tar", "sizes.json"]
    assert json.loads((shards / "sizes.json").read_text()) == {"000000.tar": 5, "000001.tar": 5, "000002.tar": 2}
    with tarfile.open(shards / "000000.tar") as tar:
        names = tar.getnames()
        assert names[:3] == ["000000000.json", "000000000.png", "000000000.txt"]
        member = json.loads(tar.extractfile("000000000.json").read())
        caption = tar.extractfile("000000000.txt").read().decode()
    first = json.loads(Path(data).read_text().splitlines()[0])
    assert member == first  # every record field is kept, texts and hard_images included
    assert caption == first["caption"]  # the webdataset convention (img2dataset, open_clip_train)


def test_train_reads_folder_glob_and_brace_pattern_like_the_jsonl(sharded):
    data, shards = sharded
    plain = TrainData.load(str(data), method=methods.create("mosaiclip"))
    for spec in (str(shards), str(shards / "*.tar"), str(shards / "{000000..000002}.tar")):
        loaded = TrainData.load(spec, method=methods.create("mosaiclip"))
        assert loaded.records == plain.records
        assert [loc.read() for loc in loaded.images] == [loc.read() for loc in plain.images]


def test_each_shard_is_indexed_once_per_cache_until_it_changes(sharded, tmp_path, monkeypatch):
    """The demo's fine-tuning runs (forked after ShardCache.preload) read the index instead of the tars;
    a load without the cache indexes them itself."""
    import shutil

    from mosaictool.training import shards as shards_module

    shards = tmp_path / "shards"
    shutil.copytree(sharded[1], shards)
    calls = []
    real = shards_module.index_tar
    monkeypatch.setattr(shards_module, "index_tar", lambda path: calls.append(Path(path).name) or real(path))
    cache = shards_module.ShardCache()
    cache.preload(str(shards))
    assert sorted(calls) == ["000000.tar", "000001.tar", "000002.tar"]
    first = TrainData.load(str(shards), method=methods.create("mosaiclip"), shards=cache)
    again = TrainData.load(str(shards / "*.tar"), method=methods.create("clip"), shards=cache)
    assert len(calls) == 3 and again.records == first.records == TrainData.load(str(sharded[0]),
                                                                                method=methods.create("mosaiclip")).records
    assert TrainData.load(str(shards), method=methods.create("clip")).records == first.records and len(calls) == 6
    # a rewritten shard (another size) is read again; a record the slim form cannot read stays whole
    # and is refused by the method's check as before
    tar = shards / "000002.tar"
    with tarfile.open(tar) as t:
        members = [(m, t.extractfile(m).read()) for m in t.getmembers()]
    import io

    with tarfile.open(tar, "w") as t:
        for m, body in members:
            if m.name.endswith(".json"):
                rec = json.loads(body)
                body = json.dumps({**rec, "texts": ["not", "an", "object"]} if rec["id"] == "img-11" else rec).encode()
                m.size = len(body)
            t.addfile(m, io.BytesIO(body))
    skipped = TrainData.load(str(shards), method=methods.create("mosaiclip"), skip_bad=True, shards=cache)
    assert calls[6:] == ["000002.tar"]
    assert [r["id"] for r in skipped.records] == [r["id"] for r in first.records if r["id"] != "img-11"]


def test_training_on_shards_equals_training_on_jsonl(sharded, tmp_path):
    data, shards = sharded
    model_cfg = write_tiny_model(tmp_path)
    common = dict(model_config=str(model_cfg), method="negclip", batch_size=4, steps=2, warmup=1, quiet=True)
    a = train(TrainConfig(data=str(shards), out=str(tmp_path / "a"), **common))
    b = train(TrainConfig(data=str(data), out=str(tmp_path / "b"), **common))
    wa, wb = openclip.read_checkpoint(a)["state_dict"], openclip.read_checkpoint(b)["state_dict"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_images_decoded_before_the_runs_give_the_same_training(sharded, tmp_path, monkeypatch):
    """The demo decodes every image once (ShardCache.decode) before forking its runs: a run handed the
    cache then decodes none and trains the same weights as one that decodes its own."""
    from mosaictool.training import loader
    from mosaictool.training.shards import ShardCache

    _, shards = sharded
    model_cfg = write_tiny_model(tmp_path)
    size = json.loads(model_cfg.read_text())["vision_cfg"]["image_size"]
    common = dict(data=str(shards), model_config=str(model_cfg), method="clip", batch_size=4, steps=3, warmup=1, quiet=True,
                  augment=False)
    own = openclip.read_checkpoint(train(TrainConfig(out=str(tmp_path / "own"), **common)))["state_dict"]
    cache = ShardCache()
    assert not cache.decode(str(shards), size, max_bytes=12 * 3 * size * size - 1)  # over the bound
    assert cache.decoded(size) is None
    assert cache.decode(str(shards / "*.tar"), size)  # any spec naming the same tars
    decoded = cache.decoded(size)
    assert decoded.images.shape == (12, 3, size, size) and len(decoded.rows) == 12
    decodes = []
    real = loader.TrainDataset._decode
    monkeypatch.setattr(loader.TrainDataset, "_decode", lambda self, i, rng: decodes.append(i) or real(self, i, rng))
    shared = openclip.read_checkpoint(train(TrainConfig(out=str(tmp_path / "shared"), **common), shards=cache))["state_dict"]
    assert decodes == [] and all(torch.equal(own[k], shared[k]) for k in own)
    # without the cache, or with random crops, the run decodes its own
    train(TrainConfig(out=str(tmp_path / "alone"), **common))
    assert decodes
    decodes.clear()
    train(TrainConfig(out=str(tmp_path / "crops"), **{**common, "augment": True}), shards=cache)
    assert decodes


def test_same_input_same_bytes(sharded, tmp_path, runner):
    data, shards = sharded
    result = runner.invoke(app, ["shard", str(data), "--image-root", str(data.parent), "--out", str(tmp_path / "s"),
                                 "--shard-size", "5", "-q"])
    assert result.exit_code == 0
    for name in ("000000.tar", "000002.tar", "sizes.json"):
        assert (tmp_path / "s" / name).read_bytes() == (shards / name).read_bytes()
    again = runner.invoke(app, ["shard", str(data), "--image-root", str(data.parent), "--out", str(tmp_path / "s")])
    assert again.exit_code == 1 and "already holds shards" in again.stderr


def test_missing_and_corrupt_images(sharded, tmp_path, runner):
    data, _ = sharded
    lines = Path(data).read_text().splitlines()
    (data.parent / "images" / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really a png")
    missing = dict(json.loads(lines[0]), id="missing", image="images/none.png")
    corrupt = dict(json.loads(lines[0]), id="corrupt", image="images/bad.png")
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[0], json.dumps(missing), json.dumps(corrupt), lines[1]]) + "\n")
    args = ["shard", str(broken), "--image-root", str(data.parent), "-q"]
    fail = runner.invoke(app, args + ["--out", str(tmp_path / "x")])
    assert fail.exit_code == 1 and "image not found" in fail.stderr and "none.png" in fail.stderr
    assert not list((tmp_path / "x").glob("*")), "no partial shards, no leftovers"
    ok = runner.invoke(app, args + ["--out", str(tmp_path / "y"), "--skip-bad"])
    assert ok.exit_code == 0, ok.output
    assert "skipped 2 bad record(s)" in ok.stderr and "corrupt image" in ok.stderr
    assert json.loads((tmp_path / "y" / "sizes.json").read_text()) == {"000000.tar": 2}
    no_image = runner.invoke(app, ["shard", str(broken), "--out", str(tmp_path / "z"), "--image-key", "picture"])
    assert no_image.exit_code == 1 and "missing 'picture'" in no_image.stderr


# --- images named outside --image-root: refused by default (one line), packed with --allow-outside-root ---------


def _pointing_out(tmp_path: Path, how: str) -> tuple[Path, bytes]:
    """A 4-record world whose first record names an image outside its root (`how`); -> the captions and that file's bytes."""
    data = make_world(tmp_path / "w", n=4)
    secret = tmp_path / "secret.png"
    secret.write_bytes((data.parent / "images" / "001.png").read_bytes())
    (data.parent / "images" / "link.png").symlink_to(secret)
    name = {"absolute": str(secret), "dotdot": "../secret.png", "link": "images/link.png"}[how]
    records = [json.loads(line) for line in data.read_text().splitlines()]
    records[0]["image"] = name
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    return data, secret.read_bytes()


@pytest.mark.parametrize("how", ["absolute", "dotdot", "link"])
def test_shard_refuses_an_image_outside_the_root_unless_allowed(tmp_path, how):
    from typer.testing import CliRunner

    data, secret = _pointing_out(tmp_path, how)
    args = ["shard", str(data), "--image-root", str(data.parent), "-q", "--out"]
    refused = CliRunner().invoke(app, [*args, str(tmp_path / "s1")])
    assert refused.exit_code == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "record 'img-0'" in lines[0] and "leads outside --image-root" in lines[0], refused.stderr
    assert "--allow-outside-root" in lines[0] and not (tmp_path / "s1").exists()
    skipped = CliRunner().invoke(app, [*args, str(tmp_path / "s2"), "--skip-bad"])
    assert skipped.exit_code == 0 and json.loads((tmp_path / "s2" / "sizes.json").read_text()) == {"000000.tar": 3}
    allowed = CliRunner().invoke(app, [*args, str(tmp_path / "s3"), "--allow-outside-root"])
    assert allowed.exit_code == 0, allowed.stderr
    with tarfile.open(tmp_path / "s3" / "000000.tar") as tar:
        assert tar.extractfile("000000000.png").read() == secret


@pytest.mark.parametrize("how", ["absolute", "dotdot", "link"])
def test_train_data_refuses_an_image_outside_the_root_unless_allowed(tmp_path, how):
    from mosaictool.errors import MosaicError

    data, _ = _pointing_out(tmp_path, how)
    method = methods.create("clip", {})
    with pytest.raises(MosaicError, match=r"record 'img-0'.*leads outside --image-root .*--allow-outside-root"):
        TrainData.load(str(data), method=method)
    assert len(TrainData.load(str(data), method=method, skip_bad=True)) == 3
    assert len(TrainData.load(str(data), method=method, allow_outside_root=True)) == 4


def _copy_shards(shards: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(shards, to)
    return to


def test_a_lying_sizes_json_is_said_in_one_line_and_the_tars_counted(sharded, tmp_path, caplog):
    """sizes.json is what `shard` wrote; training counts the tars, and says where the file disagrees."""
    _, shards = sharded
    folder = _copy_shards(shards, tmp_path / "s")
    (folder / "sizes.json").write_text(json.dumps({"000000.tar": 7, "000001.tar": 5, "000002.tar": 2}))
    with caplog.at_level("WARNING"):
        loaded = TrainData.load(str(folder), method=methods.create("mosaiclip"))
    assert len(loaded) == 12
    lines = [r.getMessage() for r in caplog.records if "sizes.json" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert "000000.tar" in lines[0] and "7" in lines[0] and "5" in lines[0]


def test_a_shard_that_sizes_json_lists_but_the_folder_lacks_is_refused(sharded, tmp_path):
    from mosaictool.errors import MosaicError

    _, shards = sharded
    folder = _copy_shards(shards, tmp_path / "s")
    (folder / "000001.tar").unlink()
    with pytest.raises(MosaicError) as e:
        TrainData.load(str(folder), method=methods.create("mosaiclip"))
    assert "sizes.json" in str(e.value) and "000001.tar" in str(e.value) and "\n" not in str(e.value)


def test_a_repeated_member_in_a_shard_is_one_line_naming_shard_and_key(sharded, tmp_path):
    """Two 000000001.png in one tar: which image is the sample's? Neither is guessed."""
    import io

    from mosaictool.errors import MosaicError

    _, shards = sharded
    with tarfile.open(shards / "000000.tar") as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    dup = next((m, b) for m, b in members if m.name == "000000001.png")
    folder = tmp_path / "s"
    folder.mkdir()
    with tarfile.open(folder / "000000.tar", "w") as out:
        for m, b in [*members, dup]:
            out.addfile(m, io.BytesIO(b))
    with pytest.raises(MosaicError) as e:
        TrainData.load(str(folder), method=methods.create("mosaiclip"))
    line = str(e.value)
    assert f"{folder / '000000.tar'}#000000001: key '000000001' again after other samples (000000001.png)" in line
    assert "mosaictool shard" in line and "\n" not in line


def test_a_record_naming_itself_as_its_hard_image_is_a_bad_record(tmp_path):
    from mosaictool.errors import MosaicError

    data = make_world(tmp_path / "w", n=4)
    lines = data.read_text().splitlines()
    first = json.loads(lines[0])
    first["hard_images"] = [first["id"]]
    data.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(MosaicError) as e:
        TrainData.load(str(data), method=methods.create("negclip"))
    assert f"{data}:1" in str(e.value) and "hard_images[0]" in str(e.value) and "own id" in str(e.value)
    kept = TrainData.load(str(data), method=methods.create("negclip"), skip_bad=True)
    assert [r["id"] for r in kept.records] == ["img-1", "img-2", "img-3"]


class _WorkerTagged:
    """A loader's collate that also says which worker built the batch (the loader hands each batch to one worker)."""

    def __init__(self, collate):
        self.collate = collate

    def __call__(self, samples):
        return torch.utils.data.get_worker_info().id, self.collate(samples).indices.tolist()


@pytest.mark.parametrize("n", [16, 19])
def test_every_sample_once_per_epoch_across_2_nodes_2_ranks_2_workers(tmp_path, n):
    """Shards of 5, 5, 5 and 1 (or 4) samples, read as 2 nodes x 2 ranks (world size 4) with 2 loader workers
    each. Ranks take slices of one seeded permutation of all the samples, never whole shards, so uneven shards
    unbalance nothing. The policy for a remainder: each epoch drops the n mod (batch x world) samples at the
    tail of its permutation (another draw each epoch), as a DataLoader's drop_last does; none is repeated."""
    from mosaictool.training.loader import TrainDataset
    from mosaictool.training.sampler import BatchPlan, SamplerConfig
    from mosaictool.training.transform import ImageTransform

    data = make_world(tmp_path / "w", n=n)
    mosaictool.shard(data, out=tmp_path / "shards", image_root=data.parent, shard_size=5)
    train_data = TrainData.load(str(tmp_path / "shards"), method=methods.create("mosaiclip"))
    cfg = SamplerConfig(method=methods.create("mosaiclip"), batch_size=2, seed=3)
    world, epochs = 4, 2
    seen: dict[int, list[tuple]] = {epoch: [] for epoch in range(epochs)}  # epoch -> (key, rank, worker) per sample
    for rank in range(world):
        plan = BatchPlan(n, cfg, rank=rank, world_size=world, start=0, stop=epochs * (n // 8))
        dataset = TrainDataset(train_data, cfg, ImageTransform(32, augment=False), lambda texts: torch.zeros(len(texts), 77))
        loader = torch.utils.data.DataLoader(dataset, batch_sampler=plan, collate_fn=_WorkerTagged(dataset.collate),
                                             num_workers=2, multiprocessing_context="fork")
        for g, (worker, indices) in enumerate(loader):
            seen[g // plan.batches_per_epoch] += [(train_data.records[i]["id"], rank, worker) for i in indices]
    keys = [rec["id"] for rec in train_data.records]
    for epoch, samples in seen.items():
        got = [key for key, _, _ in samples]
        assert len(got) == len(set(got)) == n - n % 8, epoch  # no sample twice in an epoch
        assert {(rank, worker) for _, rank, worker in samples} == {(r, w) for r in range(world) for w in range(2)}
        left_out = [keys[i] for i in plan.permutation(epoch)[n - n % 8:]]
        assert sorted(got + left_out) == sorted(keys), epoch  # every sample once, or left out by the policy above
    if n % 8:
        assert {key for key, _, _ in seen[0]} != {key for key, _, _ in seen[1]}  # another remainder each epoch


@pytest.mark.parametrize("cut", ["in-a-member", "in-a-header"])
def test_training_and_the_text_stages_say_the_same_of_a_broken_tar(sharded, tmp_path, cut):
    """One tar reader (mosaictool.sources.read_tar): `train --data` and `parse` refuse a cut shard with the
    same line, up to what to do about it (write it again with `shard`, or leave it out of --data)."""
    from mosaictool.errors import MosaicError
    from mosaictool.sources import REDO
    from mosaictool.training.shards import SHARD_REDO

    folder = _copy_shards(sharded[1], tmp_path / "s")
    tar = folder / "000001.tar"
    with tarfile.open(tar) as t:
        last = [m for m in t if m.name.endswith(".png")][-1]
    tar.write_bytes(tar.read_bytes()[:last.offset_data + 10 if cut == "in-a-member" else last.offset + 256])
    with pytest.raises(MosaicError) as trained:
        TrainData.load(str(folder), method=methods.create("mosaiclip"))
    with pytest.raises(MosaicError) as read:
        list(mosaictool.read(tar))
    assert str(trained.value).removesuffix(SHARD_REDO) == str(read.value).removesuffix(REDO)
    assert str(tar) in str(read.value) and ("truncated" in str(read.value) or "corrupt" in str(read.value))


# --- bad input (moved from test_bad_input.py) ---

@pytest.fixture(scope="module")
def shards(tiny_world, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shards") / "shards"
    assert_ok(invoke(["shard", tiny_world, "--image-root", tiny_world.parent, "--out", out, "--shard-size", "4", "-q"]))
    return out


def _rewrite_tar(path: Path, change) -> None:
    """Rewrite a tar member by member; change(name, bytes) -> bytes, or None to drop the member."""
    import io
    import tarfile

    with tarfile.open(path) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar]
    with tarfile.open(path, "w") as tar:
        for m, data in members:
            data = change(m.name, data)
            if data is not None:
                m.size = len(data)
                tar.addfile(m, io.BytesIO(data))


def _cut_tar(path: Path, inside: str) -> None:
    """Cut the tar in the middle of its last PNG member's data or header."""
    import tarfile

    with tarfile.open(path) as tar:
        last = [m for m in tar if m.name.endswith(".png")][-1]
    cut = last.offset_data + last.size // 2 if inside == "data" else last.offset + 256
    path.write_bytes(path.read_bytes()[:cut])


@pytest.mark.parametrize(
    "kind, mutate, words",
    [
        ("cut-inside-a-member", lambda p: _cut_tar(p, "data"), "truncated tar shard"),
        ("cut-inside-a-header", lambda p: _cut_tar(p, "header"), "truncated or corrupt tar shard (no end-of-archive"),
        ("garbage", lambda p: p.write_bytes(bytes(range(256)) * 20), "not a readable tar shard"),
        ("zero-byte", lambda p: p.write_bytes(b""), "not a readable tar shard: empty file"),
        ("invalid-json-member", lambda p: _rewrite_tar(p, lambda n, d: b"{oops" if n == "000000005.json" else d),
         "000000005.json: invalid JSON"),
    ],
    ids=["cut-inside-a-member", "cut-inside-a-header", "garbage", "zero-byte", "invalid-json-member"],
)
def test_broken_tar_shard(case, shards, kind, mutate, words):
    folder = case.src / "shards"
    shutil.copytree(shards, folder)
    mutate(folder / "000001.tar")
    case.freeze()
    assert_refused(invoke(train_args(folder, case.dst / "run")), str(folder / "000001.tar"), words,
                   "mosaictool shard", "--data")
    case.untouched()


def test_shard_sample_without_its_image(case, shards):
    folder = case.src / "shards"
    shutil.copytree(shards, folder)
    _rewrite_tar(folder / "000001.tar", lambda n, d: None if n == "000000005.png" else d)
    case.freeze()
    assert_refused(invoke(train_args(folder, case.dst / "run")), f"{folder / '000001.tar'}: record 'img-5'",
                   "no image member", "--skip-bad")
    case.untouched()
    result = invoke(train_args(folder, case.dst / "run", "--skip-bad", "--batch-size", "3"))
    assert_ok(result)
    assert "skipped 1 bad record(s)" in result.stderr
    assert snapshot(case.src) == case._before


def test_corrupt_image_inside_a_shard(case, shards):
    folder = case.src / "shards"
    shutil.copytree(shards, folder)
    _rewrite_tar(folder / "000001.tar", lambda n, d: b"garbage" if n == "000000005.png" else d)
    case.freeze()
    assert_refused(invoke(train_args(folder, case.dst / "run")), f"{folder / '000001.tar'} (member at byte",
                   "record 'img-5'", "not an image file", "shard --skip-bad")
    assert snapshot(case.src) == case._before
    assert not (case.dst / "run" / "final.pt").exists() and not (case.dst / "run" / "last.pt").exists()


def test_empty_shard_folder_and_no_match(case):
    (case.src / "shards").mkdir()
    case.freeze()
    assert_refused(invoke(train_args(case.src / "shards", case.dst / "run")), "folder holds no .tar shards",
                   "mosaictool shard")
    assert_refused(invoke(train_args(case.src / "shards" / "{000000..000003}.tar", case.dst / "run")),
                   "no such shard(s)")
    case.untouched()


def test_shard_folder_already_holding_shards(case, tiny_world, shards):
    case.freeze()
    before = snapshot(shards)
    assert_refused(invoke(["shard", tiny_world, "--image-root", tiny_world.parent, "--out", shards, "-q"]), "already holds shards",
                   "--out")
    assert snapshot(shards) == before

