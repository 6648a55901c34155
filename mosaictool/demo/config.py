"""The demo's settings (DemoConfig), its rows and columns, and the names and digests its cached
artifacts are kept under."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field

from mosaictool.errors import MosaicError
from mosaictool.records import Processes, Workers, check_flags
from mosaictool.training.config import AtLeastOne, Count, PositiveNumber, setting

Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]  # a fraction of the captions


def demo_rows() -> list[tuple[str, str, dict]]:
    """(label, train method, method options) of every row: each registered method's demo_rows."""
    from mosaictool import methods

    return [(row.label, name, dict(row.options)) for name in methods.names() for row in methods.get(name).demo_rows]


def wise_rows() -> tuple[str, ...]:
    """The labels of the rows whose method declares their WiSE-FT curve (DemoRow.wise)."""
    from mosaictool import methods

    return tuple(row.label for name in methods.names() for row in methods.get(name).demo_rows if row.wise)


METHODS = demo_rows()
# The caption-level hard negatives `negate --text` writes for the rows: NegCLIP's swaps, and the
# replace and bigram-shuffle texts FSC-CLIP's three HN kinds need (text negatives come on top of
# the graph ones, drawn from their own RNGs: adding kinds leaves the others unchanged).
TEXT_METHODS = ("negclip", "replace", "shuffle")
# WiSE-FT curves (all weights) of these rows' seed 0 (DemoRow.wise); the Probe paper's patching of every seed of PATCH_ROW
WISE_ROWS = wise_rows()
PATCH_ROW, PATCH_ALPHA = "Probe-FT", 0.2
# the families of the table's columns (the split's other benchmarks are not in the table); the
# WiSE-FT points are scored on them too
MAIN_FAMILIES = ["aro", "crepe", "zeroshot", "relforms"]

# The columns of the paper's Table 1, scaled down to the world: (column, subtask, metric).
COLUMNS: list[tuple[str, str, str]] = [
    ("attribute", "aro/VG-Attribution", "micro_accuracy"),
    ("relation", "aro/VG-Relation", "accuracy"),
    ("order", "aro/COCO-Order", "accuracy"),
    ("seen", "crepe/syst/seen_compounds_in_laion/comp", "R@1"),
    ("unseen", "crepe/syst/unseen_compounds_in_laion/comp", "R@1"),
    ("productivity", "crepe/*", "R@1"),
    ("recognition", "zeroshot/*", "top1"),
    # Relation where neither one sentence form nor the placement prior helps (bench/relforms.py): each item is an
    # image and its twin (the two objects trade cells), with the caption and its swap in each form. The copular
    # form is VG-Relation's and the plain captions' (NegCLIP's swaps of them are its negatives word for word),
    # sub-graph is MosaiCLIP's sub-graph text, fronted and with are forms no train text uses; group = Winoground's
    # group score (Thrush et al. 2022) in the held-out forms, group trained = the same in the copular and sub-graph
    # forms pooled (each of the two methods' own form once), violate = the held-out forms on the images whose
    # relation goes against the placement prior (a reader who knows the prior scores 0 there, 100 on agree).
    ("rel copular", "relforms/copular", "accuracy"),
    ("rel sub-graph", "relforms/subgraph", "accuracy"),
    ("rel fronted", "relforms/fronted", "accuracy"),
    ("rel with", "relforms/with", "accuracy"),
    ("rel group", "relforms/held-out-group", "group"),
    ("rel group trained", "relforms/trained-group", "group"),
    ("rel violate", "relforms/held-out-violate", "accuracy"),
]


# One learning rate for every row, calibrated on val (world seed 0, 400 steps) by the positive
# control: of 3e-4, 5e-4 and 1e-3 the lr at which the instrument sees the field's known effect
# (NegCLIP over CLIP on order and relation) most clearly, the same for the method under study and
# its peers (docs/demo.md). `--select-on-val` gives each row its own lr instead, by ARO's criterion
# (val retrieval, Yuksekgonul et al. 2023, App. C.3).
FINETUNE_LR = 5e-4
SELECT_LRS = (3e-4, 5e-4, 1e-3)  # --select-on-val's candidates
# NegCLIP's mined hard images: "for each image we collect the 3 most similar images" (Yuksekgonul
# et al. 2023, App. C.2), by the pairwise similarity of CLIP's image embeddings, computed once
# before fine-tuning; "at each epoch for each image we sample one of its negative images"
MINED_NEIGHBOURS = 3
HARD_IMAGE_SOURCES = ("mined", "twin-oracle")


@dataclass
class DemoConfig:
    """The demo's settings. The flags of `mosaictool demo` are made from the fields made with a help
    (setting(): name, help, bounds; defaults from the preset: DemoConfig.preset); the others are set
    by the presets and the code."""

    out: str = setting("demo-out", 'Folder for every artifact (reused when run again).', flags=("--out", "-o"), text="demo-out")
    cache_dir: str = setting(factory=lambda: os.environ.get("MOSAICTOOL_CACHE", str(Path.home() / ".cache" / "mosaictool")),
                             help='Where the world, texts, shards and pretrained base are cached for the next demo (default '
                             '~/.cache/mosaictool, or $MOSAICTOOL_CACHE; ~0.7 GB a world).')
    quick: bool = setting(False, 'A small world and short runs (~3 min): checks the pipeline, not the result.', flags=("--quick",))
    # the paired t test's 9 df: an MDE near 3 points on the case columns (docs/statistics.md)
    seeds: AtLeastOne = setting(10, 'Fine-tuning seeds per method (default 10: the paired t test has seeds − 1 df, and 10 bring the '
                                'MDE near 3 points; 1 with --quick).')
    # world
    world_train: AtLeastOne = setting(8000, 'Train scenes of the world.')
    twins: bool = setting(True, flag=False)  # counterfactual twins of every scene: arrangement, binding (colours traded), shape
    image_size: Annotated[int, Field(ge=48, le=256)] = setting(64, flag=False)
    eval_scale: PositiveNumber = setting(0.5, flag=False)
    world_seed: int = setting(0, 'Draw the world from this seed (default 0): check a result on a world nothing was tuned on.')
    # the share of train captions made web-like noisy (mosaictool.world.noise; val/test stay clean):
    # the clean vs noisy fine-tuning text of MosaiCLIP's robustness claim (Singh et al. 2023, Sec. 4.3)
    caption_noise: Share = setting(0.0, flag=False)
    # base model: plain CLIP from scratch on the world's plain captions of 1-2-object scenes (one
    # fixed form: the text tower learns word order, the image tower arrangement), each scene's
    # arrangement twin in its batch, so that the batch holds images a bag-of-words model cannot
    # tell apart. On the varied captions both towers stayed at chance on relations for 3,000 steps
    # (perf/world_probe.py), and a second stage on them took val relation from 62% to 46-52%.
    # 16-pixel patches: 17 image tokens, not mosaic-micro's 65 (a CLIP fine-tuning step two thirds of
    # mosaic-micro's on one thread: perf/step_profile.py)
    model: str = setting("mosaic-micro-p16", 'open_clip model name or shipped config (default mosaic-micro-p16).')
    pretrain_steps: AtLeastOne = setting(1500, 'Steps of the plain-CLIP base pretraining (cached).')
    pretrain_lr: PositiveNumber = setting(1e-3, flag=False)
    pretrain_batch: AtLeastOne = setting(64, flag=False)
    # fine-tuning: every method gets the same steps and the same scenes per step
    # 400 steps: at 100 no row moved from the base (NegCLIP - CLIP on val order not detectable); at 400
    # NegCLIP's order gain over CLIP is the field's, clear on val
    finetune_steps: AtLeastOne = setting(400, 'Fine-tuning steps, equal for every method.')
    # one lr for every row (FINETUNE_LR), or, with row_lrs from --select-on-val, each row its own
    finetune_lr: PositiveNumber | None = setting(
        FINETUNE_LR, "One fine-tuning learning rate for every row (default 5e-4, calibrated on val by the positive "
                     "control; --select-on-val gives each row its own).")
    row_lrs: dict = setting(factory=dict, flag=False)
    finetune_batch: AtLeastOne = setting(32, flag=False)
    # hard images in the batch: "method" for the rows whose paper uses them (NegCLIP), "all" or "none".
    # Every row sees finetune_batch images per step: a row with hard images takes finetune_batch / 2
    # images, each with its hard image (hard_image_source says which).
    hard_images: str = setting("method", "Hard images in the batch (--hard-image-source says which): 'method' (default) for the "
                               "rows whose paper uses them (NegCLIP, ARO App. C.2), 'all' rows, or 'none'. Every row sees the "
                               'same images per step: a row with hard images takes half as many images, each with its hard '
                               'image. Example: --hard-images none', metavar="method|all|none")
    # "mined": MINED_NEIGHBOURS nearest neighbours in the starting model's image space, as NegCLIP's
    # paper mined them; "twin-oracle": the world's twins, minimal pairs built for the test that no
    # real data set hands a method
    hard_image_source: str = setting(
        "mined", "Which image is an image's hard image: 'mined' (default), one of its 3 nearest neighbours in the image space of "
                 "the base the rows are fine-tuned from, mined once before fine-tuning as NegCLIP's paper did (ARO App. C.2); or "
                 "'twin-oracle', its world twin (the same scene rearranged, its colours traded or a shape changed): a "
                 "minimal pair aimed at the test, an oracle no real data set offers. Example: --hard-image-source twin-oracle",
        metavar="mined|twin-oracle")
    max_pos: AtLeastOne = setting(3, "MosaiCLIP's positive texts per image: the caption + sub-graphs (default 3; 1 = the caption "
                                  'only).')
    max_neg: Count = setting(6, flag=False)
    wise_alphas: tuple[Annotated[float, Field(ge=0, le=1)], ...] = setting(tuple(round(0.2 * i, 1) for i in range(6)), flag=False)
    # "val" to choose hyperparameters; the reported table is test's
    split: str = setting("test", "Evaluate on the world's 'val' split (to choose hyperparameters) or 'test' (the table to report).",
                         text="test")
    # --select-on-val: every row's equal budget of trials on val over its own grid (mosaictool.demo.tuning)
    select_on_val: bool = setting(False, "First tune every row on the world's val split with the same number of fine-tuning runs "
                                  "(--tuning-budget) over its own grid: the lr (3e-4, 5e-4, 1e-3) for all, and the knobs its paper "
                                  "tuned (MosaiCLIP's p_obj and caps, FSC-CLIP's loss components); each row takes its best val "
                                  "retrieval (ARO's criterion, Yuksekgonul et al. 2023, App. C.3). Example: mosaictool demo "
                                  "--select-on-val --tuning-budget 9", flags=("--select-on-val",))
    select_lrs: tuple[PositiveNumber, ...] = setting(SELECT_LRS, flag=False)
    # 6: the lr-only rows see each lr at 2 seeds, MosaiCLIP 6 of its 27 points, FSC-CLIP 6 of its 12; 30 runs, 0.6x the table's
    tuning_budget: AtLeastOne = setting(6, "--select-on-val: fine-tuning runs on val per row, the same for every row (default 6); "
                                        "a row's grid larger than that is sampled (--tuning-seed), a smaller one run whole and then "
                                        "again at the next seeds. Example: --select-on-val --tuning-budget 9")
    tuning_seed: Count = setting(0, "--select-on-val: seed of each row's draw of trials from its grid (default 0).")
    row_options: dict = setting(factory=dict, flag=False)  # each row's method options chosen by --select-on-val
    # --experiment: what runs after the table (mosaictool.demo.experiments: ablate, ladder, towers, ...)
    experiments: tuple[str, ...] = setting((), "After the table, also run this experiment (repeat for several); `mosaictool demo --help` "
                                           "lists them.", flags=("--experiment", "-x"), metavar="NAME")
    # --experiment teach: fine-tuning steps and lr from the base that must be taught (None: the table's lr);
    # chosen on world 0's val: the most found to teach on 2 cores (docs/results.md)
    teach_steps: AtLeastOne = setting(1500, '--experiment teach: fine-tuning steps from the base that knows no arrangement (default 1500; '
                                      '--preset gpu 4000; --quick 15; choose on val).')
    teach_lr: PositiveNumber | None = setting(1e-3, "--experiment teach: the rows' learning rate (default 1e-3; choose on val).")
    # --experiment scratch: seeds and steps of each method's pretraining from a random init (None: pretrain_steps)
    scratch_seeds: AtLeastOne = setting(3, "--experiment scratch: seeds of each method's pretraining from a random init (default 3).")
    scratch_steps: AtLeastOne | None = setting(None, flag=False)
    # --experiment noisy: the share of the noisy world's train captions made web-like (mosaictool.world.noise)
    noise_rate: Share = setting(0.5, flag=False)
    # the texts audit's simulated batches of 32 (150 measured the audit's shares to a fraction of a point; --quick: fewer)
    audit_batches: Count = setting(150, flag=False)
    # processes for world generation, parse and negate: every core (on a 16-core GPU machine, 2 left
    # the GPU idle for the text stages' ~4 min)
    workers: Processes = setting(factory=lambda: os.cpu_count() or 1,
                                 help="Worker processes for world generation, parse and negate (default: every core).")
    # runtime: where the models train and are evaluated (None: the GPU when CUDA is visible, see
    # mosaictool.training.device) and the DataLoader processes that decode shards for train and
    # evaluate (None: 0 on CPU, where they would compete with the step for the cores; on a GPU
    # up to 8, so that decoding overlaps the GPU's step)
    device: str | None = setting(None, 'cpu, cuda or cuda:N (default: the GPU when CUDA is visible, else cpu).')
    loader_workers: Workers | None = setting(
        None, "DataLoader processes decoding shards in train and evaluate (default: 0 on CPU, up to 8 on a GPU).")
    # processes that fine-tune on a CPU, each with one torch thread and its share of the runs, which
    # take their steps together (training.train_many; the tiny model keeps two threads ~70% busy: two
    # processes of one thread do twice the work in the same time on 2 cores). None: one per core, at
    # most 8; 1: every run in this process (torch's default threads). On a GPU, every run in this
    # process. The thread setting is part of a run's name.
    parallel_runs: Processes | None = setting(
        None, "Processes that fine-tune on a CPU, one torch thread each, each taking its share of the runs' steps together "
              "(default: one per core, at most 8; 1: every run in this process with torch's threads). "
              "A GPU trains every run in this process.")

    @classmethod
    def preset(cls, quick: bool = False, gpu: bool = False, **overrides) -> "DemoConfig":
        """quick: a check of the pipeline (minutes on CPU); gpu: a larger world and longer runs sized
        for one GPU; neither: the default, sized for a CPU machine."""
        if quick and gpu:
            raise MosaicError("--quick and --preset gpu are different sizes: choose one")
        if quick:
            base = cls(quick=True, seeds=1, world_train=600, eval_scale=0.1, pretrain_steps=40,
                       finetune_steps=15, teach_steps=15, pretrain_batch=16, finetune_batch=16, wise_alphas=(0.0, 0.5, 1.0),
                       audit_batches=20)
        elif gpu:
            base = cls(world_train=20000, pretrain_steps=4000, pretrain_batch=128, finetune_steps=500, finetune_batch=64,
                       teach_steps=4000)
        else:
            base = cls()
        cfg = dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})
        check_flags(cfg)  # every number against its declared bounds, before any work
        return cfg

    def lr_for(self, label: str) -> float:
        """The row's learning rate: --finetune-lr for every row, else its own (row_lrs)."""
        if self.finetune_lr is not None:
            return self.finetune_lr
        if label not in self.row_lrs:
            raise MosaicError(f"no learning rate for the row {label!r}: give --finetune-lr, or run --select-on-val")
        return self.row_lrs[label]

    def row_hard_images(self, method: str) -> bool:
        """Whether the row of `method` trains with hard images (see hard_images)."""
        from mosaictool.methods import get as get_method

        if self.hard_images not in ("method", "all", "none"):
            raise MosaicError(f"--hard-images {self.hard_images!r}: choose method, all or none")
        if self.hard_image_source not in HARD_IMAGE_SOURCES:
            raise MosaicError(f"--hard-image-source {self.hard_image_source!r}: choose {' or '.join(HARD_IMAGE_SOURCES)}")
        return self.hard_images == "all" or (self.hard_images == "method" and get_method(method).uses_hard_images)

    def row_hard_image_settings(self, method: str) -> tuple[bool, int]:
        """The TrainConfig's (record_hard_images, hard_images) of the row of `method`: the twins the
        world's records name, or MINED_NEIGHBOURS mined with the starting model, or neither."""
        if not self.row_hard_images(method):
            return False, 0
        return (True, 0) if self.hard_image_source == "twin-oracle" else (False, MINED_NEIGHBOURS)

    def row_batch(self, method: str) -> int:
        """Images per step before hard images: half of finetune_batch for a row with hard images."""
        return max(1, self.finetune_batch // 2) if self.row_hard_images(method) else self.finetune_batch

    def runtime(self) -> tuple[str, int]:
        """The resolved device and loader workers."""
        from mosaictool.training.device import resolve_device

        device = resolve_device(self.device)
        if self.loader_workers is not None:
            return device, self.loader_workers
        return device, (min(8, os.cpu_count() or 1) if device.startswith("cuda") else 0)

    def pretrain_ranks(self) -> int:
        """Processes the base pretrains in: on a CPU with 2+ cores, 2 gloo ranks of one thread each
        (training.launch.train_in_local_ranks: the same global batch, ~1.2x faster); else 1.
        Part of the base's cache key (a rank count sums the gradients in another order)."""
        device, _ = self.runtime()
        return 2 if device == "cpu" and (os.cpu_count() or 1) >= 2 and self.pretrain_batch % 2 == 0 else 1

    def runs_at_once(self) -> int:
        device, _ = self.runtime()
        if device != "cpu":
            return 1
        return max(1, self.parallel_runs if self.parallel_runs is not None else min(8, os.cpu_count() or 1))



def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def slug(label: str) -> str:
    """A folder / model name for a row label ("Probe-FT patched (α=0.2)" -> "probe-ft-patched-a0.2")."""
    return "-".join("".join(c if c.isalnum() or c in ".-" else " " for c in label.lower().replace("α=", "a")).split())
