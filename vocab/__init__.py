"""The vocabularies the graph stages draw from: objects N, attributes A, relations R (MosaiCLIP
App. B), antonym pairs, and irregular plurals.

A vocabulary is a folder of tab-separated files, each with a header line:

    objects.tsv      name  group     [count]   group = co-hyponym class (mammal, vehicle, shape, ...)
    attributes.tsv   name  category  [count]   category = colour, size, material, texture, state, ...
    relations.tsv    name  type      [count]   type = spatial, action, possessive, comparative
    antonyms.tsv     a     b                   optional; symmetric pairs of any of the three kinds
    plurals.tsv      singular  plural          optional; irregular plurals (the shipped list if absent)
    synonyms.tsv     kind  name  head          optional; `name` means the same as `head` (kind: objects,
                                               attributes or relations); a head stands for its group
    hypernyms.tsv    kind  name  hypernym      optional; `hypernym` is true of every `name` ("star" ->
                                               "shape"), transitively

Synonym groups and hypernyms keep negatives false: `negate` never replaces a word by one of its own
group, its hypernyms or its hyponyms (`Vocab.unsafe`), and canonical sub-graph keys name a word by
its group's head (`Vocab.head`), so that equal meaning gives equal keys.

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


@dataclass(eq=False)  # compared by identity: its lookups are cached per instance
class Vocab:
    objects: dict[str, str]  # name -> group
    attributes: dict[str, str]  # name -> category
    relations: dict[str, str]  # name -> type
    antonym_pairs: list[tuple[str, str]] = field(default_factory=list)
    plurals: dict[str, str] = field(default_factory=dict)  # irregular singular -> plural
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> name -> count
    source: str = ""
    synonyms: dict[str, dict[str, str]] = field(default_factory=dict)  # kind -> name -> head
    hypernyms: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)  # kind -> name -> hypernyms

    def head(self, kind: str, name: str) -> str:
        """The head of `name`'s synonym group (the name itself when it has none)."""
        return self._heads(kind).get(name, name)

    def broader(self, kind: str, name: str) -> tuple[str, ...]:
        """The heads of every hypernym of `name`, transitively, in a fixed order."""
        return self._broader(kind).get(self.head(kind, name), ())

    def unsafe(self, kind: str, name: str) -> frozenset[str]:
        """Every word that may be true whenever `name` is, or that `name` may be true of: its synonym
        group, its hypernyms' groups and its hyponyms' groups. A replacement drawn from these would
        not make a negative."""
        return self._unsafe(kind).get(self.head(kind, name), frozenset((name,)))

    @functools.lru_cache(maxsize=None)
    def _heads(self, kind: str) -> dict[str, str]:
        table = self.synonyms.get(kind, {})
        heads = {}
        for name in table:
            head, seen = name, set()
            while head in table and head not in seen:  # chains resolve to their end; cycles stop
                seen.add(head)
                head = table[head]
            heads[name] = head
        return heads

    @functools.lru_cache(maxsize=None)
    def _members(self, kind: str) -> dict[str, frozenset[str]]:
        out: dict[str, set[str]] = {}
        for name, head in self._heads(kind).items():
            out.setdefault(head, {head}).add(name)
        return {h: frozenset(m) for h, m in out.items()}

    @functools.lru_cache(maxsize=None)
    def _broader(self, kind: str) -> dict[str, tuple[str, ...]]:
        direct: dict[str, set[str]] = {}
        for name, hypers in self.hypernyms.get(kind, {}).items():
            direct.setdefault(self.head(kind, name), set()).update(self.head(kind, h) for h in hypers)
        out = {}
        for start in direct:
            found, todo = [], [start]
            while todo:
                for h in sorted(direct.get(todo.pop(), ())):
                    if h != start and h not in found:
                        found.append(h)
                        todo.append(h)
            out[start] = tuple(found)
        return out

    @functools.lru_cache(maxsize=None)
    def _unsafe(self, kind: str) -> dict[str, frozenset[str]]:
        members = self._members(kind)
        related: dict[str, set[str]] = {}
        for head, hypers in self._broader(kind).items():
            for h in hypers:
                related.setdefault(head, {head}).add(h)
                related.setdefault(h, {h}).add(head)  # the hyponym side
        for head in members:
            related.setdefault(head, {head})
        return {
            head: frozenset(w for h in heads for w in members.get(h, (h,)))
            for head, heads in related.items()
        }

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
    if not path.is_file():  # a folder, or a FIFO that would block the read forever
        raise MosaicError(f"{path}: not a regular file; a vocabulary folder holds TSV files (see `mosaictool vocab build`)")
    try:
        return _read_tsv_rows(path, columns, optional)
    except UnicodeDecodeError as e:
        raise MosaicError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start} of a read); save the file as UTF-8") from None


def _read_tsv_rows(path: Path, columns: tuple[str, ...], optional: tuple[str, ...]) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or any(c not in header for c in columns):
            raise MosaicError(f"{path}: the first line must be the header {chr(9).join(columns)!r}, got {header!r}")
        idx = {c: header.index(c) for c in columns + optional if c in header}
        rows = []
        for lineno, row in enumerate(_rows(reader, path), start=2):
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) < len(header):
                raise MosaicError(f"{path}:{lineno}: expected {len(header)} tab-separated columns, got {len(row)}")
            rows.append({c: row[i].strip() for c, i in idx.items()})
        return rows


def _rows(reader, path: Path):
    try:
        yield from reader
    except csv.Error as e:  # a cell over csv's field size limit (131,072 characters): no vocabulary word
        raise MosaicError(f"{path}:{reader.line_num}: {e}") from None


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
            label = row[column] or UNKNOWN
            if table.get(name, label) != label:
                raise MosaicError(f"{path}: {name!r} is listed twice, with {column} {table[name]!r} and {label!r}; keep one")
            table[name] = label
            if row.get("count"):
                try:
                    kind_counts[name] = int(row["count"])
                except ValueError:
                    raise MosaicError(f"{path}: count {row['count']!r} of {name!r} is not an integer") from None
                if kind_counts[name] < 0:
                    raise MosaicError(f"{path}: count {row['count']!r} of {name!r} is negative")
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
    synonyms: dict[str, dict[str, str]] = {}
    if (folder / "synonyms.tsv").exists():
        for r in _read_tsv(folder / "synonyms.tsv", ("kind", "name", "head")):
            synonyms.setdefault(_kind(r["kind"], folder / "synonyms.tsv"), {})[r["name"].lower()] = r["head"].lower()
    hypernyms: dict[str, dict[str, tuple[str, ...]]] = {}
    if (folder / "hypernyms.tsv").exists():
        for r in _read_tsv(folder / "hypernyms.tsv", ("kind", "name", "hypernym")):
            table = hypernyms.setdefault(_kind(r["kind"], folder / "hypernyms.tsv"), {})
            table[r["name"].lower()] = table.get(r["name"].lower(), ()) + (r["hypernym"].lower(),)
    return Vocab(
        objects=tables["objects"],
        attributes=tables["attributes"],
        relations=tables["relations"],
        antonym_pairs=pairs,
        plurals=plurals,
        counts=counts,
        source=str(folder),
        synonyms=synonyms,
        hypernyms=hypernyms,
    )


def _kind(value: str, path: Path) -> str:
    if value not in ("objects", "attributes", "relations"):
        raise MosaicError(f"{path}: kind {value!r} must be objects, attributes or relations")
    return value


# the files `save` writes in a vocabulary folder
FILES = ("objects.tsv", "attributes.tsv", "relations.tsv", "antonyms.tsv", "plurals.tsv", "synonyms.tsv", "hypernyms.tsv")


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
    _write_text(folder / "synonyms.tsv", "kind\tname\thead\n" + "".join(
        f"{kind}\t{name}\t{head}\n" for kind in sorted(vocab.synonyms) for name, head in sorted(vocab.synonyms[kind].items())
    ))
    _write_text(folder / "hypernyms.tsv", "kind\tname\thypernym\n" + "".join(
        f"{kind}\t{name}\t{h}\n" for kind in sorted(vocab.hypernyms) for name, hs in sorted(vocab.hypernyms[kind].items()) for h in hs
    ))


def _write_text(path: Path, text: str) -> None:
    from mosaictool.atomic import write_text

    write_text(path, text)
