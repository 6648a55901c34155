"""`mosaictool wise-ft`: interpolate zero-shot and fine-tuned weights."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mosaictool import api
from mosaictool.cli.common import handles_errors


@handles_errors
def wise_ft_cli(
    zeroshot: Annotated[str, typer.Option(help="Starting weights: a mosaictool checkpoint, an open_clip weights file or tag.")],
    finetuned: Annotated[str, typer.Option(help="The fine-tuned mosaictool checkpoint (e.g. runs/m1/final.pt).")],
    out: Annotated[str, typer.Option(help="Folder for the checkpoints: wise_ft_alpha_<alpha>.pt (--rule linear), "
                                          "wise_ft_fsc-lora_alpha_<alpha>.pt (--rule fsc-lora).")],
    alpha: Annotated[str, typer.Option(help="Comma-separated alphas: 0 = zero-shot, 1 = fine-tuned.")] = "0.5",
    scope: Annotated[str, typer.Option(help="all | visual | text: which tower is interpolated (the rest stays fine-tuned).")] = "all",
    rule: Annotated[str, typer.Option(
        help="linear: theta = (1 - alpha) zero-shot + alpha fine-tuned (Wortsman et al. 2022; ours). fsc-lora: for a "
             "--lora run, its adapters A and B each scaled by alpha, as FSC-CLIP's code (patch_wise_ft): the update "
             "B A shrinks as alpha^2, theta = zero-shot + alpha^2 (fine-tuned - zero-shot); --zeroshot must be the "
             "run's own base (checked).")] = "linear",
    device: Annotated[Optional[str], typer.Option(
        help="Where the weights are mixed: cpu, cuda or cuda:N (default: the GPU when CUDA is visible, else cpu).")] = None,
) -> None:
    """Weight-space ensembles (WiSE-FT): theta = (1 - alpha) * zero-shot + alpha * fine-tuned (--rule linear).

    Writes one checkpoint per alpha, with the alpha, scope, rule and both sources in its metadata, and
    prints their paths. Refuses models of different architectures. MosaiCLIP_WiSE-FT interpolates
    the image tower only (--scope visual); FSC-CLIP's LoRA models shrink their adapters (--rule fsc-lora).

    Examples:

      \b
      mosaictool wise-ft --zeroshot /weights/openai.pt --finetuned runs/m2/final.pt \\
          --alpha 0,0.25,0.5,0.75,1 --scope visual --out runs/m2/wise/

      \b
      mosaictool wise-ft --zeroshot runs/pre/final.pt --finetuned runs/m1/final.pt --out runs/m1/wise

      \b
      mosaictool wise-ft --zeroshot openai --finetuned runs/f1/final.pt --rule fsc-lora --alpha 0.5 --out runs/f1/wise
    """
    for path in api.wise_ft(zeroshot, finetuned=finetuned, out=out, alpha=alpha, scope=scope, rule=rule, device=device):
        typer.echo(str(path))


def register(app: typer.Typer) -> None:
    app.command("wise-ft")(wise_ft_cli)
