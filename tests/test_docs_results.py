"""docs/results.md is docs/results.in.md with the demo reports it names spliced in: rebuilt by
docs/build_results.py, never edited by hand, so no result table can drift from the run it came from."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def load_builder():
    spec = importlib.util.spec_from_file_location("build_results", DOCS / "build_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_md_is_rebuilt_from_its_template_and_reports():
    built = load_builder().build((DOCS / "results.in.md").read_text(), DOCS)
    assert (DOCS / "results.md").read_text() == built, "run `python docs/build_results.py` after editing docs/results.in.md"


def test_an_include_takes_the_named_section_with_its_headings_moved_down(tmp_path):
    builder = load_builder()
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "r.md").write_text("# Report\n\nintro\n\n## Table\n\n| a |\n\n### Note\n\nn\n\n## Other\n\nx\n")
    whole = builder.build("before\n<!-- include: reports/r.md -->\nafter", tmp_path)
    assert whole.startswith("before\n### Report\n") and "#### Table" in whole and whole.endswith("after\n")
    part = builder.build("<!-- include: reports/r.md#Table -->", tmp_path)
    assert part == "| a |\n\n##### Note\n\nn\n"
    with pytest.raises(SystemExit, match="no heading"):
        builder.build("<!-- include: reports/r.md#Missing -->", tmp_path)
    with pytest.raises(SystemExit, match="missing"):
        builder.build("<!-- include: reports/absent.md -->", tmp_path)
