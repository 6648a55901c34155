"""Every shell command in README.md and docs/*.md runs, so the docs cannot drift from the code.

A command is a line of a ```bash block (a line ending in a backslash continues on the next; `#` starts
a comment outside quotes; pipes and `&&` are part of the command). README.md's commands run in order
in a fresh folder holding a copy of examples/ and the FIXTURES below; each docs/*.md file's commands
then run in order in a copy of the folder the README's commands left (the docs say they follow the
README's worked example). The programs a command starts run from this test's interpreter (PROGRAMS),
so nothing depends on an activated virtualenv. HOME is a folder of this test's own (`~/data` is
absent there; the demo's cache lands there).

A command runs as written and must exit 0, unless a rule of RULES matches it: one table of a regex of
the command, what is done instead, and why. A new command in the docs must therefore run here, or
come with a rule.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]  # README.md first: the docs follow it
PY = shlex.quote(sys.executable)

# A program at the start of a command (or after |, &&, ;) -> how it is run here.
PROGRAMS = {
    "mosaictool": f"{PY} -m mosaictool",
    "duckdb": f"{PY} -m duckdb_cli",  # duckdb-cli's entry point: the `duckdb` a venv's bin/ holds
    "torchrun": f"{PY} -m torch.distributed.run",  # what the `torchrun` script runs
    "python": PY,
}

COMMAND_TIMEOUT = 600  # seconds; the longest, the demo's quick run, takes ~3 min on a loaded 2-core box
# README.md's commands run in the setup of the first test that needs them: its limit covers them all
DOCS_TIMEOUT = 2400
WEIGHTS = "weights/tiny.pt"  # FIXTURES: a mosaic-tiny checkpoint trained 2 steps


@dataclass(frozen=True)
class Rule:
    pattern: str  # regex searched in the command as written (after earlier rewrites)
    action: str  # "rewrite": re.sub(pattern, arg); "skip": not run; "error": must exit 1 with stderr matching arg
    arg: str
    reason: str


RULES = [
    Rule(r"^pip install .*", "skip", "", "CI runs the install line itself (.ci/run), in a fresh virtualenv"),
    Rule(r"^python -m pytest\b.*", "skip", "", "the test suite itself: running it here would recurse"),
    Rule(r"^python perf/scale_run\.py.*", "skip", "",
         "generates a corpus of 10^4-10^6 captions and measures the text stages on it for many minutes; perf/ prints figures"),
    Rule(r"^python perf/run_all\.py.*", "skip", "",
         "measures for minutes on purpose; perf/ prints figures, nothing in it is a test"),
    Rule(r"^(python perf/gpu_train\.py)$", "rewrite", r"\1 --methods clip --steps 3 --skip 1 --no-open-clip",
         "without a GPU it says so and exits 0; on one, 3 steps of one method instead of the full comparison"),
    Rule(r"^mosaictool demo --preset gpu.*", "skip", "",
         "sized for one GPU (~10 min there, hours on a CPU); tests/test_demo.py and test_device.py test the preset"),
    Rule(r"^mosaictool demo$", "rewrite", "mosaictool demo --quick --world-train 200",
         "the full demo takes 10+ minutes; --quick on a smaller world runs every phase"),
    # a user's data and weights
    Rule(r"my_captions\.jsonl", "rewrite", "world/train/captions.jsonl",
         "your captions: the world's train split has their format"),
    Rule(r"my_images/", "rewrite", "world/train/", "your images: the world's"),
    Rule(r"--model ViT-B-32-quickgelu --pretrained /path/to/[\w.-]+", "rewrite", f"--model mosaic-tiny --pretrained {WEIGHTS}",
         "OpenAI's ViT-B/32 weights cannot be downloaded here: a tiny checkpoint of the same kind of file"),
    Rule(r"--zeroshot /path/to/[\w.-]+", "rewrite", f"--zeroshot {WEIGHTS}",
         "the zero-shot weights: the tiny checkpoint the run started from"),
    Rule(r"(tree-score .*) -k 6\b", "rewrite", r"\1 -k 2", "the tiny checkpoint's text tower has 4 layers, ViT-B/32's 12"),
    Rule(r"vocab build graphs\.parquet --min-count 30", "rewrite", "vocab build graphs.parquet --min-count 5",
         "a few hundred captions name few words 30 times"),
    Rule(r"vocab import-vg ~/data/visual_genome", "rewrite", "vocab import-vg vg --min-count 1",
         "your Visual Genome download: the tiny VG files of FIXTURES, each name a few times"),
    Rule(r"evaluate .*--data-root ~/data/?( |$)", "error", r"missing under|not found",
         "your benchmark downloads: absent here, so evaluate must stop naming the missing file "
         "(the benchmarks and flags exist)"),
    Rule(r"^python perf/rubric_sample\.py .*--sugarcrepe ~/data/", "error", r"not found",
         "your SugarCrepe download: absent here, so the kit must stop naming the missing file "
         "(tests/test_rubric.py runs it on the vendored SugarCrepe files)"),
    Rule(r"^mosaictool parse coco_captions\.jsonl", "rewrite", "mosaictool parse world/train/captions.jsonl",
         "SugarCrepe's COCO captions as records: the world's captions have their format"),
    Rule(r"^python perf/parse_gold\.py$", "rewrite", f"python perf/parse_gold.py --gold {REPO}/tests/data/gold_graphs/coco.jsonl",
         "the gold set is test data of the repository (not copied to the docs' folder); its COCO half"),
    Rule(r"^python perf/parse_gold\.py --gold tests/", "rewrite", f"python perf/parse_gold.py --gold {REPO}/tests/",
         "the held-out gold set is test data of the repository, not copied to the docs' folder"),
    Rule(r"^python perf/parse_gold\.py --gold my\.jsonl", "error", r"cannot read the gold file",
         "your own gold file: none here, so the script must stop naming it"),
    Rule(r"^python perf/rubric_tally\.py review/", "error", r"no such file",
         "a reviewer's labels: none here (tests/test_rubric.py tallies labels it writes)"),
    # sizes: the docs' runs are sized for real training
    Rule(r"--precision amp\b", "rewrite", "--precision fp32", "fp16 amp needs a GPU"),
    Rule(r"(--method fsc-clip --recipe paper(?:-lora)?)\b", "rewrite", r"\1 --precision fp32",
         "the recipe's fp16 amp needs a GPU (a flag given explicitly wins over the recipe)"),
    Rule(r"'shards/\{000000\.\.000099\}\.tar'", "rewrite", "'shards/{000000..000000}.tar'",
         "the worked example wrote one shard"),
    Rule(r"coco/annotations/captions_train2017\.json", "rewrite", "coco/annotations/captions_val2017.json",
         "FIXTURES' COCO has val2017's captions file (the same format)"),
    Rule(r"--image-root coco/train2017", "rewrite", "--image-root coco/val2017", "FIXTURES' COCO images are val2017's"),
    Rule(r"'cc3m/\{00000\.\.00331\}\.tar'", "rewrite", "'cc3m/{00000..00001}.tar'",
         "CC-3M is 332 shards as img2dataset writes it: FIXTURES has the first two"),
    Rule(r"--nproc_per_node \d+", "rewrite", "--nproc_per_node 2", "two CPU ranks (gloo) stand in for the GPUs"),
    Rule(r"(train (?!.*--resume)(?!.*--steps [1-9]\d?\b).*?)(?: --steps \d+)?( --out \S+.*)$", "rewrite", r"\1 --steps 2\2",
         "runs sized for real training (epochs, a recipe's 40 epochs, >= 100 steps): 2 steps check the command"),
    Rule(r"^mosaictool train --resume runs/m2$", "error", r"already finished",
         "the docs' run finished, so there is nothing to resume: the flag is checked here; resuming after "
         "kill -9 is tests/test_train.py's"),
]


@dataclass
class Command:
    doc: str  # file name relative to the repo
    line: int
    text: str  # as written (continuations joined)


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def extract(path: Path) -> list[Command]:
    """The commands of a markdown file's ```bash blocks, in order."""
    commands, in_block, pending, start = [], False, "", 0
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("```"):
            assert not pending, f"{path.name}:{start}: a command ends its block with a backslash"
            in_block = not in_block and stripped == "```bash"
            continue
        if not in_block:
            continue
        line = _strip_comment(raw)
        if not pending:
            start = n
            line = line.strip()
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        text = " ".join((pending + line.strip()).split())
        pending = ""
        if text:
            commands.append(Command(str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name, start, text))
    return commands


def plan(cmd: str) -> tuple[str, str | None, list[Rule]]:
    """(the command to run, the stderr pattern it must fail with or None, the rules applied);
    an empty command means skip."""
    applied, expect = [], None
    for rule in RULES:
        if not re.search(rule.pattern, cmd):
            continue
        applied.append(rule)
        if rule.action == "skip":
            return "", None, applied
        if rule.action == "rewrite":
            cmd = re.sub(rule.pattern, rule.arg, cmd)
        else:
            expect = rule.arg
    return cmd, expect, applied


def as_run(cmd: str) -> str:
    """A leading program of each pipeline segment replaced by how it runs here (PROGRAMS)."""
    return re.sub(r"(^|\|\s*|&&\s*|;\s*)(" + "|".join(PROGRAMS) + r")(?=\s)", lambda m: m.group(1) + PROGRAMS[m.group(2)], cmd)


def run_shell(cmd: str, work: Path, env: dict, what: str, timeout: float = COMMAND_TIMEOUT) -> tuple[int, str]:
    """(exit code, stderr) of `cmd` under bash in its own session: a command that outlives `timeout`,
    or a test interrupted meanwhile, takes every process it started down with it (pool workers, ranks)."""
    proc = subprocess.Popen(["bash", "-c", "set -o pipefail; " + cmd], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{what}: still running after {timeout:.0f} s (killed)")
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc.returncode, stderr


def run_doc(doc: Path, work: Path, home: Path) -> list[tuple[Command, float]]:
    """Run a doc's commands in order in `work`; returns each command run with its seconds."""
    env = {**os.environ, "HOME": str(home)}
    env.pop("MOSAICTOOL_CACHE", None)
    ran = []
    for c in extract(doc):
        cmd, expect, applied = plan(c.text)
        if not cmd:
            continue
        t0 = time.perf_counter()
        returncode, stderr = run_shell(as_run(cmd), work, env, f"{c.doc}:{c.line}: {c.text}")
        ran.append((c, time.perf_counter() - t0))
        where = (f"{c.doc}:{c.line}: {c.text}\n  ran: {as_run(cmd)}\n  rules: {[r.reason for r in applied]}\n"
                 f"  exit {returncode}; stderr:\n{stderr[-3000:]}")
        if expect is None:
            assert returncode == 0, where
        else:
            assert returncode == 1 and re.search(expect, stderr), f"expected exit 1 and /{expect}/ in stderr\n{where}"
    return ran


# --- fixtures: the files the docs name as a user's own --------------------------------------------


def _image(path: Path, size=(48, 36), colour=(200, 30, 30)) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


def _rel(s: str, p: str, o: str, rid: int) -> dict:
    return {"relationship_id": rid, "predicate": p, "subject": {"names": [s]}, "object": {"names": [o]}}


def write_vg(root: Path) -> None:
    """vg/: Visual Genome's relationships.json, objects.json, attributes.json, image_data.json and images."""
    rels = [(1, "man", "riding", "horse"), (2, "man", "standing next to", "tree"), (2, "dog", "on", "grass"),
            (3, "woman", "holding", "umbrella"), (4, "man", "standing next to", "car"), (5, "man", "wearing", "hat"),
            (6, "cat", "on", "table")]
    images = sorted({i for i, *_ in rels})
    relationships = [{"image_id": i, "relationships": [_rel(s, p, o, 10 * i + k)
                                                        for k, (j, s, p, o) in enumerate(rels) if j == i]}
                     for i in images]
    objects = [{"image_id": r["image_id"], "objects": [x for rel in r["relationships"] for x in (rel["subject"], rel["object"])]}
               for r in relationships]
    attributes = [{"image_id": i, "attributes": [{"names": ["man"], "attributes": ["tall"]},
                                                 {"names": ["dog"], "attributes": ["brown"]}]}
                  for i in images]
    image_data = [{"image_id": i, "url": f"https://cs.stanford.edu/people/rak248/VG_100K/{i}.jpg", "width": 48, "height": 36}
                  for i in images]
    files = {"relationships": relationships, "objects": objects, "attributes": attributes, "image_data": image_data}
    vg = root / "vg"
    vg.mkdir()
    for name, data in files.items():
        (vg / f"{name}.json").write_text(json.dumps(data))
    for i in images:
        _image(vg / "VG_100K" / f"{i}.jpg")


def write_coco(root: Path) -> None:
    """coco/: COCO's captions and instances annotation files and their val2017/ images; scenes/."""
    captions = ["A small dog sits on the grass.", "A big dog runs in a park.", "A red car parked on a street.",
                "A red apple on a wooden table.", "A small cat sleeping on a bed.", "A big cat on a sofa."]
    ann = root / "coco" / "annotations"
    ann.mkdir(parents=True)
    w, h = 60, 40
    images = [{"id": i, "file_name": f"{i:012d}.jpg", "width": w, "height": h} for i in range(1, len(captions) + 1)]
    (ann / "captions_val2017.json").write_text(json.dumps({
        "images": images, "annotations": [{"id": 100 + i, "image_id": i, "caption": c} for i, c in enumerate(captions, 1)]}))

    def square(x, y, s):
        return [[x, y, x + s, y, x + s, y + s, x, y + s]]

    boxes = [(1, 1, 2, 2, 12), (2, 1, 40, 22, 10), (3, 2, 5, 5, 10), (4, 3, 30, 4, 12), (5, 2, 8, 20, 9), (6, 1, 44, 6, 8)]
    (ann / "instances_val2017.json").write_text(json.dumps({
        "images": images, "categories": [{"id": 1, "name": "dog"}, {"id": 2, "name": "cat"}, {"id": 3, "name": "car"}],
        "annotations": [{"id": k, "image_id": i, "category_id": c, "segmentation": square(x, y, s), "bbox": [x, y, s, s],
                         "area": s * s, "iscrowd": 0} for k, (i, c, x, y, s) in enumerate(boxes, 1)]}))
    splits = ["train", "train", "restval", "train", "val", "test"]  # Karpathy's dataset_coco.json for the same images
    (root / "coco" / "dataset_coco.json").write_text(json.dumps({"dataset": "coco", "images": [
        {"filepath": "val2014", "filename": f"COCO_val2014_{i:012d}.jpg", "imgid": i - 1, "split": split, "cocoid": i,
         "sentids": [i], "sentences": [{"tokens": c.lower().rstrip(".").split(), "raw": c, "imgid": i - 1, "sentid": i}]}
        for i, (c, split) in enumerate(zip(captions, splits), 1)]}))
    for im in images:
        _image(root / "coco" / "val2017" / im["file_name"], (w, h), (240, 240, 240))
    for k in range(2):
        _image(root / "scenes" / f"scene{k}.jpg", (w, h), (90, 140 + 40 * k, 90))


def write_cc3m(root: Path) -> None:
    """cc3m/ and cc3m.tsv: CC-3M as img2dataset downloads it (two of its 332 shards: <key>.jpg, .txt and .json
    per sample, {shard}.parquet and {shard}_stats.json beside each tar; 40 samples, more than a batch) and its
    input table."""
    import polars as pl
    import webdataset as wds

    colours = {"red": (200, 30, 30), "blue": (30, 30, 200), "green": (30, 160, 30), "yellow": (220, 200, 40)}
    things = ["dog", "car", "cat", "ball", "chair"]
    scenes = [(c1, t1, c2, t2) for c1 in colours for c2 in colours if c1 != c2 for t1, t2 in zip(things, things[1:] + things[:1])]
    (root / "cc3m").mkdir()
    rows = []
    for shard in range(2):
        meta = []
        with wds.TarWriter(str(root / "cc3m" / f"{shard:05d}.tar")) as sink:
            for i, (c1, t1, c2, t2) in enumerate(scenes[shard * 20:shard * 20 + 20]):
                key, caption = f"{shard:05d}{i:04d}", f"a {c1} {t1} next to a {c2} {t2}"
                image = root / "cc3m-images" / f"{key}.jpg"
                _image(image, colour=colours[c1])
                meta.append({"url": f"https://example.com/{key}.jpg", "caption": caption, "key": key, "status": "success",
                             "error_message": None, "width": 48, "height": 36})
                sink.write({"__key__": key, "jpg": image.read_bytes(), "txt": caption, "json": json.dumps(meta[-1])})
        pl.DataFrame(meta).write_parquet(root / "cc3m" / f"{shard:05d}.parquet")
        (root / "cc3m" / f"{shard:05d}_stats.json").write_text(json.dumps({"count": len(meta), "successes": len(meta)}))
        rows += meta
    shutil.rmtree(root / "cc3m-images")
    (root / "cc3m.tsv").write_text("caption\turl\n" + "".join(f"{r['caption']}\t{r['url']}\n" for r in rows))


def write_weights(root: Path) -> None:
    """weights/tiny.pt: mosaic-tiny trained 2 steps on a dozen made-up images."""
    from train_fixtures import make_world

    captions = make_world(root / "fixture-world", n=12)
    argv = [sys.executable, "-m", "mosaictool", "train", "--data", str(captions), "--method", "clip", "--steps", "2",
            "--batch-size", "4", "--out", str(root / "fixture-run"), "-q"]
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    (root / "weights").mkdir()
    shutil.move(root / "fixture-run" / "final.pt", root / WEIGHTS)
    shutil.rmtree(root / "fixture-run")
    shutil.rmtree(root / "fixture-world")


FIXTURES = {
    "examples/, perf/": "copies of the repository's (the docs run from the repository root)",
    "vg/": "tiny Visual Genome files (write_vg): the docs' `vg/` is your VG download",
    "coco/, scenes/": "tiny COCO annotation files (and Karpathy's dataset_coco.json) and images (write_coco): the docs' "
                      "`coco/` is your COCO download",
    "cc3m/, cc3m.tsv": "two img2dataset shards of CC-3M and its url/caption table (write_cc3m): the docs' are your download",
    WEIGHTS: "a mosaic-tiny checkpoint trained 2 steps: stands in for OpenAI's weights (RULES)",
}


# --- tests ----------------------------------------------------------------------------------------


def test_extract_joins_continuations_and_drops_comments(tmp_path):
    md = tmp_path / "x.md"
    md.write_text("text\n```bash\n# only a comment\nmosaictool a 'x # y' \\\n  | mosaictool b   # note\n\n"
                  "duckdb -c \"select 1\"\n```\n```\nmosaictool not-bash\n```\n")
    assert [(c.line, c.text) for c in extract(md)] == [(4, "mosaictool a 'x # y' | mosaictool b"), (7, 'duckdb -c "select 1"')]
    assert as_run("mosaictool a | mosaictool b && duckdb -c 1") == (
        f"{PY} -m mosaictool a | {PY} -m mosaictool b && {PY} -m duckdb_cli -c 1")


def test_rules_rewrite_skip_and_expect():
    assert plan("pip install -e .")[0] == ""
    cmd, expect, _ = plan("mosaictool train --data shards/ --method probe-ft --recipe paper --out runs/p1")
    assert cmd == "mosaictool train --data shards/ --method probe-ft --recipe paper --steps 2 --out runs/p1" and expect is None
    assert plan("mosaictool train --data d --steps 200 --out r")[0] == "mosaictool train --data d --steps 2 --out r"
    assert plan("mosaictool train --data d --steps 20 --out r")[0] == "mosaictool train --data d --steps 20 --out r"
    assert plan("mosaictool evaluate --bench aro -c m.pt --data-root ~/data/ -o r.jsonl")[1] == r"missing under|not found"


def test_every_rule_meets_a_command():
    commands = [c.text for doc in DOCS for c in extract(doc)]
    assert any("mosaictool demo" == c for c in commands), "README.md runs the demo"
    for rule in RULES:
        assert rule.reason and rule.action in ("rewrite", "skip", "error")
    texts = list(commands)
    for rule in RULES:  # a rule that no command meets is stale: the docs changed under it
        hit = False
        for i, c in enumerate(texts):
            if re.search(rule.pattern, c):
                hit = True
                if rule.action == "rewrite":
                    texts[i] = re.sub(rule.pattern, rule.arg, c)
        assert hit, f"no command in README.md or docs/ matches the rule {rule.pattern!r}"


@pytest.fixture(scope="session")
def readme_folder(tmp_path_factory):
    """The folder README.md's commands ran in (None and the error when they failed), and HOME."""
    root = tmp_path_factory.mktemp("docs")
    work, home = root / "work", root / "home"
    (home / "data").mkdir(parents=True)  # `~/data`: your benchmark downloads, none here
    work.mkdir()
    for folder in ("examples", "perf"):
        shutil.copytree(REPO / folder, work / folder, ignore=shutil.ignore_patterns("logs", "__pycache__"))
    write_vg(work)
    write_coco(work)
    write_cc3m(work)
    write_weights(work)
    try:
        run_doc(REPO / "README.md", work, home)
    except AssertionError as e:
        return None, str(e), home
    return work, "", home


@pytest.mark.slow
@pytest.mark.timeout(DOCS_TIMEOUT)
def test_readme_commands_run(readme_folder):
    work, error, _ = readme_folder
    assert work is not None, error


@pytest.mark.slow
@pytest.mark.timeout(DOCS_TIMEOUT)
@pytest.mark.parametrize("doc", [d for d in DOCS[1:] if any(plan(c.text)[0] for c in extract(d))], ids=lambda d: d.name)
def test_docs_commands_run(doc, readme_folder, tmp_path):
    work, error, home = readme_folder
    if work is None:
        pytest.fail(f"README.md's commands failed first, and the docs follow them:\n{error}")
    copy = tmp_path / "work"
    shutil.copytree(work, copy, symlinks=True)
    run_doc(doc, copy, home)
