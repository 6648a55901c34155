"""Bad input, measured: every kind of broken or unusual input a user can hand a stage.

Each case checks what the user sees and what is left on disk:
- a refused input: exit code 1, ONE line on stderr, `Error: ...` naming the file, the line / record
  and the flag (or stage) that fixes it, and no Python traceback;
- an accepted oddity (a BOM, CRLF, blank lines, CMYK/16-bit/palette/1x1 images, an over-long caption
  in tree-score): exit 0, the right output, and a note on stderr where a record was skipped;
- in both: the input is byte-for-byte unchanged and no half-written output or temp file is left.
Signals (SIGINT, SIGTERM) run the real command in a subprocess and are marked slow.

KINDS COVERED: 70 distinct inputs (a parametrized case counts only when its input is a different kind):
 records (parse)   1 UTF-8 BOM (.jsonl and .jsonl.gz)  2 CRLF line ends  3 blank / whitespace lines
                   4 no `caption`  5 non-string caption (int, null, list)  6 empty / blank caption
                   7 100,000-character caption  8 duplicate id  9 no `id`  10 id of the wrong type (float, bool)
                   11 a line that is not an object (array, string)  12 invalid JSON  13 invalid UTF-8
                   14 empty file  15 a folder as the input  16 a missing input  17 truncated .gz
                   18 Parquet of the wrong schema (column missing, wrong type)  19 a .parquet that is not Parquet
                   20 truncated Parquet
 outputs           21 -o a folder  22 -o in a missing folder  23 -o equal to the input  24 full disk (/dev/full
                   as -o and as stdout)  25 read-only output folder (skipped when run as root)
 stages            26 decompose before parse (no graph)  27 malformed graph (relation indices)
                   28 negate before decompose (no subgraphs)  29 template: malformed negatives
 vocabularies      30 TSV row with a missing column  31 TSV not UTF-8  32 TSV without header
                   33 missing vocabulary folder / file  34 vocab build: records without graphs
                   35 vocab build: nothing reaches --min-count
 images            36 CMYK  37 16-bit greyscale  38 palette with alpha  39 1x1 (converted; shard and train)
                   40 missing  41 zero-byte  42 truncated  43 not an image (each through shard and train)
 shards            44 tar cut inside a member  45 tar cut inside a header  46 garbage tar  47 zero-byte tar
                   48 invalid JSON member  49 sample without its image  50 corrupt image inside a shard
                   51 empty shard folder / pattern matching nothing  52 --out already holding shards
 training data     53 empty records file  54 fewer records than one batch
 checkpoints       55 truncated  56 zero-byte  57 weights that do not fit their config (another architecture;
                   evaluate, tree-score, wise-ft)  58 wise-ft pair of different architectures  59 an open_clip
                   weights file of another architecture (--pretrained, --zeroshot)
 benchmarks        60 folder missing one annotation file (sugarcrepe, aro)  61 truncated annotation JSON
                   62 annotation case missing fields  63 missing benchmark image
 tree-score        64 bad gold tree (plus no caption, truncated checkpoint, over-long caption skipped with a note)
 devices           65 --device cuda without a GPU (train, evaluate, wise-ft, tree-score)
 training          66 non-finite loss / gradient (stops; the last good checkpoint kept)
                   67 --lr / --wd not a positive finite number  68 truncated last.pt on --resume (falls back,
                   bit-exact)  69 world --out a file or a non-empty folder
 signals (slow)    70 SIGINT and SIGTERM in the middle of parse, negate, shard, evaluate and train (outputs
                   complete or absent; train --resume then bit-exact)
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from helpers import invoke, jsonl, snapshot
from helpers import refused as assert_refused
from train_fixtures import write_tiny_model

# ---- helpers ------------------------------------------------------------------------------------


def assert_ok(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, (result.stdout[-500:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr


class Case:
    """An input folder and an output folder; `untouched()` checks that a failed run lost nothing:
    the input folder is unchanged and the output folder holds nothing (no partial / temp file)."""

    def __init__(self, tmp_path: Path):
        self.src = tmp_path / "in"
        self.dst = tmp_path / "out"
        self.src.mkdir()
        self.dst.mkdir()
        self._before: dict[str, str] | None = None

    def file(self, name: str, content: str | bytes) -> Path:
        path = self.src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
        return path

    def freeze(self) -> None:
        self._before = snapshot(self.src)

    def untouched(self) -> None:
        assert self._before is not None, "call freeze() before running the command"
        assert snapshot(self.src) == self._before, "the input changed"
        assert snapshot(self.dst) == {}, f"output left behind: {snapshot(self.dst)}"


@pytest.fixture
def case(tmp_path) -> Case:
    return Case(tmp_path)


def out_records(path: Path) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


CAP = "A red dog on a blue sofa."


# ---- records, through parse ---------------------------------------------------------------------


def test_bom_is_skipped(case):
    src = case.file("caps.jsonl", "\ufeff" + jsonl({"id": 1, "caption": CAP}, {"id": 2, "caption": CAP}))
    case.freeze()
    result = invoke(["parse", src, "-o", case.dst / "g.jsonl", "-q"])
    assert_ok(result)
    assert [r["id"] for r in out_records(case.dst / "g.jsonl")] == [1, 2]
    assert snapshot(case.src) == case._before


def test_bom_in_gzip_is_skipped(case):
    src = case.src / "caps.jsonl.gz"
    src.write_bytes(gzip.compress(b"\xef\xbb\xbf" + jsonl({"id": 1, "caption": CAP}).encode()))
    result = invoke(["parse", src, "-q"])
    assert_ok(result)
    assert json.loads(result.stdout)["id"] == 1


def test_crlf_and_blank_lines_are_accepted(case):
    body = jsonl({"id": 1, "caption": CAP}).replace("\n", "\r\n") + "\r\n   \n\n" + jsonl({"id": 2, "caption": CAP})
    src = case.file("caps.jsonl", body.encode())
    result = invoke(["parse", src, "-q"])
    assert_ok(result)
    recs = [json.loads(x) for x in result.stdout.splitlines()]
    assert [r["id"] for r in recs] == [1, 2] and recs[0]["caption"] == CAP  # no stray \r in the caption


def test_crlf_bad_line_is_numbered_physically(case):
    src = case.file("caps.jsonl", b'{"id": 1, "caption": "a dog"}\r\n\r\n{"id": 2}\r\n')
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl"]), f"{src}:3:", "missing 'caption'", "--text-key")
    case.untouched()


@pytest.mark.parametrize(
    "record, message, flag",
    [
        ({"id": 2}, "missing 'caption'", "--text-key"),
        ({"id": 2, "caption": 42}, "caption: expected a string, got int", "--skip-bad"),
        ({"id": 2, "caption": None}, "caption: expected a string, got null", "--skip-bad"),
        ({"id": 2, "caption": ["a", "dog"]}, "caption: expected a string, got list", "--skip-bad"),
        ({"id": 2, "caption": ""}, "'caption' is empty", "--skip-bad"),
        ({"id": 2, "caption": "  \t "}, "'caption' is empty", "--skip-bad"),
        ({"id": 2, "caption": "dog " * 25_000}, "100000 characters, more than --max-chars 2000", "--max-chars"),
        ({"id": 1, "caption": CAP}, "duplicate id 1", "--skip-bad"),
        ({"caption": CAP}, "missing 'id'", "--assign-ids"),
        ({"id": 2.5, "caption": CAP}, "'id' must be a string or an integer, got float", "--skip-bad"),
        ({"id": True, "caption": CAP}, "'id' must be a string or an integer, got bool", "--skip-bad"),
        ([1, 2], "expected a JSON object, got list", "--skip-bad"),
        ("just a caption", "expected a JSON object, got str", "--skip-bad"),
    ],
    ids=["no-caption", "int-caption", "null-caption", "list-caption", "empty-caption", "blank-caption",
         "100k-caption", "duplicate-id", "no-id", "float-id", "bool-id", "array-line", "string-line"],
)
def test_bad_record_is_refused_with_its_line(case, record, message, flag):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}, record))
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl"]), f"{src}:2:", message, flag)
    case.untouched()


def test_bad_records_skipped_and_counted_with_skip_bad(case):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}, {"id": 2}, {"id": 1, "caption": CAP},
                                        {"id": 3, "caption": "dog " * 25_000}, {"id": 4, "caption": CAP}))
    result = invoke(["parse", src, "-o", case.dst / "g.jsonl", "--skip-bad", "-q"])
    assert_ok(result)
    assert [r["id"] for r in out_records(case.dst / "g.jsonl")] == [1, 4]
    assert "skipped 3 bad record(s)" in result.stderr and f"{src}:2:" in result.stderr


def test_invalid_json_and_invalid_utf8(case):
    src = case.file("caps.jsonl", b'{"id": 1, "caption": "a dog"}\n{"id": 2, "caption": "a \xff cat"}\n')
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl"]), f"{src}:2:", "invalid JSON", "--skip-bad")
    src2 = case.file("more.jsonl", '{"id": 1, "caption": "a dog"}\n{"id": 2, "caption": "a cat"\n')
    case.freeze()
    assert_refused(invoke(["parse", src2, "-o", case.dst / "g.jsonl"]), f"{src2}:2:", "invalid JSON")
    case.untouched()


def test_empty_file_gives_empty_output(case):
    # A 1:1 stage maps no records to no records (a filter upstream may have kept none); the
    # commands that need data (shard, train) refuse an empty input themselves.
    for name in ("empty.jsonl", "blank.jsonl"):
        src = case.file(name, "" if name == "empty.jsonl" else "\n\n  \n")
        result = invoke(["parse", src, "-o", case.dst / f"{name}.out.jsonl", "-q"])
        assert_ok(result)
        assert (case.dst / f"{name}.out.jsonl").read_text() == ""


def test_directory_as_input(case):
    case.freeze()
    assert_refused(invoke(["parse", case.src, "-o", case.dst / "g.jsonl"]), f"{case.src}: is a directory",
                   "give the JSONL or Parquet file")
    case.untouched()


def test_missing_input(case):
    assert_refused(invoke(["parse", case.src / "nope.jsonl", "-o", case.dst / "g.jsonl"]), "nope.jsonl: no such file")
    assert snapshot(case.dst) == {}


def test_truncated_gzip(case):
    blob = gzip.compress(jsonl(*({"id": i, "caption": CAP} for i in range(200))).encode())
    src = case.file("caps.jsonl.gz", blob[: len(blob) // 2])
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl", "-q"]), f"{src}: truncated or corrupt gzip",
                   "re-create")
    case.untouched()


def test_parquet_of_the_wrong_schema(case):
    import polars as pl

    src = case.src / "caps.parquet"
    pl.DataFrame({"id": [1, 2], "text": [CAP, CAP]}).write_parquet(src)
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl"]), f"{src}:row 1:", "missing 'caption'",
                   "--text-key")
    wrong_type = case.src / "ints.parquet"
    pl.DataFrame({"id": [1], "caption": [7]}).write_parquet(wrong_type)
    case.freeze()
    assert_refused(invoke(["parse", wrong_type, "-o", case.dst / "g.jsonl"]), f"{wrong_type}:row 1:",
                   "caption: expected a string, got int")
    case.untouched()


def test_not_parquet_and_truncated_parquet(case):
    import polars as pl

    fake = case.file("caps.parquet", jsonl({"id": 1, "caption": CAP}))
    good = case.src / "good.parquet"
    pl.DataFrame({"id": list(range(500)), "caption": [CAP] * 500}).write_parquet(good)
    cut = case.file("cut.parquet", good.read_bytes()[: good.stat().st_size // 2])
    case.freeze()
    assert_refused(invoke(["parse", fake, "-o", case.dst / "g.jsonl"]), f"{fake}: not a readable Parquet file")
    assert_refused(invoke(["parse", cut, "-o", case.dst / "g.jsonl"]), f"{cut}: not a readable Parquet file")
    case.untouched()


# ---- outputs ------------------------------------------------------------------------------------


def test_output_is_a_directory(case):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", case.dst]), f"{case.dst}: is a directory", "-o")
    case.untouched()


def test_output_folder_missing(case):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    assert_refused(invoke(["parse", src, "-o", case.dst / "no" / "g.jsonl"]), "does not exist")
    assert snapshot(case.dst) == {}


def test_output_equals_input(case):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    assert_refused(invoke(["parse", src, "-o", src]), "is the input INPUT", "-o")
    assert snapshot(case.src) == case._before


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_full_disk_dev_full(case):
    src = case.file("caps.jsonl", jsonl(*({"id": i, "caption": CAP} for i in range(3))))
    case.freeze()
    before = os.stat("/dev/full")
    assert_refused(invoke(["parse", src, "-o", "/dev/full", "-q"]), "/dev/full: cannot write (No space left on device)",
                   "disk is full", "-o")
    after = os.stat("/dev/full")  # written in place: the device itself was not replaced by a file
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino
    case.untouched()
    assert not list(Path("/dev").glob(".full.*"))


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_full_disk_as_stdout(case):
    import subprocess

    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([sys.executable, "-m", "mosaictool", "decompose", str(src)], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              input=None)
    # decompose refuses a record without a graph before writing; parse's graphs are what it reads
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    graphs = case.file("graphs.jsonl", jsonl({"id": 1, "caption": "a dog", "graph": {
        "entities": [{"span": "a dog", "lemma_span": "a dog", "head": "dog", "lemma_head": "dog", "span_bounds": [0, 2],
                      "modifiers": [{"dep": "det", "span": "a", "lemma_span": "a"}], "type": "unknown",
                      "attributes": []}], "relations": []}}))
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([sys.executable, "-m", "mosaictool", "decompose", str(graphs), "-q"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == "Error: <stdout>: cannot write (No space left on device): the disk is full; " \
                                  "free space or choose another -o"


@contextlib.contextmanager
def unwritable(folder: Path):
    """`folder` made unwritable: by its permission bits, or, for root (whom they do not stop), by the
    immutable flag (chattr +i; ext4, xfs, btrfs)."""
    import subprocess

    if os.geteuid() != 0:
        os.chmod(folder, 0o555)
        try:
            yield
        finally:
            os.chmod(folder, 0o755)
        return
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("running as root on a file system without chattr +i: no folder is unwritable for root here")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_read_only_output_folder(case):
    src = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    with unwritable(case.dst):
        assert_refused(invoke(["parse", src, "-o", case.dst / "g.jsonl"]), f"{case.dst / 'g.jsonl'}: cannot write",
                       "permission denied", "-o")
    case.untouched()


# ---- the other record stages: input of the wrong stage, malformed graphs and negatives --------------


GRAPH = {"entities": [{"span": "a dog", "lemma_span": "a dog", "head": "dog", "lemma_head": "dog", "span_bounds": [0, 2],
                       "modifiers": [{"dep": "det", "span": "a", "lemma_span": "a"}], "type": "unknown", "attributes": []}],
         "relations": []}


@pytest.mark.parametrize(
    "stage, record, message, fix",
    [
        ("decompose", {"id": 2, "caption": CAP}, "missing 'graph'", "mosaictool parse"),
        ("decompose", {"id": 2, "caption": CAP, "graph": {"entities": [], "relations": [
            {"subject": 5, "object": 9, "relation": "on"}]}}, "graph.relations[0].subject: 5 is not an index", "--skip-bad"),
        ("negate", {"id": 2, "caption": CAP, "graph": GRAPH}, "missing 'subgraphs'", "mosaictool decompose"),
        ("template", {"id": 2, "caption": CAP, "graph": GRAPH, "subgraphs": [], "negatives": [{"text": 5}]},
         "missing 'negatives[0].kind'", "--skip-bad"),
    ],
    ids=["decompose-no-graph", "decompose-bad-relation", "negate-no-subgraphs", "template-bad-negative"],
)
def test_stage_input_of_the_wrong_shape(case, stage, record, message, fix):
    first = {"id": 1, "caption": "a dog", "graph": GRAPH}
    if stage != "decompose":  # a record the stage accepts, so that the bad one is line 2
        first = json.loads(invoke(["decompose", "-q"], input=jsonl(first)).stdout)
    src = case.file("in.jsonl", jsonl(first, record))
    case.freeze()
    assert_refused(invoke([stage, src, "-o", case.dst / "out.jsonl", "-q"]), f"{src}:2:", message, fix)
    case.untouched()


# ---- vocabularies --------------------------------------------------------------------------------


@pytest.fixture
def vocab_copy(case):
    folder = case.src / "vocab"
    shutil.copytree(Path(__file__).resolve().parent.parent / "vocab", folder,
                    ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return folder


@pytest.mark.parametrize(
    "kind, content, message",
    [
        ("short-row", "name\tgroup\nperson\tperson\nman\n", "objects.tsv:3: expected 2 tab-separated columns, got 1"),
        ("not-utf8", b"name\tgroup\nperson\tperson\n\xff\xfe\tx\n", "objects.tsv: not UTF-8 text"),
        ("no-header", "", "objects.tsv: the first line must be the header"),
    ],
    ids=["short-row", "not-utf8", "no-header"],
)
def test_broken_vocabulary_file(case, vocab_copy, kind, content, message):
    (vocab_copy / "objects.tsv").write_bytes(content if isinstance(content, bytes) else content.encode())
    case.freeze()
    assert_refused(invoke(["vocab", "show", "--vocab", vocab_copy]), message)
    graphs = case.file("sub.jsonl", invoke(["decompose", "-q"], input=jsonl({"id": 1, "caption": "a dog",
                                                                             "graph": GRAPH})).stdout)
    case.freeze()
    assert_refused(invoke(["negate", graphs, "--vocab", vocab_copy, "-o", case.dst / "n.jsonl", "-q"]), message)
    case.untouched()


def test_missing_vocabulary_folder_and_file(case, vocab_copy):
    os.unlink(vocab_copy / "relations.tsv")
    case.freeze()
    assert_refused(invoke(["vocab", "show", "--vocab", case.src / "nope"]), "nope: no such vocabulary folder", "vocab build")
    assert_refused(invoke(["vocab", "show", "--vocab", vocab_copy]), "relations.tsv: missing")
    case.untouched()


def test_vocab_build_bad_records_and_nothing_to_keep(case):
    src = case.file("graphs.jsonl", jsonl({"id": 1, "caption": "a dog", "graph": GRAPH}, {"id": 2, "caption": CAP}))
    case.freeze()
    assert_refused(invoke(["vocab", "build", src, "-o", case.dst / "v", "--min-count", "1"]), f"{src}:2:",
                   "missing 'graph'", "mosaictool parse")
    ok = case.file("ok.jsonl", jsonl({"id": 1, "caption": "a dog", "graph": GRAPH}))
    case.freeze()
    assert_refused(invoke(["vocab", "build", ok, "-o", case.dst / "v", "--min-count", "5"]), f"{ok}:",
                   "--min-count 5", "nothing written")
    case.untouched()


# ---- images, shards and training data --------------------------------------------------------------


def _odd_image(kind: str, path: Path) -> tuple[int, int, int]:
    """Write an unusual but valid image; returns the RGB colour it must decode to."""
    from PIL import Image

    if kind == "cmyk":
        Image.new("CMYK", (40, 40), (0, 255, 0, 0)).save(path, "JPEG", quality=100)
        return (255, 0, 255)
    if kind == "16bit":
        Image.new("I;16", (40, 40), 30000).save(path, "PNG")
        return (117, 117, 117)  # 30000 / 257, not PIL's clip to white
    if kind == "palette-alpha":
        im = Image.new("P", (40, 40), 1)
        im.putpalette([0, 0, 0, 200, 20, 20] + [0, 0, 0] * 254)
        im.save(path, "PNG", transparency=0)
        return (200, 20, 20)
    if kind == "1x1":
        Image.new("RGB", (1, 1), (9, 90, 200)).save(path, "PNG")
        return (9, 90, 200)
    raise ValueError(kind)


def _bad_image(kind: str, path: Path, good: bytes) -> str:
    """Write a broken image (or none); returns the words the error must hold."""
    if kind == "missing":
        return "image not found"
    if kind == "zero-byte":
        path.write_bytes(b"")
        return "not an image file"
    if kind == "truncated":
        path.write_bytes(good[: len(good) // 2])
        return "truncated"
    if kind == "not-an-image":
        path.write_text("this is a caption, not a PNG")
        return "not an image file"
    raise ValueError(kind)


@pytest.fixture(scope="module")
def world(tiny_worlds) -> Path:
    """8 make_world records with images (batch 4: two batches)."""
    return tiny_worlds(n=8)[0]


def copy_world(world: Path, case: Case, replace: dict[int, str] | None = None) -> Path:
    """The world into case.src; record i's image becomes `replace[i]` (a name under images/)."""
    shutil.copytree(world.parent / "images", case.src / "images")
    records = [json.loads(x) for x in world.read_text().splitlines()]
    for i, name in (replace or {}).items():
        records[i]["image"] = f"images/{name}"
    return case.file("captions.jsonl", jsonl(*records))


def train_args(data, out, *extra):
    return ["train", "--data", data, "--out", out, "--batch-size", "4", "--steps", "2", "--no-augment",
            "--device", "cpu", "-q", *extra]


@pytest.mark.parametrize("kind", ["cmyk", "16bit", "palette-alpha", "1x1"])
def test_unusual_images_are_converted(case, world, kind):
    import random

    from mosaictool.training.transform import ImageTransform

    name = f"odd.{'jpg' if kind == 'cmyk' else 'png'}"
    colour = _odd_image(kind, case.src / name)
    pixels = ImageTransform(32, augment=False)((case.src / name).read_bytes(), random.Random(0))
    assert pixels.shape == (3, 32, 32)
    assert [round(float(pixels[c].float().mean())) for c in range(3)] == pytest.approx(colour, abs=3)
    data = copy_world(world, case, {3: name})
    shutil.move(case.src / name, case.src / "images" / name)
    case.freeze()
    assert_ok(invoke(["shard", data, "--image-root", case.src, "--out", case.dst / "shards", "-q"]))
    assert json.loads((case.dst / "shards" / "sizes.json").read_text()) == {"000000.tar": 8}
    assert_ok(invoke(train_args(case.dst / "shards", case.dst / "run")))
    assert (case.dst / "run" / "final.pt").is_file()
    assert snapshot(case.src) == case._before


@pytest.mark.parametrize("kind", ["missing", "zero-byte", "truncated", "not-an-image"])
def test_bad_image_in_shard(case, world, kind):
    words = _bad_image(kind, case.src / "bad.png", (world.parent / "images" / "000.png").read_bytes())
    data = copy_world(world, case, {3: "../bad.png"})
    case.freeze()
    assert_refused(invoke(["shard", data, "--image-root", case.src, "--out", case.dst / "shards", "-q"]),
                   f"{data}: record 'img-3'", words, "bad.png", "--skip-bad")
    case.untouched()
    result = invoke(["shard", data, "--image-root", case.src, "--out", case.dst / "shards", "-q", "--skip-bad"])
    assert_ok(result)
    assert "skipped 1 bad record(s)" in result.stderr and "img-3" in result.stderr
    assert json.loads((case.dst / "shards" / "sizes.json").read_text()) == {"000000.tar": 7}
    assert snapshot(case.src) == case._before


@pytest.mark.parametrize("kind", ["missing", "zero-byte", "truncated", "not-an-image"])
def test_bad_image_in_training_records(case, world, kind):
    words = _bad_image(kind, case.src / "bad.png", (world.parent / "images" / "000.png").read_bytes())
    data = copy_world(world, case, {3: "../bad.png"})
    case.freeze()
    line = assert_refused(invoke(train_args(data, case.dst / "run")), "bad.png", "record 'img-3'", words)
    assert "--skip-bad" in line or "shard --skip-bad" in line
    assert snapshot(case.src) == case._before
    # found before training: no run folder; found while decoding: the run folder holds no checkpoint
    run = case.dst / "run"
    assert not run.exists() or sorted(p.name for p in run.iterdir()) in (["config.json"], ["config.json", "metrics.jsonl"])


@pytest.fixture(scope="module")
def shards(world, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shards") / "shards"
    assert_ok(invoke(["shard", world, "--image-root", world.parent, "--out", out, "--shard-size", "4", "-q"]))
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


def test_shard_folder_already_holding_shards(case, world, shards):
    case.freeze()
    before = snapshot(shards)
    assert_refused(invoke(["shard", world, "--image-root", world.parent, "--out", shards, "-q"]), "already holds shards",
                   "--out")
    assert snapshot(shards) == before


def test_training_records_empty_or_too_few(case, world):
    empty = case.file("empty.jsonl", "")
    case.freeze()
    assert_refused(invoke(train_args(empty, case.dst / "run")), f"{empty}: no usable training records")
    assert_refused(invoke(train_args(world, case.dst / "run", "--batch-size", "64")),
                   "8 training records are fewer than one global batch", "--batch-size")
    case.untouched()


# ---- checkpoints: truncated, another architecture, mismatched pairs ---------------------------------


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    import torch

    from mosaictool.model import openclip

    d = tmp_path_factory.mktemp("ckpts")
    tiny = d / "tiny.pt"
    openclip.save_checkpoint(tiny, openclip.create("mosaic-tiny", seed=0))
    other = d / "other.pt"
    openclip.save_checkpoint(other, openclip.create("test-tiny", model_config_file=write_tiny_model(d), seed=0))
    blob = tiny.read_bytes()
    (d / "truncated.pt").write_bytes(blob[: len(blob) // 2])
    (d / "zero.pt").write_bytes(b"")
    lie = torch.load(tiny, weights_only=True)  # mosaic-tiny weights under another architecture's config
    other_ckpt = torch.load(other, weights_only=True)
    lie.update(model_name=other_ckpt["model_name"], model_cfg=other_ckpt["model_cfg"])
    torch.save(lie, d / "lie.pt")
    torch.save(other_ckpt["state_dict"], d / "other_weights.pt")  # a plain open_clip weights file
    return {p.stem: p for p in d.glob("*.pt")}


@pytest.fixture(scope="module")
def bench_root(tmp_path_factory) -> Path:
    """SugarCrepe's layout: three subsets of three cases, COCO val2017 images."""
    from PIL import Image

    root = tmp_path_factory.mktemp("bench")
    (root / "sugarcrepe").mkdir()
    colours = ["red", "green", "blue"]
    for sub in ("add_att", "swap_obj", "replace_rel"):
        cases = {str(i): {"filename": f"{c}.jpg", "caption": f"a {c} square", "negative_caption": f"a {colours[i - 1]} circle"}
                 for i, c in enumerate(colours)}
        (root / "sugarcrepe" / f"{sub}.json").write_text(json.dumps(cases))
    (root / "coco" / "val2017").mkdir(parents=True)
    for c in colours:
        Image.new("RGB", (24, 24), c).save(root / "coco" / "val2017" / f"{c}.jpg")
    return root


CKPT_ERRORS = {
    "truncated": "truncated or corrupt checkpoint",
    "zero": "empty checkpoint (0 bytes)",
    "lie": "weights do not fit the test-tiny its config describes",
}


@pytest.mark.parametrize("kind", sorted(CKPT_ERRORS))
def test_bad_checkpoint_in_evaluate_tree_score_wise_ft(case, ckpts, bench_root, kind, tmp_path):
    bad = ckpts[kind]
    caps = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    before = snapshot(bad.parent)
    assert_refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "-c", bad, "-d", bench_root, "-o",
                           case.dst / "r.jsonl", "-q"]), str(bad), CKPT_ERRORS[kind])
    assert_refused(invoke(["tree-score", caps, "--checkpoint", bad, "-o", case.dst / "t.jsonl", "-q"]), str(bad),
                   CKPT_ERRORS[kind])
    assert_refused(invoke(["wise-ft", "--zeroshot", ckpts["tiny"], "--finetuned", bad, "--out", case.dst / "w"]),
                   str(bad), CKPT_ERRORS[kind])
    case.untouched()
    assert snapshot(bad.parent) == before
    assert len(assert_refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "-c", bad, "-d", bench_root]))) < 400


def test_wise_ft_with_mismatched_checkpoints(case, ckpts):
    case.freeze()
    assert_refused(invoke(["wise-ft", "--zeroshot", ckpts["tiny"], "--finetuned", ckpts["other"], "--out", case.dst / "w"]),
                   "are different architectures (model_name: 'mosaic-tiny' vs 'test-tiny')")
    assert_refused(invoke(["wise-ft", "--zeroshot", ckpts["other_weights"], "--finetuned", ckpts["tiny"], "--out",
                           case.dst / "w"]), "--zeroshot", "other_weights.pt", "another architecture")
    assert_refused(invoke(["wise-ft", "--zeroshot", ckpts["truncated"], "--finetuned", ckpts["tiny"], "--out",
                           case.dst / "w"]), "--zeroshot", "truncated.pt")
    case.untouched()


def test_pretrained_weights_of_another_architecture(case, world, ckpts, bench_root):
    case.freeze()
    assert_refused(invoke(train_args(world, case.dst / "run", "--model", "mosaic-tiny", "--pretrained",
                                     ckpts["other_weights"])), "other_weights.pt", "another architecture")
    assert_refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "--model", "mosaic-tiny", "--pretrained",
                           ckpts["other_weights"], "-d", bench_root]), "other_weights.pt", "another architecture")
    case.untouched()


# ---- benchmarks ----------------------------------------------------------------------------------------


def test_benchmark_folder_missing_one_annotation_file(case, ckpts, bench_root):
    root = case.src / "bench"
    shutil.copytree(bench_root, root)
    os.unlink(root / "sugarcrepe" / "swap_obj.json")
    (root / "aro").mkdir()
    case.freeze()
    assert_refused(invoke(["evaluate", "-b", "sugarcrepe:add_att+swap_obj+replace_rel", "-c", ckpts["tiny"], "-d", root,
                           "-o", case.dst / "r.jsonl"]), "sugarcrepe", "swap_obj.json not found", "--data-root")
    assert_refused(invoke(["evaluate", "-b", "aro:VG-Relation", "-c", ckpts["tiny"], "-d", root, "-o", case.dst / "r.jsonl"]),
                   "visual_genome_relation.json not found", "--data-root")
    case.untouched()


@pytest.mark.parametrize(
    "content, words",
    [('{"0": {"filename": "red.jpg", "capt', "invalid JSON"),
     ('{"0": {"filename": "red.jpg"}}', "case '0': missing 'caption'")],
    ids=["truncated-annotation", "annotation-missing-fields"],
)
def test_broken_annotation_file(case, ckpts, bench_root, content, words):
    root = case.src / "bench"
    shutil.copytree(bench_root, root)
    (root / "sugarcrepe" / "swap_obj.json").write_text(content)
    case.freeze()
    assert_refused(invoke(["evaluate", "-b", "sugarcrepe:swap_obj", "-c", ckpts["tiny"], "-d", root, "-o",
                           case.dst / "r.jsonl"]), str(root / "sugarcrepe" / "swap_obj.json"), words)
    case.untouched()


def test_benchmark_image_missing(case, ckpts, bench_root):
    root = case.src / "bench"
    shutil.copytree(bench_root, root)
    os.unlink(root / "coco" / "val2017" / "green.jpg")
    case.freeze()
    assert_refused(invoke(["evaluate", "-b", "sugarcrepe:add_att", "-c", ckpts["tiny"], "-d", root, "-o",
                           case.dst / "r.jsonl"]), "1 image file(s) missing", "green.jpg", "--data-root",
                   "--skip-missing")
    case.untouched()


# ---- tree-score -----------------------------------------------------------------------------------------


def test_tree_score_bad_records(case, ckpts):
    caps = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}, {"id": 2, "text": CAP}))
    case.freeze()
    assert_refused(invoke(["tree-score", caps, "--checkpoint", ckpts["tiny"], "-o", case.dst / "t.jsonl", "-q"]),
                   f"{caps}:2:", "missing or non-string 'caption'", "--text-key")
    gold = case.file("gold.jsonl", jsonl({"id": 1, "tree": "((a red) dog"}))
    ok = case.file("ok.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    assert_refused(invoke(["tree-score", ok, "--checkpoint", ckpts["tiny"], "--gold", gold, "-o", case.dst / "t.jsonl",
                           "-q"]), f"{gold}:1:", "bad gold `tree`")
    case.untouched()


def test_tree_score_skips_an_overlong_caption_with_a_note(case, ckpts):
    caps = case.file("caps.jsonl", jsonl({"id": 1, "caption": "dog " * 25_000}, {"id": 2, "caption": "a red dog"}))
    result = invoke(["tree-score", caps, "--checkpoint", ckpts["tiny"], "-o", case.dst / "t.jsonl", "-q"])
    assert_ok(result)
    rows = out_records(case.dst / "t.jsonl")
    assert [(r["id"], r["skipped"]) for r in rows] == [(1, "too_long"), (2, None)]
    assert "too_long 1" in result.stderr


# ---- devices ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a GPU is visible")
def test_device_cuda_without_a_gpu(case, world, ckpts, bench_root):
    caps = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    for args in (
        ["train", "--data", world, "--out", case.dst / "run", "--steps", "1", "--batch-size", "4", "--device", "cuda"],
        ["evaluate", "-b", "sugarcrepe", "-c", ckpts["tiny"], "-d", bench_root, "--device", "cuda"],
        ["wise-ft", "--zeroshot", ckpts["tiny"], "--finetuned", ckpts["tiny"], "--out", case.dst / "w", "--device", "cuda"],
        ["tree-score", caps, "--checkpoint", ckpts["tiny"], "--device", "cuda:1"],
    ):
        assert_refused(invoke(args), "--device cuda", "no CUDA GPU is visible", "--device cpu")
    case.untouched()


# ---- training: a loss that blows up, bad numbers, a truncated last.pt -----------------------------------


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(case, world):
    import torch

    from mosaictool.model import openclip

    run = case.dst / "run"
    # --lr 30 with warmup: finite for a few steps (here 3), then the weights blow up
    result = invoke(train_args(world, run, "--steps", "10", "--save-every", "1", "--lr", "30", "--warmup", "4",
                               "--grad-clip", "0"))
    line = assert_refused(result, "(not finite), training stopped", "--lr")
    step = int(line.split("step ", 1)[1].split(":", 1)[0])
    assert not (run / "final.pt").exists() and not [p for p in run.iterdir() if p.name.startswith(".")]
    if "last good checkpoint" in line:
        kept = openclip.read_checkpoint(run / "last.pt")
        assert f"(step {kept['step']})" in line and kept["step"] <= step - 2  # its next loss was finite
        assert all(torch.isfinite(v).all() for v in kept["state_dict"].values() if v.is_floating_point())
        # the message's way out works: a new run from it with a lower --lr
        assert_ok(invoke(train_args(world, case.dst / "again", "--pretrained", run / "last.pt", "--lr", "1e-4")))
    else:
        assert "no checkpoint was written yet" in line and not (run / "last.pt").exists()
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == list(range(1, step))


@pytest.mark.parametrize("flag, value", [("--lr", "nan"), ("--lr", "inf"), ("--lr", "-1"), ("--wd", "nan")])
def test_bad_numbers_refused_before_training(case, world, flag, value):
    assert_refused(invoke(train_args(world, case.dst / "run", flag, value)), f"{flag} ", "must be")
    assert snapshot(case.dst) == {}


def test_resume_from_a_truncated_last_checkpoint_falls_back(case, world):
    import torch

    from mosaictool.model import openclip

    run = case.dst / "run"
    args = train_args(world, run, "--steps", "6", "--save-every", "2")
    assert_ok(invoke(args))
    reference = openclip.read_checkpoint(run / "final.pt")["state_dict"]
    assert sorted(p.name for p in run.iterdir()) == ["config.json", "final.pt", "metrics.jsonl"]
    # the same run stopped after step 4 (last.pt = step 4, last.prev.pt = step 2), last.pt then cut short
    crashed = case.dst / "crashed"
    with pytest.raises(KeyboardInterrupt):  # on_step is not a flag: stop it like Ctrl-C would
        from mosaictool.training import TrainConfig, train

        def stop(step, metrics, model):
            if step == 5:
                raise KeyboardInterrupt

        train(TrainConfig(data=str(world), out=str(crashed), batch_size=4, steps=6, save_every=2, augment=False,
                          device="cpu", quiet=True), on_step=stop)
    assert openclip.read_checkpoint(crashed / "last.prev.pt")["step"] == 2
    blob = (crashed / "last.pt").read_bytes()
    (crashed / "last.pt").write_bytes(blob[: len(blob) // 3])
    result = invoke(["train", "--resume", crashed, "-q"])
    assert_ok(result)
    assert "last.pt: truncated or corrupt" in result.stderr and "last.prev.pt (step 2)" in result.stderr
    resumed = openclip.read_checkpoint(crashed / "final.pt")["state_dict"]
    assert all(torch.equal(reference[k], resumed[k]) for k in reference)  # bit-exact
    assert sorted(p.name for p in crashed.iterdir()) == ["config.json", "final.pt", "metrics.jsonl"]
    assert [json.loads(x)["step"] for x in (crashed / "metrics.jsonl").read_text().splitlines()] == list(range(1, 7))


# ---- other outputs ---------------------------------------------------------------------------------------


def test_world_out_is_a_file_or_not_empty(case):
    f = case.file("caps.jsonl", jsonl({"id": 1, "caption": CAP}))
    case.freeze()
    assert_refused(invoke(["world", "--out", f, "--train", "2"]), f"{f}: is a file", "--out")
    assert_refused(invoke(["world", "--out", case.src, "--train", "2"]), "exists and is not empty", "--out",
                   "--overwrite")
    case.untouched()


# ---- signals in the middle of a run (real processes) -------------------------------------------------
# Each command runs under tests/paused_cli.py, which stops it at a known point of its work and says so
# on stderr; the signal is sent once that line is read, so it always lands mid-run.


def _run_and_signal(args: list, sig: int, pause_after: str, calls: int = 1) -> tuple[int, str]:
    """Run `mosaictool ARGS`, paused after the `calls`-th call of `pause_after`; send `sig` there and
    return (exit code, stderr)."""
    import subprocess

    import paused_cli

    proc = subprocess.Popen([sys.executable, paused_cli.__file__, pause_after, str(calls), *map(str, args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        before = []
        for line in proc.stderr:  # blocks until the child writes a line; ends if the child does
            if line.strip() == paused_cli.READY:
                break
            before.append(line)
        else:
            proc.wait()
            pytest.fail(f"ended before the pause (exit {proc.returncode}): {''.join(before)[-2000:]}")
        proc.send_signal(sig)
        _, after = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(before) + after


def _assert_stopped(code: int, err: str, sig: int) -> None:
    import signal

    assert "Traceback" not in err, err
    expected = {signal.SIGINT: (130, "Interrupted."), signal.SIGTERM: (143, "Terminated (SIGTERM).")}[sig]
    assert (code, err.strip().splitlines()[-1]) == expected, (code, err[-2000:])


@pytest.mark.slow
@pytest.mark.parametrize("stage, sig", [("parse", "SIGINT"), ("negate", "SIGTERM")])
def test_signal_in_the_middle_of_a_record_stage(case, stage, sig):
    import signal

    sig = getattr(signal, sig)
    if stage == "parse":
        records = [{"id": i, "caption": f"a red dog number {i} on a blue sofa near {i % 7} cats"} for i in range(300)]
    else:
        first = json.loads(invoke(["decompose", "-q"], input=jsonl({"id": 0, "caption": "a dog", "graph": GRAPH})).stdout)
        records = [{**first, "id": i} for i in range(300)]
    src = case.file("in.jsonl", jsonl(*records))
    case.freeze()
    code, err = _run_and_signal([stage, src, "-o", case.dst / "out.jsonl", "-q"], sig, "mosaictool.io:RecordWriter.write",
                                calls=100)
    _assert_stopped(code, err, sig)
    case.untouched()  # the input as it was, no output and no temporary file


@pytest.mark.slow
def test_sigterm_in_the_middle_of_shard(case, world):
    import signal

    records = [json.loads(x) for x in world.read_text().splitlines()]
    many = [{**records[i % len(records)], "id": i} for i in range(300)]
    src = case.file("many.jsonl", jsonl(*many))
    case.freeze()
    out = case.dst / "shards"
    # paused with one shard of 200 complete and the next one open
    code, err = _run_and_signal(["shard", src, "--image-root", world.parent, "--out", out, "--shard-size", "200", "-q"],
                                signal.SIGTERM, "webdataset:ShardWriter.write", calls=250)
    _assert_stopped(code, err, signal.SIGTERM)
    case.untouched()


@pytest.mark.slow
def test_sigint_in_the_middle_of_evaluate(case, ckpts, bench_root):
    import signal

    root = case.src / "bench"
    shutil.copytree(bench_root, root)
    colours = ["red", "green", "blue"]
    cases = {str(i): {"filename": f"{colours[i % 3]}.jpg", "caption": f"a {colours[i % 3]} square number {i}",
                      "negative_caption": f"a {colours[(i + 1) % 3]} circle number {i}"} for i in range(30)}
    (root / "sugarcrepe" / "add_att.json").write_text(json.dumps(cases))
    case.freeze()
    # paused with the images encoded and the texts not yet, the output file open
    code, err = _run_and_signal(["evaluate", "-b", "sugarcrepe:add_att", "-c", ckpts["tiny"], "-d", root, "-o",
                                 case.dst / "r.jsonl", "--batch-size", "8", "-q"], signal.SIGINT,
                                "mosaictool.bench.engine:Encoder.images")
    _assert_stopped(code, err, signal.SIGINT)
    case.untouched()


@pytest.mark.slow
def test_signals_in_the_middle_of_train_then_resume_is_bit_exact(case, world):
    import signal

    import torch

    import clirun
    from mosaictool.model import openclip

    def mosaictool(*cmd):
        done = clirun.run(*cmd, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]

    args = ["--batch-size", "4", "--steps", "20", "--save-every", "2", "--no-augment", "--device", "cpu", "-q"]
    # every run in the same kind of process (same threads), so that equal means bit for bit
    mosaictool("train", "--data", world, "--out", case.dst / "ref", *args)
    reference = openclip.read_checkpoint(case.dst / "ref" / "final.pt")["state_dict"]
    for sig in (signal.SIGTERM, signal.SIGINT):
        run = case.dst / sig.name
        # paused after the second checkpoint (step 4): last.pt and last.prev.pt on disk
        code, err = _run_and_signal(["train", "--data", world, "--out", run, *args], sig,
                                    "mosaictool.model.openclip:save_checkpoint", calls=2)
        _assert_stopped(code, err, sig)
        assert not (run / "final.pt").exists() and not [p for p in run.iterdir() if p.name.startswith(".")]
        assert openclip.read_resume_checkpoint(run / "last.pt")["step"] == 4
        mosaictool("train", "--resume", run, "-q")
        resumed = openclip.read_checkpoint(run / "final.pt")["state_dict"]
        assert all(torch.equal(reference[k], resumed[k]) for k in reference), sig.name
        assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == list(range(1, 21))
