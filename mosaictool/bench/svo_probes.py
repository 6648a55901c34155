"""SVO-Probes (deepmind/svo_probes): a sentence, the image it describes and a negative image that
differs in the subject, the verb or the object.

Rules (`deepmind/svo_probes`, its evaluation notebook):
- rows are kept only where exactly one of subj_neg / verb_neg / obj_neg is true (as the official
  notebook does), giving the 3 subtasks;
- many image URLs are dead: the official notebook drops rows whose positive or negative image
  could not be scored. Here the engine stops on missing images (count + first paths), and
  `--skip-missing` drops and reports them;
- the official metric is a binary match classifier's (pos_acc + neg_acc) / 2, which a contrastive
  model has no threshold for. vl_compo's CLIP rule is unreleased; we use pairwise image selection:
  correct iff s(sentence, positive image) > s(sentence, negative image), strict (a tie is wrong).
  Each CSV row is one test case (duplicates are not merged);
- headline: plain mean of the 3 subtask accuracies (vl_compo).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import bad_record, chosen, headline, read_text, require_files
from mosaictool.bench._formats import check_inside, check_text
from mosaictool.bench.base import ImageRef, Item, row
from mosaictool.errors import MosaicError

SUBTASKS = ["subj_neg", "verb_neg", "obj_neg"]
COLUMNS = ("sentence", "pos_image_id", "neg_image_id", *SUBTASKS)

LAYOUT = """\
  svo_probes/svo_probes.csv                    the repo's CSV (sentence, pos_triplet, neg_triplet, subj_neg, verb_neg, obj_neg,
                                               pos_url, neg_url, pos_image_id, neg_image_id)
  svo_probes/images/<image_id>.jpg             each image downloaded from its URL (image_urls.txt), named by its id
  rows with exactly one *_neg true; correct iff s(sentence, pos image) > s(sentence, neg image), tie wrong"""


def _flag(value: str, path: Path, where: str, column: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1"):
        return True
    if v in ("false", "0"):
        return False
    raise bad_record("svo_probes", path, where, f"{column} = {value!r} is not True/False")


class SVOProbes:
    name = "svo_probes"
    aliases = ("svo",)  # the name the MosaiCLIP paper and vl_compo tables use
    subtasks = SUBTASKS
    layout = LAYOUT

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """One item per CSV row with exactly one negative type, in file order; `limit` = per subtask."""
        wanted = chosen(self.subtasks, subtasks, self.name)
        base = Path(root) / "svo_probes"
        path = base / "svo_probes.csv"
        require_files([path], self.name, self.layout)
        counts = dict.fromkeys(SUBTASKS, 0)
        items = []
        with io.StringIO(read_text(path, self.name), newline="") as f:
            reader = csv.DictReader(f)
            absent = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if absent:
                raise MosaicError(f"svo_probes: {path}: missing column(s) {', '.join(absent)}; expected the repo's svo_probes.csv")
            for lineno, rec in enumerate(reader, 2):
                where = f"line {lineno}"
                flags = [s for s in SUBTASKS if _flag(rec[s], path, where, s)]
                if len(flags) != 1:
                    continue
                sub = flags[0]
                if sub not in wanted or (limit is not None and counts[sub] >= limit):
                    continue
                check_text(rec["sentence"], self.name, path, f"{where}: sentence")
                images = [ImageRef(str(base / "images" / f"{check_inside(rec[k].strip(), self.name, path, f'{where}: {k}')}.jpg"))
                          for k in ("pos_image_id", "neg_image_id")]
                items.append(Item(images, [rec["sentence"]], {"subtask": sub, "line": lineno}))
                counts[sub] += 1
        return items

    def score(self, items: list[Item], sims: list[np.ndarray], *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        by_sub: dict[str, list[np.ndarray]] = {}
        for item, s in zip(items, sims):
            by_sub.setdefault(item.meta["subtask"], []).append(np.asarray(s, dtype=np.float64)[:, 0])
        rows, accs = [], []
        for sub in SUBTASKS:
            if sub not in by_sub:
                accs.append(None)
                continue
            scores = np.stack(by_sub[sub])  # (n, 2): positive image, negative image
            accs.append(row(sub, "accuracy", metrics.choice_accuracy(scores, 0, tie="strict"), len(scores)))
            rows.append(accs[-1])
            rows.append(row(sub, "mu_c", metrics.mean_confidence(scores, 0, logit_scale), len(scores)))
        return rows + headline("accuracy", accs)


BENCHMARK = SVOProbes()
