"""The engine that trains models (as open_clip_train is to open_clip): the loop, the data and batch
contract, torchrun plumbing, devices, logging. What a trained model is and how it is stored is
mosaictool.model; the methods it trains are mosaictool.methods, looked up by name.

    from mosaictool.training import TrainConfig, train, train_many
    train(TrainConfig(data="shards/", out="runs/m1", method="mosaiclip"))
    train_many([TrainConfig(data="shards/", out=f"runs/s{s}", seed=s) for s in range(5)])  # their steps together

Its names load on first use (PEP 562): `mosaictool train --help` reads TrainConfig's settings
(mosaictool.training.config) without loading torch.
"""

# name -> the module of mosaictool.training that defines it
_WHERE = {"ShardCache": "shards", "TrainConfig": "config", "train": "loop", "train_many": "multirun", "with_recipe": "config"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    from importlib import import_module

    if name in _WHERE:
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
