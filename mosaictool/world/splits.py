"""One item of each kind the world writes: a train record (with its twin), and the items of the
val/test benchmark files. Each function draws from its own seeded stream, renders its images into
`root` and returns the annotation row(s); none depends on any other item, so items can be made in
any order or process and the output stays byte-identical.
"""

from __future__ import annotations

import random
from pathlib import Path

from mosaictool.world.captions import (
    ATTRIBUTE_ORDER,
    canonical_np,
    change_shape,
    holds,
    noun_phrase,
    parts_text,
    plain_caption,
    plan_caption,
    render_caption,
    render_parts,
    swap_colours,
    twin_pair,
)
from mosaictool.world.noise import NOISE_KINDS, noisy_record
from mosaictool.world.render import encode, render
from mosaictool.world.scene import (
    ALL_COMPOUNDS,
    HELD_OUT_FACTS,
    SEEN_COMPOUNDS,
    arrange,
    binding_twin,
    cell_bounds,
    make_scene,
    prior_order,
    sample_objects,
    sample_scene,
    shape_twin,
    shows_held_out,
    twin,
)
from mosaictool.world.vocab import (
    COLOURS,
    HELD_OUT_OBJECTS,
    HELD_OUT_RELATIONS,
    RELATIONS,
    SHAPES,
    SIZES,
    TEXTURES,
)

TRAIN_OBJECT_COUNTS = (1, 2, 3, 4)
TRAIN_OBJECT_WEIGHTS = (0.1, 0.4, 0.3, 0.2)
COMPLEXITIES = tuple(range(4, 13))
ATTRIBUTE_VALUES = {"colour": COLOURS, "size": SIZES, "texture": TEXTURES, "shape": SHAPES}


def stream(seed: int, *key) -> random.Random:
    """An independent random stream per item: str seeds are hashed with SHA-512, not hash()."""
    return random.Random("/".join(["mosaic-world", str(seed), *map(str, key)]))


def save(image, root: Path, rel: str, fmt: str = "png") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode(image, fmt))


# --- train -------------------------------------------------------------------------------------------


def train_item(seed: int, index: int, image_size: int, twins: bool, binding_twins: bool = False, shape_twins: bool = False,
               caption_noise: float = 0.0, noise_kinds: tuple[str, ...] = NOISE_KINDS, *, root: Path) -> list[dict]:
    """A train record, followed by its counterfactual twins' records when asked (and when the caption
    states a relation): the arrangement twin (the first relation's two objects trade places) and the
    binding twin (they trade colours) and the shape twin (the first object changes shape). Scenes
    whose arrangement twin would show a held-out compound are redrawn whether or not twins are
    written, so twin options only add records.
    With caption_noise > 0 each record's caption is made noisy with that chance (world.noise), from
    a stream of its own: the scenes, images and clean captions are those of the clean world."""
    rng = stream(seed, "train", index)
    while True:
        n = rng.choices(TRAIN_OBJECT_COUNTS, TRAIN_OBJECT_WEIGHTS)[0]
        scene = sample_scene(rng, n, image_size, train=True)
        plan = plan_caption(rng, scene)
        pair = twin_pair(plan)
        twin_scene = twin(scene, *pair) if pair else None
        if twin_scene is None or not shows_held_out(twin_scene):
            break
    surface = rng.getrandbits(64)
    rid = f"train-{index:06d}"
    parts_of: dict[str, dict] = {}  # record id -> its caption's segments (the noise edits them)

    def caption_of(plan: dict, scene: dict, key: str) -> tuple[str, dict]:
        parts = parts_of[key] = render_parts(plan, scene, random.Random(surface))
        return parts_text(parts), parts["mentions"]

    caption, mentions = caption_of(plan, scene, rid)
    record = {"id": rid, "image": f"images/{index:06d}.png", "caption": caption, "plain_caption": plain_caption(mentions, scene),
              "scene": scene, "mentions": mentions, "hard_images": None, "twin_of": None, "twin_kind": None}
    save(render(scene), root, record["image"])
    out = [record]
    if twins and twin_scene is not None:
        text, graph = caption_of(plan, twin_scene, f"{rid}-twin")
        out.append({"id": f"{rid}-twin", "image": f"images/{index:06d}_twin.png", "caption": text,
                    "plain_caption": plain_caption(graph, twin_scene), "scene": twin_scene,
                    "mentions": graph, "hard_images": [rid], "twin_of": rid, "twin_kind": "arrangement"})
    first = next((c for c in plan["clauses"] if c[0] == "rel"), None)
    said_both = first is not None and "colour" in first[4] and "colour" in first[5]  # a pure binding swap
    said_shape = first is not None and "shape" in first[4]
    bound = binding_twin(scene, *pair) if binding_twins and said_both else None
    if bound is not None and not shows_held_out(bound):
        text, graph = caption_of(swap_colours(plan, *pair, scene), bound, f"{rid}-bind")
        if text != caption:
            out.append({"id": f"{rid}-bind", "image": f"images/{index:06d}_bind.png", "caption": text,
                        "plain_caption": plain_caption(graph, bound), "scene": bound,
                        "mentions": graph, "hard_images": [rid], "twin_of": rid, "twin_kind": "binding"})
    # The shape twin has its own stream: asking for it never changes the other records.
    shaped = shape_twin(scene, pair[0], stream(seed, "train-shape", index)) if shape_twins and said_shape else None
    if shaped is not None and not shows_held_out(shaped) and not any(c[0] == "count" for c in plan["clauses"]):
        text, graph = caption_of(change_shape(plan, pair[0], shaped["objects"][pair[0]]["shape"]), shaped, f"{rid}-shape")
        if text != caption:
            out.append({"id": f"{rid}-shape", "image": f"images/{index:06d}_shape.png", "caption": text,
                        "plain_caption": plain_caption(graph, shaped), "scene": shaped,
                        "mentions": graph, "hard_images": [rid], "twin_of": rid, "twin_kind": "shape"})
    for rec in out[1:]:
        save(render(rec["scene"]), root, rec["image"])
    if len(out) > 1:
        record["hard_images"] = [rec["id"] for rec in out[1:]]
    if caption_noise:
        out = [noisy_record(rec, parts_of[rec["id"]], stream(seed, "train-noise", rec["id"]), caption_noise, noise_kinds) for rec in out]
    return out


# --- ARO ---------------------------------------------------------------------------------------------


def full_box(image_size: int) -> dict:
    return {"bbox_x": 0, "bbox_y": 0, "bbox_w": image_size, "bbox_h": image_size}


def aro_relation_item(seed: int, split: str, index: int, image_size: int, *, root: Path) -> dict:
    """VG-Relation: "the A is <rel> the B" vs "the B is <rel> the A"."""
    rng = stream(seed, split, "aro-relation", index)
    pred = RELATIONS[index % len(RELATIONS)]
    while True:
        scene = sample_scene(rng, rng.choice((2, 3, 4)), image_size, train=True)
        pairs = [(r["subject"], r["object"]) for r in scene["relations"] if r["relation"] == pred]
        if pairs:
            break
    i, j = pairs[rng.randrange(len(pairs))]
    a, b = canonical_np(scene["objects"][i]), canonical_np(scene["objects"][j])
    name = f"relation_{index:05d}.png"
    save(render(scene), root / "aro" / "images", name)
    return {"image_path": name, **full_box(image_size), "true_caption": f"{a} is {pred} {b}",
            "false_caption": f"{b} is {pred} {a}", "relation_name": pred, "scene": scene}


def attribution_groups() -> list[tuple[str, str, str]]:
    """(attribute kind, first value, second value): colour, texture and size pairs, each unordered
    pair once (in vocabulary order), so that ARO's ≥25-per-group rule keeps every group."""
    groups = []
    for kind, values in (("colour", COLOURS), ("texture", TEXTURES), ("size", SIZES)):
        for x in range(len(values)):
            for y in range(x + 1, len(values)):
                groups.append((kind, values[x], values[y]))
    return groups


def aro_attribution_item(seed: int, split: str, index: int, image_size: int, *, root: Path) -> dict:
    """VG-Attribution: "the a0 X and the a1 Y" vs "the a1 X and the a0 Y"."""
    rng = stream(seed, split, "aro-attribution", index)
    groups = attribution_groups()
    kind, a0, a1 = groups[index % len(groups)]
    while True:
        objects = sample_objects(rng, rng.choice((2, 3)), SEEN_COMPOUNDS)
        objects[0][kind], objects[1][kind] = a0, a1
        compounds = [(o["colour"], o["shape"]) for o in objects]
        if objects[0]["shape"] == objects[1]["shape"] or len(set(compounds)) < len(compounds):
            continue
        if any(c in HELD_OUT_OBJECTS for c in compounds):
            continue
        scene = arrange(rng, objects, image_size)
        if shows_held_out(scene):
            continue
        x, y = scene["objects"][0]["shape"], scene["objects"][1]["shape"]
        if holds([{kind: a1, "shape": x}, {kind: a0, "shape": y}], [], scene):
            continue  # a distractor makes the swapped caption true
        break
    keys = (kind, "shape")
    true = f"{canonical_np(scene['objects'][0], keys)} and {canonical_np(scene['objects'][1], keys)}"
    false = f"{noun_phrase([a1, x], 'the')} and {noun_phrase([a0, y], 'the')}"
    name = f"attribution_{index:05d}.png"
    save(render(scene), root / "aro" / "images", name)
    return {"image_path": name, **full_box(image_size), "true_caption": true, "false_caption": false,
            "attributes": [a0, a1], "scene": scene}


# --- COCO-Order --------------------------------------------------------------------------------------


def order_item(seed: int, split: str, index: int, image_size: int, captions: int = 2, *, root: Path) -> dict:
    """An image with train-style captions that state relations (the evaluator perturbs their order)."""
    rng = stream(seed, split, "order", index)
    scene = sample_scene(rng, rng.choice((2, 3, 4)), image_size, train=True)
    texts = []
    while len(texts) < captions:
        plan = plan_caption(rng, scene)
        if not any(c[0] == "rel" for c in plan["clauses"]):
            continue
        text, _ = render_caption(plan, scene, rng)
        if text not in texts:
            texts.append(text)
    name = f"world/order_{index:05d}.png"
    save(render(scene), root / "coco", name)
    return {"image": name, "caption": texts, "scene": scene}


# --- CREPE -------------------------------------------------------------------------------------------


def _phrase(desc: dict) -> str:
    return noun_phrase([desc[k] for k in ATTRIBUTE_ORDER if k in desc] + [desc.get("shape", "shape")], "a")


def _relation_text(descs: list[dict], rels: list[tuple]) -> str:
    """"a X <rel> a Y that is <rel> a Z ...": a chain, each relation from object k to k+1."""
    parts = [_phrase(descs[0])]
    for k, (i, pred, j, *neg) in enumerate(rels):
        negated = bool(neg and neg[0])
        verb = ("is not " if negated else "is ") if k == 0 else ("that is not " if negated else "that is ")
        parts.append(f"{verb}{pred} {_phrase(descs[j])}")
    return " ".join(parts)


def _false_variants(descs, rels, scene, edits) -> list[str]:
    """The texts of the edited descriptions that are false of the scene, unique, in edit order."""
    out = []
    for new_descs, new_rels in edits:
        if holds(new_descs, new_rels, scene):
            continue
        text = _relation_text(new_descs, new_rels)
        if text not in out and text != _relation_text(descs, rels):
            out.append(text)
    return out


def _atom_edits(descs, rels):
    for k, d in enumerate(descs):
        for key in ("colour", "shape", "size", "texture"):
            if key in d:
                for v in ATTRIBUTE_VALUES[key]:
                    if v != d[key]:
                        yield [*descs[:k], {**d, key: v}, *descs[k + 1:]], rels
    for k, (i, pred, j, *_) in enumerate(rels):
        for p in RELATIONS:
            if p != pred:
                yield descs, [*rels[:k], (i, p, j), *rels[k + 1:]]


def _swap_edits(descs, rels):
    for a in range(len(descs)):
        for b in range(a + 1, len(descs)):
            for key in ("colour", "shape", "size", "texture"):
                if key in descs[a] and key in descs[b] and descs[a][key] != descs[b][key]:
                    new = [dict(d) for d in descs]
                    new[a][key], new[b][key] = descs[b][key], descs[a][key]
                    yield new, rels


def _negate_edits(descs, rels):
    for k, (i, pred, j, *_) in enumerate(rels):
        yield descs, [*rels[:k], (i, pred, j, True), *rels[k + 1:]]


def _pick(rng: random.Random, items: list[str], k: int) -> list[str]:
    return items if len(items) <= k else [items[x] for x in sorted(rng.sample(range(len(items)), k))]


def crepe_box(image_size: int) -> dict:
    return {"x": 0, "y": 0, "width": image_size, "height": image_size}


def systematicity_item(seed: int, split: str, index: int, image_size: int, unseen: bool, image_id: int, *, root: Path) -> dict:
    """"a c1 s1 <rel> a c2 s2"; unseen items contain a held-out object or relation compound, seen
    items none. Hard negatives: atom = one atom replaced; comp = the two objects' colours swapped, or
    the two objects trading places in the sentence; combined = both lists."""
    rng = stream(seed, split, "crepe-syst", "unseen" if unseen else "seen", index)
    while True:
        if unseen and index % 2 == 0:  # a held-out object compound
            colour, shape = HELD_OUT_OBJECTS[(index // 2) % len(HELD_OUT_OBJECTS)]
            others = sample_objects(rng, rng.choice((1, 2)), [c for c in ALL_COMPOUNDS if c != (colour, shape)])
            objects = [{"shape": shape, "colour": colour, "size": rng.choice(SIZES), "texture": rng.choice(TEXTURES)}, *others]
        elif unseen:  # a held-out relation compound
            s, pred, o = HELD_OUT_RELATIONS[(index // 2) % len(HELD_OUT_RELATIONS)]
            pool = [c for c in ALL_COMPOUNDS if c not in HELD_OUT_OBJECTS]
            a = rng.choice([c for c in pool if c[1] == s])
            b = rng.choice([c for c in pool if c[1] == o and c[0] != a[0]])
            objects = [{"shape": c[1], "colour": c[0], "size": rng.choice(SIZES), "texture": rng.choice(TEXTURES)} for c in (a, b)]
        else:
            objects = sample_objects(rng, rng.choice((2, 3)), SEEN_COMPOUNDS)
        scene = arrange(rng, objects, image_size)
        rels = [r for r in scene["relations"] if r["subject"] == 0 and r["object"] == 1]
        if unseen and index % 2 == 1:
            rels = [r for r in rels if (objects[0]["shape"], r["relation"], objects[1]["shape"]) in HELD_OUT_FACTS]
        if not rels or shows_held_out(scene) != unseen:
            continue
        pred = rels[rng.randrange(len(rels))]["relation"]
        descs = [{"colour": objects[0]["colour"], "shape": objects[0]["shape"]},
                 {"colour": objects[1]["colour"], "shape": objects[1]["shape"]}]
        chain = [(0, pred, 1)]
        atom = _pick(rng, _false_variants(descs, chain, scene, _atom_edits(descs, chain)), 4)
        comp = _false_variants(descs, chain, scene, [
            ([{**descs[0], "colour": descs[1]["colour"]}, {**descs[1], "colour": descs[0]["colour"]}], chain),
            ([descs[1], descs[0]], chain),
        ])
        if atom and comp:
            break
    save(render(scene), root / "crepe" / "VG_100K", f"{image_id}.jpg", "jpg")
    return {"image_id": image_id, "region_id": index, **crepe_box(image_size), "caption": _relation_text(descs, chain),
            "valid_hard_negs_atom": atom, "valid_hard_negs_comp": comp, "valid_hard_negs_combined": atom + comp}


def productivity_item(seed: int, split: str, complexity: int, index: int, image_size: int, image_id: int, *, root: Path) -> dict:
    """A caption of exactly `complexity` atoms (objects + attributes + relations, a chain of 2-4
    objects), and its atom / swap / negate hard negatives (up to 3 each, all false of the image)."""
    rng = stream(seed, split, "crepe-prod", complexity, index)
    feasible = [m for m in (2, 3, 4) if 2 * m - 1 <= complexity <= 2 * m - 1 + 3 * m]
    while True:
        m = rng.choice(feasible)
        scene = sample_scene(rng, rng.randint(m, 4), image_size, train=True)
        objs = scene["objects"]
        chosen = rng.sample(range(len(objs)), m)
        chain = []
        for k in range(m - 1):
            preds = [r["relation"] for r in scene["relations"] if r["subject"] == chosen[k] and r["object"] == chosen[k + 1]]
            chain.append((k, preds[rng.randrange(len(preds))], k + 1))
        budget = complexity - (2 * m - 1)
        slots = [(k, key) for k in range(m) for key in ("colour", "size", "texture")]
        said = set(rng.sample(slots, budget))
        descs = [{key: objs[o][key] for key in ("size", "texture", "colour", "shape") if key == "shape" or (k, key) in said}
                 for k, o in enumerate(chosen)]
        negs = {
            "atom": _pick(rng, _false_variants(descs, chain, scene, _atom_edits(descs, chain)), 3),
            "swap": _pick(rng, _false_variants(descs, chain, scene, _swap_edits(descs, chain)), 3),
            "negate": _pick(rng, _false_variants(descs, chain, scene, _negate_edits(descs, chain)), 3),
        }
        if all(negs.values()):
            break
    save(render(scene), root / "crepe" / "VG_100K", f"{image_id}.jpg", "jpg")
    return {"image_id": image_id, **crepe_box(image_size), "caption": _relation_text(descs, chain), "hard_negs": negs,
            "complexity": complexity}


# --- zero-shot classification ------------------------------------------------------------------------


def zeroshot_classes(task: str) -> list[str]:
    if task == "shape":
        return list(SHAPES)
    if task == "colour":
        return list(COLOURS)
    return [f"{c} {s}" for c, s in SEEN_COMPOUNDS]


ZEROSHOT_TEMPLATES = {
    "shape": ("a {c}.", "a picture of a {c}.", "there is a {c}."),
    "colour": ("a {c} shape.", "a {c} object.", "something {c}."),
    "object": ("a {c}.", "a picture of a {c}.", "there is a {c}."),
}


def zeroshot_item(seed: int, split: str, task: str, index: int, image_size: int, *, root: Path) -> str:
    """One single-object image of class index % n_classes; returns its path under the task folder."""
    rng = stream(seed, split, "zeroshot", task, index)
    classes = zeroshot_classes(task)
    label = index % len(classes)
    if task == "shape":
        compound = rng.choice([c for c in SEEN_COMPOUNDS if c[1] == classes[label]])
    elif task == "colour":
        compound = rng.choice([c for c in SEEN_COMPOUNDS if c[0] == classes[label]])
    else:
        compound = SEEN_COMPOUNDS[label]
    obj = {"shape": compound[1], "colour": compound[0], "size": rng.choice(SIZES), "texture": rng.choice(TEXTURES)}
    scene = arrange(rng, [obj], image_size)
    rel = f"test/{label:02d}/{index:05d}.png"
    save(render(scene), root / "zeroshot" / task, rel)
    return rel


# --- Probe-C and Probe-B (Schiappa et al. 2023) -------------------------------------------------------------------
# No Probe-R: its swaps are relations and subjects that are implausible because the data never pairs
# them (a man "garnished with" snow). The world's four predicates are geometric, so every predicate is
# possible between any two shapes, and the only never-seen triples are the held-out compounds, which
# the world makes plausible on purpose (CREPE's unseen files test them). A swap false of the image is
# ARO VG-Relation, which the world already writes.

PROBE_C_PAIRS = (("size", "big", "small"), ("texture", "solid", "striped"), ("texture", "solid", "dotted"),
                 ("colour", "red", "green"), ("colour", "blue", "orange"), ("colour", "yellow", "purple"))
PROBE_C_CATEGORY = {"size": "size", "texture": "pattern", "colour": "color"}
PROBE_B_FILLERS = ("black", "gray", "noise", "scene")
BACKDROPS = ("checker", "bands", "blotches")


def _probe_objects(rng: random.Random, image_size: int, target: dict, variant: dict, avoid: set[str]):
    """Two scenes, the same but for the target object (first) being `target` or `variant`: other objects
    (0-2) have shapes outside `avoid`; no held-out compound in either; or None."""
    others = [o for o in sample_objects(rng, 3, SEEN_COMPOUNDS) if o["shape"] not in avoid][:rng.choice((0, 1, 2))]
    objs = [[target, *others], [variant, *others]]
    for o in objs:
        compounds = [(x["colour"], x["shape"]) for x in o]
        if len(set(compounds)) < len(compounds) or any(c not in SEEN_COMPOUNDS for c in compounds):
            return None
    cells = [divmod(k, 3) for k in rng.sample(range(9), len(objs[0]))]
    scenes = [arrange(rng, o, image_size, cells) for o in objs]
    return None if any(shows_held_out(s) for s in scenes) else scenes


def probe_c_item(seed: int, split: str, which: str, index: int, image_size: int, *, root: Path) -> dict:
    """A Probe-C group: `composition` = the same shape with antonym attributes ("a big circle" / "a small
    circle"), `object` = the same attribute on two shapes ("a big circle" / "a big square"); the two
    images differ only in the target object, and no other object has its shape(s)."""
    rng = stream(seed, split, "probe-c", which, index)
    while True:
        base = {"shape": rng.choice(SHAPES), "colour": rng.choice(COLOURS), "size": rng.choice(SIZES), "texture": rng.choice(TEXTURES)}
        if which == "composition":
            kind, a, b = PROBE_C_PAIRS[index % len(PROBE_C_PAIRS)]
            first, second = {**base, kind: a}, {**base, kind: b}
            words = [[a, base["shape"]], [b, base["shape"]]]
        else:
            kind = ("size", "texture", "colour")[index % 3]
            shapes = rng.sample(SHAPES, 2)
            first, second = {**base, "shape": shapes[0]}, {**base, "shape": shapes[1]}
            words = [[base[kind], shapes[0]], [base[kind], shapes[1]]]
        scenes = _probe_objects(rng, image_size, first, second, {first["shape"], second["shape"]})
        if scenes is not None:
            break
    names = [f"images/{which}_{index:05d}_{k}.png" for k in (1, 2)]
    for scene, name in zip(scenes, names):
        save(render(scene), root / "probe_c", name)
    return {"id": f"probe-c-{which}-{index:05d}", "split": which, "category": PROBE_C_CATEGORY[kind], "images": names,
            "texts": [noun_phrase(w, "a") for w in words], "compositions": words, "scenes": scenes}


def backdrop(kind: str, size: int, rng: random.Random):
    """A textured background of muted colours: a checkerboard, horizontal bands or soft blotches."""
    from PIL import Image, ImageDraw

    def muted():
        return tuple(rng.randrange(60, 180) for _ in range(3))

    if kind == "blotches":
        small = Image.new("RGB", (4, 4))
        small.putdata([muted() for _ in range(16)])
        return small.resize((size, size), Image.Resampling.BILINEAR)
    img = Image.new("RGB", (size, size), muted())
    draw = ImageDraw.Draw(img)
    if kind == "checker":
        other, side = muted(), rng.choice((4, 6))
        for y in range(0, size, side):
            for x in range(0, size, side):
                if (x // side + y // side) % 2:
                    draw.rectangle((x, y, x + side - 1, y + side - 1), fill=other)
    else:  # bands
        y = 0
        while y < size:
            h = rng.randrange(3, 10)
            draw.rectangle((0, y, size - 1, y + h - 1), fill=muted())
            y += h
    return img


def compose(scene: dict, base):
    """The scene's objects drawn over `base` (a background image) instead of the flat world background."""
    from mosaictool.world.render import shape_mask, texture_fill

    canvas = base.copy()
    for obj in scene["objects"]:
        box = tuple(obj["bbox"])
        canvas.paste(texture_fill(obj["colour"], obj["texture"], scene["image_size"]).crop(box), box,
                     shape_mask(obj["shape"], box[2] - box[0]))
    return canvas


def _filler(kind: str, size: int, rng: random.Random, avoid: str):
    import numpy as np
    from PIL import Image

    if kind == "black":
        return Image.new("RGB", (size, size), (0, 0, 0))
    if kind == "gray":
        return Image.new("RGB", (size, size), (128, 128, 128))
    if kind == "noise":
        g = np.random.default_rng(rng.getrandbits(64))
        return Image.fromarray(np.clip(g.normal(128, 64, (size, size, 3)), 0, 255).astype(np.uint8))
    return backdrop(rng.choice([b for b in BACKDROPS if b != avoid]), size, rng)  # another scene than x0's


def probe_b_item(seed: int, split: str, which: str, index: int, image_size: int, *, root: Path) -> list[dict]:
    """Probe-B records of one scene, one per filler. MR: x0 = the scene on a textured backdrop, x0~ = x0
    with a filler patch in an empty grid cell (objects never leave their cells, so it hides none),
    x1~ = the objects on the filler. R (2-3 objects of distinct shapes): x0 = the objects on the filler,
    x0~ = that with a patch of a second draw of the same filler (so black and gray patches are invisible),
    x1~ = the target object alone on the filler."""
    from PIL import Image

    rng = stream(seed, split, "probe-b", which, index)
    while True:
        scene = sample_scene(rng, rng.choice((2, 3) if which == "R" else (2, 3, 4)), image_size, train=True)
        if len({o["shape"] for o in scene["objects"]}) == len(scene["objects"]):
            break
    kind = BACKDROPS[index % len(BACKDROPS)]
    x0_bg = compose(scene, backdrop(kind, image_size, rng))
    used = {tuple(o["cell"]) for o in scene["objects"]}
    cell = rng.choice([divmod(k, 3) for k in range(9) if divmod(k, 3) not in used])
    (y0, y1), (x0, x1) = cell_bounds(image_size, cell[0]), cell_bounds(image_size, cell[1])
    target = rng.randrange(len(scene["objects"]))
    labels = sorted({o["shape"] for o in scene["objects"]})
    folder = root / "probe_b"
    out = []
    x0_name = f"images/MR/x0/{index:05d}.png"
    if which == "MR":
        save(x0_bg, folder, x0_name)
    for filler in PROBE_B_FILLERS:
        fill = _filler(filler, image_size, stream(seed, split, "probe-b-fill", which, index, filler), kind)
        # R's x0 already lies on the filler: its patch is a second draw (visible for noise and scene)
        patch = fill if which == "MR" else _filler(filler, image_size, stream(seed, split, "probe-b-patch", index, filler), kind)

        def patched(img: Image.Image) -> Image.Image:
            img = img.copy()
            img.paste(patch.crop((x0, y0, x1, y1)), (x0, y0))
            return img

        on_fill = compose(scene, fill)
        names = {v: f"images/{which}/{filler}/{index:05d}_{v}.png" for v in ("x0", "x0_patch", "x1")}
        if which == "MR":
            names["x0"] = x0_name
            images = {"x0_patch": patched(x0_bg), "x1": on_fill}
        else:
            alone = make_scene([scene["objects"][target]], image_size)
            images = {"x0": on_fill, "x0_patch": patched(on_fill), "x1": compose(alone, fill)}
        for v, img in images.items():
            save(img, folder, names[v])
        out.append({"id": f"probe-b-{which}-{index:05d}-{filler}", "split": which, "filler": filler, "images": names,
                    "labels": labels, "target": scene["objects"][target]["shape"] if which == "R" else None,
                    "backdrop": kind, "scene": scene})
    return out


def write_probe_files(root: Path, results: dict[str, list]) -> dict[str, int]:
    """probe_c/probe_c.jsonl, probe_b/probe_b.jsonl + classes.txt / prompts.txt (the benches' layouts)."""
    import orjson

    (root / "probe_c").mkdir(parents=True, exist_ok=True)
    (root / "probe_b").mkdir(parents=True, exist_ok=True)
    groups = results["probe_c_composition"] + results["probe_c_object"]
    (root / "probe_c" / "probe_c.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in groups))
    recs = [r for rs in results["probe_b_MR"] + results["probe_b_R"] for r in rs]
    (root / "probe_b" / "probe_b.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    (root / "probe_b" / "classes.txt").write_text("\n".join(SHAPES) + "\n")
    (root / "probe_b" / "prompts.txt").write_text("\n".join(f"{noun_phrase([s], 'a')}." for s in SHAPES) + "\n")
    return {"probe_c_composition": len(results["probe_c_composition"]), "probe_c_object": len(results["probe_c_object"]),
            "probe_b_records": len(recs)}


# --- relation in several surface forms ----------------------------------------------------------------
# VG-Relation above reads relation through one sentence form, the plain captions' copular "the A is
# <rel> the B", so NegCLIP's swaps of the plain captions are its negatives word for word; and through the
# placement priors, which a reader blind to the image uses to win most of it. These items say each
# relation in several forms, on an image and its twin (the two objects trade cells: Winoground's
# minimal pair, Thrush et al. 2022), so that neither one sentence form nor a prior can win:
# - copular: the test form of VG-Relation and of the plain captions;
# - subgraph: MosaiCLIP's sub-graph text "{N1} {R} {N2}" (Singh et al. 2023, Sec. 3.3; stages/template.py);
# - fronted, with: held-out forms that no train text uses (no caption form, plain caption, sub-graph
#   template or swap of them starts with a relation or says "with ... it"); both name the relation's
#   object first, where every train form names its subject first.
RELATION_FORMS = ("copular", "subgraph", "fronted", "with")
HELD_OUT_FORMS = ("fronted", "with")


def relation_form(form: str, subject: dict, pred: str, obj: dict) -> str:
    """The sentence "subject <pred> obj" in `form` (subject and obj: objects, named by colour and shape)."""
    the_s, the_o = canonical_np(subject), canonical_np(obj)
    a_s, a_o = canonical_np(subject, det="a"), canonical_np(obj, det="a")
    if form == "copular":
        return f"{the_s} is {pred} {the_o}"
    if form == "subgraph":
        return f"{a_s} {pred} {a_o}"
    if form == "fronted":
        return f"{pred} {the_o} is {the_s}"
    if form == "with":
        return f"{a_o} with {a_s} {pred} it"
    raise ValueError(f"unknown relation form {form!r}")


def prior_class(subject_shape: str, pred: str, object_shape: str) -> str:
    """Whether "subject <pred> object" is what the world's placement priors favour for these shapes
    (scene.HEIGHT_RANK / LEFT_RANK): agree, violate, or neutral when both shapes rank the same."""
    order = prior_order(subject_shape, object_shape, 0 if pred in ("above", "below") else 1)
    if order == 0:
        return "neutral"
    return "agree" if (order > 0) == (pred in ("above", "to the left of")) else "violate"


def relation_forms_item(seed: int, split: str, index: int, image_size: int, *, root: Path) -> dict:
    """An image where object A is <pred> object B, and its twin where A and B trade cells (so B is
    <pred> A there): for every form, the caption (true of the image, false of the twin) and its swap (A
    and B exchanged: true of the twin, false of the image). `prior`: the prior class of each image's
    true relation; the twin's is the image's mirrored, so every item that is not neutral has one image
    with the prior and one against it."""
    rng = stream(seed, split, "relation-forms", index)
    pred = RELATIONS[index % len(RELATIONS)]
    while True:
        scene = sample_scene(rng, rng.choice((2, 3, 4)), image_size, train=True)
        pairs = [(r["subject"], r["object"]) for r in scene["relations"] if r["relation"] == pred]
        if not pairs:
            continue
        i, j = pairs[rng.randrange(len(pairs))]
        other = twin(scene, i, j)
        if not shows_held_out(other):
            break
    a, b = scene["objects"][i], scene["objects"][j]
    names = [f"images/{index:05d}_{k}.png" for k in (0, 1)]
    for s, name in zip((scene, other), names):
        save(render(s), root / "relforms", name)
    first = prior_class(a["shape"], pred, b["shape"])
    mirrored = {"agree": "violate", "violate": "agree", "neutral": "neutral"}[first]
    return {"id": f"relforms-{index:05d}", "images": names, "relation": pred, "subject": i, "object": j,
            "forms": {f: [relation_form(f, a, pred, b), relation_form(f, b, pred, a)] for f in RELATION_FORMS},
            "held_out": list(HELD_OUT_FORMS), "prior": [first, mirrored], "scenes": [scene, other]}


def write_relation_forms(root: Path, items: list[dict]) -> dict[str, int]:
    """relforms/relation_forms.jsonl (one item a line; images under relforms/images/)."""
    import orjson

    (root / "relforms").mkdir(parents=True, exist_ok=True)
    (root / "relforms" / "relation_forms.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in items))
    return {"relation_forms": len(items)}
