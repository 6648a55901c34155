"""`mosaictool train`: fine-tuning of open_clip models with any method of mosaictool.methods.

The command names no method: `--method` takes the registry's names, and every method's own flags
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
from mosaictool.cli.common import AllowOutsideRootOpt, QuietOpt, SkipBadOpt, handles_errors


@handles_errors
def train_cli(
    ctx: typer.Context,
    data: Annotated[Optional[str], typer.Option(help="Shards (folder, glob or {a..b} pattern) or a JSONL/Parquet file.")] = None,
    out: Annotated[Optional[str], typer.Option(help="Run folder: config.json, metrics.jsonl, last.pt, final.pt.")] = None,
    method: Annotated[str, typer.Option(help="A training method (listed below: METHODS).")] = "clip",
    recipe: Annotated[Optional[str], typer.Option(
        help="The method's paper recipe by name (METHODS lists each method's recipes), e.g. --method fsc-clip "
             "--recipe paper: its optimizer, lr, batch, epochs, precision, ...; flags you give explicitly win.")] = None,
    image_root: Annotated[Optional[str], typer.Option(
        help="JSONL/Parquet data: folder of the image paths (default: the file's folder).")] = None,
    texts: Annotated[Optional[str], typer.Option(
        help="Records (template's JSONL/Parquet, made by `parse SHARDS`) joined by key to the images of --data's WebDataset "
             "shards (img2dataset's): no second copy of the images. A sample without a record trains on its .txt caption "
             "without negatives; a record no sample has is an error (--skip-bad: counted). "
             "Example: --data 'cc3m/{00000..00331}.tar' --texts cc3m-texts.parquet")] = None,
    model: Annotated[str, typer.Option(help="open_clip model name or a shipped config (mosaic-tiny).")] = "mosaic-tiny",
    pretrained: Annotated[Optional[str], typer.Option(
        help="open_clip tag, weights file, local-dir:FOLDER or a mosaictool checkpoint.")] = None,
    model_config: Annotated[Optional[str], typer.Option(help="JSON model config (open_clip schema) for a custom architecture.")] = None,
    force_quick_gelu: Annotated[bool, typer.Option(help="QuickGELU activations (OpenAI weights); prefer a -quickgelu model name.")] = False,
    hard_images: Annotated[int, typer.Option(help="Mine K nearest-neighbour hard images with the starting model (0: off).")] = 0,
    record_hard_images: Annotated[
        Optional[bool], typer.Option("--record-hard-images/--no-record-hard-images",
                                     help="Use records' hard_images ids (default: the method's; on for negclip).")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Images per process per micro-batch (hard images come on top).")] = 32,
    epochs: Annotated[int, typer.Option(help="Passes over the data.")] = 5,
    steps: Annotated[Optional[int], typer.Option(help="Optimizer steps (overrides --epochs).")] = None,
    lr: Annotated[Optional[float], typer.Option(help="Peak learning rate (default 1e-5 with --pretrained, else 5e-4).")] = None,
    optimizer: Annotated[str, typer.Option(
        help="adamw | sgd (with --momentum; the Probe paper's: --optimizer sgd --lr 1e-3 --wd 1e-4).")] = "adamw",
    momentum: Annotated[float, typer.Option(help="SGD momentum (--optimizer sgd).")] = 0.9,
    wd: Annotated[float, typer.Option(help="Weight decay (not on gains, biases, logit_scale); decoupled for adamw, L2 for sgd.")] = 0.1,
    warmup: Annotated[int, typer.Option(help="Linear warmup steps before the cosine decay.")] = 50,
    grad_clip: Annotated[float, typer.Option(help="Gradient norm clip (0: off).")] = 1.0,
    accum_freq: Annotated[int, typer.Option(help="Micro-batches per optimizer step (the loss sees them all).")] = 1,
    precision: Annotated[str, typer.Option(
        help="fp32 | bf16 | amp | amp_bf16 (amp, fp16 with a loss scaler, needs a GPU; amp_bf16 also runs on CPU).")] = "fp32",
    grad_checkpointing: Annotated[bool, typer.Option(help="Recompute activations in backward to save memory.")] = False,
    lock_image: Annotated[bool, typer.Option(help="Freeze the image tower.")] = False,
    lock_text: Annotated[bool, typer.Option(help="Freeze the text tower.")] = False,
    lora: Annotated[int, typer.Option(
        help="Train LoRA adapters of this rank (peft; every adapted weight W + B A / rank, a loralib-style conv1 adapter, "
             "as FSC-CLIP's code) on both towers instead of all weights, e.g. --lora 4 with --lr 5e-5 (FSC-CLIP's; --recipe paper-lora); "
             "final.pt holds them merged into plain weights (0: full fine-tuning).")] = 0,
    augment: Annotated[bool, typer.Option(help="Random-resized-crop augmentation (off: center crop, cached).")] = True,
    images_on_device: Annotated[bool, typer.Option(
        help="With --no-augment: decode every image once into one tensor on the "
             "training device (GPU memory: N x 3 x S x S bytes); a step gathers its images there.")] = False,
    crop_scale: Annotated[str, typer.Option(
        help="The random crop's share of the image area, LOW,HIGH (FSC-CLIP's recipe: 0.9,1).")] = "0.8,1",
    local_loss: Annotated[bool, typer.Option(help="torchrun: each process computes its own rows of the loss.")] = False,
    merge_equal_texts: Annotated[
        Optional[bool], typer.Option("--merge-equal-texts/--no-merge-equal-texts",
                                     help="Equal texts in a batch are one sub-graph: positives of every image owning them, never its "
                                          "negatives (default: the method's; off for fsc-clip, whose paper labels captions by position).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the initialisation, the data order and every random draw.")] = 0,
    device: Annotated[Optional[str], typer.Option(help="cpu or cuda (default: cuda when available).")] = None,
    num_workers: Annotated[int, typer.Option(help="Data loader worker processes.")] = 0,
    save_every: Annotated[int, typer.Option(help="Write a resumable checkpoint every N steps (0: only the final one).")] = 0,
    log_every: Annotated[int, typer.Option(help="Append a metrics line every N steps.")] = 1,
    report_to: Annotated[Optional[str], typer.Option(
        help="Also log every loss term, lr, samples/s, texts/s and GPU memory to tensorboard (OUT/tensorboard/), "
             "wandb or both (tensorboard,wandb); with --resume it replaces the run's own. Default: off.")] = None,
    eval_bench: Annotated[Optional[str], typer.Option(
        help="Score these benchmarks (evaluate's --bench syntax, e.g. world-val) at the end of every epoch; their "
             "headline goes to metrics.jsonl and --report-to.")] = None,
    eval_data_root: Annotated[Optional[str], typer.Option(
        help="Folder holding the --eval-bench benchmarks (evaluate's --data-root).")] = None,
    resume: Annotated[Optional[str], typer.Option(help="Continue the run in this folder with its stored config.")] = None,
    skip_bad: SkipBadOpt = False,
    allow_outside_root: AllowOutsideRootOpt = False,
    quiet: QuietOpt = False,
    **method_flags,
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
    final = api.train(
        data, out=out, method=method, recipe=recipe, image_root=image_root, texts=texts, model=model, pretrained=pretrained,
        model_config=model_config, force_quick_gelu=force_quick_gelu, hard_images=hard_images,
        record_hard_images=record_hard_images, batch_size=batch_size, epochs=epochs, steps=steps, lr=lr, optimizer=optimizer,
        momentum=momentum, wd=wd, warmup=warmup, grad_clip=grad_clip, accum_freq=accum_freq, precision=precision,
        grad_checkpointing=grad_checkpointing, lock_image=lock_image, lock_text=lock_text, lora=lora, augment=augment,
        images_on_device=images_on_device, crop_scale=crop_scale, local_loss=local_loss, merge_equal_texts=merge_equal_texts,
        seed=seed, device=device, num_workers=num_workers, save_every=save_every, log_every=log_every, report_to=report_to,
        eval_bench=eval_bench, eval_data_root=eval_data_root, resume=resume, skip_bad=skip_bad,
        allow_outside_root=allow_outside_root, quiet=quiet, given=given,
        **method_flags,
    )
    if os.environ.get("RANK", "0") == "0":  # under torchrun only the first process reports
        typer.echo(str(final))


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

    own = [p for p in inspect.signature(train_cli, eval_str=True).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    command.__signature__ = inspect.Signature(own + method_parameters())
    app.command("train", epilog=methods_epilog())(command)
