"""World generation speed (images/s) and how well `parse` reads the world's captions.

    python perf/world_speed.py                 # 2,000 train scenes with twins, 2 workers; parse 1,000 captions
    python perf/world_speed.py --train 20000   # the README's world size

Parse quality compares SceneGraphParser's graph of each train caption (via mosaictool's parse
stage) with the caption's `mentions`, the graph the generator knows it wrote:
  objects    - the parsed entities' lemmas are exactly the mentioned nouns, in order
  attributes - and each entity's adjectives are exactly the mentioned ones
  relations  - every stated relation is a parsed relation between the right two entities, with the
               right preposition (split by axis: SceneGraphParser reads "above"/"below"/"over"/
               "under"/"beneath"; "to the left of" only through parse's spatial-compound merge)
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from mosaictool.console import console_logging

DIRECTION_NOUNS = ("left", "right")


def parse_quality(records: list[dict]) -> dict:
    from mosaictool.stages.parse import parse

    stats = {"captions": 0, "objects": 0, "attributes": 0, "all": 0, "objects_attributes_right_but_direction_nouns": 0}
    rel_total = {"x": 0, "y": 0}
    rel_ok = {"x": 0, "y": 0}
    axis = {"to the left of": "x", "to the right of": "x", "above": "y", "below": "y"}
    for rec in parse(records, batch_size=256):
        g, m = rec["graph"], rec["mentions"]
        ents = g["entities"]
        want = [x["noun"] for x in m["mentions"]]
        objects_ok = [e["lemma_head"] for e in ents] == want
        # "to the left of" becomes an entity "left" (a SceneGraphParser limit): count the
        # captions that are right apart from that,
        # and spaCy's compound nouns ("orange triangle": a head with the colour inside) count as right
        kept = [e for e in ents if e["lemma_head"] not in DIRECTION_NOUNS]
        if len(kept) == len(want) and all(
            e["lemma_head"].split()[-1] == x["noun"]
            and sorted(e["attributes"] + e["lemma_head"].split()[:-1]) == sorted(x["attributes"])
            for e, x in zip(kept, m["mentions"])
        ):
            stats["objects_attributes_right_but_direction_nouns"] += 1
        attrs_ok = objects_ok and all(sorted(e["attributes"]) == sorted(x["attributes"]) for e, x in zip(ents, m["mentions"]))
        rels_ok = True
        for rel in m["relations"]:
            ax = axis[rel["relation"]]
            rel_total[ax] += 1
            found = objects_ok and any(r["subject"] == rel["subject"] and r["object"] == rel["object"]
                                       and r["relation"] == rel["text"] for r in g["relations"])
            rel_ok[ax] += found
            rels_ok &= found
        stats["captions"] += 1
        stats["objects"] += objects_ok
        stats["attributes"] += attrs_ok
        stats["all"] += attrs_ok and rels_ok
    n = stats["captions"]
    return {
        "captions": n,
        "objects_right": stats["objects"] / n,
        "objects_and_attributes_right": stats["attributes"] / n,
        "everything_right": stats["all"] / n,
        "objects_and_attributes_right_ignoring_direction_and_compounds": stats["objects_attributes_right_but_direction_nouns"] / n,
        "vertical_relations_right": rel_ok["y"] / max(1, rel_total["y"]),
        "horizontal_relations_right": rel_ok["x"] / max(1, rel_total["x"]),
    }


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--parse-sample", type=int, default=1000)
    args = ap.parse_args()
    from mosaictool.world import generate_world

    tmp = Path(tempfile.mkdtemp(prefix="world-speed-"))
    try:
        out = tmp / "world"
        t0 = time.perf_counter()
        info = generate_world(out, train=args.train, twins=True, workers=args.workers)
        dt = time.perf_counter() - t0
        c = info["counts"]
        n_images = sum(1 for p in out.rglob("*") if p.suffix in (".png", ".jpg"))
        print(f"world --train {args.train} --twins --workers {args.workers}: {dt:.1f}s, {n_images} images "
              f"({c['train']['records']} train), {n_images / dt:.0f} images/s")
        lines = (out / "train" / "captions.jsonl").read_text().splitlines()
        step = max(1, len(lines) // args.parse_sample)
        sample = [json.loads(line) for line in lines[::step][: args.parse_sample]]
        t0 = time.perf_counter()
        q = parse_quality(sample)
        print(f"parse quality on {q['captions']} train captions ({time.perf_counter() - t0:.1f}s):")
        for k, v in q.items():
            if k != "captions":
                print(f"  {k:30s} {v:6.1%}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
