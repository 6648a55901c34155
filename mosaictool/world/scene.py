"""Scenes of the synthetic world: objects on a 3×3 grid, and the relations that the grid makes true.

A scene is a plain dict (it goes into records as the true scene graph):

    {"image_size": 64,
     "objects": [{"shape", "colour", "size", "texture", "cell": [row, col], "bbox": [x0, y0, x1, y1]}, ...],
     "relations": [{"subject": i, "relation": "to the left of", "object": j}, ...]}

Objects sit centred in their own grid cell (cells are whole multiples of the ViT patch, see
`cell_side`), so their boxes never overlap and every relation is drawn
without ambiguity: i is "to the left of" j iff i's column is left of j's (whatever the rows), and
"above" j iff i's row is higher. `relations` lists every true one, converses included. Within a
scene no two objects share both colour and shape, so "the red circle" always names one object.
"""

from __future__ import annotations

import random

from mosaictool.world.vocab import (
    COLOURS,
    HELD_OUT_OBJECTS,
    SHAPES,
    SIZES,
    TEXTURES,
    held_out_relation_facts,
)

GRID = 3
SIZE_FRACTION = {"small": 0.62, "big": 0.9}  # of a cell's side
ALL_COMPOUNDS = tuple((c, s) for c in COLOURS for s in SHAPES)
SEEN_COMPOUNDS = tuple(cs for cs in ALL_COMPOUNDS if cs not in HELD_OUT_OBJECTS)
HELD_OUT_FACTS = held_out_relation_facts()


PATCH = 8  # the tiny model's ViT patch side at 64 px


def cell_side(image_size: int) -> int:
    """Cells are whole multiples of the ViT patch (16 px at 64 px), so an object looks the same, patch
    for patch, in every cell: the patch tokens of a red circle do not depend on where it is, only the
    position embeddings do. That makes shape and colour cheap to learn and position easy to read."""
    return max(PATCH, image_size // (GRID * PATCH) * PATCH)


def cell_bounds(image_size: int, index: int) -> tuple[int, int]:
    side = cell_side(image_size)
    margin = (image_size - GRID * side) // 2 // PATCH * PATCH
    return margin + index * side, margin + (index + 1) * side


def object_side(image_size: int, size: str) -> int:
    return max(5, round(SIZE_FRACTION[size] * cell_side(image_size)))


def place(image_size: int, cell: tuple[int, int], size: str) -> list[int]:
    """The object's box: centred in its cell, without jitter (see cell_side)."""
    side = object_side(image_size, size)
    (y0, y1), (x0, x1) = cell_bounds(image_size, cell[0]), cell_bounds(image_size, cell[1])
    x = x0 + (x1 - x0 - side) // 2
    y = y0 + (y1 - y0 - side) // 2
    return [x, y, x + side, y + side]


def relations_of(objects: list[dict]) -> list[dict]:
    """Every true spatial relation between the objects, in a fixed order (subject, then object, then predicate)."""
    rels = []
    for i, a in enumerate(objects):
        for j, b in enumerate(objects):
            if i == j:
                continue
            (ra, ca), (rb, cb) = a["cell"], b["cell"]
            if ca < cb:
                rels.append({"subject": i, "relation": "to the left of", "object": j})
            if ca > cb:
                rels.append({"subject": i, "relation": "to the right of", "object": j})
            if ra < rb:
                rels.append({"subject": i, "relation": "above", "object": j})
            if ra > rb:
                rels.append({"subject": i, "relation": "below", "object": j})
    return rels


def relation_between(objects: list[dict], i: int, j: int, axis: str) -> str | None:
    """The predicate that holds from i to j along `axis` ("x" or "y"), or None when they are aligned on it."""
    (ri, ci), (rj, cj) = objects[i]["cell"], objects[j]["cell"]
    if axis == "x":
        return "to the left of" if ci < cj else "to the right of" if ci > cj else None
    return "above" if ri < rj else "below" if ri > rj else None


def shows_held_out(scene: dict) -> bool:
    """Whether the scene contains a held-out object compound or held-out relation compound."""
    objs = scene["objects"]
    if any((o["colour"], o["shape"]) in HELD_OUT_OBJECTS for o in objs):
        return True
    return any((objs[r["subject"]]["shape"], r["relation"], objs[r["object"]]["shape"]) in HELD_OUT_FACTS for r in scene["relations"])


def make_scene(objects: list[dict], image_size: int) -> dict:
    return {"image_size": image_size, "objects": objects, "relations": relations_of(objects)}


def sample_objects(rng: random.Random, n: int, compounds=SEEN_COMPOUNDS) -> list[dict]:
    """`n` objects with distinct colour-shape compounds, random size and texture (not yet placed)."""
    picks = rng.sample(range(len(compounds)), n)
    return [
        {"shape": compounds[k][1], "colour": compounds[k][0], "size": rng.choice(SIZES), "texture": rng.choice(TEXTURES)}
        for k in picks
    ]


# Where shapes usually sit. Real scenes have placement priors (a lamp above a table, a man on a
# horse), and most of ARO's VG-Relation swaps are implausible ones, which a text prior alone can
# reject; learning that prior from swapped captions is a large part of NegCLIP's VG-Relation gain
# (Yuksekgonul et al. 2023, Sec. 5; SugarCrepe, Hsieh et al. 2023, on ARO's implausible negatives). A world without
# priors measured only vision: every fine-tuned row sat at chance on relation (2,400 val cases,
# world v2). Each shape's usual rank top to bottom and left to right; an arrangement is the most
# usual of PRIOR_DRAWS random ones, so that the prior holds for most pairs, not all.
HEIGHT_RANK = {s: k for k, s in enumerate(("star", "triangle", "circle", "diamond", "cross", "square"))}
LEFT_RANK = {s: k for k, s in enumerate(("circle", "cross", "star", "square", "triangle", "diamond"))}
PRIOR_DRAWS = 3


def prior_order(a: str, b: str, axis: int) -> int:
    """+1 when the placement priors put shape a before shape b on the axis (0: a above b; 1: a left
    of b), -1 when after, 0 when both rank the same."""
    rank = (HEIGHT_RANK, LEFT_RANK)[axis]
    return (rank[a] < rank[b]) - (rank[a] > rank[b])


def usualness(objects: list[dict], cells: list[tuple[int, int]]) -> int:
    """Pairs placed as the priors say minus pairs placed against them (rows and columns)."""
    score = 0
    for a in range(len(objects)):
        for b in range(a + 1, len(objects)):
            for axis in (0, 1):
                order = prior_order(objects[a]["shape"], objects[b]["shape"], axis)
                if cells[a][axis] != cells[b][axis] and order:
                    score += 1 if (cells[a][axis] < cells[b][axis]) == (order > 0) else -1
    return score


def arrange(rng: random.Random, objects: list[dict], image_size: int, cells: list[tuple[int, int]] | None = None) -> dict:
    """Put the objects in distinct cells (the given ones, else the most usual of PRIOR_DRAWS random
    draws) and return the scene."""
    if cells is None:
        draws = [[divmod(k, GRID) for k in rng.sample(range(GRID * GRID), len(objects))] for _ in range(PRIOR_DRAWS)]
        cells = max(draws, key=lambda c: usualness(objects, c))
    placed = []
    for obj, cell in zip(objects, cells):
        placed.append({**obj, "cell": list(cell), "bbox": place(image_size, cell, obj["size"])})
    return make_scene(placed, image_size)


def sample_scene(rng: random.Random, n: int, image_size: int, *, train: bool, tries: int = 200) -> dict:
    """A random scene of n objects; train scenes never show a held-out compound."""
    objects = sample_objects(rng, n, SEEN_COMPOUNDS if train else ALL_COMPOUNDS)
    for _ in range(tries):
        scene = arrange(rng, objects, image_size)
        if not (train and shows_held_out(scene)):
            return scene
    # Some object sets cannot avoid a held-out relation often: draw new objects.
    return sample_scene(rng, n, image_size, train=train, tries=tries)


def twin(scene: dict, a: int, b: int) -> dict:
    """The counterfactual twin: the same objects, with objects a and b trading cells."""
    objs = [dict(o) for o in scene["objects"]]
    size = scene["image_size"]
    objs[a]["cell"], objs[b]["cell"] = list(scene["objects"][b]["cell"]), list(scene["objects"][a]["cell"])
    for k in (a, b):
        objs[k]["bbox"] = place(size, tuple(objs[k]["cell"]), objs[k]["size"])
    return make_scene(objs, size)


def binding_twin(scene: dict, a: int, b: int) -> dict | None:
    """The binding twin: everything in place, but objects a and b trade colours (None when their
    colours are the same). It shows the same colours, shapes and places, bound differently."""
    objs = [dict(o) for o in scene["objects"]]
    if objs[a]["colour"] == objs[b]["colour"]:
        return None
    objs[a]["colour"], objs[b]["colour"] = objs[b]["colour"], objs[a]["colour"]
    return make_scene(objs, scene["image_size"])


def shape_twin(scene: dict, a: int, rng: random.Random) -> dict | None:
    """The shape twin: everything in place, but object a has another shape (one that keeps colour-shape
    compounds distinct and seen). It shows the same colours and places with a different object."""
    objs = [dict(o) for o in scene["objects"]]
    taken = {(o["colour"], o["shape"]) for o in objs}
    options = [s for s in SHAPES if (objs[a]["colour"], s) in SEEN_COMPOUNDS and (objs[a]["colour"], s) not in taken]
    if not options:
        return None
    objs[a]["shape"] = options[rng.randrange(len(options))]
    return make_scene(objs, scene["image_size"])
