"""docs/results.md from docs/results.in.md and the demo reports it includes, so that no table of the
results is copied by hand.

    python docs/build_results.py                          # rebuild docs/results.md
    python docs/build_results.py --add w0-test demo-out/report.md   # keep a run's report.md as
                                                          # docs/reports/w0-test.md, then rebuild

results.in.md is the hand-written reading; a line `<!-- include: reports/NAME.md -->` is replaced by
that report (its headings moved down two levels), `<!-- include: reports/NAME.md#Heading -->` by the
section under that heading only. tests/test_docs_results.py checks results.md is up to date.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
INCLUDE = re.compile(r"^<!-- include: (reports/[\w.-]+\.md)(?:#(.+?))? -->$")


def section(text: str, heading: str) -> str:
    """The lines under the markdown heading `heading` (any level) up to the next heading of that level
    or higher."""
    lines = text.splitlines()
    for k, line in enumerate(lines):
        m = re.match(r"^(#+) (.*)$", line)
        if m and m.group(2).strip() == heading.strip():
            level = len(m.group(1))
            body = []
            for rest in lines[k + 1:]:
                n = re.match(r"^(#+) ", rest)
                if n and len(n.group(1)) <= level:
                    break
                body.append(rest)
            return "\n".join(body).strip("\n")
    raise SystemExit(f"build_results: no heading {heading!r}")


def build(template: str, docs: Path = DOCS) -> str:
    out = []
    for line in template.splitlines():
        m = INCLUDE.match(line.strip())
        if not m:
            out.append(line)
            continue
        path = docs / m.group(1)
        if not path.is_file():
            raise SystemExit(f"build_results: {path} is missing (keep a run's report with --add)")
        text = path.read_text()
        text = section(text, m.group(2)) if m.group(2) else text
        out.append(re.sub(r"^(#+) ", lambda h: "#" * min(6, len(h.group(1)) + 2) + " ", text.strip("\n"), flags=re.M))
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--add", nargs=2, metavar=("NAME", "REPORT"), action="append", default=[],
                        help="keep REPORT (a demo's report.md) as docs/reports/NAME.md first")
    args = parser.parse_args(argv)
    for name, report in args.add:
        shutil.copyfile(report, DOCS / "reports" / f"{name}.md")
    (DOCS / "results.md").write_text(build((DOCS / "results.in.md").read_text()))


if __name__ == "__main__":
    main(sys.argv[1:])
