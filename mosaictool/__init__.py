"""mosaictool: stages for teaching CLIP-style models composition (MosaiCLIP, NegCLIP, FSC-CLIP).

`import mosaictool` is cheap on purpose: torch, open_clip and spaCy are imported inside the
functions that need them, so `mosaictool --help` is instant.
"""

__version__ = "0.1.0"
