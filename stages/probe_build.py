"""probe_build: the Probe paper's three benchmarks (Schiappa et al. 2023, Sec. 3, App. A) rebuilt from the annotation
files a user brings. The authors released their built groups and their evaluation code (GitHub
DeepLearningRobustnessStudies/UnderstandingVisualTextModels, new_datasets/README.md, commit da44432; the
data from crcv.ucf.edu/data1/probe_rcb/), which `evaluate --bench probe_r,probe_c,probe_b` reads as they
are; these builders make the same kind of groups from VG and COCO (other splits, other seeds, or when
their download is unavailable). Each builder returns an iterator of JSONL records (the layout
`mosaictool.bench.probe_r / probe_c / probe_b` read) and fills a `Counts` with what it kept and skipped.

- Probe-R (`build_probe_r`), from Visual Genome relationships.json (+ optional objects.json,
  image_data.json): per anchor image one relation R1 = <s, r, o>, a predicate swap R2 = <s, r~, o> and a
  subject swap R3 = <s~, r, o>, by App. A.1's rule: each cleaned predicate collects every object it was
  annotated with (as subject or object, anywhere in the file); r~ is a predicate that neither s nor o was
  ever annotated with (the authors' README: "not ... associated with the original subject"), s~ an object
  never annotated with r and not in the anchor image (their README: R1 vs R3 tests whether the model
  recognises that an object is not present). Then the subject-only prompt O1 = <s> (and O3 = <s~>), and up to 10 images that
  show s but no other object of the anchor. Relation aliases are cleaned as App. A.1 says (lower case,
  leading "is/are/..." and articles dropped, so "are standing next to" = "standing next to"; repeats
  merge); a VG relationship_alias.txt can merge more.
- Probe-C (`build_probe_c`), from COCO captions parsed with our `parse`: adjective-noun compositions per
  image, the attributes and categories of Table 5 (bench/data/probe_c_antonyms.tsv); the composition split
  pairs an image of (a, n) with one of (a~, n), a~ an antonym of a from that map, neither image showing
  the other's composition; the object split pairs (a, n1) with (a, n2), n1 != n2, neither image
  mentioning the other's noun.
- Probe-B (`build_probe_b`), from COCO instances (polygon and RLE masks, decoded with pycocotools), as the
  authors' image folders are laid out (their eval scripts' val2014_random_patch_dataset,
  val2014_background_removed_dataset, val2014_background_removed_and_cooccurrence_dataset): per image
  and filler, patch = the photo with a filler patch that overlaps no annotated box; nobg = every object
  kept on the filler (background removed); one = one object alone on the filler. Split MR keeps x0 = the
  photo, x0~ = patch, x1~ = nobg; split R (images whose boxes do not overlap) keeps x0 = nobg, x0~ = the
  same patch (their co-occurrence script reads the MR patch folder), x1~ = one. Crowd regions
  (`iscrowd`) are objects: their classes are present (never an "absent" prompt of split R), kept with
  the objects and avoided by the patch; a crowd region is never split R's target. Fillers: black, gray,
  Gaussian noise, a scene image from a folder the user supplies.

Every draw comes from a random stream keyed by (seed, benchmark, item), so output depends only on the
inputs, the seed and the flags. The annotation files are single JSON documents (VG's and COCO's format),
so they are read whole; records are written as they are made.
"""

from __future__ import annotations

import os
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import orjson

from mosaictool.errors import MosaicError
from mosaictool.images import ImageError, image_path
from mosaictool.io import read_json
from mosaictool.stages.source_formats import (
    COCO_ANNOTATION,
    COCO_CATEGORY,
    COCO_IMAGE,
    VG_OBJECTS_ENTRY,
    VG_RELATIONSHIP,
    VG_RELATIONSHIPS_ENTRY,
    check_entry,
)

FILLERS = ("black", "gray", "noise", "scene")
BE_WORDS = frozenset({"is", "are", "was", "were", "be", "been", "being", "am", "'s"})
ARTICLES = frozenset({"a", "an", "the"})
MAX_SUBJECT_IMAGES = 10
VG_IMAGE_DIRS = ("", "VG_100K", "VG_100K_2", "images")


@dataclass
class Counts:
    """What a builder kept and skipped, by reason; printed on stderr by the CLI."""

    kept: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)

    def lines(self, name: str) -> list[str]:
        out = [f"{name}: wrote " + ", ".join(f"{v} {k}" for k, v in sorted(self.kept.items()))]
        if self.skipped:
            out.append(f"{name}: skipped " + ", ".join(f"{v} {k}" for k, v in sorted(self.skipped.items())))
        return out


def stream(seed: int, *key) -> random.Random:
    return random.Random("/".join(["mosaic-probe", str(seed), *map(str, key)]))


def article(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


# --- reading annotation files ---------------------------------------------------------------------------


def read_annotations(path: str | Path, what: str, flag: str):
    """An annotation file (`what`, given with `flag`) through mosaictool.io's JSON reader."""
    path = Path(path)
    if not path.is_file():
        raise MosaicError(f"{path}: {what} not found; pass the file with {flag}")
    return read_json(path, hint=f"is this {what}? ({flag})")


def need(obj, fields: tuple[str, ...], path, where: str, what: str) -> None:
    """A clear error naming the file, the entry and the missing field."""
    if not isinstance(obj, dict):
        raise MosaicError(f"{path}: {where}: expected an object, got {type(obj).__name__} (not {what})")
    for f in fields:
        if f not in obj:
            raise MosaicError(f"{path}: {where}: missing field {f!r} (not {what})")


def need_list(obj, path, where: str, what: str) -> list:
    if not isinstance(obj, list):
        raise MosaicError(f"{path}: {where}: expected a list, got {type(obj).__name__} (not {what})")
    return obj


# --- Probe-R ---------------------------------------------------------------------------------------------


def clean_name(name: str) -> str:
    words = re.sub(r"[^a-z0-9' ]", " ", str(name).lower()).split()
    while words and words[0] in ARTICLES:
        words.pop(0)
    return " ".join(words)


def clean_predicate(pred: str, aliases: dict[str, str] | None = None) -> str:
    """App. A.1: "are standing next to" -> "standing next to"; "is on top of a" -> "on top of"."""
    words = re.sub(r"[^a-z0-9' ]", " ", str(pred).lower()).split()
    while words and words[0] in BE_WORDS:
        words.pop(0)
    text = " ".join(w for w in words if w not in ARTICLES)
    return (aliases or {}).get(text, text)


def read_aliases(path: str | Path) -> dict[str, str]:
    """VG's relationship_alias.txt: comma-separated aliases per line, all mapped to the first."""
    out = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        names = [clean_predicate(p) for p in line.split(",") if p.strip()]
        for n in names[1:]:
            out[n] = names[0]
    return out


def _vg_name(obj: dict, path, where: str) -> str:
    if "name" in obj:
        return clean_name(obj["name"])
    names = obj.get("names")
    if isinstance(names, list) and names:
        return clean_name(names[0])
    raise MosaicError(f"{path}: {where}: missing field 'name' or 'names' (not VG relationships.json / objects.json)")


def vg_image_files(image_data_path: str | Path | None) -> dict:
    """image_id -> the file's path under the images folder, from image_data.json's url (VG_100K_2/1.jpg)."""
    if image_data_path is None:
        return {}
    what = "VG image_data.json (a list of {image_id, url, ...})"
    data = need_list(read_annotations(image_data_path, what, "--vg-image-data"), image_data_path, "top level", what)
    out = {}
    for i, rec in enumerate(data):
        if isinstance(rec, dict) and "id" in rec and "image_id" not in rec:
            rec = {**rec, "image_id": rec["id"]}  # VG 1.0 names the field `id`
        need(rec, ("image_id", "url"), image_data_path, f"entry {i}", what)
        parts = str(rec["url"]).rstrip("/").split("/")
        out[rec["image_id"]] = "/".join(parts[-2:])
    return out


class ImageFinder:
    """Where an image file is (or None), looked up under `root`, remembered per name. A file found outside
    the root (a name with `..`, a link leading out) is a MosaicError unless `allow_outside` (images.image_path)."""

    def __init__(self, root: str | Path, candidates, allow_outside: bool = False):
        self.root, self.candidates, self.seen, self.allow_outside = Path(root), candidates, {}, allow_outside

    def __call__(self, key) -> Path | None:
        if key not in self.seen:
            found = next((c for c in self.candidates(key) if (self.root / c).is_file()), None)
            if found is not None:
                try:
                    image_path(self.root, found, allow_outside=self.allow_outside, flag="--images")
                except ImageError as e:
                    raise MosaicError(f"image id {key}: {e}") from None
            self.seen[key] = None if found is None else self.root / found
        return self.seen[key]


def vg_image_finder(images: str | Path, image_data: str | Path | None, allow_outside: bool = False) -> ImageFinder:
    """A VG image's path under `images`: image_data.json's url file name, else <id>.jpg in the usual folders."""
    files = vg_image_files(image_data)
    return ImageFinder(images, lambda iid: ([files[iid]] if iid in files else [])
                       + [f"{d}/{iid}.jpg" if d else f"{iid}.jpg" for d in VG_IMAGE_DIRS], allow_outside)


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def _sample_not_in(rng: random.Random, pool: list[str], *banned: set[str], tries: int = 200) -> str | None:
    """Uniform over pool minus every banned set, by rejection, then by a scan when rejection keeps failing
    (a frequent object bans most predicates); None if none is left."""
    if not pool:
        return None
    for _ in range(tries):
        c = pool[rng.randrange(len(pool))]
        if not any(c in b for b in banned):
            return c
    rest = [c for c in pool if not any(c in b for b in banned)]
    return rng.choice(rest) if rest else None


@dataclass
class VGIndex:
    """What Visual Genome says can go together (App. A.1): each cleaned predicate's objects, in either
    role, and so each object's predicates; what every image shows; each image's usable relations."""

    per_image: list = field(default_factory=list)  # (image id, [(s, r, o, relationship id)]), file order
    image_objects: dict = field(default_factory=lambda: defaultdict(set))  # image id -> objects named in it
    preds_with: dict = field(default_factory=lambda: defaultdict(set))  # object -> predicates it was seen with
    objects_with: dict = field(default_factory=lambda: defaultdict(set))  # predicate -> objects seen with it
    pred_count: Counter = field(default_factory=Counter)
    obj_count: Counter = field(default_factory=Counter)

    def pools(self, min_count: int) -> tuple[list[str], list[str]]:
        """(predicates, objects) seen at least `min_count` times: what swaps are drawn from."""
        return (sorted(p for p, c in self.pred_count.items() if c >= min_count),
                sorted(s for s, c in self.obj_count.items() if c >= min_count))

    def images_with(self) -> dict[str, list]:
        """object -> the images that show it, in file order (deterministic)."""
        out: dict[str, list] = defaultdict(list)
        for iid in self.image_objects:
            for name in sorted(self.image_objects[iid]):
                out[name].append(iid)
        return out


VG_RELATIONSHIPS = "VG relationships.json (a list of {image_id, relationships: [{predicate, subject, object}]})"
VG_OBJECTS = "VG objects.json (a list of {image_id, objects: [{names, ...}]})"


def index_vg_relationships(data: list, path, alias_map: dict[str, str], counts: Counts) -> VGIndex:
    """The index of a VG relationships.json's entries (`data`), relations cleaned (App. A.1)."""
    index = VGIndex()
    for i, entry in enumerate(data):
        check_entry(VG_RELATIONSHIPS_ENTRY, entry, path, f"entry {i}", VG_RELATIONSHIPS)
        iid = entry["image_id"]
        triples = []
        for j, rel in enumerate(entry["relationships"]):
            triple = _vg_relation(rel, j, iid, index, alias_map, counts, path, f"entry {i} (image {iid}): relationship {j}")
            if triple:
                triples.append(triple)
        index.per_image.append((iid, triples))
    return index


def _vg_relation(rel, j, iid, index: VGIndex, alias_map, counts: Counts, path, where: str) -> tuple | None:
    """One relationship into `index`; its (s, r, o, id) when it can anchor a group, else None."""
    check_entry(VG_RELATIONSHIP, rel, path, where, VG_RELATIONSHIPS)
    s, o = _vg_name(rel["subject"], path, f"{where}: subject"), _vg_name(rel["object"], path, f"{where}: object")
    r = clean_predicate(rel["predicate"], alias_map)
    if not (s and o):
        return None
    index.image_objects[iid].update((s, o))
    if not r or s == o:
        counts.skipped["relationships without a usable predicate"] += 1
        return None
    index.preds_with[s].add(r)
    index.preds_with[o].add(r)
    index.objects_with[r].update((s, o))
    index.pred_count[r] += 1
    index.obj_count[s] += 1
    index.obj_count[o] += 1
    return s, r, o, rel.get("relationship_id", j)


def add_vg_objects(index: VGIndex, path) -> None:
    """Every object a VG objects.json names in an image joins what that image shows."""
    data = need_list(read_annotations(path, VG_OBJECTS, "--vg-objects"), path, "top level", VG_OBJECTS)
    for i, entry in enumerate(data):
        check_entry(VG_OBJECTS_ENTRY, entry, path, f"entry {i}", VG_OBJECTS)
        for j, obj in enumerate(entry["objects"]):
            name = _vg_name(obj, path, f"entry {i}: object {j}")
            if name:
                index.image_objects[entry["image_id"]].add(name)


def pick_relation(rng: random.Random, iid, triples: list[tuple], index: VGIndex, pred_pool: list[str],
                  obj_pool: list[str]) -> tuple | None:
    """(s, r, o, id, r~, s~) for the first relation of image `iid`, in a random order, that has both swaps:
    r~ a predicate neither s nor o was seen with, s~ an object never seen with r and absent from the image
    (R1 vs R3 asks whether the model "is able to recognize an object is NOT present": the authors'
    new_datasets/README.md); None if no relation has both."""
    order = list(range(len(triples)))
    rng.shuffle(order)
    for k in order:
        s, r, o, rid = triples[k]
        r2 = _sample_not_in(rng, pred_pool, index.preds_with[s], index.preds_with[o])
        s3 = _sample_not_in(rng, obj_pool, index.objects_with[r], index.image_objects[iid])
        if r2 and s3:
            return s, r, o, rid, r2, s3
    return None


def pick_subject_images(rng: random.Random, iid, subject: str, index: VGIndex, images_with: dict[str, list],
                        finder: ImageFinder, wanted: int, counts: Counts) -> list[tuple]:
    """Up to `wanted` (image id, path) of other images that show `subject` and no other object of image
    `iid`, drawn without replacement: a small pool is tried in full, a large one up to 20 per wanted image."""
    others = index.image_objects[iid] - {subject}
    pool = images_with[subject]
    picked: list = []
    for cand in rng.sample(pool, min(len(pool), 20 * wanted)):
        if len(picked) >= wanted:
            break
        if cand == iid or index.image_objects[cand] & others:
            continue
        path = finder(cand)
        if path is None:
            counts.skipped["subject-only images missing"] += 1
            continue
        picked.append((cand, path))
    return picked


def probe_r_record(iid, anchor: Path, group: tuple, picked: list[tuple], out_dir: Path) -> dict:
    s, r, o, rid, r2, s3 = group
    return {
        "id": f"probe-r-{iid}-{rid}", "image_id": iid, "image": _rel(anchor, out_dir), "relationship_id": rid,
        "relation": [s, r, o], "predicate_swap": r2, "subject_swap": s3,
        "texts": {"R1": f"a photo of {article(s)} {r} {article(o)}", "R2": f"a photo of {article(s)} {r2} {article(o)}",
                  "R3": f"a photo of {article(s3)} {r} {article(o)}", "O1": f"a photo of {article(s)}",
                  "O3": f"a photo of {article(s3)}"},
        "subject_image_ids": [c for c, _ in picked], "subject_images": [_rel(p, out_dir) for _, p in picked],
    }


def build_probe_r(relationships: str | Path, images: str | Path, out_dir: str | Path, *, objects: str | Path | None = None,
                  image_data: str | Path | None = None, aliases: str | Path | None = None, seed: int = 0,
                  max_groups: int | None = 100_000, subject_images: int = MAX_SUBJECT_IMAGES, min_count: int = 1,
                  counts: Counts | None = None, allow_outside_root: bool = False) -> Iterator[dict]:
    """Probe-R records (see the module docstring); image paths relative to `out_dir`. Pass 1 indexes the
    files, pass 2 makes one group per anchor image."""
    counts = counts if counts is not None else Counts()
    data = need_list(read_annotations(relationships, VG_RELATIONSHIPS, "--vg-relationships"), relationships, "top level",
                     VG_RELATIONSHIPS)
    alias_map = read_aliases(aliases) if aliases else {}
    finder = vg_image_finder(images, image_data, allow_outside_root)
    index = index_vg_relationships(data, relationships, alias_map, counts)
    del data
    if objects is not None:
        add_vg_objects(index, objects)
    images_with = index.images_with()
    pred_pool, obj_pool = index.pools(min_count)
    out_dir = Path(out_dir)
    made = 0
    for iid, triples in index.per_image:
        if max_groups is not None and made >= max_groups:
            break
        if not triples:
            continue
        rng = stream(seed, "probe-r", iid)
        group = pick_relation(rng, iid, triples, index, pred_pool, obj_pool)
        if group is None:
            counts.skipped["anchor images without an unseen predicate or subject"] += 1
            continue
        anchor = finder(iid)
        if anchor is None:
            counts.skipped["anchor images missing"] += 1
            continue
        picked = pick_subject_images(rng, iid, group[0], index, images_with, finder, subject_images, counts)
        made += 1
        counts.kept["groups"] += 1
        counts.kept["subject-only images"] += len(picked)
        yield probe_r_record(iid, anchor, group, picked, out_dir)


# --- Probe-C ---------------------------------------------------------------------------------------------


def load_antonyms(path: str | Path | None = None) -> tuple[dict[str, set[str]], dict[str, str]]:
    """(attribute -> antonyms, attribute -> category) from the shipped map or a user's TSV."""
    if path is None:
        text = resources.files("mosaictool.bench").joinpath("data/probe_c_antonyms.tsv").read_text(encoding="utf-8")
        where = "probe_c_antonyms.tsv"
    else:
        if not Path(path).is_file():
            raise MosaicError(f"{path}: antonym map not found (--antonyms)")
        text, where = Path(path).read_text(encoding="utf-8"), str(path)
    antonyms: dict[str, set[str]] = defaultdict(set)
    category: dict[str, str] = {}
    second: dict[str, str] = {}  # the category of an attribute only ever named second
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip() and not ln.startswith("#")]
    for n, line in lines[1:]:  # the first is the header
        cols = line.split("\t")
        if len(cols) != 3:
            raise MosaicError(f"{where}:{n}: expected 3 tab-separated columns (attribute, antonym, category)")
        a, b, cat = (c.strip().lower() for c in cols)
        antonyms[a].add(b)
        antonyms[b].add(a)
        category.setdefault(a, cat)  # the category column is the first attribute's (Table 5 crosses categories)
        second.setdefault(b, cat)
    return dict(antonyms), {**second, **category}


def coco_caption_records(path: str | Path) -> tuple[list[dict], dict]:
    """(caption records {id, image_id, caption}, image_id -> file_name) from a COCO captions file."""
    what = "COCO captions (captions_*.json: {images: [{id, file_name}], annotations: [{image_id, caption}]})"
    data = read_annotations(path, what, "--coco-captions")
    need(data, ("images", "annotations"), path, "top level", what)
    files = {}
    for i, img in enumerate(need_list(data["images"], path, "images", what)):
        need(img, ("id", "file_name"), path, f"images[{i}]", what)
        files[img["id"]] = img["file_name"]
    recs = []
    for i, ann in enumerate(need_list(data["annotations"], path, "annotations", what)):
        need(ann, ("image_id", "caption"), path, f"annotations[{i}]", what)
        recs.append({"id": ann.get("id", i), "image_id": ann["image_id"], "caption": str(ann["caption"])})
    return recs, files


def compositions(graph_records, antonyms: dict[str, set[str]]) -> tuple[dict, dict]:
    """From parsed caption records: image_id -> {(attribute, noun)} (attributes of the map only) and
    image_id -> {nouns}."""
    comps: dict = defaultdict(set)
    nouns: dict = defaultdict(set)
    for rec in graph_records:
        for ent in rec["graph"]["entities"]:
            noun = clean_name(ent.get("lemma_head") or ent.get("head") or "")
            if not noun:
                continue
            nouns[rec["image_id"]].add(noun)
            for a in ent.get("attributes", []):
                a = a.strip().lower()
                if a in antonyms:
                    comps[rec["image_id"]].add((a, noun))
    return comps, nouns


def images_by_composition(comps: dict) -> dict:
    """(attribute, noun) -> the images that show it, in sorted image order."""
    present: dict = defaultdict(list)
    for iid in sorted(comps, key=str):
        for c in comps[iid]:
            present[c].append(iid)
    return present


class _ExistingImages:
    """An image's path, or None with each missing image counted once."""

    def __init__(self, finder: ImageFinder, counts: Counts):
        self.finder, self.counts, self.missing = finder, counts, set()

    def __call__(self, iid) -> Path | None:
        p = self.finder(iid)
        if p is None and iid not in self.missing:
            self.missing.add(iid)
            self.counts.skipped["images missing"] += 1
        return p


def composition_pairs(present: dict, comps: dict, ant: dict[str, set[str]], seed: int, per: int,
                      exists: _ExistingImages) -> Iterator[tuple]:
    """The composition split: (i1, i2, (a, n), (a~, n), p1, p2), a~ an antonym of a, neither image showing
    the other's composition; each unordered antonym pair once, up to `per` pairs each."""
    for a, n in sorted(present):
        for b in sorted(ant.get(a, ())):
            if b < a or (b, n) not in present:
                continue
            pool1 = [i for i in present[(a, n)] if (b, n) not in comps[i]]
            pool2 = [i for i in present[(b, n)] if (a, n) not in comps[i]]
            rng = stream(seed, "probe-c", "composition", a, b, n)
            rng.shuffle(pool1)
            made = 0
            for i1 in pool1:
                if made >= per or not pool2:
                    break
                i2 = pool2[rng.randrange(len(pool2))]
                p1, p2 = exists(i1), exists(i2)
                if p1 is None or p2 is None:
                    continue
                yield i1, i2, (a, n), (b, n), p1, p2
                made += 1


def _other_noun(rng: random.Random, others: list[str], i1, n1: str, a: str, present: dict, nouns: dict):
    """(n2, images of (a, n2) not mentioning n1) for a noun n2 that image i1 does not mention, up to 20
    draws; None when none is found."""
    for _ in range(20):
        n2 = others[rng.randrange(len(others))]
        if n2 in nouns[i1]:
            continue
        pool2 = [i for i in present[(a, n2)] if n1 not in nouns[i]]
        if pool2:
            return n2, pool2
    return None


def object_pairs(present: dict, nouns: dict, seed: int, per: int, exists: _ExistingImages) -> Iterator[tuple]:
    """The object split: (i1, i2, (a, n1), (a, n2), p1, p2), n1 != n2, neither image mentioning the other's
    noun; an image pair drawn from both of its nouns counts once; up to `per` pairs per (a, n1)."""
    by_attribute: dict[str, list[str]] = defaultdict(list)
    for a, n in sorted(present):
        by_attribute[a].append(n)
    used: set = set()  # (attribute, unordered image pair)
    for a, n1 in sorted(present):
        others = [n for n in by_attribute[a] if n != n1]
        if not others:
            continue
        rng = stream(seed, "probe-c", "object", a, n1)
        pool1 = list(present[(a, n1)])
        rng.shuffle(pool1)
        made = 0
        for i1 in pool1:
            if made >= per:
                break
            drawn = _other_noun(rng, others, i1, n1, a, present, nouns)
            if drawn is None:
                continue
            n2, pool2 = drawn
            i2 = pool2[rng.randrange(len(pool2))]
            key = (a, frozenset((i1, i2)))
            if key in used:
                continue
            p1, p2 = exists(i1), exists(i2)
            if p1 is None or p2 is None:
                continue
            used.add(key)
            yield i1, i2, (a, n1), (a, n2), p1, p2
            made += 1


def probe_c_record(split: str, k: int, pair: tuple, category: dict[str, str], out_dir: Path) -> dict:
    i1, i2, c1, c2, p1, p2 = pair
    return {"id": f"probe-c-{split}-{k:06d}", "split": split, "category": category.get(c1[0], "other"),
            "image_ids": [i1, i2], "images": [_rel(p1, out_dir), _rel(p2, out_dir)],
            "compositions": [list(c1), list(c2)],
            "texts": [f"a photo of {article(c1[0])} {c1[1]}", f"a photo of {article(c2[0])} {c2[1]}"]}


def build_probe_c(captions: str | Path, images: str | Path, out_dir: str | Path, *, antonyms: str | Path | None = None,
                  seed: int = 0, pairs_per_composition: int = 5, model: str | None = None, workers: int = 1,
                  batch_size: int = 256, counts: Counts | None = None, parsed=None, allow_outside_root: bool = False) -> Iterator[dict]:
    """Probe-C records: the composition split, then the object split. `parsed` (records with image_id and
    graph) replaces parsing the captions, for callers that parsed them already."""
    counts = counts if counts is not None else Counts()
    ant, category = load_antonyms(antonyms)
    recs, files = coco_caption_records(captions)
    if parsed is None:
        from mosaictool.stages.parse import parse

        parsed = parse(recs, text_key="caption", model=model, batch_size=batch_size, workers=workers)
    comps, nouns = compositions(parsed, ant)
    exists = _ExistingImages(ImageFinder(images, lambda iid: [files.get(iid, f"{iid}.jpg")], allow_outside_root), counts)
    present = images_by_composition(comps)
    out_dir = Path(out_dir)
    splits = (("composition", composition_pairs(present, comps, ant, seed, pairs_per_composition, exists)),
              ("object", object_pairs(present, nouns, seed, pairs_per_composition, exists)))
    for split, pairs in splits:
        for k, pair in enumerate(pairs):
            counts.kept[f"{split} groups"] += 1
            yield probe_c_record(split, k, pair, category, out_dir)


# --- Probe-B ---------------------------------------------------------------------------------------------


def coco_instances(path: str | Path) -> tuple[dict, dict, list[str]]:
    """(image_id -> image entry, image_id -> its annotations, category names in id order)."""
    what = "COCO instances (instances_*.json: {images, annotations: [{image_id, category_id, segmentation, bbox}], categories})"
    data = read_annotations(path, what, "--coco-instances")
    need(data, ("images", "annotations", "categories"), path, "top level", what)
    cats = {}
    for i, c in enumerate(need_list(data["categories"], path, "categories", what)):
        check_entry(COCO_CATEGORY, c, path, f"categories[{i}]", what)
        cats[c["id"]] = c["name"]
    imgs = {}
    for i, img in enumerate(need_list(data["images"], path, "images", what)):
        check_entry(COCO_IMAGE, img, path, f"images[{i}]", what)
        imgs[img["id"]] = img
    anns: dict = defaultdict(list)
    for i, ann in enumerate(need_list(data["annotations"], path, "annotations", what)):
        check_entry(COCO_ANNOTATION, ann, path, f"annotations[{i}]", what)
        if ann["category_id"] not in cats:
            raise MosaicError(f"{path}: annotations[{i}]: category_id {ann['category_id']} is not in categories")
        anns[ann["image_id"]].append({**ann, "category": cats[ann["category_id"]]})
    return imgs, anns, [cats[c] for c in sorted(cats)]


def decode_mask(segmentation, height: int, width: int):
    """A COCO segmentation (polygons, uncompressed or compressed RLE) as a bool (height, width) array."""
    import numpy as np

    try:
        from pycocotools import mask as mask_utils
    except ImportError as e:
        raise MosaicError("Probe-B needs pycocotools to decode COCO masks: pip install pycocotools "
                          "(or pip install 'mosaictool[probe]')") from e
    if isinstance(segmentation, list):
        # pycocotools reads a 4-number polygon as a box and refuses shorter ones: under 3 points there is no area
        polygons = [p for p in segmentation if len(p) >= 6]
        if not polygons:
            return np.zeros((height, width), dtype=bool)
        rle = mask_utils.merge(mask_utils.frPyObjects(polygons, height, width))
    elif isinstance(segmentation, dict) and isinstance(segmentation.get("counts"), list):
        rle = mask_utils.frPyObjects(segmentation, height, width)
    else:
        rle = dict(segmentation)
        if isinstance(rle.get("counts"), str):
            rle["counts"] = rle["counts"].encode()
    return mask_utils.decode(rle).astype(bool)


def filler_image(kind: str, height: int, width: int, rng: random.Random, scenes: list[Path]):
    """A (height, width, 3) uint8 filler: black, gray (128), Gaussian noise (mean 128, sd 64) or a scene."""
    import numpy as np
    from PIL import Image

    if kind == "black":
        return np.zeros((height, width, 3), np.uint8)
    if kind == "gray":
        return np.full((height, width, 3), 128, np.uint8)
    if kind == "noise":
        g = np.random.default_rng(rng.getrandbits(64))
        return np.clip(g.normal(128, 64, (height, width, 3)), 0, 255).astype(np.uint8)
    if kind == "scene":
        path = scenes[rng.randrange(len(scenes))]
        try:
            with Image.open(path) as im:
                return np.asarray(im.convert("RGB").resize((width, height), Image.BILINEAR))
        except OSError as e:
            raise MosaicError(f"{path}: cannot read scene image ({e}); fix --scenes") from e
    raise MosaicError(f"unknown filler {kind!r}; choose from {', '.join(FILLERS)} (--fillers)")


def patch_box(rng: random.Random, height: int, width: int, boxes: list, frac: float, tries: int = 50):
    """A square patch (side = frac x the shorter side) overlapping none of the (x, y, w, h) boxes, or None."""
    side = max(1, int(round(frac * min(height, width))))
    if side >= min(height, width):
        return None
    for _ in range(tries):
        x, y = rng.randrange(width - side + 1), rng.randrange(height - side + 1)
        if all(x + side <= bx or bx + bw <= x or y + side <= by or by + bh <= y for bx, by, bw, bh in boxes):
            return x, y, side
    return None


def _overlap(a, b) -> bool:
    return not (a[0] + a[2] <= b[0] or b[0] + b[2] <= a[0] or a[1] + a[3] <= b[1] or b[1] + b[3] <= a[1])


@dataclass(frozen=True)
class _BOptions:
    images: str
    out_dir: str
    fillers: tuple
    scene_files: tuple
    splits: tuple
    seed: int
    min_removed: float
    min_object: float
    max_object: float
    patch: float
    ext: str
    allow_outside_root: bool = False


def _source_image(iid, meta: dict, o: _BOptions, skipped: Counter) -> tuple[Path, object]:
    """The annotated image's path and pixels (RGB); pixels None (counted in `skipped`) when the file is
    missing or its size is not the annotation's."""
    import numpy as np
    from PIL import Image

    try:
        src = image_path(o.images, meta["file_name"], allow_outside=o.allow_outside_root, flag="--images")
    except ImageError as e:
        raise MosaicError(f"image id {iid}: {e}") from None
    if not src.is_file():
        skipped["images missing"] += 1
        return src, None
    with Image.open(src) as im:
        x0 = np.asarray(im.convert("RGB"))
    if x0.shape[:2] != (meta["height"], meta["width"]):
        skipped["images whose size differs from the annotation"] += 1
        return src, None
    return src, x0


def _r_target(objs: list[dict], masks: list, boxes: list, o: _BOptions, rng, skipped: Counter) -> int | None:
    """The object R removes all but (drawn among those of the size range, not a crowd, alone of their
    category), or None (counted in `skipped`) when boxes overlap or none fits."""
    sizes = [m.mean() for m in masks]
    no_overlap = all(not _overlap(boxes[i], boxes[j]) for i in range(len(boxes)) for j in range(i + 1, len(boxes)))
    fit = [i for i, s in enumerate(sizes) if o.min_object <= s <= o.max_object and not objs[i].get("iscrowd", 0)
           and sum(x["category"] == objs[i]["category"] for x in objs) == 1]
    if not no_overlap:
        skipped["R: images with overlapping boxes"] += 1
    elif not fit:
        skipped["R: images without a single object of the size range"] += 1
    else:
        return fit[rng.randrange(len(fit))]
    return None


def _probe_b_image(job: tuple) -> tuple[list[dict], Counter, Counter]:
    """One annotated image's records (and written images), with what was kept and skipped. `objs` holds
    every annotation, crowd regions included: they are objects of the image, but never R's target."""
    import numpy as np
    from PIL import Image

    iid, meta, objs, o = job
    kept, skipped = Counter(), Counter()
    out_dir = Path(o.out_dir)
    src, x0 = _source_image(iid, meta, o, skipped)
    if x0 is None:
        return [], kept, skipped
    h, w = x0.shape[:2]
    masks = [decode_mask(a["segmentation"], h, w) for a in objs]
    union = np.logical_or.reduce(masks)
    boxes = [a["bbox"] for a in objs]
    labels = sorted({a["category"] for a in objs})
    rng = stream(o.seed, "probe-b", iid)
    place = patch_box(rng, h, w, boxes, o.patch)
    target = _r_target(objs, masks, boxes, o, rng, skipped) if "R" in o.splits else None
    mr_ok = "MR" in o.splits and (1 - union.mean()) >= o.min_removed
    if "MR" in o.splits and not mr_ok:
        skipped["MR: images with too little background"] += 1
    if place is None and (mr_ok or target is not None):
        skipped["images without room for a patch"] += 1
        return [], kept, skipped
    records = []
    for filler in o.fillers:
        fill = filler_image(filler, h, w, stream(o.seed, "probe-b-filler", iid, filler), list(o.scene_files))
        px, py, side = place
        saved: dict[str, str] = {}

        def save(tag, make) -> str:
            """Each image file once per (image, filler): splits MR and R share patch and nobg, as the
            authors' two scripts read the same folders."""
            if tag not in saved:
                rel = f"images/{filler}/{iid}_{tag}.{o.ext}"
                path = out_dir / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(make()).save(path, **({"quality": 95} if o.ext == "jpg" else {}))
                saved[tag] = rel
            return saved[tag]

        def patched():
            out = x0.copy()
            out[py:py + side, px:px + side] = fill[py:py + side, px:px + side]
            return out

        def objects_only():
            return np.where(union[..., None], x0, fill)

        if mr_ok:
            kept[f"MR groups ({filler})"] += 1
            records.append({"id": f"probe-b-MR-{iid}-{filler}", "split": "MR", "filler": filler, "image_id": iid,
                            "images": {"x0": _rel(src, out_dir), "x0_patch": save("patch", patched), "x1": save("nobg", objects_only)},
                            "labels": labels, "target": None})
        if target is not None:
            kept[f"R groups ({filler})"] += 1
            records.append({"id": f"probe-b-R-{iid}-{filler}", "split": "R", "filler": filler, "image_id": iid,
                            "images": {"x0": save("nobg", objects_only), "x0_patch": save("patch", patched),
                                       "x1": save("one", lambda: np.where(masks[target][..., None], x0, fill))},
                            "labels": labels, "target": objs[target]["category"]})
    return records, kept, skipped


def build_probe_b(instances: str | Path, images: str | Path, out_dir: str | Path, *, fillers=("black", "gray", "noise"),
                  scenes: str | Path | None = None, splits=("MR", "R"), seed: int = 0, max_images: int | None = None,
                  min_removed: float = 0.2, min_object: float = 0.05, max_object: float = 0.5, patch: float = 0.2,
                  image_format: str = "png", workers: int = 1, counts: Counts | None = None,
                  allow_outside_root: bool = False) -> Iterator[dict]:
    """Probe-B records in image-id order; writes the modified images under out_dir/images/<filler>/
    (<image id>_patch, _nobg: shared by MR and R; _one: R's x1~).
    Images are independent (each its own random stream), so `workers` processes give the same output."""
    import multiprocessing
    import sys

    counts = counts if counts is not None else Counts()
    bad = [f for f in fillers if f not in FILLERS]
    if bad:
        raise MosaicError(f"unknown filler(s) {', '.join(bad)}; choose from {', '.join(FILLERS)} (--fillers)")
    scene_files: list[Path] = []
    if "scene" in fillers:
        if scenes is None or not Path(scenes).is_dir():
            raise MosaicError("the scene filler needs a folder of scene images without COCO objects: pass --scenes DIR")
        scene_files = sorted(p for p in Path(scenes).rglob("*") if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
        if not scene_files:
            raise MosaicError(f"{scenes}: no .jpg/.png scene images (--scenes)")
    imgs, anns, classes = coco_instances(instances)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "classes.txt").write_text("\n".join(classes) + "\n", encoding="utf-8")  # the prompts' classes
    opts = _BOptions(str(images), str(out_dir), tuple(fillers), tuple(map(str, scene_files)), tuple(splits), seed, min_removed,
                     min_object, max_object, patch, "jpg" if image_format in ("jpg", "jpeg") else "png", allow_outside_root)

    def jobs():
        made = 0
        for iid in sorted(imgs):
            objs = anns.get(iid, [])
            if not objs:
                counts.skipped["images without objects"] += 1
                continue
            if max_images is not None and made >= max_images:
                return
            made += 1
            yield iid, imgs[iid], objs, opts

    def collect(results):
        for records, kept, skipped in results:
            counts.kept.update(kept)
            counts.skipped.update(skipped)
            yield from records

    if workers <= 1:
        yield from collect(map(_probe_b_image, jobs()))
        return
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    with ctx.Pool(workers) as pool:
        yield from collect(pool.imap(_probe_b_image, jobs(), chunksize=4))  # imap keeps image order


def write_jsonl(records, path: str | Path) -> int:
    """Write records to `path` atomically (temp file beside it, replaced on success)."""
    from mosaictool.atomic import atomic_output

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with atomic_output(path, flag="--out") as tmp, open(tmp, "wb") as f:
        for rec in records:
            f.write(orjson.dumps(rec) + b"\n")
            n += 1
    return n
