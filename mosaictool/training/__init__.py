"""The engine that trains models (as open_clip_train is to open_clip): the loop, the data and batch
contract, torchrun plumbing, devices, logging. What a trained model is and how it is stored is
mosaictool.model; the methods it trains are mosaictool.methods, looked up by name.

    from mosaictool.training import TrainConfig, train
    train(TrainConfig(data="shards/", out="runs/m1", method="mosaiclip"))
"""

from mosaictool.training.config import TrainConfig, with_recipe
from mosaictool.training.loop import train

__all__ = ["TrainConfig", "train", "with_recipe"]
