"""Reading the Probe benchmarks (Schiappa et al. 2023) in either of two layouts: our JSONL (written by `mosaictool
probe build` or `mosaictool world`: one record per line, image paths relative to the file's folder), or
the authors' released files (GitHub DeepLearningRobustnessStudies/UnderstandingVisualTextModels,
new_datasets/README.md and the core/eval_*.py scripts that read them, commit da44432). Private: no
BENCHMARK here."""

from __future__ import annotations

import json
from pathlib import Path

from mosaictool.bench._files import json_value, parse_json, read_text
from mosaictool.bench._formats import check_entry
from mosaictool.errors import MosaicError

OURS, OFFICIAL = "ours", "official"


def read_jsonl(path: Path, bench: str, fields: tuple[str, ...], limit: int | None = None, contract=None) -> list[dict]:
    """The records of `path`; a broken line, a missing field or (with `contract`, a
    mosaictool.records.Contract) a field of the wrong type names the file and line."""
    if not path.is_file():
        raise MosaicError(f"{bench}: {path} not found; build it with `mosaictool probe build {bench[-1]} --out <data root>` "
                          "(see `mosaictool evaluate --list`) or fix --data-root")
    out, first = [], {}
    for lineno, line in enumerate(read_text(path, bench).splitlines(), 1):
        if not line.strip():
            continue
        if limit is not None and len(out) >= limit:
            break
        rec = json_value(line, f"{bench}: {path}:{lineno}", hint="build the file again")
        missing = [k for k in fields if not isinstance(rec, dict) or k not in rec]
        if missing:
            raise MosaicError(f"{bench}: {path}:{lineno}: missing field(s) {', '.join(missing)} "
                              f"(not a {bench} file; build it with `mosaictool probe build`)")
        if contract is not None:
            check_entry(contract, rec, bench, path, f"line {lineno}")
        key = json.dumps(rec["id"]) if "id" in fields else None  # ids name the groups in the output: two alike would merge
        if key is not None and key in first:
            raise MosaicError(f"{bench}: {path}: line {lineno}: id {key} repeats line {first[key]}; build the file again")
        first[key] = lineno
        out.append(rec)
    return out


def which_layout(folder: Path, bench: str, ours: str, theirs: tuple[str, ...]) -> str:
    """OURS or OFFICIAL, by the files in `folder`: our `ours` file, or any of the authors' `theirs`."""
    mine = (folder / ours).is_file()
    found = [t for t in theirs if (folder / t).is_file()]
    if mine and found:
        raise MosaicError(f"{bench}: {folder} holds both our {ours} and the authors' {', '.join(found)}; "
                          "keep one layout per folder (move the other) so it is clear which is scored")
    if mine:
        return OURS
    if found:
        return OFFICIAL
    raise MosaicError(f"{bench}: no {bench} files in {folder}: expected either our layout ({ours}, written by "
                      f"`mosaictool probe build {bench[-1]} --out <data root>`) or the authors' released layout "
                      f"({' / '.join(theirs)}); see `mosaictool evaluate --list`, or fix --data-root")


def read_json(path: Path, bench: str, kind: type):
    """A JSON file of the authors' release, which must hold a `kind` (dict or list) at the top."""
    data = parse_json(read_text(path, bench), path, bench)
    if not isinstance(data, kind):
        raise MosaicError(f"{bench}: {path}: expected a JSON {'object' if kind is dict else 'list'} at the top, "
                          f"as the authors' release has; got {type(data).__name__}")
    return data


def need(rec: dict, fields: tuple[str, ...], bench: str, where: str) -> None:
    """A record of the authors' files must have `fields`; `where` names it (file and key / index)."""
    missing = [k for k in fields if not isinstance(rec, dict) or k not in rec]
    if missing:
        raise MosaicError(f"{bench}: {where}: missing field(s) {', '.join(missing)} (not the authors' {bench} file?)")


def coco_name(image_id) -> str:
    """The authors' COCO val2014 file name for an image id (their load_image: zero-padded to 12)."""
    return f"COCO_val2014_{str(image_id).zfill(12)}.jpg"
