"""Probe-R / Probe-C / Probe-B read from the authors' released layout and scored as their code scores
them: fixtures in their format (tiny images via Pillow) are loaded by our readers and scored by our
functions; the same embeddings go through a transcription of the authors' scoring code, and every
number must agree to 1e-9.

Authors' code: GitHub DeepLearningRobustnessStudies/UnderstandingVisualTextModels, commit
da4443214c94e5aa32bf36ae6685aec729b336e7 (the newest; files unchanged since 0032257):
  core/eval_relation_understanding.py      VisualGenomeDataset 27-77, eval_clip 319-467, eval 725-784
  core/eval_compositional_understanding.py COCOCompositionalDataset 23-63, eval_clip 66-125
  core/eval_context_understanding.py       BackgroundCuesDataset 32-92, average_precision 95-112,
                                           make_comparisons 115-149, eval_clip 151-197, eval 444-453
  core/eval_cooccurence_understanding.py   OccurenceDataset 32-118, average_precision 121-138,
                                           make_comparisons 141-183, eval_clip 186-236, eval 508-521
The transcriptions keep their statements; they take embeddings instead of a CLIP model (their
`model.encode_*` + `normalize`), and leave out the logging's round(..., 4).
"""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import orjson
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from mosaictool.bench import get
from mosaictool.bench.base import HEADLINE
from mosaictool.cli import app
from mosaictool.errors import MosaicError

DIM = 8


class Space:
    """A random unit embedding per image path / text, the same for our scorer and for theirs."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.feats: dict[str, np.ndarray] = {}

    def __call__(self, key: str) -> np.ndarray:
        if key not in self.feats:
            v = self.rng.normal(size=DIM)
            self.feats[key] = v / np.linalg.norm(v)
        return self.feats[key]

    def sims(self, item) -> np.ndarray:
        return np.stack([self(r.path) for r in item.images]) @ np.stack([self(t) for t in item.texts]).T

    def t(self, keys) -> torch.Tensor:
        return torch.tensor(np.stack([self(str(k)) for k in keys]))


def _img(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4), (len(path.name) * 9 % 255, 0, 0)).save(path)


def close(ours: float, theirs: float) -> bool:
    return abs(ours - theirs) <= 1e-9 * max(1.0, abs(theirs))


def by_key(rows):
    return {(r["subtask"], r["metric"]): r for r in rows}


# their get_logits (all four scripts): `return logit_scale * text_f @ imf_i.t()`
def get_logits(logit_scale, imf_i, text_f):
    return logit_scale * text_f @ imf_i.t()


# --- Probe-R -----------------------------------------------------------------------------------------


def write_probe_r(root, groups: int = 3):
    folder = root / "probe_r"
    ann = {}
    for g in range(groups):
        gid = str(2317469 + g)
        ann[gid] = {"positive_image_ids": [100 + 10 * g + k for k in range(10)],
                    "negative_image_ids": [500 + 10 * g + k for k in range(10)],
                    "positive_prompt": f"A photo of a snow covering ground {g}.",
                    "negative_prompt": f"A photo of a cracker covering ground {g}.",
                    "negative_object": f"cracker{g}", "positive_object": f"snow{g}",
                    "negative_predicate_prompt": f"A photo of a snow flying in front of ground {g}."}
        for i in [gid] + ann[gid]["positive_image_ids"] + ann[gid]["negative_image_ids"]:
            _img(folder / "images" / f"{i}.jpg")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "relation_eval_subject.json").write_text(json.dumps(ann))
    return ann


def their_relation_group(logit_scale, visual_features, text_features, results, acc):
    """eval_relation_understanding.py eval_clip, lines 361-466 with batch_size 1 (their __main__),
    from the normalised features of [gt image, 10 positive, 10 negative images] and of the prompts
    [positive_prompt, negative_prompt, positive_obj_prompt, negative_obj_prompt, negative_predicate_prompt]."""
    batch_size = 1
    rel1_img_features = visual_features[:batch_size]
    dims = visual_features.shape[-1]
    obj1_img_features = visual_features[batch_size: batch_size + (batch_size * 10)].reshape(batch_size, 10, dims)
    obj3_img_features = visual_features[
                        (batch_size + (batch_size * 10)): (batch_size + (batch_size * 10)) + (batch_size * 10)].reshape(
        batch_size, 10, dims)
    rel1_prompt_txt_features = text_features[:batch_size]
    rel3_prompt_txt_features = text_features[batch_size: batch_size * 2]
    obj1_txt_features = text_features[batch_size * 2: batch_size * 3]
    obj3_txt_features = text_features[batch_size * 3: batch_size * 4]
    rel2_prompt_txt_features = text_features[batch_size * 4: batch_size * 5]
    for batch_idx, im_f in enumerate(rel1_img_features):
        rel1_img_vs_rel1_prompt_logits = get_logits(logit_scale, im_f, rel1_prompt_txt_features[batch_idx])
        rel1_img_vs_rel3_prompt_logits = get_logits(logit_scale, im_f, rel3_prompt_txt_features[batch_idx])
        result = torch.stack([rel1_img_vs_rel1_prompt_logits, rel1_img_vs_rel3_prompt_logits]).softmax(dim=0)
        results['rel1_image']['rel1_vs_rel3'].append(result[0].cpu().item())
        acc['rel1_image']['rel1_vs_rel3'].append(int(result[0] > result[1]))
        rel1_img_vs_rel2_prompt_logits = get_logits(logit_scale, im_f, rel2_prompt_txt_features[batch_idx])
        result = torch.stack([rel1_img_vs_rel1_prompt_logits, rel1_img_vs_rel2_prompt_logits]).softmax(dim=0)
        results['rel1_image']['rel1_vs_rel2'].append(result[0].cpu().item())
        acc['rel1_image']['rel1_vs_rel2'].append(int(result[0] > result[1]))
        rel1_img_vs_obj1_prompt_logits = get_logits(logit_scale, im_f, obj1_txt_features[batch_idx])
        result = torch.stack([rel1_img_vs_rel1_prompt_logits, rel1_img_vs_obj1_prompt_logits]).softmax(dim=0)
        results['rel1_image']['rel1_vs_obj1'].append(result[0].cpu().item())
        acc['rel1_image']['rel1_vs_obj1'].append(int(result[0] > result[1]))
        obj1_img_vs_rel1_prompt_logits = torch.mean(get_logits(logit_scale, obj1_img_features[batch_idx],
                                                               rel1_prompt_txt_features[batch_idx].unsqueeze(0)))
        obj1_img_vs_obj1_prompt_logits = torch.mean(get_logits(logit_scale, obj1_img_features[batch_idx],
                                                               obj1_txt_features[batch_idx].unsqueeze(0)))
        result = torch.stack([obj1_img_vs_obj1_prompt_logits, obj1_img_vs_rel1_prompt_logits]).softmax(dim=0)
        results['obj1_images']['obj1_vs_rel1'].append(result[0].cpu().item())
        acc['obj1_images']['obj1_vs_rel1'].append(int(result[0] > result[1]))
        obj1_img_vs_rel2_prompt_logits = torch.mean(get_logits(logit_scale, obj1_img_features[batch_idx],
                                                               rel2_prompt_txt_features[batch_idx].unsqueeze(0)))
        result = torch.stack([obj1_img_vs_obj1_prompt_logits, obj1_img_vs_rel2_prompt_logits]).softmax(dim=0)
        results['obj1_images']['obj1_vs_rel2'].append(result[0].cpu().item())
        acc['obj1_images']['obj1_vs_rel2'].append(int(result[0] > result[1]))
        result = torch.stack([obj1_img_vs_rel1_prompt_logits, obj1_img_vs_rel2_prompt_logits]).softmax(dim=0)
        results['obj1_images']['rel1_vs_rel2'].append(result[0].cpu().item())
        acc['obj1_images']['rel1_vs_rel2'].append(int(result[0] > result[1]))
        obj1_img_vs_rel3_prompt_logits = torch.mean(get_logits(logit_scale, obj1_img_features[batch_idx],
                                                               rel3_prompt_txt_features[batch_idx].unsqueeze(0)))
        result = torch.stack([obj1_img_vs_rel1_prompt_logits, obj1_img_vs_rel3_prompt_logits]).softmax(dim=0)
        results['obj1_images']['rel1_vs_rel3'].append(result[0].cpu().item())
        acc['obj1_images']['rel1_vs_rel3'].append(int(result[0] > result[1]))
        obj3_img_vs_obj3_prompt_logits = torch.mean(get_logits(logit_scale, obj3_img_features[batch_idx],
                                                               obj3_txt_features[batch_idx].unsqueeze(0)))
        obj1_img_vs_obj3_prompt_logits = torch.mean(get_logits(logit_scale, obj1_img_features[batch_idx],
                                                               obj3_txt_features[batch_idx].unsqueeze(0)))
        obj_detection_pos = torch.stack([obj1_img_vs_obj1_prompt_logits, obj1_img_vs_obj3_prompt_logits]).softmax(dim=0)
        obj3_img_vs_obj1_prompt_logits = torch.mean(get_logits(logit_scale, obj3_img_features[batch_idx],
                                                               obj1_txt_features[batch_idx].unsqueeze(0)))
        obj_detection_neg = torch.stack([obj3_img_vs_obj3_prompt_logits, obj3_img_vs_obj1_prompt_logits]).softmax(dim=0)
        results['obj3_images']['obj3_vs_obj1'].append(obj_detection_neg[0].cpu().item())
        acc['obj3_images']['obj3_vs_obj1'].append(int(result[0] > result[1]))
        results['obj1_images']['obj1_vs_obj3'].append(obj_detection_pos[0].cpu().item())
        acc['obj1_images']['obj1_vs_obj3'].append(int(result[0] > result[1]))


# their (key, comparison) -> our subtask
R_NAMES = {("rel1_image", "rel1_vs_rel3"): "R1_vs_R3", ("rel1_image", "rel1_vs_rel2"): "R1_vs_R2",
           ("rel1_image", "rel1_vs_obj1"): "R1_vs_O1",
           ("obj1_images", "obj1_vs_rel1"): "O1_vs_R1", ("obj1_images", "obj1_vs_rel2"): "O1_vs_R2",
           ("obj1_images", "rel1_vs_rel2"): "X_O1/R1_vs_R2", ("obj1_images", "rel1_vs_rel3"): "X_O1/R1_vs_R3",
           ("obj1_images", "obj1_vs_obj3"): "O1_vs_O3", ("obj3_images", "obj3_vs_obj1"): "O3_vs_O1"}


def test_probe_r_official_layout_equals_their_code(tmp_path):
    ann = write_probe_r(tmp_path)
    space = Space(0)
    bench = get("probe_r")
    items = bench.load(tmp_path)
    assert [it.meta["subtask"] for it in items] == ["anchor", "subject", "swap"] * 3
    assert all(os.path.isfile(r.path) for it in items for r in it.images)
    ours = by_key(bench.score(items, [space.sims(it) for it in items], logit_scale=100.0))

    # their side: VisualGenomeDataset reads <root_image_dir>/<id>.jpg; collate_fn builds the object prompts
    columns = ['rel1_vs_rel3', 'rel1_vs_obj1', 'rel1_vs_rel2', 'obj1_vs_rel1', 'obj2_vs_rel2', 'obj3_vs_obj1',
               'obj1_vs_obj3', 'obj1_vs_rel2']
    results = {k: {c: [] for c in columns} for k in ('rel1_image', 'obj1_images', 'obj3_images')}
    acc = {k: {c: [] for c in columns} for k in ('rel1_image', 'obj1_images', 'obj3_images')}
    root = tmp_path / "probe_r" / "images"
    for image_id, a in ann.items():
        image_paths = [os.path.join(root, str(i) + '.jpg')
                       for i in [image_id] + a['positive_image_ids'] + a['negative_image_ids']]
        prompts = [a['positive_prompt'], a['negative_prompt'], 'A photo of ' + a['positive_object'] + '.',
                   'A photo of ' + a['negative_object'] + '.', a['negative_predicate_prompt']]
        their_relation_group(100.0, space.t(image_paths), space.t(prompts), results, acc)
    for (key, comparison), sub in R_NAMES.items():
        assert ours[(sub, "mu_c")]["n"] == len(results[key][comparison]) == 3
        assert close(ours[(sub, "mu_c")]["value"], np.mean(results[key][comparison])), sub
        if comparison in ("obj1_vs_obj3", "obj3_vs_obj1"):
            # their accuracy here re-reads the stale `result` of rel1_vs_rel3 on X_O1: ours scores the comparison
            assert np.sum(acc[key][comparison]) / 3 == np.sum(acc['obj1_images']['rel1_vs_rel3']) / 3
        else:
            assert close(ours[(sub, "accuracy")]["value"], np.sum(acc[key][comparison]) / len(acc[key][comparison])), sub
    assert ours[(HEADLINE, "accuracy")]["value"] == ours[("R1_vs_R2", "accuracy")]["value"]
    assert len(bench.load(tmp_path, limit=2)) == 6


def test_probe_r_official_bad_group(tmp_path):
    (tmp_path / "probe_r").mkdir()
    (tmp_path / "probe_r" / "relation_eval_subject.json").write_text(json.dumps({"7": {"ositive_image_ids": []}}))
    with pytest.raises(MosaicError, match=r"relation_eval_subject.json: group 7: missing field\(s\) positive_image_ids"):
        get("probe_r").load(tmp_path)
    (tmp_path / "probe_r" / "relation_eval_subject.json").write_text("[]")
    with pytest.raises(MosaicError, match="expected a JSON object"):
        get("probe_r").load(tmp_path)


# --- Probe-C -----------------------------------------------------------------------------------------


def write_probe_c(root):
    folder = root / "probe_c"
    folder.mkdir(parents=True)
    comp = [{"img1_prompt": "A photo of a small dog.", "img1_id": "42", "img1_composition": "small", "img1_object": "dog",
             "img2_id": 371046, "img2_prompt": "A photo of a large dog.", "img2_composition": "large", "img2_object": "dog"},
            {"img1_prompt": "A photo of a white dog.", "img1_id": "74", "img1_composition": "white", "img1_object": "dog",
             "img2_id": 240637, "img2_prompt": "A photo of a black dog.", "img2_composition": "black", "img2_object": "dog"},
            {"img1_prompt": "A photo of a wet cat.", "img1_id": "75", "img1_composition": "wet", "img1_object": "cat",
             "img2_id": 240638, "img2_prompt": "A photo of a dry cat.", "img2_composition": "dry", "img2_object": "cat"}]
    obj = [{"img1_prompt": "A photo of a small dog.", "img1_id": "42", "img1_composition": "small", "img1_object": "dog",
            "img2_id": 514990, "img2_prompt": "A photo of a small boy.", "img2_composition": "small", "img2_object": "boy"},
           {"img1_prompt": "A photo of a white dog.", "img1_id": "74", "img1_composition": "white", "img1_object": "dog",
            "img2_id": 437393, "img2_prompt": "A photo of a white horse.", "img2_composition": "white", "img2_object": "horse"}]
    (folder / "data_compositional_switch.json").write_text(json.dumps(comp))
    (folder / "data_object_switch.json").write_text(json.dumps(obj))
    for a in comp + obj:
        for i in (a["img1_id"], a["img2_id"]):
            _img(folder / "val2014" / f"COCO_val2014_{str(i).zfill(12)}.jpg")
    return {"composition": comp, "object": obj}


def their_compositional(logit_scale, image1_features, image2_features, prompt1_features, prompt2_features, results, acc):
    """eval_compositional_understanding.py eval_clip, lines 97-124 (batch_idx = 0)."""
    batch_idx = 0
    image1_vs_prompt1 = get_logits(logit_scale, image1_features[batch_idx], prompt1_features[batch_idx])
    image1_vs_prompt2 = get_logits(logit_scale, image1_features[batch_idx], prompt2_features[batch_idx])
    result = torch.stack([image1_vs_prompt1, image1_vs_prompt2]).softmax(dim=0)
    results['image1']['prompt1'].append(result[0].item())
    results['image1']['prompt2'].append(result[1].item())
    image2_vs_prompt2 = get_logits(logit_scale, image2_features[batch_idx], prompt2_features[batch_idx])
    image2_vs_prompt1 = get_logits(logit_scale, image2_features[batch_idx], prompt1_features[batch_idx])
    result = torch.stack([image2_vs_prompt2, image2_vs_prompt1]).softmax(dim=0)
    results['image2']['prompt2'].append(result[0].item())
    results['image2']['prompt1'].append(result[1].item())
    text_correct = image1_vs_prompt1 > image1_vs_prompt2 and image2_vs_prompt2 > image2_vs_prompt1
    acc['text_correct'].append(text_correct.item())
    image_correct = image1_vs_prompt1 > image2_vs_prompt1 and image2_vs_prompt2 > image1_vs_prompt2
    acc['image_correct'].append(image_correct.item())
    acc['group_correct'].append(image_correct.item() and text_correct.item())


def test_probe_c_official_layout_equals_their_code(tmp_path):
    data = write_probe_c(tmp_path)
    space = Space(1)
    bench = get("probe_c")
    items = bench.load(tmp_path)
    assert all(os.path.isfile(r.path) for it in items for r in it.images)
    assert [it.meta["category"] for it in items if it.meta["subtask"] == "composition"][:2] == ["size", "color"]
    ours = by_key(bench.score(items, [space.sims(it) for it in items], logit_scale=100.0))
    root = tmp_path / "probe_c" / "val2014"
    for split, anns in data.items():
        results = {k: {c: [] for c in ('prompt1', 'prompt2')} for k in ('image1', 'image2')}
        acc = {c: [] for c in ('text_correct', 'image_correct', 'group_correct')}
        for a in anns:  # COCOCompositionalDataset.load_image: COCO_val2014_<id zero-filled to 12>.jpg
            f1, f2 = (os.path.join(root, f"COCO_val2014_{str(a[k]).zfill(12)}.jpg") for k in ('img1_id', 'img2_id'))
            their_compositional(100.0, space.t([f1]), space.t([f2]), space.t([a['img1_prompt']]),
                                space.t([a['img2_prompt']]), results, acc)
        for metric, col in (("text", "text_correct"), ("image", "image_correct"), ("group", "group_correct")):
            assert close(ours[(split, metric)]["value"], np.sum(acc[col]) / len(acc[col])), (split, metric)
        # mu(c): the right prompt's confidence, their two logged means averaged
        theirs = (np.mean(results['image1']['prompt1']) + np.mean(results['image2']['prompt2'])) / 2
        assert close(ours[(split, "mu_c")]["value"], theirs) and ours[(split, "mu_c")]["n"] == len(anns)
    assert ours[(HEADLINE, "mu_c")]["value"] == ours[("composition", "mu_c")]["value"]
    assert [it.meta["subtask"] for it in bench.load(tmp_path, limit=1)] == ["composition", "object"]


# --- Probe-B -----------------------------------------------------------------------------------------

CLASSES = ["dog", "cat", "apple", "car", "person"]


def coco(i) -> str:
    return f"COCO_val2014_{str(i).zfill(12)}.jpg"


def write_probe_b(root):
    """Both splits, fillers black and noise; image 5's patch is missing for noise and image 9's
    single-object image for black (their datasets leave such records out)."""
    folder = root / "probe_b"
    folder.mkdir(parents=True)
    with open(folder / "prompt_classes.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["class", "prompt"])
        w.writerows([c, f"A photo of a {c}."] for c in CLASSES)
    mr = [{"annotations": {c: [{"bbox": [0, 0, 1, 1]}] for c in labels}, "image": coco(i), "image_id": i}
          for i, labels in [(1, ["dog"]), (2, ["cat", "car"]), (3, ["person", "dog", "apple"]), (5, ["car"])]]
    alone = [{"image_id": i, "object": o, "other_objects": others, "path": f"{o}_{coco(i)}"}
             for i, o, others in [(6, "dog", ["cat"]), (7, "car", ["person", "apple"]), (8, "apple", ["dog"]), (9, "person", [])]]
    (folder / "background_context_dataset.json").write_text(json.dumps(mr))
    (folder / "object_context_dataset.json").write_text(json.dumps(alone))
    for filler in ("black", "noise"):
        for a in mr:
            _img(folder / "val2014" / coco(a["image_id"]))
            _img(folder / "val2014_background_removed_dataset" / "segmentation_mask" / filler / coco(a["image_id"]))
            if not (filler == "noise" and a["image_id"] == 5):
                _img(folder / "val2014_random_patch_dataset" / filler / coco(a["image_id"]))
        for a in alone:
            _img(folder / "val2014_background_removed_dataset" / "segmentation_mask" / filler / coco(a["image_id"]))
            _img(folder / "val2014_random_patch_dataset" / filler / coco(a["image_id"]))
            if not (filler == "black" and a["image_id"] == 9):
                _img(folder / "val2014_background_removed_and_cooccurrence_dataset" / "segmentation_mask" / filler / a["path"])
    return mr, alone


def average_precision(target, output):
    """eval_context_understanding.py lines 95-112 (the same in eval_cooccurence_understanding.py 121-138)."""
    epsilon = 1e-8
    indices = output.argsort()[::-1]
    total_count_ = np.cumsum(np.ones((len(output), 1)))
    target_ = target[indices]
    ind = target_ == 1
    pos_count_ = np.cumsum(ind)
    total = pos_count_[-1]
    pos_count_[np.logical_not(ind)] = 0
    pp = pos_count_ / total_count_
    precision_at_i_ = np.sum(pp)
    precision_at_i = precision_at_i_ / (total + epsilon)
    return precision_at_i


def make_comparisons_context(gt_labels, logits, results):
    """eval_context_understanding.py lines 115-149."""
    gt_logits = logits[0].softmax(dim=0).cpu().numpy()
    gt_ap = average_precision(gt_labels, gt_logits)
    patch_logits = logits[1].softmax(dim=0).cpu().numpy()
    patch_ap = average_precision(gt_labels, patch_logits)
    mod_logits = logits[2].softmax(dim=0).cpu().numpy()
    mod_ap = average_precision(gt_labels, mod_logits)
    softmax_mods = mod_logits[np.argwhere(gt_labels > 0)].transpose()[0]
    softmax_gt = gt_logits[np.argwhere(gt_labels > 0)].transpose()[0]
    softmax_patch = patch_logits[np.argwhere(gt_labels > 0)].transpose()[0]
    results['gt_ap'].append(float(gt_ap))
    results['mod_ap'].append(float(mod_ap))
    results['patch_ap'].append(float(patch_ap))
    results['relative_robustness_gt_mod_ap'].append(float(1 - (gt_ap - mod_ap) / gt_ap))
    results['relative_robustness_gt_patch_ap'].append(float(1 - (gt_ap - patch_ap) / gt_ap))
    results['relative_robustness_patch_mod_ap'].append(float(1 - (patch_ap - mod_ap) / patch_ap))
    results['change_gt_mod_conf'].append(float(np.mean(softmax_gt - softmax_mods)))
    results['change_patch_mod_conf'].append(float(np.mean(softmax_patch - softmax_mods)))
    results['change_gt_patch_conf'].append(float(np.mean(softmax_gt - softmax_patch)))
    return results


def make_comparisons_cooccurrence(results, no_others_logits, new_label):
    """eval_cooccurence_understanding.py lines 141-183 (the lines that feed the aggregated file). Their
    new_label is a one-element list, so each value is a one-element array: numpy < 2 let float() take
    it, numpy 2 wants .item(); `float` below is that, and their statements stay as they are."""
    def float(x):
        return np.asarray(x).item()

    gt_no_others_logits = no_others_logits[0].softmax(dim=0).cpu().numpy()
    patch_no_others_logits = no_others_logits[1].softmax(dim=0).cpu().numpy()
    mod_no_others_logits = no_others_logits[2].softmax(dim=0).cpu().numpy()
    results['gt_single_object_acc'].append(float(np.argmax(gt_no_others_logits) == new_label))
    results['patch_single_object_acc'].append(float(np.argmax(patch_no_others_logits) == new_label))
    results['mod_single_object_acc'].append(float(np.argmax(mod_no_others_logits) == new_label))
    results['gt_mod_change_conf'].append(float(gt_no_others_logits[new_label] - mod_no_others_logits[new_label]))
    results['gt_patch_change_conf'].append(float(gt_no_others_logits[new_label] - patch_no_others_logits[new_label]))
    results['patch_mod_change_conf'].append(float(patch_no_others_logits[new_label] - mod_no_others_logits[new_label]))
    results['rel_robustness_gt_mod_change_conf'].append(
        float(1 - (gt_no_others_logits[new_label] - mod_no_others_logits[new_label]) / gt_no_others_logits[new_label]))
    results['rel_robustness_gt_patch_change_conf'].append(
        float(1 - (gt_no_others_logits[new_label] - patch_no_others_logits[new_label]) / gt_no_others_logits[new_label]))
    results['rel_robustness_patch_mod_change_conf'].append(
        float(1 - (patch_no_others_logits[new_label] - mod_no_others_logits[new_label]) / patch_no_others_logits[new_label]))
    return results


MR_NAMES = {"gt_ap": "mAP_x0", "patch_ap": "mAP_x0_patch", "mod_ap": "mAP_x1",
            "relative_robustness_gt_mod_ap": "robustness_x0_x1", "relative_robustness_gt_patch_ap": "robustness_x0_x0_patch",
            "relative_robustness_patch_mod_ap": "robustness_x0_patch_x1",
            "change_gt_mod_conf": "confidence_change_x0_x1", "change_gt_patch_conf": "confidence_change_x0_x0_patch",
            "change_patch_mod_conf": "confidence_change_x0_patch_x1"}
R_B_NAMES = {"gt_single_object_acc": "accuracy_x0", "patch_single_object_acc": "accuracy_x0_patch",
             "mod_single_object_acc": "accuracy_x1", "rel_robustness_gt_mod_change_conf": "robustness_x0_x1",
             "rel_robustness_gt_patch_change_conf": "robustness_x0_x0_patch",
             "rel_robustness_patch_mod_change_conf": "robustness_x0_patch_x1", "gt_mod_change_conf": "confidence_change_x0_x1",
             "gt_patch_change_conf": "confidence_change_x0_x0_patch", "patch_mod_change_conf": "confidence_change_x0_patch_x1"}


def their_probe_b(folder, filler, space, logit_scale):
    """Their two scripts' datasets (filters as in BackgroundCuesDataset 44-56, OccurenceDataset 43-68),
    eval_clip (context 174-195, co-occurrence 205-234) and the aggregation (np.mean per column)."""
    import pandas as pd

    # split MR: image_root_original = val2014, modified = <mod>/segmentation_mask/<fill>, patch = <patch>/<fill>
    image_root_original = os.path.join(folder, 'val2014')
    image_root_modified = os.path.join(folder, 'val2014_background_removed_dataset', 'segmentation_mask', filler)
    image_root_patch = os.path.join(folder, 'val2014_random_patch_dataset', filler)
    annotations = json.load(open(os.path.join(folder, 'background_context_dataset.json'), 'r'))
    patched = os.listdir(image_root_patch)
    annotations = [x for x in annotations if x['image'] in patched]
    coco_classes = pd.read_csv(os.path.join(folder, 'prompt_classes.csv'))
    class_prompts = coco_classes['prompt'].values
    coco_classes = np.array(coco_classes['class'].values)
    text_features = space.t(class_prompts)
    mr = {k: [] for k in MR_NAMES}
    for annotation in annotations:
        pth = f"COCO_val2014_{str(annotation['image_id']).zfill(12)}.jpg"
        paths = [os.path.join(r, pth) for r in (image_root_original, image_root_patch, image_root_modified)]  # orig + patch + mod
        labels = torch.zeros(len(coco_classes))
        for obj in list(annotation['annotations'].keys()):
            labels[np.where(coco_classes == obj)[0][0]] = 1.0
        gt_labels = np.stack([labels])[0]
        logits = get_logits(logit_scale, space.t(paths), text_features).t()
        mr = make_comparisons_context(gt_labels, logits, mr)
    # split R: original = <removed>/segmentation_mask/<fill>, modified = <removed_and_cooccurrence>/segmentation_mask/<fill>
    image_root_original = os.path.join(folder, 'val2014_background_removed_dataset', 'segmentation_mask', filler)
    image_root_modified = os.path.join(folder, 'val2014_background_removed_and_cooccurrence_dataset', 'segmentation_mask', filler)
    annotations = json.load(open(os.path.join(folder, 'object_context_dataset.json'), 'r'))
    patched = [int(p.split('.')[0].split('_')[-1]) for p in os.listdir(image_root_patch)]
    annotations = [x for x in annotations if x['image_id'] in patched]
    original = [int(p.split('.')[0].split('_')[-1]) for p in os.listdir(image_root_original)]
    annotations = [x for x in annotations if x['image_id'] in original and x['object'] != 'apple']
    mod = os.listdir(image_root_modified)
    annotations = [x for x in annotations if f"{x['object']}_COCO_val2014_{str(x['image_id']).zfill(12)}.jpg" in mod]
    coco_classes = pd.read_csv(os.path.join(folder, 'prompt_classes.csv'))
    coco_classes = coco_classes[coco_classes['class'] != 'apple']
    class_prompts = coco_classes['prompt'].values
    text_features = space.t(class_prompts)
    r = {k: [] for k in R_B_NAMES}
    for annotation in annotations:
        single_object, other_objects = [annotation['object']], [annotation['other_objects']]
        pth = f"COCO_val2014_{str(annotation['image_id']).zfill(12)}.jpg"
        paths = [os.path.join(image_root_original, pth), os.path.join(image_root_patch, pth),
                 os.path.join(image_root_modified, f"{annotation['object']}_{pth}")]  # orig + patch + mod
        tmp = {i: p for i, p in enumerate(class_prompts) if p.replace('A photo of a ', '').replace('.',
                                                                                                   '') not in other_objects[0]}
        tmp_text_features = text_features[list(tmp.keys())]
        new_label = [i for i, p in enumerate(tmp.values()) if p.replace('A photo of a ', '').replace('.', '') == single_object[0]]
        no_others_logits = get_logits(logit_scale, space.t(paths), tmp_text_features).t()
        r = make_comparisons_cooccurrence(r, no_others_logits, new_label)
    return {k: np.mean(np.array(v)) for k, v in mr.items()}, {k: np.mean(np.array(v)) for k, v in r.items()}, \
        len(mr["gt_ap"]), len(r["gt_single_object_acc"])


def test_probe_b_official_layout_equals_their_code(tmp_path):
    write_probe_b(tmp_path)
    space = Space(2)
    bench = get("probe_b")
    items = bench.load(tmp_path)
    assert all(os.path.isfile(r.path) for it in items for r in it.images)
    assert all("A photo of a apple." not in it.texts for it in items if it.meta["split"] == "R")  # their R drops apple
    ours = by_key(bench.score(items, [space.sims(it) for it in items], logit_scale=30.0))
    for filler, n_mr, n_r in (("black", 4, 2), ("noise", 3, 3)):
        mr, r, their_n_mr, their_n_r = their_probe_b(str(tmp_path / "probe_b"), filler, space, 30.0)
        assert (their_n_mr, their_n_r) == (n_mr, n_r)
        for theirs, names, split, n in ((mr, MR_NAMES, "MR", n_mr), (r, R_B_NAMES, "R", n_r)):
            for col, metric in names.items():
                got = ours[(f"{split}/{filler}", metric)]
                assert got["n"] == n and close(got["value"], theirs[col]), (split, filler, metric, got["value"], theirs[col])
    assert ours[(HEADLINE, "mAP_x1")]["value"] == ours[("MR", "mAP_x1")]["value"]
    assert len(bench.load(tmp_path, limit=1)) == 4
    assert {it.meta["subtask"] for it in bench.load(tmp_path, subtasks=["R/noise"])} == {"R/noise"}


def test_probe_b_score_does_not_depend_on_record_or_class_order(tmp_path):
    """Ties included: a constant model scores mAP 1/4 with 4 classes and one object per image, wherever
    the object's class and the record sit (the old per-class AP gave 1.0 or 0.25 by file order)."""
    folder = tmp_path / "probe_b"
    folder.mkdir()
    views = {"x0": "a.png", "x0_patch": "b.png", "x1": "c.png"}

    def score(classes, labels, sims):
        (folder / "classes.txt").write_text("\n".join(classes) + "\n")
        rows = [{"id": str(i), "split": "MR", "filler": "gray", "images": views, "labels": ls, "target": None}
                for i, ls in enumerate(labels)]
        (folder / "probe_b.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        items = get("probe_b").load(tmp_path)
        return {k: r["value"] for k, r in by_key(get("probe_b").score(items, sims)).items()}

    classes, labels = ["dog", "cat", "car", "cow"], [["dog"], ["cat"], ["car", "dog"], ["cow"]]
    rng = np.random.default_rng(3)
    sims = [np.round(rng.normal(size=(3, 4)), 1) for _ in labels]  # rounded: ties in the rankings
    base = score(classes, labels, sims)
    perm_c, perm_r = [2, 0, 3, 1], [3, 1, 0, 2]
    again = score([classes[k] for k in perm_c], [labels[k] for k in perm_r], [sims[k][:, perm_c] for k in perm_r])
    assert again.keys() == base.keys() and all(again[k] == pytest.approx(base[k], rel=1e-12) for k in base)
    const = score(classes, [["dog"], ["cat"], ["car"], ["cow"]], [np.zeros((3, 4))] * 4)
    assert const[("MR/gray", "mAP_x0")] == pytest.approx(0.25)


# --- layouts -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bench, ours, theirs", [("probe_r", "probe_r.jsonl", "relation_eval_subject.json"),
                                                  ("probe_c", "probe_c.jsonl", "data_compositional_switch.json"),
                                                  ("probe_b", "probe_b.jsonl", "background_context_dataset.json")])
def test_layout_detection_errors(tmp_path, bench, ours, theirs):
    folder = tmp_path / bench
    folder.mkdir()
    with pytest.raises(MosaicError, match=f"expected either our layout \\({ours}.*authors' released layout \\(.*{theirs}"):
        get(bench).load(tmp_path)
    (folder / ours).write_text("")
    (folder / theirs).write_text("[]")
    with pytest.raises(MosaicError, match=f"holds both our {ours} and the authors' {theirs}"):
        get(bench).load(tmp_path)


@pytest.mark.slow
def test_evaluate_reads_the_authors_files(tmp_path, tiny_checkpoint):
    """`mosaictool evaluate --bench probe_r,probe_c,probe_b` on a folder holding only the authors' layout."""
    ckpt = tiny_checkpoint
    data = tmp_path / "data"
    write_probe_r(data, groups=1)
    write_probe_c(data)
    write_probe_b(data)
    out = tmp_path / "r.jsonl"
    res = CliRunner().invoke(app, ["evaluate", "--bench", "probe_r,probe_c,probe_b", "-c", str(ckpt), "--data-root",
                                   str(data), "-o", str(out)])
    assert res.exit_code == 0, res.stderr
    rows = [orjson.loads(x) for x in out.read_text().splitlines()]
    heads = {r["benchmark"]: r for r in rows if r["subtask"] == HEADLINE}
    assert {b: h["metric"] for b, h in heads.items()} == {"probe_r": "accuracy", "probe_c": "mu_c", "probe_b": "mAP_x1"}
    n = {(r["benchmark"], r["subtask"], r["metric"]): r["n"] for r in rows}
    assert n[("probe_r", "O1_vs_R2", "accuracy")] == 1 and n[("probe_c", "object", "group")] == 2
    assert n[("probe_b", "MR/black", "mAP_x0")] == 4 and n[("probe_b", "R/noise", "accuracy_x1")] == 3
