"""`mosaictool demo`: the whole pipeline on the synthetic world, and the comparison of methods.

Its flags are DemoConfig's settings (mosaictool.demo.config: a new flag is a field there, with its
help) and --preset; each defaults to None, "not given", and the preset fills it in."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import config_options, handles_errors


@handles_errors
def demo_cli(
    preset: Annotated[Optional[str], typer.Option(
        help="gpu: sized for one GPU (20,000-scene world, base 4,000 steps at batch 128, fine-tuning 500 steps at batch 64, "
             "10 seeds; the GPU by default, loader workers and pinned memory).")] = None,
    **settings,
) -> None:
    """Run the main job end to end on the synthetic world and print the comparison table.

    world -> parse -> decompose -> negate -> template -> shard -> pretrain a tiny base model
    with the plain CLIP loss (once, cached; on the world's plain captions of one- and two-object
    scenes, each with its arrangement twin in the batch) -> fine-tune it with every registered
    method's rows (CLIP, NegCLIP, MosaiCLIP, FSC-CLIP, Probe-FT) at equal steps,
    images per step (NegCLIP with its hard images, at the same images per step), one learning rate
    calibrated on val, several seeds, on every image with both its captions -> WiSE-FT of all weights
    (curves for MosaiCLIP and FSC-CLIP; Probe-FT patched at alpha 0.2) -> evaluate on the world's
    test split. Prints the table (attribute, relation, order, seen/unseen compounds, productivity,
    recognition; mean ± 95% CI over seeds), the positive control (NegCLIP over CLIP on order and
    relation, p < 0.01, paired by seed and test case) and the minimal detectable effect per column;
    writes OUT/report.md (settings, every comparison with CLIP, WiSE-FT curves, the texts audit),
    OUT/methods.png and OUT/wise_ft.png. Every artifact stays in OUT for inspection.

    Examples:

      mosaictool demo

      mosaictool demo --quick --out /tmp/demo

      mosaictool demo --split val --finetune-steps 120   # choosing settings: never on test

      mosaictool demo --select-on-val --tuning-budget 9   # every row 9 runs on val over its own knobs, then test

      mosaictool demo --world-seed 7   # another world: settings were tuned on seed 0's val

      mosaictool demo --hard-images none   # no row gets hard images

      mosaictool demo --hard-image-source twin-oracle   # NegCLIP's hard images: the world's twins, an oracle

      mosaictool demo --experiment ladder --experiment towers   # why MosaiCLIP and NegCLIP differ (val)

      mosaictool demo --parallel-runs 1   # every fine-tuning run in this process

      mosaictool demo --preset gpu --device cuda:0
    """
    result = api.demo(preset=preset, **settings)
    typer.echo(result.table)
    typer.echo()
    typer.echo(result.control["verdict"])
    if result.headline:
        typer.echo(result.headline["verdict"])
    if result.power:
        typer.echo(result.power)


def register(app: typer.Typer) -> None:
    import functools
    import inspect

    from mosaictool.demo import experiments
    from mosaictool.demo.config import DemoConfig

    @functools.wraps(demo_cli)
    def command(**kwargs):
        return demo_cli(**kwargs)

    # DemoConfig's flag fields (setting(): help, bounds), each None unless given: the preset fills them in
    settings = config_options(DemoConfig, unset=True, helps={"experiments": experiments.help_text()})
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in inspect.signature(demo_cli, eval_str=True).parameters.values()
           if p.kind is not inspect.Parameter.VAR_KEYWORD]
    command.__signature__ = inspect.Signature(settings[:3] + own + settings[3:])  # --preset after --out, --cache-dir, --quick
    app.command("demo")(command)
