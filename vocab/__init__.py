"""The vocabularies the graph stages draw from: objects N, attributes A, relations R (MosaiCLIP
App. B), antonym pairs, and irregular plurals.

A vocabulary is a folder of tab-separated files, each with a header line:

    objects.tsv      name  group     [count]   group = co-hyponym class (mammal, vehicle, shape, ...)
    attributes.tsv   name  category  [count]   category = colour, size, material, texture, state, ...
    relations.tsv    name  type      [count]   type = spatial, action, possessive, comparative
    antonyms.tsv     a     b                   optional; symmetric pairs of any of the three kinds
    plurals.tsv      singular  plural          optional; irregular plurals (the shipped list if absent)

Names are lower-case; relations are written as they read between two noun phrases ("next to",
"sitting on"). This folder holds the default vocabulary, written for mosaictool (no WordNet):
`load()` reads it, `load(path)` a user's (from `mosaictool vocab build` or `vocab import-vg`).
"""

from __future__ import annotations

import csv
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

from mosaictool.errors import MosaicError

DEFAULT_DIR = Path(__file__).resolve().parent
UNKNOWN = "other"  # group / category / type of a name whose kind is not known

_KINDS = (("objects", "group"), ("attributes", "category"), ("relations", "type"))


@dataclass
class Vocab:
    objects: dict[str, str]  # name -> group
    attributes: dict[str, str]  # name -> category
    relations: dict[str, str]  # name -> type
    antonym_pairs: list[tuple[str, str]] = field(default_factory=list)
    plurals: dict[str, str] = field(default_factory=dict)  # irregular singular -> plural
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> name -> count
    source: str = ""

    # Sorted tuples, so that sampling with a seeded RNG is reproducible across runs and machines.
    @functools.cached_property
    def object_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.objects))

    @functools.cached_property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.attributes))

    @functools.cached_property
    def relation_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.relations))

    @functools.cached_property
    def objects_by_group(self) -> dict[str, tuple[str, ...]]:
        return _group(self.objects)

    @functools.cached_property
    def attributes_by_category(self) -> dict[str, tuple[str, ...]]:
        return _group(self.attributes)

    @functools.cached_property
    def relations_by_type(self) -> dict[str, tuple[str, ...]]:
        return _group(self.relations)

    @functools.cached_property
    def antonyms(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, set[str]] = {}
        for a, b in self.antonym_pairs:
            out.setdefault(a, set()).add(b)
            out.setdefault(b, set()).add(a)
        return {k: tuple(sorted(v)) for k, v in out.items()}

    @functools.cached_property
    def _plural_forms(self) -> set[str]:
        return set(self.plurals.values())

    def group(self, noun: str) -> str:
        return self.objects.get(noun.lower(), UNKNOWN)

    def category(self, attribute: str) -> str:
        return self.attributes.get(attribute.lower(), UNKNOWN)

    def relation_type(self, relation: str) -> str:
        return self.relations.get(relation.lower(), UNKNOWN)

    def plural(self, noun: str) -> str:
        """The plural of a (possibly multi-word) noun: irregular list first, then English rules."""
        words = noun.split()
        if not words:
            return noun
        head = words[-1]
        if noun in self.plurals:
            return self.plurals[noun]
        if head in self.plurals:
            return " ".join(words[:-1] + [self.plurals[head]])
        if head in self._plural_forms:
            return noun
        if head.endswith(("s", "x", "z", "ch", "sh")):
            head += "es"
        elif head.endswith("y") and len(head) > 1 and head[-2] not in "aeiou":
            head = head[:-1] + "ies"
        else:
            head += "s"
        return " ".join(words[:-1] + [head])

    def summary(self) -> dict[str, dict[str, int]]:
        """Entry counts per group / category / type, for `vocab show`."""
        return {
            "objects": {k: len(v) for k, v in self.objects_by_group.items()},
            "attributes": {k: len(v) for k, v in self.attributes_by_category.items()},
            "relations": {k: len(v) for k, v in self.relations_by_type.items()},
        }


def _group(mapping: dict[str, str]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for name in sorted(mapping):
        out.setdefault(mapping[name], []).append(name)
    return {k: tuple(v) for k, v in sorted(out.items())}


def _read_tsv(path: Path, columns: tuple[str, ...], optional: tuple[str, ...] = ()) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or any(c not in header for c in columns):
            raise MosaicError(f"{path}: the first line must be the header {chr(9).join(columns)!r}, got {header!r}")
        idx = {c: header.index(c) for c in columns + optional if c in header}
        rows = []
        for lineno, row in enumerate(reader, start=2):
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) < len(header):
                raise MosaicError(f"{path}:{lineno}: expected {len(header)} tab-separated columns, got {len(row)}")
            rows.append({c: row[i].strip() for c, i in idx.items()})
        return rows


def load(path: str | os.PathLike | None = None) -> Vocab:
    """Read a vocabulary folder; `None` is the default vocabulary shipped with mosaictool."""
    if path is None:
        return _load_default()
    return _load(Path(path))


@functools.lru_cache(maxsize=1)
def _load_default() -> Vocab:
    return _load(DEFAULT_DIR)


def _load(folder: Path) -> Vocab:
    if not folder.is_dir():
        raise MosaicError(f"{folder}: no such vocabulary folder (make one with `mosaictool vocab build` or `vocab import-vg`)")
    tables: dict[str, dict[str, str]] = {}
    counts: dict[str, dict[str, int]] = {}
    for kind, column in _KINDS:
        path = folder / f"{kind}.tsv"
        if not path.exists():
            raise MosaicError(f"{path}: missing; a vocabulary folder needs objects.tsv, attributes.tsv and relations.tsv")
        table, kind_counts = {}, {}
        for row in _read_tsv(path, ("name", column), ("count",)):
            name = row["name"].lower()
            if not name:
                continue
            table[name] = row[column] or UNKNOWN
            if row.get("count"):
                try:
                    kind_counts[name] = int(row["count"])
                except ValueError:
                    raise MosaicError(f"{path}: count {row['count']!r} of {name!r} is not an integer") from None
        tables[kind] = table
        if kind_counts:
            counts[kind] = kind_counts
    antonyms_path = folder / "antonyms.tsv"
    pairs = (
        [(r["a"].lower(), r["b"].lower()) for r in _read_tsv(antonyms_path, ("a", "b"))]
        if antonyms_path.exists()
        else []
    )
    plurals_path = folder / "plurals.tsv"
    if not plurals_path.exists():
        plurals_path = DEFAULT_DIR / "plurals.tsv"
    plurals = {r["singular"].lower(): r["plural"].lower() for r in _read_tsv(plurals_path, ("singular", "plural"))}
    return Vocab(
        objects=tables["objects"],
        attributes=tables["attributes"],
        relations=tables["relations"],
        antonym_pairs=pairs,
        plurals=plurals,
        counts=counts,
        source=str(folder),
    )


def save(vocab: Vocab, folder: str | os.PathLike) -> None:
    """Write `vocab` as a vocabulary folder (TSV files; a `count` column where counts are known)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for kind, column in _KINDS:
        table = getattr(vocab, kind)
        kind_counts = vocab.counts.get(kind, {})
        names = sorted(table, key=lambda n: (-kind_counts.get(n, 0), n))
        lines = [f"name\t{column}" + ("\tcount" if kind_counts else "")]
        for name in names:
            line = f"{name}\t{table[name]}"
            if kind_counts:
                line += f"\t{kind_counts.get(name, 0)}"
            lines.append(line)
        _write_text(folder / f"{kind}.tsv", "\n".join(lines) + "\n")
    _write_text(folder / "antonyms.tsv", "a\tb\n" + "".join(f"{a}\t{b}\n" for a, b in vocab.antonym_pairs))
    _write_text(folder / "plurals.tsv", "singular\tplural\n" + "".join(f"{s}\t{p}\n" for s, p in vocab.plurals.items()))


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
