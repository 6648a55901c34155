"""Metrics shared by the benchmarks, each with its tie rule spelled out.

Scores are cosine similarities. Tie rules (docs/evaluate.md; each benchmark module names its source):
- "strict": the correct option must score strictly above every other one; a tie is wrong
  (SugarCrepe, VL-CheckList, VALSE, Winoground).
- "argmax-first": the prediction is numpy's argmax, which picks the lowest index among tied
  options; so a tie is right when the correct option comes first (ARO Order, WhatsUp) and wrong
  when it does not (ARO VG, whose options are [false, true]).

Ranks are 1-based (1 = best). A tie in a ranking is broken by list position (a stable descending
sort, what `torch.argsort` gives in practice for CREPE, whose ground truth sits at index 0); for
retrieval a tie counts against the ground truth (pessimistic), so a constant model scores chance,
not 100%.

Mean confidence μ(c) (Schiappa et al. 2023, §3.4): the softmax probability of the correct option over the
options' *logits*, i.e. logit_scale · cosine with the model's learned temperature (exp of its
logit_scale, 100 for OpenAI CLIP) — the numbers CLIP's own softmax would give. On bare cosines the
softmax would sit near 1/k for every model and say nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CLIP_LOGIT_SCALE = 100.0
TIE_RULES = ("strict", "argmax-first")


def _as_2d(scores) -> np.ndarray:
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"expected an (n, k) score matrix, got shape {arr.shape}")
    return arr


def choice_correct(scores, correct: int | Sequence[int] | np.ndarray = 0, tie: str = "strict") -> np.ndarray:
    """Per row of an (n, k) score matrix: is option `correct` the chosen one? Boolean array (n,)."""
    arr = _as_2d(scores)
    n, k = arr.shape
    idx = np.broadcast_to(np.asarray(correct, dtype=np.int64), (n,))
    if tie == "argmax-first":
        return np.argmax(arr, axis=1) == idx if k else np.zeros(n, bool)
    if tie != "strict":
        raise ValueError(f"unknown tie rule {tie!r}; use one of {TIE_RULES}")
    right = arr[np.arange(n), idx]
    others = arr.copy()
    others[np.arange(n), idx] = -np.inf
    return right > others.max(axis=1)


def choice_accuracy(scores, correct=0, tie: str = "strict") -> float:
    hits = choice_correct(scores, correct, tie)
    return float(hits.mean()) if hits.size else float("nan")


def confidence(scores, correct=0, logit_scale: float = CLIP_LOGIT_SCALE) -> np.ndarray:
    """Softmax probability of the correct option over logit_scale · scores, per row."""
    arr = _as_2d(scores) * float(logit_scale)
    arr = arr - arr.max(axis=1, keepdims=True)
    probs = np.exp(arr)
    probs /= probs.sum(axis=1, keepdims=True)
    idx = np.broadcast_to(np.asarray(correct, dtype=np.int64), (arr.shape[0],))
    return probs[np.arange(arr.shape[0]), idx]


def mean_confidence(scores, correct=0, logit_scale: float = CLIP_LOGIT_SCALE) -> float:
    """μ(c): mean over rows of the correct option's softmax probability."""
    conf = confidence(scores, correct, logit_scale)
    return float(conf.mean()) if conf.size else float("nan")


def rank_of(scores, correct: int = 0) -> int:
    """1-based rank of option `correct` in a descending stable sort of a 1-D score vector."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    c = s[correct]
    return int((s > c).sum() + (s[:correct] == c).sum()) + 1


def rank_metrics(ranks: Sequence[int] | np.ndarray, ks: Sequence[int] = (1, 3, 5, 10)) -> dict[str, float]:
    """R@k = fraction with rank <= k, plus mean, median and (population) std of the ranks."""
    r = np.asarray(ranks, dtype=np.float64)
    if not r.size:
        return {**{f"R@{k}": float("nan") for k in ks}, "mean_rank": float("nan"), "median_rank": float("nan"), "std_rank": float("nan")}
    out = {f"R@{k}": float((r <= k).mean()) for k in ks}
    out.update(mean_rank=float(r.mean()), median_rank=float(np.median(r)), std_rank=float(r.std()))
    return out


def winoground_scores(s) -> dict[str, bool]:
    """Winoground's three scores for one 2x2 matrix s[image, caption] (image i matches caption i);
    all comparisons strict."""
    s = np.asarray(s, dtype=np.float64)
    text = s[0, 0] > s[0, 1] and s[1, 1] > s[1, 0]
    image = s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1]
    return {"text": bool(text), "image": bool(image), "group": bool(text and image)}


def winoground_accuracy(matrices: Sequence) -> dict[str, float]:
    per = [winoground_scores(m) for m in matrices]
    if not per:
        return {"text": float("nan"), "image": float("nan"), "group": float("nan")}
    return {key: float(np.mean([p[key] for p in per])) for key in ("text", "image", "group")}


def retrieval_ranks(sims, text_to_image: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-based ranks for image→text (best-ranked of the image's captions) and text→image, from an
    (n_images, n_texts) similarity matrix; ties count against the ground truth."""
    sims = _as_2d(sims)
    owner = np.asarray(text_to_image, dtype=np.int64)
    n_img, n_txt = sims.shape
    if owner.shape != (n_txt,):
        raise ValueError("text_to_image must give one image index per text")
    # text -> image: the image's score vs every other image's score for that text
    gt_t2i = sims[owner, np.arange(n_txt)]
    t2i = (sims >= gt_t2i[None, :]).sum(axis=0)  # includes the ground truth itself
    # image -> text: best ground-truth caption score vs the other images' captions
    is_gt = owner[None, :] == np.arange(n_img)[:, None]
    best_gt = np.where(is_gt, sims, -np.inf).max(axis=1)
    i2t = (np.where(is_gt, -np.inf, sims) >= best_gt[:, None]).sum(axis=1) + 1
    return i2t, t2i


def retrieval_recalls(sims, text_to_image, ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """{"image_to_text_R@k", "text_to_image_R@k"} for each k."""
    i2t, t2i = retrieval_ranks(sims, text_to_image)
    out = {f"image_to_text_R@{k}": float((i2t <= k).mean()) for k in ks}
    out.update({f"text_to_image_R@{k}": float((t2i <= k).mean()) for k in ks})
    return out


def micro_mean(values: Sequence[float], counts: Sequence[int]) -> float:
    """Count-weighted mean (a micro average from per-subset accuracies)."""
    v, c = np.asarray(values, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    return float((v * c).sum() / c.sum()) if c.sum() else float("nan")


def macro_mean(values: Sequence[float]) -> float:
    v = np.asarray(list(values), dtype=np.float64)
    return float(v.mean()) if v.size else float("nan")
