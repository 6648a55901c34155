"""Draw the captions of the gold scene-graph set (docs/gold_graphs.md) and write selection.jsonl.

Deterministic: one random.Random(20261128), files read in sorted order, captions deduplicated by text.
Part "coco": 170 positive captions of SugarCrepe (Hsieh et al., 2023), COCO val2017.
Part "other": 170 positive captions, in near-equal shares, from ARO's NegCLIP validation file
(Yuksekgonul et al., 2023), VALSE (Parcalabescu et al., 2022; records that at least two of three
annotators judged a correct caption, as the VALSE paper's valid subset; not the coreference pieces), VL-CheckList (Zhao et al., 2022;
the POS phrases) and ImageCoDe (Krojer et al., 2022; the descriptions of the target images).
Negatives and foils are never drawn; captions over 30 words are skipped.
Part "heldout": 60 further captions drawn after the two parts above with the same generator, never one of
theirs (20 SugarCrepe, 10 each from ARO, VALSE, VL-CheckList and ImageCoDe), annotated after the parser's
repairs were developed on the first two parts, so that they measure those repairs on unseen text.

Run from anywhere: python tests/data/gold_graphs/select.py
The benchmark files are read from $MOSAICTOOL_SHARED/benchmarks, else from ../shared/benchmarks beside
the repository.
"""

from __future__ import annotations

import csv
import json
import os
import random
from pathlib import Path

SEED = 20261128
PER_PART = 170
HELDOUT = {"coco": 20, "aro": 10, "valse": 10, "vlc": 10, "icode": 10}
MAX_WORDS = 30
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
BENCHMARKS = Path(os.environ.get("MOSAICTOOL_SHARED", REPO.parent / "shared")) / "benchmarks"


def sugarcrepe(root: Path):
    for path in sorted((root / "sugarcrepe" / "data").glob("*.json")):
        for _key, ex in sorted(json.loads(path.read_text()).items(), key=lambda kv: int(kv[0])):
            yield path, ex["caption"]


def aro(root: Path):
    # NegCLIP's validation TSV: the "title" column is the true caption, neg_caption the swapped ones.
    path = root / "aro" / "temp_data" / "valid_neg_clip.tsv"
    with path.open(newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            yield path, row["title"]


def valse(root: Path):
    # The coreference pieces append a question and its answer to the caption ("... field. is it day time? yes."):
    # not a caption, so they are left out.
    for path in sorted((root / "valse" / "data").glob("*.json")):
        if path.name.startswith("coreference"):
            continue
        for _key, ex in sorted(json.loads(path.read_text()).items()):
            if ex["mturk"]["caption"] >= 2:
                yield path, ex["caption"]


def vl_checklist(root: Path):
    for path in sorted((root / "vl_checklist" / "data").rglob("*.json")):
        for _image, ex in json.loads(path.read_text()):
            for caption in ex["POS"]:
                yield path, caption


def imagecode(root: Path):
    # valid_data.json maps each image set to {target image index: description}; every description is true
    # of its target image (valid_simple.json repeats the same descriptions with a negative index).
    path = root / "imagecode" / "data" / "valid_data.json"
    for _directory, descriptions in sorted(json.loads(path.read_text()).items()):
        for _idx, caption in sorted(descriptions.items(), key=lambda kv: int(kv[0])):
            yield path, caption


def pool(pairs, root: Path, taken: set[str]) -> list[tuple[str, str]]:
    """(source relative to benchmarks/, caption) once per caption text, first file wins, in read order."""
    out: dict[str, str] = {}
    for path, caption in pairs:
        text = " ".join(caption.split())
        if text and len(text.split()) <= MAX_WORDS and text not in taken and text not in out:
            out[text] = path.relative_to(root).as_posix()
    return [(source, text) for text, source in out.items()]


def main() -> None:
    if not BENCHMARKS.is_dir():
        raise SystemExit(f"Error: no benchmark folder at {BENCHMARKS} (set MOSAICTOOL_SHARED to the folder holding benchmarks/)")
    rng = random.Random(SEED)
    rows = []
    coco = pool(sugarcrepe(BENCHMARKS), BENCHMARKS, set())
    for n, (source, text) in enumerate(rng.sample(coco, PER_PART), 1):
        rows.append({"id": f"coco-sc-{n:04d}", "source": source, "caption": text, "part": "coco"})
    taken = {text for _source, text in coco}
    readers = {"aro": aro, "valse": valse, "vlc": vl_checklist, "icode": imagecode}
    shares = [PER_PART // len(readers) + (i < PER_PART % len(readers)) for i in range(len(readers))]
    for (tag, reader), share in zip(readers.items(), shares):
        drawn = pool(reader(BENCHMARKS), BENCHMARKS, taken)
        for n, (source, text) in enumerate(rng.sample(drawn, share), 1):
            rows.append({"id": f"other-{tag}-{n:04d}", "source": source, "caption": text, "part": "other"})
            taken.add(text)
    # Drawn after both parts, so their selection stays as it was; a caption of either part is never drawn again.
    drawn_texts = {row["caption"] for row in rows}
    heldout_pools = {"coco": coco, **{tag: pool(reader(BENCHMARKS), BENCHMARKS, set()) for tag, reader in readers.items()}}
    for tag, share in HELDOUT.items():
        fresh = [(source, text) for source, text in heldout_pools[tag] if text not in drawn_texts]
        for n, (source, text) in enumerate(rng.sample(fresh, share), 1):
            rows.append({"id": f"heldout-{tag}-{n:04d}", "source": source, "caption": text, "part": "heldout"})
            drawn_texts.add(text)
    with (HERE / "selection.jsonl").open("w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
