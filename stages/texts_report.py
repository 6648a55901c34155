"""texts-report: what a texts file (`template` output) holds, per transform, for a human to judge.

Reads records with `texts` {positives, negatives} (and `caption`); for every text, one stratum: its
negative transform ("f_rel:swap", "replace:att", ...) or, for a positive, "positive:<kind>". Per
stratum it counts

- texts with an out-of-vocabulary word: a name in the text's canonical key (objects, attributes,
  relations) the vocabulary lacks; for a caption-level text negative, its replacement word (`to`);
- texts with an unseen combination: an object-attribute pair or subject-relation-object triple of the
  text's key (for a negative: one its positive lacks, so the change made it) whose count in the
  vocabulary's co-occurrence tables is 0 (`Vocab.attribute_count`, `Vocab.relation_count`);
- swaps of a symmetric relation (`Vocab.is_symmetric`): "a cup next to a plate" swapped is still true;

and, per caption, whether it got any graph negative, split by whether its graph had an attribute or
relation (the caption positive's key, else `subgraph_keys`). A vocabulary without the counts or the
symmetric flag gives None for those figures (shown "n/a"). Texts without a key (caption-level text
negatives) have no graph: their combinations and swaps are not applicable.

`report` also draws, per stratum, a fixed random sample (`Reservoir`: seeded by (seed, stratum) alone,
in bounded memory) for the review page (`markdown_page`, `html_page`): caption, the positive a negative changed, the text, its
transform and what changed.
"""

from __future__ import annotations

import html
import random
import re
from collections import Counter
from collections.abc import Iterable

from mosaictool.stages.subgraph import parse_has_attribute_or_relation

_RELATION = re.compile(r"^(.*?) >(.+?)> (.*)$")
_NODE = re.compile(r"^([^#\[]+)(?:#([^\[]*))?(?:\[(.*)\])?$")
NOT_APPLICABLE = "–"
TOP_OOV = 20  # the out-of-vocabulary names the report lists, most frequent first
NO_COUNTS = "n/a (vocabulary has no counts)"


def parse_node(text: str) -> tuple[str, tuple[str, ...]]:
    """`noun#count[attr,attr]` (subgraph._node_string) -> (noun, attributes)."""
    match = _NODE.match(text.strip())
    if match is None:
        return text.strip(), ()
    attributes = tuple(a for a in (match.group(3) or "").split(",") if a)
    return match.group(1), attributes


def parse_key(key: str) -> tuple[list[tuple[str, tuple[str, ...]]], list[tuple[str, str, str]]]:
    """A canonical sub-graph key (subgraph.canonical_key) -> its objects (noun, attributes) and its
    relations (subject noun, relation, object noun)."""
    objects, triples = [], []
    for part in key.split(" & "):
        match = _RELATION.match(part)
        if match is None:
            objects.append(parse_node(part))
            continue
        subject, object_ = parse_node(match.group(1)), parse_node(match.group(3))
        objects += [subject, object_]
        triples.append((subject[0], match.group(2), object_[0]))
    return objects, triples


def combinations(key: str | None) -> set[tuple]:
    """The object-attribute pairs and subject-relation-object triples a key states."""
    if not key:
        return set()
    objects, triples = parse_key(key)
    return {(noun, attr) for noun, attrs in objects for attr in attrs} | set(triples)


def has_attribute_or_relation(key: str | None) -> bool:
    return bool(key) and ("[" in key or " >" in key)


class VocabView:
    """What the report asks of a vocabulary: known names, and, where it has them, co-occurrence
    counts and symmetric relations."""

    def __init__(self, vocab):
        self.vocab = vocab
        self.objects = set(vocab.objects) | set(vocab.synonyms.get("objects", {})) | set(vocab.synonyms.get("objects", {}).values())
        self.attributes = (set(vocab.attributes) | set(vocab.synonyms.get("attributes", {}))
                           | set(vocab.synonyms.get("attributes", {}).values()))
        self.relations = (set(vocab.relations) | set(vocab.synonyms.get("relations", {}))
                          | set(vocab.synonyms.get("relations", {}).values()))
        self.words = self.objects | self.attributes | self.relations | {vocab.plural(o) for o in self.objects}
        # The shipped vocabulary has no co-occurrence counts (`vocab build` makes them): "n/a", not "all unseen"
        self.has_counts = bool(vocab.object_attributes or vocab.relation_triples)

    def symmetric(self, subj: str, rel: str, obj: str) -> bool:
        return self.vocab.is_symmetric(rel, subj, obj)  # "with" is symmetric between people and animals only

    def unknown(self, key: str) -> list[str]:
        objects, triples = parse_key(key)
        names = [n for n, _ in objects if n not in self.objects]
        names += [a for _, attrs in objects for a in attrs if a not in self.attributes]
        names += [r for _, r, _ in triples if r not in self.relations]
        return sorted(set(names))

    def unseen(self, combos: Iterable[tuple]) -> list[str]:
        out = []
        for combo in sorted(combos):
            if len(combo) == 2:
                if self.vocab.attribute_count(combo[0], combo[1]) == 0:
                    out.append(f"{combo[1]} {combo[0]}")
            elif self.vocab.relation_count(*combo) == 0:
                out.append(" ".join(combo))
        return out


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9']+", text.lower()))


def inspect_text(entry: dict, positive_key: str | None, view: VocabView, *, negative: bool, caption: str = "") -> dict:
    """Flags of one text: `oov` (words the vocabulary lacks), `unseen` (combinations never counted),
    `symmetric` (a swap of a symmetric relation); each None where it does not apply or the
    vocabulary cannot tell."""
    key = entry.get("key")
    out: dict = {"oov": None, "unseen": None, "symmetric": None}
    if key:
        out["oov"] = view.unknown(key)
        if view.has_counts:
            combos = combinations(key) - (combinations(positive_key) if negative else set())
            out["unseen"] = view.unseen(combos)
        if negative and entry.get("slot") == "objects":
            out["symmetric"] = any(view.symmetric(*triple) for triple in parse_key(key)[1])
    elif negative and entry.get("to") and not _words(str(entry["to"])) <= _words(caption):  # a swap brings no new word
        to = " ".join(str(entry["to"]).lower().split())
        out["oov"] = [] if to in view.words else [to]
    return out


def stratum_of(entry: dict, negative: bool) -> str:
    if negative:
        return str(entry.get("transform") or entry.get("kind") or "negative")
    return f"positive:{entry.get('kind') or 'text'}"


def changed(entry: dict) -> str:
    """What a negative changed, as read from its slot, from and to ("objects: towels|shower -> shower|towels")."""
    before, after, slot = entry.get("from"), entry.get("to"), entry.get("slot")
    if before is None and after is None:
        return NOT_APPLICABLE
    return f"{slot + ': ' if slot else ''}{before if before is not None else ''} -> {after if after is not None else ''}"


def _share(counter: Counter, name: str) -> float | None:
    n = counter[f"{name}_n"]
    return counter[name] / n if n else None


def report(records: Iterable[dict], vocab, *, sample: int = 20, seed: int = 0) -> dict:
    """The figures and the review sample of a texts file's records (each with a `texts` dict)."""
    view = VocabView(vocab)
    strata: dict[str, Counter] = {}
    samples: dict[str, Reservoir] = {}
    zero, oov_names = Counter(), Counter()
    for record in records:
        texts = record["texts"]
        positives = texts.get("positives") or []
        negatives = texts.get("negatives") or []
        caption_key = next((p.get("key") for p in positives if p.get("kind") == "caption"), None)
        keys = [caption_key] if caption_key else (record.get("subgraph_keys") or [p.get("key") for p in positives])
        had = any(has_attribute_or_relation(k) for k in keys)
        parsed = parse_has_attribute_or_relation(record.get("graph"))
        zero["captions"] += 1
        zero["had"] += had
        zero["parse_had"] += parsed
        if not any(n.get("kind") == "graph" for n in negatives):
            zero["zero_had" if had else "zero_none"] += 1
            zero["zero_parse_had"] += parsed
        for negative, entries in ((False, positives), (True, negatives)):
            for entry in entries:
                index = entry.get("positive")
                has_positive = isinstance(index, int) and 0 <= index < len(positives)
                positive_key = positives[index].get("key") if has_positive else None
                flags = inspect_text(entry, positive_key, view, negative=negative, caption=record.get("caption") or "")
                oov_names.update(flags["oov"] or ())
                name = stratum_of(entry, negative)
                counter = strata.setdefault(name, Counter())
                counter["n"] += 1
                counter["object_swaps"] += negative and bool(entry.get("key")) and entry.get("slot") == "objects"
                for flag, value in flags.items():
                    if value is not None:
                        counter[f"{flag}_n"] += 1
                        counter[flag] += bool(value)
                positive = positives[index]["text"] if negative and has_positive else NOT_APPLICABLE
                if name not in samples:
                    samples[name] = Reservoir(sample, seed, name)
                samples[name].add({
                    "id": record.get("id"), "caption": record.get("caption") or "", "positive": positive, "text": entry["text"],
                    "transform": name,
                    "changed": changed(entry) if negative else NOT_APPLICABLE, **flags,
                })
    rows = [
        {"transform": name, "n": c["n"], "oov": _share(c, "oov"), "unseen": _share(c, "unseen"), "symmetric": _share(c, "symmetric"),
         "object_swaps": c["object_swaps"]}
        for name, c in sorted(strata.items(), key=lambda kv: (not kv[0].startswith("positive:"), kv[0]))
    ]
    return {
        "rows": rows, "zero_graph_negatives": dict(zero), "oov_names": oov_names.most_common(TOP_OOV),
        "has_counts": view.has_counts,
        "sample": [item for name in sorted(samples) for item in samples[name].items()], "sample_per_transform": sample, "seed": seed,
    }


class Reservoir:
    """A uniform sample of up to `k` items of a stream of unknown length, in bounded memory
    (Vitter 1985, Algorithm R), drawn by an RNG seeded with (seed, stratum) alone: the same items in
    the same order give the same sample whatever the other strata hold."""

    def __init__(self, k: int, seed: int, stratum: str):
        self.k, self.seen, self.kept = k, 0, []
        self.rng = random.Random(f"{seed}\x1f{stratum}")

    def add(self, item: dict) -> None:
        position = self.seen
        self.seen += 1
        if len(self.kept) < self.k:
            self.kept.append((position, item))
        elif self.k:
            j = self.rng.randrange(self.seen)
            if j < self.k:
                self.kept[j] = (position, item)

    def items(self) -> list[dict]:
        """The sample in input order, each with `of`: how many items the stratum had."""
        return [{**item, "of": self.seen} for _, item in sorted(self.kept, key=lambda pi: pi[0])]


def _pct(value: float | None, missing: str) -> str:
    return missing if value is None else f"{value:.1%}"


def summary_rows(result: dict) -> list[list[str]]:
    """The per-transform table: header, then one row per stratum."""
    no_counts = NOT_APPLICABLE if result["has_counts"] else NO_COUNTS
    table = [["transform", "texts", "out-of-vocabulary", "unseen combination", "symmetric-relation swap"]]
    for row in result["rows"]:
        table.append([
            row["transform"], f"{row['n']:,}", _pct(row["oov"], NOT_APPLICABLE), _pct(row["unseen"], no_counts),
            _pct(row["symmetric"], NOT_APPLICABLE),
        ])
    return table


def zero_line(result: dict) -> str:
    z = result["zero_graph_negatives"]
    captions, had = z.get("captions", 0), z.get("had", 0)
    zero = z.get("zero_had", 0) + z.get("zero_none", 0)
    if not captions:
        return "no captions"

    def share(part: int, whole: int) -> str:
        return f"{part:,} of {whole:,} ({part / whole:.1%})" if whole else "0 of 0"

    # Two bases: the sub-graphs decompose kept (the caption positive's key) and the parse before it; a
    # relation decompose drops as unsaid or ambiguous counts against the second, never the first.
    line = (f"captions with zero graph negatives: {share(zero, captions)}; of those whose kept graph had an attribute or relation: "
            f"{share(z.get('zero_had', 0), had)}; of those whose kept graph had none: {share(z.get('zero_none', 0), captions - had)}")
    if "parse_had" in z:
        line += f"; of those whose parse had an attribute or relation: {share(z.get('zero_parse_had', 0), z['parse_had'])}"
    return line


def _md(text) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _flags(item: dict) -> str:
    out = []
    if item["oov"]:
        out.append("out-of-vocabulary: " + ", ".join(item["oov"]))
    if item["unseen"]:
        out.append("unseen: " + ", ".join(item["unseen"]))
    if item["symmetric"]:
        out.append("symmetric-relation swap")
    return "; ".join(out)


def summary_markdown(result: dict) -> str:
    table = summary_rows(result)
    lines = ["| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in table[1:]]
    return "\n".join(lines) + "\n\n" + zero_line(result) + "\n\n" + oov_line(result) + "\n"


def oov_line(result: dict) -> str:
    names = ", ".join(f"{name} ({n:,})" for name, n in result["oov_names"]) or "none"
    return f"most frequent out-of-vocabulary names (texts): {names}"


def markdown_page(result: dict, source: str) -> str:
    """The review page: the summary, then the sample per transform as a table."""
    parts = [f"# Texts report: {_md(source)}\n", summary_markdown(result),
             f"\n## Review sample\n\nUp to {result['sample_per_transform']} texts per transform, seed {result['seed']}.\n"]
    current = None
    for item in result["sample"]:
        if item["transform"] != current:
            current = item["transform"]
            parts.append(f"\n### {_md(current)} ({item['of']:,} texts)\n")
            parts.append("| id | caption | positive it changed | text | what changed | flags |\n|---|---|---|---|---|---|")
        cells = (item["id"], item["caption"], item["positive"], item["text"], item["changed"], _flags(item))
        parts.append("| " + " | ".join(_md(c) for c in cells) + " |")
    return "\n".join(parts) + "\n"


def html_page(result: dict, source: str) -> str:
    """The review page as one self-contained HTML file."""
    e = html.escape
    table = summary_rows(result)
    out = ["<!doctype html>", "<html><head><meta charset=\"utf-8\">", f"<title>Texts report: {e(source)}</title>",
           "<style>body{font-family:sans-serif;max-width:80em;margin:auto}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:.2em .5em;vertical-align:top;text-align:left}</style></head><body>",
           f"<h1>Texts report: {e(source)}</h1>", "<table>",
           "<tr>" + "".join(f"<th>{e(c)}</th>" for c in table[0]) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in table[1:]]
    out += ["</table>", f"<p>{e(zero_line(result))}</p>", f"<p>{e(oov_line(result))}</p>", "<h2>Review sample</h2>",
            f"<p>Up to {result['sample_per_transform']} texts per transform, seed {result['seed']}.</p>"]
    current = None
    for item in result["sample"]:
        if item["transform"] != current:
            if current is not None:
                out.append("</table>")
            current = item["transform"]
            out += [f"<h3>{e(current)} ({item['of']:,} texts)</h3>", "<table>",
                    "<tr><th>id</th><th>caption</th><th>positive it changed</th><th>text</th><th>what changed</th><th>flags</th></tr>"]
        cells = (item["id"], item["caption"], item["positive"], item["text"], item["changed"], _flags(item))
        out.append("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in cells) + "</tr>")
    if current is not None:
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
