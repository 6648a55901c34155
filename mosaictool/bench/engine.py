"""Scoring a model on a benchmark: every unique image and text encoded once, in batches.

`evaluate(benchmarks, models, root)` loads each benchmark's items once, then per model encodes
the unique image regions (path + crop box) and unique texts, L2-normalises them, builds each
item's cosine matrix and hands them to the benchmark's `score`. Per-example encoding (what the
ARO repo does: the image and its captions for every test case) re-encodes the same image for
every caption pair of SugarCrepe or every caption of COCO-Order; deduplication and batching are
where the speed comes from (perf/evaluate_speed.py).

Embeddings can be cached on disk (`cache_dir`), keyed by the model's identity (a hash of its
name, activation and weights) and, per image, by file path, size, mtime and crop box.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mosaictool.atomic import new_file_mode
from mosaictool.bench.base import ImageRef, Item
from mosaictool.errors import MosaicError
from mosaictool.io import progress

logger = logging.getLogger(__name__)

MISSING_SHOWN = 5
# the most preprocessed images a benchmark keeps for the next model (Prepared.memo): the demo's 5,151
# at 64 px are 0.25 GB; 5,000 COCO images at 224 px would be 3 GB and are decoded per model instead
PIXEL_MEMO_BYTES = 1 << 30


@dataclass
class EngineOptions:
    batch_size: int = 64
    text_batch_size: int = 256
    device: str = "cpu"
    workers: int = 0  # DataLoader processes decoding and preprocessing images
    cache_dir: str | None = None
    skip_missing: bool = False
    allow_outside_root: bool = False  # read images that lead out of --data-root (images.image_path)
    # also a row per subtask with every case's outcome ("hits": a string of 0/1 in the file's order)
    # where the benchmark can say (Bench.item_hits): the input of paired tests over cases
    item_hits: bool = False
    limit: int | None = None
    quiet: bool = False

    def note(self, message: str) -> None:
        logger.warning(message)


def _accepts(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def parse_bench_spec(spec: str) -> list[tuple[str, list[str] | None]]:
    """`aro:VG-Relation+VG-Attribution,sugarcrepe` -> [("aro", [...]), ("sugarcrepe", None)]. An
    empty item, an empty subtask list or a benchmark or subtask named twice is refused: it would
    otherwise run all subtasks, or score one twice."""
    parts = [p.strip() for p in spec.split(",")]
    if not any(parts):
        raise MosaicError("--bench is empty; name one or more benchmarks (see --list)")
    out: list[tuple[str, list[str] | None]] = []
    for part in parts:
        if not part:
            raise MosaicError(f"--bench {spec!r}: an empty item between commas; name each benchmark once")
        name, colon, subs = (x.strip() for x in part.partition(":"))
        if any(name == seen for seen, _ in out):
            raise MosaicError(f"--bench {spec!r}: {name} is named twice; give it once (NAME:SUB1+SUB2 for several subtasks)")
        picked = [s.strip() for s in subs.split("+")] if colon else None
        if picked is not None and not all(picked):
            raise MosaicError(f"--bench {part!r}: an empty subtask after ':' or between '+'; "
                              f"leave out ':' for all of {name}'s subtasks (see --list)")
        if picked is not None and len(set(picked)) < len(picked):
            raise MosaicError(f"--bench {part!r}: a subtask is named twice; give each once")
        out.append((name, picked))
    return out


def load_items(bench, root: Path, *, limit: int | None = None, subtasks: list[str] | None = None) -> list[Item]:
    if subtasks:
        unknown = [s for s in subtasks if s not in bench.subtasks]
        if unknown and not getattr(bench, "open_subtasks", False):
            raise MosaicError(f"{bench.name}: unknown subtask(s) {', '.join(unknown)}; choose from {', '.join(bench.subtasks)}")
        if not _accepts(bench.load, "subtasks"):
            raise MosaicError(f"{bench.name}: subtask selection is not supported; use --bench {bench.name}")
        items = bench.load(root, limit=limit, subtasks=subtasks)
    else:
        items = bench.load(root, limit=limit)
    if not items:
        raise MosaicError(f"{bench.name}: no test cases found under {root} (its annotation files hold none, or --limit / "
                          "the subtasks chose none); `mosaictool evaluate --list` shows the expected layout")
    return items


# ---------------------------------------------------------------- missing images


@dataclass
class Missing:
    items_skipped: int = 0
    items_total: int = 0
    paths: list[str] = field(default_factory=list)


def _check_inside(items: list[Item], root: str | os.PathLike, where: str) -> None:
    """MosaicError when an image of the benchmark leads out of --data-root once links are resolved."""
    from mosaictool.images import ImageError, image_path

    seen: set[str] = set()
    for item in items:
        for ref in item.images:
            if ref.data is None and ref.path not in seen:
                seen.add(ref.path)
                try:
                    image_path(root, os.path.relpath(ref.path, root), flag="--data-root")
                except ImageError as e:
                    raise MosaicError(f"{where}: {e}") from None


def drop_missing(items: list[Item], *, skip: bool, where: str) -> tuple[list[Item], Missing]:
    """Check that every image file exists. Missing ones stop the run (count + first paths), or
    with `skip` their items are dropped and counted."""
    status: dict[str, bool] = {}
    missing: list[str] = []
    for item in items:
        for ref in item.images:
            if ref.data is None and ref.path not in status:
                status[ref.path] = os.path.isfile(ref.path)
                if not status[ref.path]:
                    missing.append(ref.path)
    report = Missing(items_total=len(items), paths=missing)
    if not missing:
        return items, report
    if not skip:
        shown = ", ".join(missing[:MISSING_SHOWN])
        more = f" and {len(missing) - MISSING_SHOWN} more" if len(missing) > MISSING_SHOWN else ""
        raise MosaicError(  # one line: the first paths, then the fixes
            f"{where}: {len(missing)} image file(s) missing (first: {shown}{more}); put the images where the layout "
            "says (see `mosaictool evaluate --list`), fix --data-root, or pass --skip-missing to score only the "
            "test cases whose images exist (skips are reported)"
        )
    kept = [it for it in items if all(r.data is not None or status[r.path] for r in it.images)]
    report.items_skipped = len(items) - len(kept)
    return kept, report


# ---------------------------------------------------------------- model identity and cache


def model_identity(bundle) -> str:
    """A hash of what determines the embeddings: architecture, activation, preprocessing size, weights."""
    h = hashlib.blake2b(digest_size=16)
    meta = bundle.meta
    h.update(json.dumps([meta.get("model_name"), meta.get("quick_gelu"), meta.get("model_cfg")], sort_keys=True, default=str).encode())
    for name, tensor in sorted(bundle.model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def image_key(ref: ImageRef) -> str:
    if ref.data is not None:
        stamp = hashlib.blake2b(ref.data, digest_size=12).hexdigest()
    else:
        st = os.stat(ref.path)
        stamp = f"{st.st_size}:{st.st_mtime_ns}"
    return f"{os.path.abspath(ref.path) if ref.data is None else ref.path}|{ref.box}|{stamp}"


def _checksum(keys: np.ndarray, vectors: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update("\0".join(keys.tolist()).encode())
    h.update(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    return h.hexdigest()


class EmbeddingCache:
    """Embeddings of one model on disk: `<dir>/<model id>/{image,text}.npz` (keys, vectors and their
    checksum). A file is trusted only when its vectors have the model's width, are finite and unit
    length (the encoder normalises them) and match the checksum; any other is discarded with one
    line (`log`) and its embeddings computed again, so an edited or damaged cache never moves a score."""

    def __init__(self, directory: str | os.PathLike, model_id: str, dim: int, log=None):
        self.dir = Path(directory) / model_id
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dim, self.log = dim, log or (lambda message: None)

    def load(self, kind: str) -> dict[str, np.ndarray]:
        path = self.dir / f"{kind}.npz"
        if not path.exists():
            return {}
        try:
            with np.load(path, allow_pickle=False) as z:
                keys, vectors, checksum = z["keys"], z["vectors"], str(z["checksum"])
        except Exception as e:  # not an npz, or one without our arrays (an older mosaictool's has no checksum)
            return self._discard(path, f"unreadable ({type(e).__name__}: {e})")
        problem = None
        if vectors.dtype != np.float32 or vectors.shape != (len(keys), self.dim) or keys.ndim != 1:
            problem = f"{vectors.dtype} vectors of shape {vectors.shape}, expected float32 ({len(keys)}, {self.dim})"
        elif not np.isfinite(vectors).all():
            problem = "it holds NaN or infinite vectors"
        elif len(vectors) and np.abs(np.linalg.norm(vectors, axis=1) - 1).max() > 1e-2:  # bf16 models: ~1e-3
            problem = "it holds vectors that are not unit length"
        elif checksum != _checksum(keys, vectors):
            problem = "its checksum does not match its vectors (edited or damaged)"
        if problem:
            return self._discard(path, problem)
        return dict(zip(keys.tolist(), vectors))

    def _discard(self, path: Path, problem: str) -> dict:
        path.unlink(missing_ok=True)
        self.log(f"cache: {path}: {problem}; discarded, its embeddings are computed again")
        return {}

    def save(self, kind: str, table: dict[str, np.ndarray]) -> None:
        if not table:
            return
        keys = np.array(list(table), dtype=str)
        vectors = np.stack(list(table.values())).astype(np.float32)
        fd, tmp = tempfile.mkstemp(prefix=f".{kind}.", suffix=".npz", dir=self.dir)
        os.close(fd)
        try:
            np.savez(tmp, keys=keys, vectors=vectors, checksum=np.array(_checksum(keys, vectors)))
            os.chmod(tmp, new_file_mode())  # mkstemp's 0600 -> the umask's
            os.replace(tmp, self.dir / f"{kind}.npz")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


# ---------------------------------------------------------------- encoding


def open_image(ref: ImageRef):
    from PIL import Image

    from mosaictool import images
    from mosaictool.images import image_to_rgb

    try:
        if ref.data is None and ref.path.endswith(".npy"):
            # EqBen's YouCook2 frames: BGR arrays, read as the official toolkit does
            img = Image.fromarray(np.load(ref.path)[:, :, [2, 1, 0]], "RGB")
        else:
            img = images.open_image(ref.data if ref.data is not None else ref.path, ref.path)  # regular file, size bounded
        img = image_to_rgb(img)
    except Exception as e:
        raise MosaicError(f"{ref.path}: cannot read image: {e}") from e
    return img.crop(ref.box) if ref.box is not None else img


class _ImageSet:
    """A map-style dataset of preprocessed image regions (DataLoader workers decode in parallel)."""

    def __init__(self, refs: Sequence[ImageRef], preprocess):
        self.refs, self.preprocess = refs, preprocess

    def __len__(self) -> int:
        return len(self.refs)

    def __getitem__(self, i: int):
        return self.preprocess(open_image(self.refs[i]))


class Encoder:
    """Encodes images and texts with one model: batched, normalised, optionally cached."""

    def __init__(self, bundle, options: EngineOptions):
        import torch

        self.bundle, self.opt = bundle, options
        self.device = torch.device(options.device)
        self.model = bundle.model.to(self.device).eval()
        scale = getattr(self.model, "logit_scale", None)
        self.logit_scale = float(scale.exp().item()) if scale is not None else 100.0
        self.cache = EmbeddingCache(options.cache_dir, model_identity(bundle), self._dim(), options.note) if options.cache_dir else None

    def images(self, refs: Sequence[ImageRef], desc: str, memo: dict | None = None) -> np.ndarray:
        import torch

        keys = [image_key(r) for r in refs] if self.cache else []
        table = self.cache.load("image") if self.cache else {}
        todo = [i for i, k in enumerate(keys) if k not in table] if self.cache else list(range(len(refs)))
        out = np.zeros((len(refs), self._dim()), dtype=np.float32)
        if todo:
            chunks = []
            with torch.inference_mode():
                for batch in self._pixels([refs[i] for i in todo], desc, memo):
                    emb = self.model.encode_image(batch.to(self.device, non_blocking=True), normalize=True)
                    chunks.append(emb.float().cpu().numpy())
            out[todo] = np.concatenate(chunks)
        self._fill_and_save("image", keys, out, table, changed=bool(todo))
        return out

    def _pixels(self, refs: Sequence[ImageRef], desc: str, memo: dict | None):
        """Batches of the preprocessed images of `refs`. With `memo` (kept across the models scored
        on the same items, Prepared.memo) each image is decoded once per preprocessing, not per model."""
        import torch

        def load(todo):
            return torch.utils.data.DataLoader(
                _ImageSet(todo, self.bundle.preprocess_val),
                batch_size=self.opt.batch_size,
                num_workers=self.opt.workers,
                shuffle=False,
                pin_memory=self.device.type == "cuda",  # page-locked batches: the copy to the GPU overlaps
            )

        if memo is None:
            yield from progress(load(refs), desc=f"{desc} images", unit="batch", quiet=self.opt.quiet)
            return
        decoded = memo.setdefault(("pixels", repr(self.bundle.preprocess_val)), {})
        missing = list(dict.fromkeys(r for r in refs if r not in decoded))
        if (len(decoded) + len(missing)) * self._image_bytes() > PIXEL_MEMO_BYTES:
            yield from self._pixels(refs, desc, None)  # too many to hold: decoded for every model
            return
        if missing:
            rows = (row for batch in progress(load(missing), desc=f"{desc} images", unit="batch", quiet=self.opt.quiet)
                    for row in batch)
            decoded.update(zip(missing, rows))
        step = self.opt.batch_size
        for s in range(0, len(refs), step):
            yield torch.stack([decoded[r] for r in refs[s : s + step]])

    def _image_bytes(self) -> int:
        """Bytes of one preprocessed image (float32, the model config's image size; 0 if it has none)."""
        size = ((self.bundle.meta.get("model_cfg") or {}).get("vision_cfg") or {}).get("image_size", 0)
        height, width = (size, size) if isinstance(size, int) else size
        return 3 * height * width * 4

    def texts(self, texts: Sequence[str], desc: str, memo: dict | None = None) -> np.ndarray:
        import torch

        from mosaictool.model.text_tower import encode_text, text_lengths

        table = self.cache.load("text") if self.cache else {}
        todo = [i for i, t in enumerate(texts) if t not in table]
        out = np.zeros((len(texts), self._dim()), dtype=np.float32)
        if todo:
            tokens = self._tokens([texts[i] for i in todo], memo)
            # batches of like lengths: each runs only up to its longest text (model.text_tower)
            order = torch.argsort(text_lengths(tokens), stable=True)
            step = self.opt.text_batch_size
            with torch.inference_mode():
                for s in progress(range(0, len(todo), step), desc=f"{desc} texts", unit="batch", quiet=self.opt.quiet):
                    rows = order[s : s + step]
                    emb = encode_text(self.model, tokens[rows].to(self.device), normalize=True)
                    out[[todo[i] for i in rows.tolist()]] = emb.float().cpu().numpy()
        self._fill_and_save("text", texts, out, table, changed=bool(todo))
        return out

    def _tokens(self, texts: list[str], memo: dict | None):
        """The tokenizer's ids of `texts`; with `memo`, each text tokenized once per tokenizer (the model's
        name and text config say which)."""
        import torch

        name, cfg = self.bundle.meta.get("model_name"), self.bundle.meta.get("model_cfg")
        if memo is None or name is None or cfg is None:
            return self.bundle.tokenizer(texts)
        known = memo.setdefault(("tokens", name, json.dumps(cfg.get("text_cfg"), sort_keys=True)), {})
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            known.update(zip(missing, self.bundle.tokenizer(missing)))
        return torch.stack([known[t] for t in texts])

    def _fill_and_save(self, kind: str, keys: Sequence[str], out: np.ndarray, table: dict, changed: bool) -> None:
        """Cached rows into `out`, freshly encoded rows into the cache (saved if any were new)."""
        if not self.cache:
            return
        for i, k in enumerate(keys):
            if k in table:
                out[i] = table[k]
            else:
                table[k] = out[i]
        if changed:
            self.cache.save(kind, table)

    def _dim(self) -> int:
        proj = getattr(self.model, "text_projection", None)
        if proj is not None and hasattr(proj, "shape"):
            return int(proj.shape[-1])
        return int(self.bundle.meta["model_cfg"]["embed_dim"])


class Similarities(Sequence):
    """Each item's (images x texts) cosine matrix, computed when asked for, so retrieval's
    thousands-by-thousands matrices are not all held at once. An item whose meta has
    `ensembles` (lists of text indices: zero-shot prompt templates per class) gets one column per
    ensemble: the cosine with the renormalised mean of the ensemble's text embeddings (CLIP's
    prompt ensembling)."""

    def __init__(self, items: Sequence[Item], image_emb, text_emb, ref_index, text_index):
        self.items, self.img, self.txt = items, image_emb, text_emb
        self.ref_index, self.text_index = ref_index, text_index

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> np.ndarray:
        item = self.items[i]
        img = self.img[[self.ref_index[r] for r in item.images]]
        txt = self.txt[[self.text_index[t] for t in item.texts]]
        groups = item.meta.get("ensembles")
        if groups is not None:
            txt = np.stack([txt[g].mean(axis=0) for g in groups])
            txt /= np.linalg.norm(txt, axis=1, keepdims=True)
        return img @ txt.T


def similarities(items: Sequence[Item], encoder: Encoder, desc: str, memo: dict | None = None) -> Similarities:
    """Encode every unique image region and text of `items` once; the items' cosine matrices.
    `memo`: decoded images and tokens kept for the next model (Prepared.memo)."""
    ref_index: dict[ImageRef, int] = {}
    text_index: dict[str, int] = {}
    for item in items:
        for ref in item.images:
            ref_index.setdefault(ref, len(ref_index))
        for t in item.texts:
            text_index.setdefault(t, len(text_index))
    img = encoder.images(list(ref_index), desc, memo)
    txt = encoder.texts(list(text_index), desc, memo)
    return Similarities(items, img, txt, ref_index, text_index)


# ---------------------------------------------------------------- driver


@dataclass
class Prepared:
    bench: object
    items: list[Item]
    missing: Missing
    # the items' decoded images and tokens, kept for every model scored on them in this process (a
    # checkpoint of the demo's tiny model spent ~3 of its 13 s decoding and tokenizing them again)
    memo: dict = field(default_factory=dict, repr=False)


def prepare(bench, root: Path, subtasks: list[str] | None, options: EngineOptions) -> Prepared:
    items = load_items(bench, root, limit=options.limit, subtasks=subtasks)
    if not (options.allow_outside_root or getattr(bench, "images_outside_root", False)):
        _check_inside(items, root, bench.name)
    items, missing = drop_missing(items, skip=options.skip_missing, where=bench.name)
    if missing.items_skipped:
        shown = ", ".join(missing.paths[:MISSING_SHOWN])
        options.note(
            f"{bench.name}: skipped {missing.items_skipped} of {missing.items_total} test case(s): "
            f"{len(missing.paths)} image file(s) missing (first: {shown})"
        )
    if not items:
        raise MosaicError(f"{bench.name}: every test case lacks its image(s); nothing left to score under {root}")
    return Prepared(bench, items, missing)


def score_prepared(prep: Prepared, encoder: Encoder, item_hits: bool = False) -> list[dict]:
    sims = similarities(prep.items, encoder, prep.bench.name, prep.memo)
    if _accepts(prep.bench.score, "logit_scale"):
        rows = prep.bench.score(prep.items, sims, logit_scale=encoder.logit_scale)
    else:
        rows = prep.bench.score(prep.items, sims)
    if item_hits and hasattr(prep.bench, "item_hits"):
        rows = [*rows, *({"subtask": sub, "metric": "hits", "value": float(h.mean()), "n": int(h.size), "detail": True,
                          "hits": "".join("1" if x else "0" for x in h)} for sub, h in prep.bench.item_hits(prep.items, sims).items())]
    if prep.missing.items_skipped:
        rows = [*rows, {"subtask": "*", "metric": "skipped_missing_images", "value": float(prep.missing.items_skipped),
                        "n": prep.missing.items_total}]
    return rows


def evaluate(
    benchmarks: Iterable[tuple[object, list[str] | None]],
    models: Iterable[tuple[str, object]],
    root: str | os.PathLike,
    options: EngineOptions | None = None,
) -> Iterator[dict]:
    """Rows {model, benchmark, subtask, metric, value, n} for every (model, benchmark).

    `benchmarks`: (BENCHMARK object, subtasks or None); `models`: (label, ModelBundle). Items are
    loaded (and image files checked) once, before any model runs.
    """
    options = options or EngineOptions()
    root = Path(root).expanduser()
    prepared = [prepare(b, root, subs, options) for b, subs in benchmarks]
    for label, bundle in models:
        yield from score_model(prepared, label, bundle, options)


def score_model(prepared: Sequence[Prepared], label: str, bundle, options: EngineOptions) -> Iterator[dict]:
    """One model's rows on benchmarks already prepared (`prepare`): what `evaluate` does per model."""
    encoder = Encoder(bundle, options)
    for prep in prepared:
        for r in score_prepared(prep, encoder, options.item_hits):
            yield {"model": label, "benchmark": prep.bench.name, **r, "detail": bool(r.get("detail", False))}

