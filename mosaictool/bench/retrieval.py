"""Image-text retrieval on the COCO / Flickr30k Karpathy test splits: R@1/5/10 both directions.

Same annotation files and image folders as ARO's Order tasks (BLIP's `coco_karpathy_test.json`,
`flickr30k_test.json`); captions are normalised with ARO's `pre_caption`. Image→text counts the
best-ranked of the image's captions; a tie counts against the ground truth.

`coco-perturbed` / `flickr30k-perturbed` (`evaluate --perturb`) repeat the retrieval with every
caption replaced by each of ARO's four order perturbations (Yuksekgonul et al. 2023, §3.1: retrieval barely moves
when word order is destroyed, i.e. the model behaves like a bag of words).
"""

from __future__ import annotations

from pathlib import Path

from mosaictool.bench import metrics
from mosaictool.bench._files import read_json
from mosaictool.bench._formats import KARPATHY, check_entry, check_list
from mosaictool.bench.aro import ORDER_SEED, pre_caption
from mosaictool.bench.base import ImageRef, Item, row
from mosaictool.errors import MosaicError

DATASETS = {"coco": ("aro/coco_karpathy_test.json", "coco"), "flickr30k": ("aro/flickr30k_test.json", "flickr30k")}
SUBTASKS = ["coco", "flickr30k", "coco-perturbed", "flickr30k-perturbed"]
KS = (1, 5, 10)

LAYOUT = """\
  aro/coco_karpathy_test.json + coco/<image>             (the ARO COCO-Order files)
  aro/flickr30k_test.json + flickr30k/<image>            (the ARO Flickr30k-Order files)"""


def _read(root: Path, dataset: str, limit: int | None) -> tuple[list[str], list[str], list[int]]:
    """(image paths, raw captions, image index of each caption); `limit` counts images."""
    ann, image_dir = DATASETS[dataset]
    path = root / ann
    if not path.is_file():
        raise MosaicError(f"retrieval: {path} not found; expected:\n{LAYOUT}")
    data = check_list(read_json(path, "retrieval"), "retrieval", path)
    images, captions, owner = [], [], []
    for i, rec in enumerate(data[:limit] if limit else data):
        check_entry(KARPATHY, rec, "retrieval", path, f"entry {i}")
        caps = rec["caption"] if isinstance(rec["caption"], list) else [rec["caption"]]
        for c in caps:
            captions.append(c)
            owner.append(len(images))
        images.append(str(root / image_dir / rec["image"]))
    return images, captions, owner


def load_dataset(root: Path, subtask: str, limit: int | None = None, prefix: str = "") -> list[Item]:
    dataset = subtask.removesuffix("-perturbed")
    images, captions, owner = _read(root, dataset, limit)
    refs = [ImageRef(p) for p in images]
    if subtask == dataset:
        return [Item(images=refs, texts=[pre_caption(c) for c in captions], meta={"subtask": prefix + dataset, "owner": owner})]
    from mosaictool.bench._order import PERTURBATIONS, OrderPerturber

    perturbed = OrderPerturber(seed=ORDER_SEED).perturb_all(captions)
    return [
        Item(images=refs, texts=[pre_caption(p[k]) for p in perturbed], meta={"subtask": f"{prefix}{dataset}/{name}", "owner": owner})
        for k, name in enumerate(PERTURBATIONS)
    ]


def score_rows(items: list[Item], sims) -> list[dict]:
    rows = []
    for i, item in enumerate(items):
        owner = item.meta["owner"]
        s = sims[i]
        recalls = metrics.retrieval_recalls(s, owner, KS)
        for name, value in recalls.items():
            rows.append(row(item.meta["subtask"], name, value, s.shape[0] if name.startswith("image") else s.shape[1]))
    return rows


class Retrieval:
    name = "retrieval"
    subtasks = SUBTASKS
    layout = LAYOUT
    # what it reads under --data-root: an output there must not replace one of them (api.evaluate)
    data = ("aro/", "coco/", "flickr30k/")

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        root = Path(root)
        if subtasks is None:
            subtasks = [d for d, (ann, _) in DATASETS.items() if (root / ann).is_file()]
            if not subtasks:
                raise MosaicError(f"retrieval: neither {' nor '.join(a for a, _ in DATASETS.values())} under {root}; expected:\n{LAYOUT}")
        return [it for s in subtasks for it in load_dataset(root, s, limit)]

    def score(self, items: list[Item], sims) -> list[dict]:
        return score_rows(items, sims)


BENCHMARK = Retrieval()
