"""The plan: which records form micro-batch g on rank r, and with how many text slots.

Order and randomness: the data of optimizer step s is a pure function of (seed, s), whatever the
number of workers, the device or the number of ranks at a fixed global batch: each epoch is a seeded
permutation of the records, cut into global batches of batch_size × world_size anchors, and rank r
takes the r-th slice. Every random choice about one sample (which texts, which crop, which hard
image) comes from a generator seeded by (seed, epoch, record index). That is what makes
`--resume` exact: the run continues at micro-batch s × accum_freq with the same draws.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from mosaictool.errors import MosaicError


def sample_rng(seed: int, epoch: int, index: int, purpose: str) -> random.Random:
    return random.Random(f"{seed}:{epoch}:{index}:{purpose}")  # str seeds hash with sha512: stable across runs


@dataclass
class SamplerConfig:
    method: object  # a mosaictool.methods.Method: slots per step and the texts of each image
    batch_size: int  # anchors per rank per micro-batch
    seed: int = 0
    use_hard: bool = False
    total_steps: int = 1  # optimizer steps of the run (a method's curriculum is a share of them)
    accum_freq: int = 1


class BatchPlan:
    """Iterates the micro-batches of one rank from micro-batch `start` on: lists of sample specs
    (index, epoch, kp, kn, is_hard). A torch batch_sampler."""

    def __init__(self, n_records: int, cfg: SamplerConfig, *, rank: int, world_size: int, start: int, stop: int,
                 hard: list[list[int]] | None = None):
        self.n = n_records
        self.cfg = cfg
        self.rank = rank
        self.world = world_size
        self.start = start
        self.stop = stop
        self.hard = hard or []
        self.global_batch = cfg.batch_size * world_size
        self.batches_per_epoch = n_records // self.global_batch
        if self.batches_per_epoch < 1:
            raise MosaicError(
                f"{n_records} training records are fewer than one global batch ({cfg.batch_size} per rank × "
                f"{world_size} rank(s)); lower --batch-size"
            )
        self._perm: tuple[int, list[int]] | None = None

    def __len__(self) -> int:
        return self.stop - self.start

    def permutation(self, epoch: int) -> list[int]:
        if self._perm is None or self._perm[0] != epoch:
            g = torch.Generator().manual_seed(self.cfg.seed * 100_003 + epoch)
            self._perm = (epoch, torch.randperm(self.n, generator=g).tolist())
        return self._perm[1]

    def micro_batch(self, g: int) -> list[tuple]:
        epoch, b = divmod(g, self.batches_per_epoch)
        kp, kn = self.cfg.method.slots(g // self.cfg.accum_freq, self.cfg.total_steps)
        perm = self.permutation(epoch)
        first = b * self.global_batch + self.rank * self.cfg.batch_size
        anchors = perm[first : first + self.cfg.batch_size]
        specs = [(i, epoch, kp, kn, False) for i in anchors]
        if self.cfg.use_hard:
            for i in anchors:
                rng = sample_rng(self.cfg.seed, epoch, i, "hard")
                candidates = self.hard[i] if self.hard else []
                if candidates:
                    j = rng.choice(candidates)
                else:  # no hard image known: any other record
                    j = rng.randrange(self.n - 1)
                    j += j >= i
                specs.append((j, epoch, kp, kn, True))
        return specs

    def __iter__(self) -> Iterator[list[tuple]]:
        for g in range(self.start, self.stop):
            yield self.micro_batch(g)
