"""Caption data as researchers hold it: WebDataset tars (img2dataset's layout), COCO and Karpathy
caption files, 🤗-style Parquet with image bytes, CSV/TSV tables, each made here in its real format."""

from __future__ import annotations

import io
import json
import tarfile
import tracemalloc
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import webdataset as wds
from PIL import Image

import mosaictool
from helpers import invoke
from mosaictool.errors import MosaicError
from mosaictool.io import read_records
from mosaictool.sources import Fields

CAPTIONS = ["A red dog on a blue sofa.", "Two cats sleep on a bed.", "A man riding a horse on the beach.",
            "A small boat near a white lighthouse.", "A woman holding an umbrella in the rain.",
            "A green apple on a wooden table."]


def jpeg(colour=(200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (16, 12), colour).save(buf, "JPEG")
    return buf.getvalue()


def img2dataset_shards(folder: Path, captions: list[str], per_shard: int = 3) -> list[Path]:
    """Shards as img2dataset writes them: {shard}.tar of <key>.jpg/.txt/.json, and beside each its
    {shard}_stats.json and {shard}.parquet (which a reader of the folder's tars must leave alone)."""
    folder.mkdir(parents=True, exist_ok=True)
    tars = []
    for shard in range(0, len(captions), per_shard):
        name = f"{shard // per_shard:05d}"
        rows = []
        with wds.TarWriter(str(folder / f"{name}.tar")) as sink:
            for i, caption in enumerate(captions[shard:shard + per_shard]):
                key = f"{name}{i:04d}"
                meta = {"url": f"https://example.com/{key}.jpg", "caption": caption, "key": key, "status": "success",
                        "error_message": None, "width": 16, "height": 12, "original_width": 640, "original_height": 480}
                sink.write({"__key__": key, "jpg": jpeg(), "txt": caption, "json": json.dumps(meta)})
                rows.append(meta)
        (folder / f"{name}_stats.json").write_text(json.dumps({"count": len(rows), "successes": len(rows)}))
        pl.DataFrame(rows).write_parquet(folder / f"{name}.parquet")
        tars.append(folder / f"{name}.tar")
    return tars


def raw_tar(path: Path, members: list[tuple[str, bytes]]) -> Path:
    """A tar of exactly these members (webdataset's writer would refuse some of them)."""
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def error_line(result) -> str:
    """The one `Error:` line of a refused command."""
    assert result.exit_code == 1, (result.stdout[-500:], result.stderr[-1000:])
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def refused(source, **kwargs) -> str:
    with pytest.raises(MosaicError) as e:
        list(mosaictool.read(source, **kwargs))
    assert "\n" not in str(e.value)
    return str(e.value)


# ---- WebDataset tars ---------------------------------------------------------------------------------


def test_tar_folder_and_brace_pattern_read_as_records(tmp_path):
    tars = img2dataset_shards(tmp_path / "cc", CAPTIONS)
    by_folder = list(mosaictool.read(tmp_path / "cc"))
    assert [r["caption"] for r in by_folder] == CAPTIONS
    first = by_folder[0]
    assert first["id"] == "000000000" and first["image"] == f"{tars[0]}#000000000.jpg"
    assert first["url"] == "https://example.com/000000000.jpg" and first["original_width"] == 640  # the .json passes through
    pattern = str(tmp_path / "cc" / "{00000..00001}.tar")
    assert list(mosaictool.read(pattern)) == by_folder
    assert [r["id"] for r in mosaictool.read(tars[1])] == ["000010000", "000010001", "000010002"]
    assert [r["id"] for r in mosaictool.read(str(tmp_path / "cc" / "*.tar"))] == [r["id"] for r in by_folder]


def test_caption_and_id_from_named_json_fields(tmp_path):
    tar = tmp_path / "00000.tar"
    with wds.TarWriter(str(tar)) as sink:
        sink.write({"__key__": "k1", "jpg": jpeg(), "json": json.dumps({"TEXT": "a dog", "sample_id": 7, "caption": "alt"})})
    [rec] = mosaictool.read(tar, caption_field="TEXT", id_field="sample_id")
    assert rec == {"id": 7, "caption": "a dog", "image": f"{tar}#k1.jpg", "sample_id": 7}  # TEXT became the caption
    [rec] = mosaictool.read(tar)  # no .txt: the .json's caption
    assert rec["caption"] == "alt" and rec["id"] == "k1"


def test_parse_reads_tars_and_gives_the_jsonl_graphs(tmp_path):
    img2dataset_shards(tmp_path / "cc", CAPTIONS)
    jsonl = tmp_path / "caps.jsonl"
    jsonl.write_text("".join(json.dumps({"id": f"{s:05d}{i:04d}", "caption": c}) + "\n"
                             for s in range(2) for i, c in enumerate(CAPTIONS[3 * s:3 * s + 3])))
    out = tmp_path / "tar-graphs.jsonl"
    result = invoke(["parse", tmp_path / "cc" / "{00000..00001}.tar", "-o", out, "-q"])
    assert result.exit_code == 0, result.stderr
    from_tars = [json.loads(line) for line in out.read_text().splitlines()]
    from_jsonl = list(mosaictool.parse(jsonl))
    assert [r["id"] for r in from_tars] == [r["id"] for r in from_jsonl]
    assert [r["graph"] for r in from_tars] == [r["graph"] for r in from_jsonl]
    assert all(r["graph"]["entities"] for r in from_tars)
    assert b"\xff\xd8" not in out.read_bytes() and "image" in from_tars[0]  # a reference, no JPEG bytes


def test_the_tar_that_was_read_as_jsonl_now_parses(tmp_path):
    tar = img2dataset_shards(tmp_path, CAPTIONS[:2])[0]
    result = invoke(["parse", tar, "-q"])
    assert result.exit_code == 0, result.stderr
    assert [json.loads(line)["caption"] for line in result.stdout.splitlines()] == CAPTIONS[:2]


@pytest.mark.parametrize("members, field, needles", [
    ([("k1.jpg", jpeg()), ("k1.txt", b"caf\xe9 au lait")], None, ["#k1:", "k1.txt is not UTF-8 text"]),
    ([("k1.jpg", jpeg()), ("k1.json", b'{"url": "x"}')], "TEXT", ["#k1:", "k1.json has no 'TEXT' field", "--caption-field"]),
    ([("k1.jpg", jpeg()), ("k1.json", b'{"url": ')], None, ["#k1:", "k1.json: invalid JSON"]),
    ([("k1.jpg", jpeg())], None, ["#k1:", "no caption", "neither a k1.txt nor a k1.json"]),
    ([("k1.jpg", jpeg()), ("k1.json", b'{"url": "x"}')], None, ["#k1:", "no caption", "--caption-field"]),
    ([(".txt", b"a cat")], None, ["#:", "'.txt' is not named <key>.<extension>"]),
], ids=["txt-not-utf8", "json-without-field", "json-invalid", "no-caption-member", "json-without-caption", "missing-key"])
def test_a_bad_sample_is_one_line_naming_shard_and_key(tmp_path, members, field, needles):
    tar = raw_tar(tmp_path / "00000.tar", [("k0.txt", b"a good caption"), ("k0.json", b'{"TEXT": "a good caption"}'), *members])
    line = error_line(invoke(["parse", tar, "-o", tmp_path / "g.jsonl", *(["--caption-field", field] if field else [])]))
    assert f"{tar}#" in line and "--skip-bad" in line
    for needle in needles:
        assert needle in line, (needle, line)
    assert not (tmp_path / "g.jsonl").exists()
    skips = mosaictool.read(tar, skip_bad=True, caption_field=field)
    assert [r["id"] for r in skips] == ["k0"] and skips.skips.count == 1  # --skip-bad: counted, the rest read


def test_repeated_key_and_missing_id_field(tmp_path):
    tar = raw_tar(tmp_path / "a.tar", [("k1.txt", b"a dog"), ("k2.txt", b"a cat"), ("k1.jpg", jpeg())])
    assert "a.tar#k1: key 'k1' again after other samples (k1.jpg)" in refused(tar)
    raw_tar(tmp_path / "s1.tar", [("k1.txt", b"a dog")])
    second = raw_tar(tmp_path / "s2.tar", [("k1.txt", b"a bird")])
    assert f"{second}#k1: duplicate id 'k1'" in refused(str(tmp_path / "s{1..2}.tar"))  # keys across tars: ids, unique
    good = raw_tar(tmp_path / "b.tar", [("k1.txt", b"a dog"), ("k1.json", b'{"url": "u"}')])
    line = refused(good, id_field="sample_id")
    assert "b.tar#k1: k1.json has no 'sample_id' field (id_field; it has 'url')" in line  # the API's words: its argument


def test_a_member_twice_in_a_sample_is_one_line_naming_tar_and_key(tmp_path):
    """Two k1.txt (or two k1.jpg) in one sample: the second replaced the first's caption unsaid."""
    tar = raw_tar(tmp_path / "a.tar", [("k0.txt", b"a dog"), ("k1.txt", b"a cat"), ("k1.jpg", jpeg()), ("k1.txt", b"a cow")])
    assert "a.tar#k1: k1.txt twice in the sample" in refused(tar)
    tar = raw_tar(tmp_path / "b.tar", [("k1.txt", b"a cat"), ("k1.jpg", jpeg()), ("k1.jpg", jpeg((0, 0, 0)))])
    assert "b.tar#k1: k1.jpg twice in the sample" in refused(tar)
    skips = mosaictool.read(tmp_path / "a.tar", skip_bad=True)
    assert [r["id"] for r in skips] == ["k0"] and skips.skips.count == 1


@pytest.mark.parametrize("damage", ["cut-in-image", "cut-header", "garbage-header", "not-a-tar"])
def test_a_corrupt_tar_is_one_line_naming_it_and_the_last_sample(tmp_path, damage):
    tar = img2dataset_shards(tmp_path, CAPTIONS[:3])[0]
    data = tar.read_bytes()
    second = data.index(b"000000001.jpg")  # the second sample's image header
    cut = {"cut-in-image": data[:second + 600], "cut-header": data[:second + 100],
           "garbage-header": data[:second] + b"\x17" * 512 + data[second + 512:], "not-a-tar": b"{\"id\": 1}\n" * 100}[damage]
    tar.write_bytes(cut)
    line = error_line(invoke(["parse", tar, "-o", tmp_path / "g.jsonl", "--skip-bad"]))
    assert str(tar) in line
    if damage != "not-a-tar":
        assert "after sample '000000000'" in line or "after sample '000000001'" in line, line
        assert "truncated" in line or "corrupt" in line
    else:
        assert "not a readable tar shard" in line
    assert not (tmp_path / "g.jsonl").exists()


def test_images_are_never_read_and_one_tar_is_open_at_a_time(tmp_path, monkeypatch):
    tars = img2dataset_shards(tmp_path / "cc", CAPTIONS, per_shard=1)
    opened, read_sizes = [], []
    real_open, real_extract = tarfile.open, tarfile.TarFile.extractfile

    def tracking_open(name, *args, **kwargs):
        tar = real_open(name, *args, **kwargs)
        opened.append(tar)
        return tar

    def tracking_extract(self, member):
        read_sizes.append(member.name)
        return real_extract(self, member)

    monkeypatch.setattr(tarfile, "open", tracking_open)
    monkeypatch.setattr(tarfile.TarFile, "extractfile", tracking_extract)
    records = read_records(str(tmp_path / "cc"), fields=Fields())
    next(records)
    assert len(opened) == 1  # lazily: the first record read one tar
    for _ in records:
        assert sum(not t.closed for t in opened) <= 1
    assert len(opened) == len(tars)
    assert read_sizes and all(n.endswith((".txt", ".json")) for n in read_sizes)


def test_memory_does_not_grow_with_the_number_of_tars(tmp_path):
    caption = "a dog on the grass " * 20
    many = tmp_path / "many"
    many.mkdir()
    big = b"\0" * 64_000  # an image-sized member: read, it would show up in the peak
    for s in range(30):
        raw_tar(many / f"{s:05d}.tar", [(f"{s:05d}{i:04d}.{ext}", data) for i in range(10)
                                         for ext, data in (("jpg", big), ("txt", caption.encode()))])

    def peak(n_tars: int) -> int:
        tracemalloc.start()
        count = sum(1 for _ in read_records(str(many / f"{{00000..{n_tars - 1:05d}}}.tar"), unique_ids=False))
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert count == 10 * n_tars
        return top

    few, all_ = peak(3), peak(30)
    assert all_ < few * 1.5 + 100_000, (few, all_)
    assert all_ < 500_000  # under one tar (640 kB): images are skipped, not read


def test_a_tar_reference_given_to_shard_points_to_train_texts(tmp_path):
    tar = img2dataset_shards(tmp_path, CAPTIONS[:1])[0]
    records = tmp_path / "caps.jsonl"
    mosaictool.write(mosaictool.read(tar), records)
    line = error_line(invoke(["shard", records, "--out", tmp_path / "out"]))
    assert f"{tar}#000000000.jpg" in line and "(an image inside a WebDataset tar" in line
    assert "train --data SHARDS --texts FILE" in line


# ---- tables ------------------------------------------------------------------------------------------


def test_hf_parquet_image_bytes_become_references(tmp_path):
    path = tmp_path / "train-00000-of-00001.parquet"
    table = pa.table({"image": [{"bytes": jpeg((i * 40, 0, 0)), "path": f"{i}.jpg"} for i in range(3)],
                      "caption": CAPTIONS[:3], "sentids": [[1, 2], [3], []], "thumb": [b"\x89PNG"] * 3})
    pq.write_table(table, path)
    records = list(mosaictool.read(path))
    assert [r["id"] for r in records] == [1, 2, 3]  # no id or key column: the row number
    assert [r["image"] for r in records] == [f"{path}#0", f"{path}#1", f"{path}#2"]
    assert records[0]["thumb"] == f"{path}#0" and records[0]["sentids"] == [1, 2]
    out = tmp_path / "out.jsonl"
    assert mosaictool.write(records, out) == 3
    assert b"\xff\xd8" not in out.read_bytes() and b"PNG" not in out.read_bytes()


def test_a_pattern_of_hf_parquet_shards_numbers_rows_on(tmp_path):
    for k in range(2):
        pq.write_table(pa.table({"image": [{"bytes": jpeg(), "path": None}] * 2, "caption": CAPTIONS[2 * k:2 * k + 2]}),
                       tmp_path / f"train-{k:05d}-of-00002.parquet")
    records = list(mosaictool.read(str(tmp_path / "train-*-of-00002.parquet")))
    assert [r["id"] for r in records] == [1, 2, 3, 4] and [r["caption"] for r in records] == CAPTIONS[:4]
    assert records[2]["image"] == f"{tmp_path}/train-00001-of-00002.parquet#0"
    csvs = [tmp_path / f"caps-{k}.csv" for k in range(2)]
    for k, path in enumerate(csvs):
        path.write_text("caption,url\n" + "".join(f"{c},u\n" for c in ["a dog", "a cat"][k:]))
    assert [r["id"] for r in mosaictool.read(str(tmp_path / "caps-{0..1}.csv"))] == [1, 2, 3]
    assert "caps-{0..2}.csv" not in refused(str(tmp_path / "caps-{0..2}.csv")) and "caps-2.csv: no such file" in \
        refused(str(tmp_path / "caps-{0..2}.csv"))


def test_parquet_ids_and_caption_column(tmp_path):
    keyed = tmp_path / "00000.parquet"  # img2dataset's {shard}.parquet: a key column, no id
    pl.DataFrame({"key": ["000000000", "000000001"], "TEXT": CAPTIONS[:2], "url": ["u0", "u1"]}).write_parquet(keyed)
    records = list(mosaictool.read(keyed, caption_field="TEXT"))
    assert records[0] == {"id": "000000000", "key": "000000000", "url": "u0", "caption": CAPTIONS[0]}
    assert "no column 'caption_text' (caption_field); its columns: 'key', 'TEXT', 'url'" in refused(keyed, caption_field="caption_text")
    assert [r["id"] for r in mosaictool.read(keyed, id_field="url")] == ["u0", "u1"]


def test_csv_and_tsv_tables(tmp_path):
    csv_path = tmp_path / "cc.csv"
    csv_path.write_text('url,caption\nhttps://a/1.jpg,"a dog, on grass"\nhttps://a/2.jpg,"a ""big"" cat"\n\n'
                        'https://a/3.jpg,"two\nlines"\n', encoding="utf-8")
    records = list(mosaictool.read(csv_path))
    assert records == [{"id": 1, "url": "https://a/1.jpg", "caption": "a dog, on grass"},
                       {"id": 2, "url": "https://a/2.jpg", "caption": 'a "big" cat'},
                       {"id": 3, "url": "https://a/3.jpg", "caption": "two\nlines"}]
    tsv = tmp_path / "cc3m.tsv"  # CC-3M's file with the header img2dataset's instructions add; quotes are text in a TSV
    tsv.write_text('caption\turl\n"hello" said the dog\thttps://b/1.jpg\na cat\thttps://b/2.jpg\n', encoding="utf-8")
    assert [r["caption"] for r in mosaictool.read(tsv)] == ['"hello" said the dog', "a cat"]
    bad = tmp_path / "bad.csv"
    bad.write_text("id,caption\n1,a dog\n2,a cat,extra\n")
    assert refused(bad).startswith(f"{bad}:3: 3 fields where the header row has 2")
    latin = tmp_path / "latin.tsv"
    latin.write_bytes("caption\turl\ncafé\tu\n".encode("latin-1"))
    assert refused(latin).startswith(f"{latin}: not UTF-8 text")


@pytest.mark.parametrize("name", ["c.csv", "c.tsv", "c.csv.gz"])
def test_a_utf16_table_is_one_line_naming_utf16_even_with_skip_bad(tmp_path, name):
    import gzip

    data = "id,caption\n1,a dog\n".replace(",", "\t" if ".tsv" in name else ",").encode("utf-16")
    (tmp_path / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    line = refused(tmp_path / name, skip_bad=True)
    assert f"{tmp_path / name}: the file is UTF-16 text" in line and "not UTF-8" in line


def test_flags_name_fields_of_tars_and_tables_only(tmp_path):
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text('{"id": 1, "caption": "a dog"}\n')
    assert "caption_field names a field of WebDataset tars" in refused(jsonl, caption_field="TEXT")
    line = error_line(invoke(["parse", jsonl, "--id-field", "key"]))
    assert "--id-field names a field of WebDataset tars" in line and "--text-key" in line


def test_output_may_not_replace_a_tar_of_the_folder(tmp_path):
    img2dataset_shards(tmp_path / "cc", CAPTIONS[:2])
    line = error_line(invoke(["parse", tmp_path / "cc", "-o", tmp_path / "cc" / "00000.tar"]))
    assert "is the input INPUT" in line
    assert tarfile.is_tarfile(tmp_path / "cc" / "00000.tar")


# ---- import coco ---------------------------------------------------------------------------------------


def coco_files(root: Path) -> tuple[Path, Path]:
    """captions_train2017.json and Karpathy's dataset_coco.json for the same three images."""
    images = [{"license": 1, "file_name": f"{i:012d}.jpg", "coco_url": "", "height": 12, "width": 16, "id": i} for i in (9, 25, 30)]
    annotations = [{"image_id": iid, "id": aid, "caption": cap}
                   for aid, (iid, cap) in enumerate(zip([9, 25, 30, 9, 25], CAPTIONS), start=100)]
    captions = root / "captions_train2017.json"
    captions.write_text(json.dumps({"info": {}, "licenses": [], "images": images, "annotations": annotations}))
    karpathy_images = [{"filepath": "train2014" if s != "test" else "val2014", "sentids": [], "filename": f"COCO_x_{i:012d}.jpg",
                        "imgid": k, "split": s, "cocoid": i,
                        "sentences": [{"tokens": ["a"], "raw": f"caption {j} of {i}", "imgid": k, "sentid": 10 * i + j} for j in range(2)]}
                       for k, (i, s) in enumerate([(9, "train"), (25, "test"), (30, "restval")])]
    karpathy = root / "dataset_coco.json"
    karpathy.write_text(json.dumps({"images": karpathy_images, "dataset": "coco"}))
    return captions, karpathy


def import_coco(*args) -> tuple[list[dict], str]:
    result = invoke(["import", "coco", *args])
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()], result.stderr


def test_import_coco_captions(tmp_path):
    captions, _ = coco_files(tmp_path)
    records, note = import_coco(captions)
    assert records[0] == {"id": "9-100", "caption": CAPTIONS[0], "image": "000000000009.jpg", "image_id": 9}
    assert [r["id"] for r in records] == ["9-100", "25-101", "30-102", "9-103", "25-104"]
    assert note.strip() == "wrote 5 caption(s) of 3 image(s)"


def test_import_coco_karpathy_split(tmp_path):
    captions, karpathy = coco_files(tmp_path)
    records, _ = import_coco(captions, "--karpathy", karpathy)  # default: the train split
    assert [r["id"] for r in records] == ["9-100", "9-103"]
    records, _ = import_coco(captions, "--karpathy", karpathy, "--split", "train,restval")
    assert [r["image_id"] for r in records] == [9, 30, 9]
    records, _ = import_coco(karpathy, "--split", "test")  # Karpathy's own sentences
    assert records == [{"id": "25-250", "caption": "caption 0 of 25", "image": "val2014/COCO_x_000000000025.jpg", "image_id": 25},
                       {"id": "25-251", "caption": "caption 1 of 25", "image": "val2014/COCO_x_000000000025.jpg", "image_id": 25}]


def test_import_coco_image_root(tmp_path):
    captions, _ = coco_files(tmp_path)
    (tmp_path / "train2017").mkdir()
    for i in (9, 25):
        (tmp_path / "train2017" / f"{i:012d}.jpg").write_bytes(jpeg())
    line = error_line(invoke(["import", "coco", captions, "--image-root", tmp_path / "train2017", "-o", tmp_path / "c.jsonl"]))
    assert "annotations[2] (id 102): image not found" in line and "000000000030.jpg" in line
    assert not (tmp_path / "c.jsonl").exists()
    records, note = import_coco(captions, "--image-root", tmp_path / "train2017", "--skip-bad")
    assert len(records) == 4 and "skipped 1 bad record(s)" in note


@pytest.mark.parametrize("edit, needles", [
    (lambda d: d["annotations"][3].pop("caption"), ["annotations[3] (id 103)", "caption"]),
    (lambda d: d["annotations"][1].update(caption=7), ["annotations[1] (id 101)", "caption: expected a non-empty string, got int"]),
    (lambda d: d["annotations"][2].update(image_id=4), ["annotations[2] (id 102)", "image_id 4 is not among the file's images"]),
    (lambda d: d["annotations"][4].update(id=100, image_id=9), ["annotations[4] (id 100)", "also", "annotations[0]"]),
    (lambda d: d["images"][1].pop("file_name"), ["images[1]", "file_name"]),
    (lambda d: d.pop("annotations"), ["top level", "annotations"]),
], ids=["no-caption", "int-caption", "unknown-image", "repeated-id", "image-without-file", "no-annotations"])
def test_import_coco_refuses_a_bad_file_naming_the_annotation(tmp_path, edit, needles):
    captions, _ = coco_files(tmp_path)
    data = json.loads(captions.read_text())
    edit(data)
    captions.write_text(json.dumps(data))
    line = error_line(invoke(["import", "coco", captions, "-o", tmp_path / "c.jsonl"]))
    assert str(captions) in line
    for needle in needles:
        assert needle in line, (needle, line)
    assert not (tmp_path / "c.jsonl").exists()


def test_import_coco_refuses_a_bad_karpathy_file_and_split(tmp_path):
    captions, karpathy = coco_files(tmp_path)
    data = json.loads(karpathy.read_text())
    data["images"][1]["split"] = "dev"
    karpathy.write_text(json.dumps(data))
    line = error_line(invoke(["import", "coco", captions, "--karpathy", karpathy]))
    assert f"{karpathy}: images[1]: split: expected one of 'train', 'val', 'test', 'restval', got 'dev'" in line
    assert "--split 'tran'" in error_line(invoke(["import", "coco", captions, "--karpathy", karpathy, "--split", "tran"]))
    assert "give it with --karpathy" in error_line(invoke(["import", "coco", captions, "--split", "train"]))


def test_import_coco_refuses_two_annotations_with_one_id_on_different_images(tmp_path):
    """COCO's annotation ids are unique in a file: two alike are a merged or edited file (the records'
    ids, image-annotation, differed, so both were written unsaid)."""
    captions, _ = coco_files(tmp_path)
    data = json.loads(captions.read_text())
    data["annotations"][1]["id"] = data["annotations"][0]["id"]
    captions.write_text(json.dumps(data))
    line = error_line(invoke(["import", "coco", captions, "-o", tmp_path / "c.jsonl"]))
    assert f"{captions}: annotations[1] (id 100): annotation id 100 is also annotations[0]'s" in line
    assert not (tmp_path / "c.jsonl").exists()


def test_a_table_line_longer_than_the_limit_is_refused_without_reading_it_whole(tmp_path, monkeypatch):
    """The csv module holds a whole line before it judges a field (200 MB: 443 MB of memory)."""
    import tracemalloc

    from mosaictool import sources

    monkeypatch.setattr(sources, "LINE_LIMIT", 1 << 20)
    path = tmp_path / "big.csv"
    with path.open("w") as f:
        f.write("id,caption\n1,")
        for _ in range(64):
            f.write("x" * (1 << 20))
        f.write("\n2,a cat\n")
    tracemalloc.start()
    try:
        line = refused(path, skip_bad=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"{path}:2: line longer than 1 MiB" in line
    assert peak < 16 << 20, peak


def test_a_parquet_column_name_twice_is_refused(tmp_path):
    """Arrow writes two columns of one name; as a record the second replaced the first's captions unsaid."""
    table = pa.Table.from_arrays([pa.array(["a", "b"]), pa.array(["a dog", "a cat"]), pa.array(["x", "y"])],
                                 names=["id", "caption", "caption"])
    pq.write_table(table, tmp_path / "t.parquet")
    line = refused(tmp_path / "t.parquet", skip_bad=True)
    assert f"{tmp_path / 't.parquet'}: column 'caption' appears 2 times in the schema" in line
