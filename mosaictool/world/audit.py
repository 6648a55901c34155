"""How truthful a texts file of the world is, measured against the world's own truth (`holds`).

For every record (it carries its `scene`) the texts that `template` wrote are read back as world
descriptions: a sub-graph's nouns, adjectives and relations through the world's word meanings
(`vocab.word_meanings`). A word the world has no meaning for ("right" as an object, "of" as a
relation, "orange cross" as one noun) makes the text *debris*: it cannot be checked, and it teaches
nothing about the world. The audit counts, per transform:

- negatives true of their own image (a negative should be false), and of those, how many the caption
  itself already says (`said_scene`: true of the objects, attributes and relations the caption
  mentions): those a text-only stage could have dropped; the rest is image content the caption never
  mentions, which no text-only stage can know;
- positives false of their own image (a positive should be true);
- in simulated batches, texts of one image that are true of another image of the batch (what a
  contrastive loss that treats them as negatives gets wrong), and how many of those the canonical
  keys catch (the text's `key` is in the other image's `subgraph_keys`, MosaiCLIP's P(i));
- graph negatives that carry debris.

Caption-level text negatives (NegCLIP swaps, shuffles) have no graph: counted, never checked.

On a world with noisy captions (`mosaictool world --caption-noise`) the same counts are also split
by the caption each text was made from (`noise`): left clean, the world's plain caption, or noisy
by one kind (a fragment by its form) or several. What noise does to MosaiCLIP's texts is read there:
a wrong attribute makes sub-graph positives false of the image, a dropped mention makes none, an
unrelated word may make a positive of words the world does not know (debris).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator

from mosaictool.world.captions import count_matching, holds
from mosaictool.world.vocab import CONVERSE, NUMBERS, attribute_kind, word_meanings

BATCH_SIZE = 32
BATCHES = 150


class _Debris(Exception):
    """A word the world has no meaning for."""


def _words(text) -> str:
    return " ".join(str(text or "").lower().split())


def describe(graph: dict) -> tuple[list[dict], list[tuple], list[tuple[int, object]]] | None:
    """A sub-graph ({objects, relations}) as `holds`'s descriptions and relations, plus count
    conditions (object index, count word); None for a description no object can fit ("a red blue
    star"). Raises _Debris on a word the world does not know."""
    meanings = word_meanings()
    descs, counts = [], []
    for k, node in enumerate(graph["objects"]):
        noun = _words(node.get("lemma") or node.get("noun"))
        shape = meanings["objects"].get(noun, meanings["objects"].get(_words(node.get("noun"))))
        if shape is None:
            raise _Debris(noun)
        desc: dict = {} if shape == "shape" else {"shape": shape}
        for word in node.get("attributes") or ():
            word = _words(word)
            kind = attribute_kind(word)
            if kind is None:
                raise _Debris(word)
            value = meanings["attributes"][word]
            if desc.get(kind, value) != value:
                return None
            desc[kind] = value
        descs.append(desc)
        if node.get("count") is not None or node.get("plural"):
            counts.append((k, node.get("count")))
    rels = []
    for rel in graph["relations"]:
        pred = meanings["relations"].get(_words(rel["relation"]))
        if pred is None:
            raise _Debris(_words(rel["relation"]))
        rels.append((rel["subject"], pred, rel["object"]))
    return descs, rels, counts


def is_true(description, scene: dict) -> bool:
    """Whether a `describe` result holds in a scene: the existential reading, with exact counts
    ("two circles": exactly two) and plurals without a count meaning at least two."""
    if description is None:
        return False
    descs, rels, counts = description
    for k, count in counts:
        n = count_matching(descs[k], scene)
        word = _words(count)
        if word in NUMBERS:
            if n != NUMBERS.index(word):
                return False
        elif word.isdigit():
            if n != int(word):
                return False
        elif n < 2:
            return False
    # a counted group outside any relation ("two shapes") is checked by its count alone: its
    # objects may be the ones other phrases name
    linked = {i for s, _, o in rels for i in (s, o)}
    counted = {k for k, _ in counts}
    keep = [k for k in range(len(descs)) if k in linked or k not in counted]
    index = {k: i for i, k in enumerate(keep)}
    return holds([descs[k] for k in keep], [(index[s], p, index[o]) for s, p, o in rels], scene)


def caption_mentions(record: dict) -> dict | None:
    """The `mentions` of the record's own caption: the world's, or, for a record whose caption is
    the world's `plain_caption` (the demo's second caption of every image), the mentions of that
    plain form (`captions.plain_caption`: the first relation, else the named objects, else every
    object, by colour and shape)."""
    mentions = record.get("mentions")
    if not isinstance(mentions, dict):
        return None
    if record.get("caption") != record.get("plain_caption") or not isinstance(record.get("scene"), dict):
        return mentions
    clean = record.get("clean_mentions")  # a noisy world: the plain caption was made from the clean one
    objs, said = record["scene"]["objects"], (clean if isinstance(clean, dict) else mentions)["mentions"]

    def mention(k: int) -> dict:
        return {"object": k, "noun": objs[k]["shape"], "attributes": [objs[k]["colour"]], "count": None}

    relations = (clean if isinstance(clean, dict) else mentions).get("relations")
    if relations:
        rel = relations[0]
        pair = [mention(said[rel["subject"]]["object"]), mention(said[rel["object"]]["object"])]
        return {"mentions": pair, "relations": [{**rel, "subject": 0, "object": 1}]}
    named = list(dict.fromkeys(m["object"] for m in said if m.get("object") is not None)) or list(range(len(objs)))
    return {"mentions": [mention(k) for k in named], "relations": []}


def said_scene(mentions: dict) -> dict:
    """A scene of what a caption says, from the world's `mentions`: each mentioned object with only
    its mentioned shape and attributes (an unsaid one is None, which no description matches), and
    only the stated relations and their converses. A negative true of it (`is_said`) is entailed by
    the caption. Count phrases ("two shapes") name no object and are left out."""
    meanings = word_meanings()
    objects: list[dict] = []
    where: dict = {}  # scene object (or mention, when it names none) -> said object
    of_mention: dict[int, int] = {}
    for m, mention in enumerate(mentions.get("mentions") or ()):
        if mention.get("count") is not None:
            continue
        ref = ("object", mention["object"]) if mention.get("object") is not None else ("mention", m)
        if ref not in where:
            where[ref] = len(objects)
            objects.append({"shape": None, "colour": None, "size": None, "texture": None})
        obj = objects[where[ref]]
        of_mention[m] = where[ref]
        shape = meanings["objects"].get(_words(mention.get("noun")))
        if shape not in (None, "shape"):
            obj["shape"] = shape
        for word in mention.get("attributes") or ():
            kind = attribute_kind(_words(word))
            if kind is not None:
                obj[kind] = meanings["attributes"][_words(word)]
    relations = []
    for rel in mentions.get("relations") or ():
        s, o, pred = of_mention.get(rel["subject"]), of_mention.get(rel["object"]), rel.get("relation")
        if s is None or o is None or pred not in CONVERSE:
            continue
        relations += [{"subject": s, "relation": pred, "object": o}, {"subject": o, "relation": CONVERSE[pred], "object": s}]
    return {"objects": objects, "relations": relations}


def is_said(description, said: dict) -> bool:
    """Whether a `describe` result is true of a `said_scene`. A count is never read as said: the
    caption's objects are not all the image's ("two shapes" is not said by "a star above a cross")."""
    return description is not None and not description[2] and is_true(description, said)


def _mentions_graph(mentions: dict) -> dict:
    """The caption's own graph, from the world's `mentions` (what a perfect parser would return);
    two mentions of one scene object are one node."""
    objects, node_of, where = [], {}, {}
    for m, mention in enumerate(mentions["mentions"]):
        obj = mention.get("object")
        if obj is not None and obj in where:
            node = objects[where[obj]]
            node["attributes"] = list(dict.fromkeys(node["attributes"] + list(mention["attributes"])))
            node_of[m] = where[obj]
            continue
        node_of[m] = len(objects)
        if obj is not None:
            where[obj] = len(objects)
        objects.append({"lemma": mention["noun"], "attributes": list(mention["attributes"]), "count": mention.get("count")})
    relations = [
        {"subject": node_of[r["subject"]], "object": node_of[r["object"]], "relation": r["relation"]}
        for r in mentions.get("relations") or ()
    ]
    return {"objects": objects, "relations": relations}


def _texts(record: dict) -> list[dict]:
    """Every text of a record with its group, its graph (None: no graph) and its key."""
    texts = record.get("texts") or {}
    subgraphs = record.get("subgraphs") or []
    out = []
    for p in texts.get("positives") or ():
        graph = None
        if p.get("subgraph") is not None and p["subgraph"] < len(subgraphs):
            graph = subgraphs[p["subgraph"]]
        elif p.get("kind") == "caption" and caption_mentions(record) is not None:
            graph = _mentions_graph(caption_mentions(record))
        out.append({"side": "positive", "group": f"positive:{p.get('kind')}", "graph": graph, "key": p.get("key")})
    # template renders graph negatives in order and drops duplicates: match each text back to the
    # first unused graph negative with the same provenance
    pool: dict[tuple, list[dict]] = {}
    for n in record.get("negatives") or ():
        if n.get("kind") == "graph":
            pool.setdefault((n.get("transform"), n.get("slot"), n.get("from"), n.get("to")), []).append(n)
    for n in texts.get("negatives") or ():
        graph = None
        if n.get("kind") == "graph":
            matches = pool.get((n.get("transform"), n.get("slot"), n.get("from"), n.get("to"))) or []
            graph = matches.pop(0)["graph"] if matches else None
        out.append({"side": "negative", "group": n.get("transform") or "?", "kind": n.get("kind"), "graph": graph, "key": n.get("key")})
    return out


def _read(text: dict):
    """(debris word or None, description or None)."""
    if text["graph"] is None:
        return None, None
    try:
        return None, describe(text["graph"])
    except _Debris as e:
        return str(e), None


WORLD_FIELDS = ("scene", "mentions", "plain_caption", "clean_caption", "clean_mentions", "noise")  # the last three: noisy worlds only


def with_world(records: Iterable[dict], world_dir) -> Iterator[dict]:
    """`records` with the world's truth (WORLD_FIELDS) filled in where they lack a `scene`: from the
    train record of the same id, else of the same image, in WORLD_DIR/train/captions.jsonl."""
    from pathlib import Path

    from mosaictool.errors import MosaicError
    from mosaictool.io import read_records

    captions = Path(world_dir) / "train" / "captions.jsonl"
    if not captions.is_file():
        raise MosaicError(f"{captions} not found: --world takes the folder `mosaictool world --out DIR` wrote")
    by_id, by_image = {}, {}
    for rec in read_records(str(captions)):
        truth = {k: rec[k] for k in WORLD_FIELDS if k in rec}
        by_id[rec.get("id")] = truth
        by_image.setdefault(rec.get("image"), truth)
    for record in records:
        if not isinstance(record.get("scene"), dict):
            truth = by_id.get(record.get("id")) or by_image.get(record.get("image"))
            if truth is not None:
                record = {**record, **truth}
        yield record


def noise_group(record: dict) -> str | None:
    """Which caption the record's texts come from: None on a world without noise, "plain" (the
    world's plain caption, never noisy), "clean", the kind of its one noise entry (a fragment:
    "fragment:<form>"), or "several kinds"."""
    noise = record.get("noise")
    if not isinstance(noise, list):
        return None
    if record.get("caption") == record.get("plain_caption"):
        return "plain"
    if not noise:
        return "clean"
    if len(noise) > 1:
        return "several kinds"
    return f"fragment:{noise[0].get('form')}" if noise[0].get("kind") == "fragment" else str(noise[0].get("kind"))


NOISE_COUNTS = ("records", "subgraph_positives", "subgraph_debris", "subgraph_checked", "subgraph_false", "caption_checked",
                "caption_false", "negatives", "negatives_debris", "negatives_checked", "negatives_true")


def _count_noise(rows: dict, group: str | None, record_texts: list[tuple]) -> None:
    """Add a record's texts ((text, debris, truth) of each) to its noise group's row and, when noisy, to "noisy"."""
    if group is None:
        return
    for name in [group] + (["noisy"] if group not in ("clean", "plain") else []):
        row = rows.setdefault(name, dict.fromkeys(NOISE_COUNTS, 0))
        row["records"] += 1
        for text, debris, truth in record_texts:
            if text["graph"] is None:
                continue
            if text["side"] == "negative":
                row["negatives"] += 1
                row["negatives_debris"] += debris
                row["negatives_checked"] += truth is not None
                row["negatives_true"] += bool(truth)
            elif text["group"] == "positive:caption":
                row["caption_checked"] += truth is not None
                row["caption_false"] += truth is False
            else:
                row["subgraph_positives"] += 1
                row["subgraph_debris"] += debris
                row["subgraph_checked"] += truth is not None
                row["subgraph_false"] += truth is False


def audit(records: Iterable[dict], *, batch_size: int = BATCH_SIZE, batches: int = BATCHES, seed: int = 0) -> dict:
    """The audit of a world texts file (module docstring). Deterministic for a given seed."""
    records = [r for r in records if isinstance(r.get("scene"), dict)]
    own: dict[str, dict[str, int]] = {}
    noise: dict[str, dict[str, int]] = {}
    read: list[list[tuple]] = []  # per record: (group, side, description, key) of its checkable texts
    for record in records:
        kept, checked = [], []
        mentions = caption_mentions(record)
        said = said_scene(mentions) if mentions is not None else None
        for text in _texts(record):
            row = own.setdefault(text["group"], {"n": 0, "graph": 0, "debris": 0, "checked": 0, "wrong": 0, "said": 0})
            row["n"] += 1
            if text["graph"] is None:
                continue
            row["graph"] += 1
            debris, description = _read(text)
            if debris is not None:
                row["debris"] += 1
                checked.append((text, True, None))
                continue
            row["checked"] += 1
            truth = is_true(description, record["scene"])
            checked.append((text, False, truth))
            row["wrong"] += truth if text["side"] == "negative" else not truth
            if truth and text["side"] == "negative" and said is not None:
                row["said"] += is_said(description, said)
            kept.append((text["group"], text["side"], description, text["key"]))
        read.append(kept)
        _count_noise(noise, noise_group(record), checked)

    n = len(records)
    cross = _cross(records, read, batch_size, batches, seed)
    result = {"records": n, "batch_size": batch_size, "batches": batches, "seed": seed, "own": own, "cross": cross,
              "summary": _summary(own)}
    if noise:  # a world without noise audits as it always did
        result["noise"] = noise
    return result


def _cross(records: list[dict], read: list[list[tuple]], batch_size: int, batches: int, seed: int) -> dict[str, dict[str, int]]:
    """Per group: the pairs of a text and another image of its simulated batch, how many of those the
    image makes true, and how many of these its sub-graph keys catch."""
    cross: dict[str, dict[str, int]] = {}
    rng = random.Random(seed)
    n = len(records)
    for _ in range(batches if n > 1 else 0):
        batch = rng.sample(range(n), min(batch_size, n))
        for i in batch:
            scene, image = records[i]["scene"], records[i].get("image")
            keys = set(records[i].get("subgraph_keys") or ())
            for j in batch:
                if j == i or (image is not None and records[j].get("image") == image):
                    continue  # the same picture (its other caption) is no other image
                for group, _side, description, key in read[j]:
                    row = cross.setdefault(group, {"pairs": 0, "true": 0, "caught": 0})
                    row["pairs"] += 1
                    if is_true(description, scene):
                        row["true"] += 1
                        row["caught"] += key is not None and key in keys
    return cross


def _share(a: int, b: int) -> float | None:
    return a / b if b else None


def _summary(own: dict) -> dict:
    neg = [r for g, r in own.items() if not g.startswith("positive:")]
    graph_neg = [r for r in neg if r["graph"]]
    pos = [r for g, r in own.items() if g.startswith("positive:")]
    return {
        "negatives_true": _share(sum(r["wrong"] for r in graph_neg), sum(r["checked"] for r in graph_neg)),
        # of the checked graph negatives: true and said by the caption / true by what it never mentions
        "negatives_true_said": _share(sum(r.get("said", 0) for r in graph_neg), sum(r["checked"] for r in graph_neg)),
        "negatives_true_unsaid": _share(sum(r["wrong"] - r.get("said", 0) for r in graph_neg), sum(r["checked"] for r in graph_neg)),
        "negatives_debris": _share(sum(r["debris"] for r in graph_neg), sum(r["graph"] for r in graph_neg)),
        "positives_false": _share(sum(r["wrong"] for r in pos), sum(r["checked"] for r in pos)),
        "positives_debris": _share(sum(r["debris"] for r in pos), sum(r["graph"] for r in pos)),
        "text_negatives_unchecked": sum(r["n"] - r["graph"] for r in neg),
    }


def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def audit_markdown(result: dict) -> str:
    """The audit as a markdown table (one row per positive kind / negative transform) and totals."""
    s = result["summary"]
    lines = [
        f"Texts audit against the world's truth ({result['records']} records; cross-image: {result['batches']} batches of "
        f"{result['batch_size']}): graph negatives true of their own image {_pct(s['negatives_true'])} (said by the caption "
        f"itself {_pct(s.get('negatives_true_said'))}, image content it never mentions "
        f"{_pct(s.get('negatives_true_unsaid'))}), graph negatives "
        f"with debris {_pct(s['negatives_debris'])}, positives false of their own image {_pct(s['positives_false'])}; "
        f"{s['text_negatives_unchecked']} caption-level text negatives not checked (no graph).",
        "",
        "| texts | n | debris | wrong for own image | of those, said by the caption | true of another batch image "
        "| of those, caught by keys |",
        "|---|---|---|---|---|---|---|",
    ]
    groups = sorted(set(result["own"]) | set(result["cross"]), key=lambda g: (not g.startswith("positive:"), g))
    for g in groups:
        o = result["own"].get(g, {"n": 0, "graph": 0, "debris": 0, "checked": 0, "wrong": 0})
        c = result["cross"].get(g, {"pairs": 0, "true": 0, "caught": 0})
        said = "–" if g.startswith("positive:") else _pct(_share(o.get("said", 0), o["wrong"]))
        lines.append(
            f"| {g} | {o['n']} | {_pct(_share(o['debris'], o['graph']))} | {_pct(_share(o['wrong'], o['checked']))} | {said} | "
            f"{_pct(_share(c['true'], c['pairs']))} | {_pct(_share(c['caught'], c['true']))} |"
        )
    lines.append("")
    lines.append("wrong for own image: a negative that is true, a positive that is false; said by the caption: true of what the "
                 "caption itself says (a text-only stage could drop it; the rest is image content the caption never mentions); "
                 "debris: a word the world has no meaning for.")
    if result.get("noise"):
        lines += ["", noise_markdown(result["noise"])]
    return "\n".join(lines)


NOISE_ORDER = ("plain", "clean", "noisy", "wrong_attribute", "dropped_mention", "fragment:truncated", "fragment:may_contain",
               "fragment:noun_list", "fragment:keywords", "unrelated_words", "several kinds")


def noise_markdown(noise: dict) -> str:
    """The noise table: per caption group, MosaiCLIP's sub-graph positives false of the image (and
    with debris), the caption positive false, the graph negatives true of the image."""
    lines = [
        ("Texts by the caption they come from (a noisy world: `world --caption-noise`; each noisy caption by its one kind, "
         "or several). False / true: of the texts checked; debris: of the texts with a graph."),
        "",
        "| caption | records | sub-graph positives | false of the image | debris | caption false | graph negatives "
        "| true of the image | debris |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for g in sorted(noise, key=lambda g: (NOISE_ORDER.index(g) if g in NOISE_ORDER else len(NOISE_ORDER), g)):
        r = noise[g]
        lines.append(
            f"| {g} | {r['records']} | {r['subgraph_positives']} | {_pct(_share(r['subgraph_false'], r['subgraph_checked']))} | "
            f"{_pct(_share(r['subgraph_debris'], r['subgraph_positives']))} | {_pct(_share(r['caption_false'], r['caption_checked']))} | "
            f"{r['negatives']} | {_pct(_share(r['negatives_true'], r['negatives_checked']))} | "
            f"{_pct(_share(r['negatives_debris'], r['negatives']))} |"
        )
    return "\n".join(lines)


def relation_prior_accuracy(items: Iterable[dict]) -> float:
    """What a reader blind to the image scores on the world's VG-Relation items ("the A is <rel> the
    B" vs its swap) when it knows the world's placement priors (scene.HEIGHT_RANK / LEFT_RANK): it
    takes the caption the priors favour, a coin flip where both shapes rank the same. The share of
    the relation column a text prior alone can win."""
    from mosaictool.world.scene import prior_order

    score, n = 0.0, 0
    for item in items:
        pred = item["relation_name"]
        subject, obj = (np.split()[-1] for np in item["true_caption"].split(f" is {pred} "))
        order = prior_order(subject, obj, 0 if pred in ("above", "below") else 1)
        score += 0.5 if order == 0 else (order > 0) == (pred in ("above", "to the left of"))
        n += 1
    return score / n if n else float("nan")


def relation_forms_prior_accuracy(records: Iterable[dict]) -> dict[str, float]:
    """What the same blind reader scores on the world's relation-form items (relforms/relation_forms.jsonl),
    in any form: the accuracy over every image (right on an agree image, wrong on a violate one, a coin
    flip on a neutral one) and its Winoground group score, 0 since its choice cannot follow the image."""
    credit = {"agree": 1.0, "violate": 0.0, "neutral": 0.5}
    images = [credit[p] for rec in records for p in rec["prior"]]
    return {"accuracy": sum(images) / len(images) if images else float("nan"), "group": 0.0}
