"""mosaictool: stages for teaching CLIP-style models composition (MosaiCLIP, NegCLIP, FSC-CLIP).

`import mosaictool` is cheap on purpose: torch, open_clip and spaCy are imported inside the
functions that need them, so `mosaictool --help` is instant.
"""

import os

__version__ = "0.1.0"

# OpenMP threads that spin while waiting make torch on a busy CPU up to ~50x slower (a tiny-model
# training step: 0.17 s passive vs 9 s spinning, 2 threads, other processes on the cores). It has to
# be set before torch loads its OpenMP runtime; a user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
