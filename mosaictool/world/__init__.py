"""The synthetic compositional world: scenes of shapes in spatial relations, captions from their
true graphs, train data and val/test splits in the real benchmarks' formats (`mosaictool world`)."""

from mosaictool.world.generate import GENERATOR_VERSION, generate_world, load_manifest

__all__ = ["GENERATOR_VERSION", "generate_world", "load_manifest"]
