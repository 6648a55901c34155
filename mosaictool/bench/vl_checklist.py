"""VL-CheckList (om-ai-lab/VL-CheckList): one image, a positive text and a negative that changes an
object, attribute or relation; 56 source files in 13 categories.

Official ITC rules (`om-ai-lab/VL-CheckList`, `vl_checklist/evaluate.py`):
- correct iff s(img, POS[0]) > s(img, NEG[0]): strict (a tie is wrong), only index 0 of each list;
- accuracy per source file (one corpus yaml = one file);
- with the config's MAX_NUM the official run keeps only the first MAX_NUM/2 items of each file: the
  `vl_checklist-max1000` benchmark does that with the sample config's MAX_NUM = 2000; `vl_checklist`
  scores every item;
- the official loader silently drops pairs whose image is missing; we never do (the engine stops
  with the count and first paths, or `--skip-missing` skips them and says how many).

Aggregation (vl_compo names, as FSC-CLIP (Oh et al. 2024) reports them): a category (e.g. `Object_Location_center`) is the
plain mean of its source files' accuracies (our choice: vl_compo's code is unreleased and each file
is the official reporting unit); Object = mean of its 6 categories, Attribute = mean of 5,
Relation = mean of 2; the headline = mean(Object, Attribute, Relation).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mosaictool.bench import metrics
from mosaictool.bench._files import bad_record, chosen, headline, mean_row, read_json, require_files
from mosaictool.bench._formats import VL_CHECKLIST, check_entry
from mosaictool.bench.base import ImageRef, Item, row
from mosaictool.records import kind_of

# corpus/v1/<category path>/<source>.yaml -> IMG_ROOT and ANNO_PATH (below data/), verbatim
_CORPUS = """\
Attribute/action/vaw                     vg   Attribute/vaw/action.json
Attribute/action/vg                      vg   Attribute/vg/action.json
Attribute/color/vaw                      vg   Attribute/vaw/color.json
Attribute/color/vg                       vg   Attribute/vg/color.json
Attribute/material/vaw                   vg   Attribute/vaw/material.json
Attribute/material/vg                    vg   Attribute/vg/material.json
Attribute/size/vaw                       vg   Attribute/vaw/size.json
Attribute/size/vg                        vg   Attribute/vg/size.json
Attribute/state/vaw                      vg   Attribute/vaw/state.json
Attribute/state/vg                       vg   Attribute/vg/state.json
Object/Location/center/hake              hake Object/Location/hake_location/hake_obj_center.json
Object/Location/center/swig_agent        swig Object/Location/swig_location/swig_agent/swig_agent_center.json
Object/Location/center/swig_destination  swig Object/Location/swig_location/swig_destination/swig_destination_center.json
Object/Location/center/swig_item         swig Object/Location/swig_location/swig_item/swig_item_center.json
Object/Location/center/swig_tool         swig Object/Location/swig_location/swig_tool/swig_tool_center.json
Object/Location/center/vg_obj            vg   Object/Location/vg_location/vg_obj_center.json
Object/Location/center/vg_subj           vg   Object/Location/vg_location/vg_subj_center.json
Object/Location/margin/hake              hake Object/Location/hake_location/hake_obj_margin.json
Object/Location/margin/swig_agent        swig Object/Location/swig_location/swig_agent/swig_agent_margin.json
Object/Location/margin/swig_destination  swig Object/Location/swig_location/swig_destination/swig_destination_margin.json
Object/Location/margin/swig_item         swig Object/Location/swig_location/swig_item/swig_item_margin.json
Object/Location/margin/swig_tool         swig Object/Location/swig_location/swig_tool/swig_tool_margin.json
Object/Location/margin/vg_obj            vg   Object/Location/vg_location/vg_obj_margin.json
Object/Location/margin/vg_subj           vg   Object/Location/vg_location/vg_subj_margin.json
Object/Location/mid/hake                 hake Object/Location/hake_location/hake_obj_mid.json
Object/Location/mid/swig_agent           swig Object/Location/swig_location/swig_agent/swig_agent_mid.json
Object/Location/mid/swig_destination     swig Object/Location/swig_location/swig_destination/swig_destination_mid.json
Object/Location/mid/swig_item            swig Object/Location/swig_location/swig_item/swig_item_mid.json
Object/Location/mid/swig_tool            swig Object/Location/swig_location/swig_tool/swig_tool_mid.json
Object/Location/mid/vg_obj               vg   Object/Location/vg_location/vg_obj_mid.json
Object/Location/mid/vg_subj              vg   Object/Location/vg_location/vg_subj_mid.json
Object/Size/large/hake                   hake Object/Size/hake_size/hake_obj_large.json
Object/Size/large/swig_agent             swig Object/Size/swig_size/swig_agent/swig_agent_large.json
Object/Size/large/swig_destination       swig Object/Size/swig_size/swig_destination/swig_destination_large.json
Object/Size/large/swig_item              swig Object/Size/swig_size/swig_item/swig_item_large.json
Object/Size/large/swig_tool              swig Object/Size/swig_size/swig_tool/swig_tool_large.json
Object/Size/large/vg_obj                 vg   Object/Size/vg_size/vg_obj_large.json
Object/Size/large/vg_subj                vg   Object/Size/vg_size/vg_subj_large.json
Object/Size/medium/hake                  hake Object/Size/hake_size/hake_obj_medium.json
Object/Size/medium/swig_agent            swig Object/Size/swig_size/swig_agent/swig_agent_medium.json
Object/Size/medium/swig_destination      swig Object/Size/swig_size/swig_destination/swig_destination_medium.json
Object/Size/medium/swig_item             swig Object/Size/swig_size/swig_item/swig_item_medium.json
Object/Size/medium/swig_tool             swig Object/Size/swig_size/swig_tool/swig_tool_medium.json
Object/Size/medium/vg_obj                vg   Object/Size/vg_size/vg_obj_medium.json
Object/Size/medium/vg_subj               vg   Object/Size/vg_size/vg_subj_medium.json
Object/Size/small/hake                   hake Object/Size/hake_size/hake_obj_small.json
Object/Size/small/swig_agent             swig Object/Size/swig_size/swig_agent/swig_agent_small.json
Object/Size/small/swig_destination       swig Object/Size/swig_size/swig_destination/swig_destination_small.json
Object/Size/small/swig_item              swig Object/Size/swig_size/swig_item/swig_item_small.json
Object/Size/small/swig_tool              swig Object/Size/swig_size/swig_tool/swig_tool_small.json
Object/Size/small/vg_obj                 vg   Object/Size/vg_size/vg_obj_small.json
Object/Size/small/vg_subj                vg   Object/Size/vg_size/vg_subj_small.json
Relation/action/hake                     hake Relation/hake_action.json
Relation/action/swig                     swig Relation/swig_action.json
Relation/action/vg                       vg   Relation/vg/action.json
Relation/spatial/vg                      vg   Relation/vg/spatial.json
"""


def _parse_corpus(text: str) -> dict[str, tuple[str, str, str]]:
    """source name -> (category, image root folder, annotation path below data/)."""
    out = {}
    for line in text.splitlines():
        yaml_path, img_root, anno = line.split()
        category_path, _, source = yaml_path.rpartition("/")
        category = category_path.replace("/", "_")
        out[f"{category}_{source}"] = (category, img_root, anno)
    return out


SOURCES = _parse_corpus(_CORPUS)
CATEGORIES: list[str] = list(dict.fromkeys(c for c, _, _ in SOURCES.values()))
KINDS = ("Object", "Attribute", "Relation")
OFFICIAL_MAX_NUM = 2000

LAYOUT = """\
  vl_checklist/data/...json             VL-CheckList's data/ folder as in the repo (the ANNO_PATHs of
                                        corpus/v1/**.yaml), e.g. data/Attribute/vg/color.json,
                                        data/Object/Location/vg_location/vg_obj_center.json, data/Relation/swig_action.json;
                                        each a list of [image path, {"POS": [...], "NEG": [...]}]
  vl_checklist/vg/<path>                Visual Genome (VG_100K/, VG_100K_2/), also for VAW
  vl_checklist/hake/<path>              HAKE image folders (hake_images_20190730/, hico_20160224_det/, vcoco/, ...)
  vl_checklist/swig/<path>              SWiG images_512
  image folder per file = the IMG_ROOT of its corpus yaml (DATASETS.md); subtasks = the 13 categories"""


class VLChecklist:
    subtasks = CATEGORIES
    layout = LAYOUT

    def __init__(self, name: str = "vl_checklist", max_num: int | None = None):
        """`max_num`: the official config's MAX_NUM; ITC mode keeps the first max_num // 2 items per file."""
        self.name = name
        self.per_file_cap = max_num // 2 if max_num else None
        if self.per_file_cap:
            self.layout = f"{LAYOUT}\nfirst {self.per_file_cap} items per file (official MAX_NUM = {max_num})"

    def sources(self, subtasks: list[str] | None = None) -> list[str]:
        cats = chosen(self.subtasks, subtasks, self.name)
        return [s for s, (c, _, _) in SOURCES.items() if c in cats]

    def load_source(self, root: Path, source: str, *, limit: int | None = None) -> list[Item]:
        """The items of one source file, in file order (after the MAX_NUM/2 cap and `limit`)."""
        category, img_root, anno = SOURCES[source]
        base = Path(root) / "vl_checklist"
        path = base / "data" / anno
        records = read_json(path, self.name)
        if not isinstance(records, list):
            raise bad_record(self.name, path, "top level", "expected a JSON list of [image, {POS, NEG}]")
        caps = [c for c in (self.per_file_cap, limit) if c is not None]
        if caps:
            records = records[: min(caps)]
        items = []
        for i, rec in enumerate(records):
            if not (isinstance(rec, list) and len(rec) == 2 and isinstance(rec[1], dict)):
                shape = f"a list of {len(rec)}" if isinstance(rec, list) else kind_of(rec)
                raise bad_record(self.name, path, f"item {i}", f"expected a list [image, {{POS, NEG}}], got {shape}")
            check_entry(VL_CHECKLIST, {"image": rec[0], **rec[1]}, self.name, path, f"item {i}")
            rel, pos, neg = rec[0], rec[1]["POS"][0], rec[1]["NEG"][0]
            items.append(Item([ImageRef(str(base / img_root / rel))], [pos, neg], {"subtask": category, "source": source}))
        return items

    def load(self, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
        """Every source file of the chosen categories (all must exist); `limit` = per file."""
        sources = self.sources(subtasks)
        require_files([Path(root) / "vl_checklist" / "data" / SOURCES[s][2] for s in sources], self.name, self.layout)
        return [item for s in sources for item in self.load_source(root, s, limit=limit)]

    def score(self, items: list[Item], sims: list[np.ndarray], *, logit_scale: float = metrics.CLIP_LOGIT_SCALE) -> list[dict]:
        by_source: dict[str, list[np.ndarray]] = {}
        for item, s in zip(items, sims):
            by_source.setdefault(item.meta["source"], []).append(np.asarray(s, dtype=np.float64)[0])
        rows: list[dict] = []
        per_source: dict[str, dict] = {}
        for source in SOURCES:
            if source not in by_source:
                continue
            scores = np.stack(by_source[source])  # (n, 2): POS[0], NEG[0]
            per_source[source] = row(source, "accuracy", metrics.choice_accuracy(scores, 0, tie="strict"), len(scores), detail=True)
            rows.append(per_source[source])
            rows.append(row(source, "mu_c", metrics.mean_confidence(scores, 0, logit_scale), len(scores), detail=True))
        per_category: dict[str, dict | None] = {}
        for cat in CATEGORIES:
            members = [s for s, (c, _, _) in SOURCES.items() if c == cat]
            if all(m in per_source for m in members):
                per_category[cat] = mean_row(cat, "accuracy", [per_source[m] for m in members])
                rows.append(per_category[cat])
            else:
                per_category[cat] = None
        kinds: list[dict | None] = []
        for kind in KINDS:
            parts = [per_category[c] for c in CATEGORIES if c.startswith(kind + "_")]
            if all(p is not None for p in parts):
                kinds.append(mean_row(kind, "accuracy", parts))
                rows.append(kinds[-1])
            else:
                kinds.append(None)
        return rows + headline("accuracy", kinds)


BENCHMARK = (VLChecklist(), VLChecklist("vl_checklist-max1000", max_num=OFFICIAL_MAX_NUM))
