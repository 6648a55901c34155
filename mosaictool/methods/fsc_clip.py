"""FSC-CLIP (Oh et al. 2024): CLIP's loss plus a global and a local hard-negative (HN) loss, both with
Selective Calibrated Regularisation (focal loss on label-smoothed targets).

Per image i with its caption T_i and its own K HN texts T~_i^k (negclip swap, replace, bigram shuffle):

    L_clip   = (L_i2t + L_t2i) / 2 over the B captions only: HN texts are in no denominator (Eq. 2)
    S_g(I,T) = exp(cos(v, t) / tau)                                                       (Eq. 1)
    p^g_i    = softmax over [S_g(I_i, T_i), S_g(I_i, T~_i^1..K)]: column 0 is the caption  (Eq. 3)
    s_wp     = t_w . v_p                 token w of the text, projected patch p of the image
    a_wp     = (s_wp - min_p s_wp) / (max_p s_wp - min_p s_wp)                            (Eq. 6)
    v^_w     = sum_p a_wp v_p / sum_p a_wp                                                (Eq. 7)
    S_l(I,T) = sum_w exp(cos(v^_w, t_w) / tau)                                            (Eq. 8)
    p^l_i    = the same softmax with S_l                                                  (Eq. 5)
    y~_ik    = (1 - beta) 1[k=0] + beta / (1 + K_i)                                       (Eq. 10)
    Focal    = sum_k (1 - p_ik)^gamma (-y~_ik log p_ik)                                   (Eq. 9)
    L^g_neg, L^l_neg = mean over images with at least one HN of Focal(p^g_i), Focal(p^l_i)
    L_total  = L_clip + lambda_g L^g_neg + lambda_l L^l_neg                               (Eq. 11)

tau is the model's (learned) temperature, 1 / logit_scale, in every term. Images whose HN
generation failed are masked out of the HN losses (App. A.1); an image with fewer than K HN texts
(K_i < K) spreads the smoothing mass beta over its 1 + K_i texts. Its empty slots, by default
(--empty-hn-slots zero), stay in the softmax with logit 0 and target 0, as in the authors' code (it
fills them with zero features and zero local scores: fsc-clip loss.py:212-222, 503 at 604015d);
--empty-hn-slots drop leaves them out of the softmax: one reading of App. A.1 (texts without an HN
counterpart are "masked out and excluded from the hard negative loss calculation").

L_clip labels captions by position, as the authors' code does (arange labels): two images with the
same caption are not each other's positives (merge_equal_texts = False; --merge-equal-texts merges them).

Choices the paper leaves open, taken as in the authors' code: the attention weights a are computed
without gradient (they weight patches; the gradient flows through v_p and t_w), the text tokens of
S_l are the valid tokens after the start token (the end token counts), and the patch tokens are the
ViT's output tokens without the class token, projected into the joint space. When all of a token's
patch similarities tie (max = min, up to rounding), Eq. 6 is 0/0; every patch then gets the same weight.

Distributed: L_clip gathers features like the other methods (`MultiPositiveContrastiveLoss`). The HN
terms pair every image with its own texts only, so each rank computes them on its own images, divided
by the global number of images with HN and scaled by the world size: the gradients DDP averages are
those of the global loss, and the mean of the logged terms over ranks is the global value.
"""

from __future__ import annotations

from mosaictool.errors import MosaicError
from mosaictool.methods.base import DemoRow, Method, Option, Selection, caption_of

DEFAULTS = {"lambda_global": 0.5, "lambda_local": 0.2, "focal_gamma": 2.0, "label_smoothing": 0.02, "hn_per_image": 3,
            "empty_hn_slots": "zero"}
# the authors' training scripts (fsc-clip README.md "Training Scripts", COCO rows, at 604015d) with their
# parser's defaults (src/training/params.py: --grad-clip-norm None, --precision amp; AdamW betas 0.9 / 0.98,
# eps 1e-6 for ViTs) and open_clip's crop (src/open_clip/transform.py: AugmentationCfg.scale (0.9, 1.0))
PAPER = {"lr": 5e-6, "wd": 0.1, "epochs": 5, "warmup": 50, "batch_size": 256, "optimizer": "adamw", "beta1": 0.9,
         "beta2": 0.98, "eps": 1e-6, "grad_clip": None, "precision": "amp", "crop_scale": (0.9, 1.0), "lora": 0,
         "method_options": {"lambda_global": 0.5, "lambda_local": 0.2, "focal_gamma": 2.0, "label_smoothing": 0.02}}
# the HN kinds of App. A.1, by the `transform` prefix `negate --text` writes: negclip:* swaps,
# replace:obj|att|rel, shuffle:bigram
HN_KINDS = ("negclip", "replace", "shuffle")
NEGATE_HINT = "mosaictool negate --text negclip,replace,shuffle (then template)"


def hn_kind(negative: dict) -> str | None:
    """Which of HN_KINDS a `texts.negatives` entry is (None: not an FSC-CLIP HN text)."""
    if negative.get("kind") != "text":
        return None
    kind = str(negative.get("transform") or "").partition(":")[0]
    return kind if kind in HN_KINDS else None


def select_hn_texts(record: dict, rng, k: int) -> list[str]:
    """The HN texts of one image for one step. Slot j is of kind HN_KINDS[j % 3], so K = 3 is one
    negclip swap, one replace and one shuffle (the paper's batch); each kind gives a random distinct
    candidate per slot while it has one. A kind the record lacks leaves its slot empty (the paper's
    "no counterpart"): an image may get fewer than K texts, or none (masked out of the HN losses)."""
    pools: dict[str, list[str]] = {kind: [] for kind in HN_KINDS}
    for negative in (record.get("texts") or {}).get("negatives") or []:
        kind = hn_kind(negative)
        if kind is not None:
            pools[kind].append(negative["text"])
    chosen: list[str] = []
    for j in range(k):
        pool = pools[HN_KINDS[j % len(HN_KINDS)]]
        if pool:
            chosen.append(pool.pop(rng.randrange(len(pool))))
    return chosen


def hn_kinds_present(records) -> dict[str, int]:
    """How many records have at least one HN text of each kind."""
    counts = dict.fromkeys(HN_KINDS, 0)
    for record in records:
        kinds = {hn_kind(n) for n in (record.get("texts") or {}).get("negatives") or []}
        for kind in HN_KINDS:
            counts[kind] += kind in kinds
    return counts


def check_hn_data(records, source: str) -> dict[str, int]:
    """Refuse training data without FSC-CLIP's HN kinds; return how many records have each kind."""
    counts = hn_kinds_present(records)
    missing = [kind for kind, n in counts.items() if n == 0]
    if missing:
        raise MosaicError(
            f"{source}: no record has {', '.join(missing)} hard-negative texts (texts.negatives with transform "
            f"{' / '.join(k + ':*' for k in missing)}), which --method fsc-clip needs; build them with `{NEGATE_HINT}`"
        )
    return counts


# ---- the method ----------------------------------------------------------------------------------


class FscClip(Method):
    name = "fsc-clip"
    place = 40
    help = ("FSC-CLIP: the caption + --hn-per-image hard-negative texts (negclip, replace, shuffle) in a global and "
            "a local token-patch HN loss (focal, label-smoothed); CLIP loss over captions only. Paper recipes: "
            "--recipe paper (lr 5e-6, batch 256, 5 epochs, warmup 50, wd 0.1, amp, no grad clip, crop 0.9-1) and "
            "paper-lora (the same with --lora 4 and lr 5e-5).")
    options = (
        Option("lambda_global", float, DEFAULTS["lambda_global"], "fsc-clip: weight of the global HN loss (lambda_g, Eq. 11)."),
        Option("lambda_local", float, DEFAULTS["lambda_local"],
               "fsc-clip: weight of the local token-patch HN loss (lambda_l; 0: no dense features)."),
        Option("focal_gamma", float, DEFAULTS["focal_gamma"], "fsc-clip: focal-loss gamma of both HN losses (Eq. 9; 0: cross entropy)."),
        Option("label_smoothing", float, DEFAULTS["label_smoothing"], "fsc-clip: label smoothing beta of the HN targets (Eq. 10)."),
        Option("hn_per_image", int, DEFAULTS["hn_per_image"],
               "fsc-clip: HN text slots per image (K); slot j is a negclip / replace / shuffle text for j mod 3."),
        Option("empty_hn_slots", str, DEFAULTS["empty_hn_slots"],
               "fsc-clip: an image's empty HN slots (fewer than K HN texts): zero (the authors' code: in the HN softmax "
               "with logit 0, as zero features) or drop (left out of the softmax)."),
    )
    # its tuning: Oh et al. 2024 set lambda_g 0.5, lambda_l 0.2, gamma 2.0, beta 0.02 (Sec. 4, Training Setup) and
    # vary the local HN loss, the focal loss and the label smoothing, each on or off (Table 2) and in size (Table 3):
    # the demo searches the final model and each of the three taken away
    demo_rows = (DemoRow("FSC-CLIP", wise=True, tuning=(
        ("component", ({}, {"lambda_local": 0.0}, {"focal_gamma": 0.0}, {"label_smoothing": 0.0})),)),)
    recipes = {"paper": PAPER, "paper-lora": {**PAPER, "lr": 5e-5, "lora": 4}}
    merge_equal_texts = False  # the authors' L_clip: arange labels, equal captions of two images are negatives
    stage_hint = NEGATE_HINT

    def validate(self) -> None:
        o = self.opts
        for name in ("lambda_global", "lambda_local", "focal_gamma"):
            if o[name] < 0:
                raise MosaicError(f"--{name.replace('_', '-')} {o[name]}: must be at least 0")
        if not 0 <= o["label_smoothing"] <= 1:
            raise MosaicError(f"--label-smoothing {o['label_smoothing']}: a fraction between 0 and 1")
        from mosaictool.methods.fsc_clip_loss import EMPTY_SLOT_RULES

        if o["empty_hn_slots"] not in EMPTY_SLOT_RULES:
            raise MosaicError(f"--empty-hn-slots {o['empty_hn_slots']!r}: choose {' or '.join(EMPTY_SLOT_RULES)}")
        if o["hn_per_image"] < 1:
            raise MosaicError(f"--hn-per-image {o['hn_per_image']}: at least 1 (without HN texts use --method clip)")

    def check_data(self, records, source):
        counts = check_hn_data(records, source)
        with_hn = sum(any(hn_kind(n) for n in (r.get("texts") or {}).get("negatives") or []) for r in records)
        if with_hn < len(records):
            return (f"{len(records) - with_hn} of {len(records)} records have no HN text (masked out of the HN "
                    f"losses); records per kind: {counts}")
        return None

    def slots(self, step, total_steps):
        return 1, self.opts["hn_per_image"]

    def select(self, record, rng, kp, kn):
        return Selection([caption_of(record)], select_hn_texts(record, rng, kn))

    @property
    def dense(self) -> bool:
        return self.opts["lambda_local"] > 0

    def make_loss(self, *, local_loss=False, rank=0, world_size=1):
        from mosaictool.methods.fsc_clip_loss import FSCCLIPLoss

        o = self.opts
        return FSCCLIPLoss(lambda_global=o["lambda_global"], lambda_local=o["lambda_local"], focal_gamma=o["focal_gamma"],
                           label_smoothing=o["label_smoothing"], empty_hn_slots=o["empty_hn_slots"], local_loss=local_loss,
                           rank=rank, world_size=world_size)


METHOD = FscClip
