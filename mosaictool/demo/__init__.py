"""The main job: the whole pipeline on the synthetic world, and the comparison it exists to show.

    data.py        world -> parse -> decompose -> negate -> template -> shard (every image with both its
                   captions), and the texts audit against the world's truth
    base.py        a tiny base model pretrained once with the plain CLIP loss on plain captions (cached)
    finetune.py    the base fine-tuned with every registered method's demo rows (mosaictool.methods: CLIP,
                   NegCLIP, MosaiCLIP, FSC-CLIP, Probe-FT, ...), several seeds, all with
                   the same steps, images per step and learning rate (calibrated on val);
                   WiSE-FT of all weights: curves
                   (alpha 0..1 step 0.2) for MosaiCLIP and FSC-CLIP, and the Probe paper's "patching"
                   (alpha 0.2) of every Probe-FT seed as a row of its own
    evaluation.py  every checkpoint scored on the world's test (or, to choose settings, val) split
    report.py      tables and plots
    significance.py the positive control (NegCLIP over CLIP) and the power of every comparison
    run.py         the whole job in order, the choice of each row's lr on val (--select-on-val) and
                   MosaiCLIP's ablation on val (--ablate)
    config.py      DemoConfig, the rows and the columns
    cache.py       the cache shared by demos: copies checked against a manifest (size, SHA-256), one writer each

It calls the same stage functions the CLI commands call, and keeps every artifact on disk
(graphs and negatives as Parquet, texts, shards, checkpoints, result rows) for inspection.
Settings are chosen on the world's validation split (`world-val`), never on test.

Its names load on first use (PEP 562): `mosaictool demo --help` lists the experiments
(mosaictool.demo.experiments) without loading the pipeline.
"""

# name -> the module of mosaictool.demo that defines it
_WHERE = {"DemoConfig": "config", "run_demo": "run"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    from importlib import import_module

    if name in _WHERE:
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
