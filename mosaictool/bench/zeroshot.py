"""Zero-shot classification in the class-folder layout (CLIP's protocol, CLIP_benchmark's metrics).

Each task is a folder with `classnames.txt` (line i = class i), `templates.txt` (prompts with `{c}`)
and `test/<class index>/<image>`. A class is the renormalised mean embedding of its prompts (prompt
ensembling); the prediction is the argmax over classes (a tie picks the lowest class index). Rows:
top-1 and top-5 accuracy (top-5 only with more than 5 classes) and mean per-class recall; the
headline is the mean top-1 over tasks. Forgetting of general knowledge shows up here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import read_text
from mosaictool.bench.base import HEADLINE, ImageRef, Item, row
from mosaictool.errors import MosaicError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"}

LAYOUT = """\
  zeroshot/<task>/classnames.txt       line i = the name of class i
  zeroshot/<task>/templates.txt        one prompt per line with {c}, e.g. "a photo of a {c}."
  zeroshot/<task>/test/<i>/<file>      images of class i (folder name = class index, zero-padding allowed)"""


def tasks(root: Path) -> list[str]:
    base = root / "zeroshot"
    return sorted(p.name for p in base.iterdir() if (p / "classnames.txt").is_file()) if base.is_dir() else []


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        raise MosaicError(f"zeroshot: {path} not found; expected:\n{LAYOUT}")
    return [line.strip() for line in read_text(path, "zeroshot").splitlines() if line.strip()]


def load_task(root: Path, task: str, limit: int | None = None, *, subtask: str | None = None) -> list[Item]:
    """One item per task: all its test images against all class prompts (grouped per class)."""
    base = root / "zeroshot" / task
    classes = _lines(base / "classnames.txt")
    templates = _lines(base / "templates.txt")
    bad = [t for t in templates if "{c}" not in t]
    if bad:
        raise MosaicError(f"{base / 'templates.txt'}: template without {{c}}: {bad[0]!r}")
    test = base / "test"
    if not test.is_dir():
        raise MosaicError(f"zeroshot: {test} not found; expected:\n{LAYOUT}")
    images, labels = [], []
    for folder in sorted(test.iterdir(), key=lambda p: p.name):
        if not folder.is_dir():
            continue
        if not folder.name.isdigit() or int(folder.name) >= len(classes):
            raise MosaicError(f"{folder}: class folders must be class indices 0..{len(classes) - 1} (line numbers of classnames.txt)")
        for f in sorted(folder.iterdir()):
            if f.suffix.lower() in IMAGE_SUFFIXES:
                images.append(ImageRef(str(f)))
                labels.append(int(folder.name))
    if limit:
        images, labels = images[:limit], labels[:limit]
    if not images:
        raise MosaicError(f"zeroshot: no images under {test}")
    texts = [t.replace("{c}", c) for c in classes for t in templates]
    ensembles = [list(range(i * len(templates), (i + 1) * len(templates))) for i in range(len(classes))]
    return [Item(images=images, texts=texts,
                 meta={"subtask": subtask or task, "labels": labels, "ensembles": ensembles, "classes": classes})]


def score_item(item: Item, sims: np.ndarray, name: str) -> list[dict]:
    labels = np.asarray(item.meta["labels"])
    n, k = sims.shape
    top1 = metrics.choice_correct(sims, labels, tie="argmax-first")
    rows = [row(name, "top1", top1.mean(), n)]
    if k > 5:
        order = np.argsort(-sims, axis=1, kind="stable")[:, :5]
        rows.append(row(name, "top5", (order == labels[:, None]).any(axis=1).mean(), n))
    per_class = [top1[labels == c].mean() for c in np.unique(labels)]
    rows.append(row(name, "mean_per_class_recall", metrics.macro_mean(per_class), n))
    return rows


class ZeroShot:
    name = "zeroshot"
    layout = LAYOUT
    subtasks: list[str] = []
    open_subtasks = True  # one subtask per task folder found under zeroshot/

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        root = Path(root)
        names = subtasks or tasks(root)
        if not names:
            raise MosaicError(f"zeroshot: no tasks under {root / 'zeroshot'}; expected:\n{LAYOUT}")
        return [it for t in names for it in load_task(root, t, limit)]

    def score(self, items: list[Item], sims) -> list[dict]:
        rows = []
        for i, item in enumerate(items):
            rows += score_item(item, sims[i], item.meta["subtask"])
        top1 = [r for r in rows if r["metric"] == "top1"]
        rows.append(row(HEADLINE, "top1", metrics.macro_mean(r["value"] for r in top1), sum(r["n"] for r in top1)))
        return rows


BENCHMARK = ZeroShot()
