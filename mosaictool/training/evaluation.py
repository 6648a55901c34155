"""--eval-bench: benchmarks scored with the model being trained, at the end of every epoch."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from mosaictool.training.checkpoints import restore_rng, rng_state

logger = logging.getLogger(__name__)


class EpochEval:
    """The benchmarks' cases loaded once, scored with the model being trained by the engine of
    `mosaictool evaluate`. Returns the headline: each benchmark's `headline` rows, or all its rows when it has
    none, as {'BENCH/SUBTASK/METRIC': value}."""

    def __init__(self, spec: str, root: str, device: str, *, micro_per_epoch: int, accum_freq: int, total_steps: int):
        from mosaictool.bench import get
        from mosaictool.bench.engine import EngineOptions, parse_bench_spec, prepare

        self.micro_per_epoch, self.accum_freq, self.total_steps = micro_per_epoch, accum_freq, total_steps
        self.options = EngineOptions(device=device, quiet=True)
        self.prepared = [prepare(get(name), Path(root), subs, self.options) for name, subs in parse_bench_spec(spec)]

    def due(self, step: int) -> bool:
        """At the end of every epoch (an epoch ends at `step`), and at the run's last step."""
        a = self.accum_freq
        return (step * a) // self.micro_per_epoch > ((step - 1) * a) // self.micro_per_epoch or step == self.total_steps

    def at_step(self, step: int, bundle, metrics: dict, reporter, quiet: bool = False) -> None:
        """Score the model being trained (with --lora its merged copy: the weights checkpoints hold) at
        `step`: its headline into `metrics` and the reporter; the model is back in training mode after."""
        from mosaictool.model import lora

        headline = self(lora.merged_bundle(bundle))
        bundle.model.train()
        reporter.log_eval(step, headline)
        metrics.update({f"eval/{name}": value for name, value in headline.items()})
        if not quiet:
            logger.info(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in headline.items()))

    def __call__(self, bundle) -> dict[str, float]:
        from mosaictool.bench.base import HEADLINE
        from mosaictool.bench.engine import Encoder, score_prepared

        headline = {}
        with _rng_kept(self.options.device):  # the evaluation's loaders draw seeds: training goes on as without it
            encoder = Encoder(bundle, self.options)
            for prep in self.prepared:
                rows = [r for r in score_prepared(prep, encoder) if not r.get("detail")]
                rows = [r for r in rows if r["subtask"] == HEADLINE] or rows
                headline.update({f"{prep.bench.name}/{r['subtask']}/{r['metric']}": float(r["value"]) for r in rows
                                 if r["value"] is not None})
        return headline


@contextlib.contextmanager
def _rng_kept(device: str):
    state = rng_state(device)
    try:
        yield
    finally:
        restore_rng(state)
