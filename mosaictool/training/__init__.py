"""The engine that trains models (as open_clip_train is to open_clip): the loop, the data and batch
contract, torchrun plumbing, devices, logging. What a trained model is and how it is stored is
mosaictool.model; the methods it trains are mosaictool.methods, looked up by name.

    from mosaictool.training import TrainConfig, train, train_many
    train(TrainConfig(data="shards/", out="runs/m1", method="mosaiclip"))
    train_many([TrainConfig(data="shards/", out=f"runs/s{s}", seed=s) for s in range(5)])  # their steps together
"""

from mosaictool.training.config import TrainConfig, with_recipe
from mosaictool.training.loop import train
from mosaictool.training.multirun import train_many
from mosaictool.training.shards import ShardCache

__all__ = ["ShardCache", "TrainConfig", "train", "train_many", "with_recipe"]
