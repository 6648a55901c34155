"""`mosaictool train`: fine-tuning of open_clip models with any method of mosaictool.methods.

Its flags are TrainConfig's settings (config_parameters: a new setting is a field there, with its
help). The command names no method: `--method` takes the registry's names, and every method's own flags
(Method.options) are added to the command's signature from the registry (method_parameters), with
None defaults so that only the flags a user gives reach TrainConfig.method_options; the method
fills in its defaults and refuses flags of other methods.
"""

from __future__ import annotations

import inspect
import os
from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import AllowOutsideRootOpt, QuietOpt, SkipBadOpt, config_options, handles_errors
from mosaictool.training.config import TrainConfig


@handles_errors
def train_cli(
    ctx: typer.Context,
    resume: Annotated[Optional[str], typer.Option(help="Continue the run in this folder with its stored config.")] = None,
    **settings,
) -> None:
    """Fine-tune a CLIP model with one of the training methods (--method; METHODS below).

    Reads shards from `mosaictool shard` or records + images, fills each image's text slots as the
    method says (clip: the caption; negclip: + one text negative and hard images; mosaiclip: up to
    --max-pos positives and --max-neg sub-graph negatives), and writes OUT/final.pt (a checkpoint
    evaluate and wise-ft read), OUT/metrics.jsonl (every loss term) and OUT/config.json. Same data,
    flags and seed: same weights. Flags marked with a method's name apply to that method only.

    Examples:

      \b
      mosaictool train --data shards/ --method mosaiclip --out runs/m1

      \b
      mosaictool train --data texts.jsonl --image-root world/train --method negclip --steps 200 --out runs/n1

      \b
      torchrun --nproc_per_node 8 -m mosaictool train --data 'shards/{000000..000099}.tar' \\
          --method mosaiclip --model ViT-B-32-quickgelu --pretrained /weights/openai.pt --out runs/m2

      \b
      mosaictool train --data shards/ --method probe-ft --recipe paper --out runs/p1   # App. B: SGD, lr 1e-3, 40 epochs

      \b
      mosaictool train --data shards/ --method fsc-clip --recipe paper-lora --out runs/f1   # LoRA 4, lr 5e-5, merged at the end

      \b
      mosaictool train --data shards/ --method mosaiclip --report-to tensorboard --eval-bench world-val \\
          --eval-data-root world/ --out runs/m3   # curves in runs/m3/tensorboard, val headline every epoch

      \b
      mosaictool train --resume runs/m1        # after a crash: same final weights
    """
    # by name: typer ships its own click, whose ParameterSource is not click.core's
    given = {name for name in ctx.params if ctx.get_parameter_source(name).name != "DEFAULT"}
    final = api.train(**settings, resume=resume, given=given)
    if os.environ.get("RANK", "0") == "0":  # under torchrun only the first process reports
        typer.echo(str(final))


# The options every command shares stand for these settings (listed last, as on every command)
SHARED = {"skip_bad": SkipBadOpt, "allow_outside_root": AllowOutsideRootOpt, "quiet": QuietOpt}


def config_parameters(config: type | None = None) -> tuple[list[inspect.Parameter], list[inspect.Parameter]]:
    """One keyword parameter per setting of TrainConfig (or a subclass), with the field's default
    (config_options). -> (the settings' own flags, the shared ones: SHARED, in its order)."""
    params = config_options(config or TrainConfig)
    own = [p for p in params if p.name not in SHARED]
    shared = [p.replace(annotation=SHARED[p.name]) for p in params if p.name in SHARED]
    return own, sorted(shared, key=lambda p: list(SHARED).index(p.name))


def method_parameters() -> list[inspect.Parameter]:
    """One keyword parameter per method option of the registry (a flag shared by several methods
    once), default None: 'not given'."""
    from mosaictool import methods

    params = []
    for name, (opt, owners) in methods.all_options().items():
        decl = (f"{opt.flag}/--no-{opt.flag[2:]}",) if opt.type is bool else (opt.flag,)
        default = opt.flag_default()
        help_text = f"{opt.help} Default: {default}. [{', '.join(owners)}]"
        annotation = Annotated[Optional[opt.type], typer.Option(*decl, help=help_text)]
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation))
    return params


def methods_epilog() -> str:
    from mosaictool import methods

    def recipes(name: str) -> str:
        names = list(methods.get(name).recipes)
        return f" (--recipe {', '.join(names)})" if names else ""

    return "METHODS: " + "; ".join(f"{n}: {methods.get(n).help}{recipes(n)}" for n in methods.names())


def register(app: typer.Typer) -> None:
    import functools

    @functools.wraps(train_cli)
    def command(**kwargs):
        return train_cli(**kwargs)

    context, resume = (p for p in inspect.signature(train_cli, eval_str=True).parameters.values()
                       if p.kind is not inspect.Parameter.VAR_KEYWORD)
    settings, shared = config_parameters()
    resume = resume.replace(kind=inspect.Parameter.KEYWORD_ONLY)
    command.__signature__ = inspect.Signature([context, *settings, resume, *shared, *method_parameters()])
    app.command("train", epilog=methods_epilog())(command)
