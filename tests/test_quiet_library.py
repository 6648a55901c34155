"""The library logs and leaves the process as it found it: a program importing mosaictool and calling
its API (world, parse, decompose, negate, template; a model built, saved and loaded again) sees nothing on
stdout or stderr, and its environment, root logger and open_clip's model registry are unchanged. The
`mosaictool` command owns the console: it shows the library's messages on stderr."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

from mosaictool.cli import app
from train_fixtures import write_tiny_model

PROGRAM = textwrap.dedent("""
    import json, logging, os, sys
    from pathlib import Path

    import open_clip
    from open_clip import factory

    tmp = Path(sys.argv[1])
    root = logging.getLogger()
    before = {"env": dict(os.environ), "root_level": root.level, "root_handlers": list(root.handlers),
              "models": open_clip.list_models(), "config_paths": list(factory._MODEL_CONFIG_PATHS)}

    import mosaictool
    from mosaictool.model import openclip

    world = mosaictool.api.world(tmp / "world", train=12, eval_scale=0.02, seed=3)
    records = [{"id": "a", "caption": "a red cube left of a blue sphere"}, {"id": "b", "caption": "two small dogs on grass"}]
    texts = list(mosaictool.template(mosaictool.negate(mosaictool.decompose(mosaictool.parse(records)))))
    for name, config in (("mosaic-micro", None), ("test-tiny", sys.argv[2])):  # a shipped config, a user's
        bundle = openclip.create(name, model_config_file=config, seed=0)
        openclip.save_checkpoint(tmp / f"{name}.pt", bundle, step=1)
        openclip.load_checkpoint(tmp / f"{name}.pt")

    after = {"env": dict(os.environ), "root_level": root.level, "root_handlers": list(root.handlers),
             "models": open_clip.list_models(), "config_paths": list(factory._MODEL_CONFIG_PATHS)}
    (tmp / "result.json").write_text(json.dumps({
        "changed": sorted(k for k in before if before[k] != after[k]),
        "env_added": sorted(set(after["env"]) - set(before["env"])),
        "scenes": world.counts["train"]["records"], "texts": len(texts)}))
""")


def test_the_api_prints_nothing_and_leaves_no_global_change(tmp_path):
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path), str(write_tiny_model(tmp_path))],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (proc.stdout, proc.stderr) == ("", "")
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["changed"] == [] and result["env_added"] == [], result
    assert result["scenes"] == 12 and result["texts"] == 2  # the calls did their work


def test_the_command_shows_the_library_log_on_stderr(runner, tmp_path):
    """The library's INFO messages reach the command's stderr as they are (no level, no logger name);
    stdout keeps the data."""
    world = tmp_path / "world"
    assert runner.invoke(app, ["world", "--out", str(world), "--train", "12", "--eval-scale", "0.02", "-q"]).exit_code == 0
    lines = '{"id": "a", "caption": "a cat"}\nnot json\n'
    result = runner.invoke(app, ["parse", "--skip-bad", "-"], input=lines)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("skipped 1 bad record(s); the first:\n  <stdin>:2: "), result.stderr
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == ["a"]
    assert logging.getLogger().level == logging.WARNING  # the command configured mosaictool's logger, not the root


def test_a_program_sees_the_library_log_only_when_it_asks(tmp_path):
    """Without configuration a mosaictool warning goes nowhere (a NullHandler on the package's logger,
    not Python's last-resort stderr); with console_logging() it is one plain line on stderr."""
    program = ("import sys\nfrom mosaictool.io import Skips\n"
               "if sys.argv[1] == 'shown':\n    from mosaictool.console import console_logging\n    console_logging()\n"
               "skips = Skips(enabled=True)\nskips.handle('in.jsonl:3', 'invalid JSON')\nskips.report()\n")
    quiet = subprocess.run([sys.executable, "-c", program, "quiet"], capture_output=True, text=True, timeout=120)
    shown = subprocess.run([sys.executable, "-c", program, "shown"], capture_output=True, text=True, timeout=120)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    assert (shown.returncode, shown.stdout) == (0, "")
    assert shown.stderr == "skipped 1 bad record(s); the first:\n  in.jsonl:3: invalid JSON\n"


def test_the_package_sets_no_environment_on_import():
    program = "import os, json; before = dict(os.environ); import mosaictool; print(json.dumps(dict(os.environ) == before))"
    env = {k: v for k, v in __import__("os").environ.items() if k != "OMP_WAIT_POLICY"}
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, env=env,
                          cwd=Path(__file__).parent)
    assert proc.stdout.strip() == "true", proc.stderr


def test_a_users_config_is_known_to_open_clip_only_while_its_model_is_built(tmp_path):
    """A user's config named like a shipped one builds the user's model; after it, the name means the
    shipped config again and open_clip's registry holds neither."""
    import open_clip

    from mosaictool.model import openclip
    from train_fixtures import TINY_MODEL

    user = tmp_path / "mosaic-tiny.json"
    user.write_text(json.dumps(TINY_MODEL))
    before = open_clip.list_models()
    bundle = openclip.create("ignored", model_config_file=user, seed=0)
    assert bundle.meta["model_cfg"]["embed_dim"] == TINY_MODEL["embed_dim"] == bundle.model.text_projection.shape[1]
    assert open_clip.list_models() == before and open_clip.get_model_config("mosaic-tiny") is None
    assert openclip.model_config("mosaic-tiny")["embed_dim"] == 128  # the shipped config
    shipped = openclip.create("mosaic-tiny", seed=0)
    assert shipped.model.text_projection.shape[1] == 128 and open_clip.list_models() == before
