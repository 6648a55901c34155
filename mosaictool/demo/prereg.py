"""The pre-registration of a demo on test (preregistration.json in OUT): what will be compared and how,
written before any evaluation on test and never changed there; and the one reading of test it allows.

It states the settings (every DemoConfig field but where and how fast the demo runs), every row's
search on val (its grid, the budget, the seed and the trials drawn: mosaictool.demo.tuning) and the
criterion, the headline measure and the positive control with their levels, the rule for every other
p, and, with `--experiment claims`, the claims' rules, their regimes, every claim as its code states
it (comparison, regime, test, margin, family) and the SHA-256 of that code, so that no claim changes
after test was read without the plan changing. A rerun in the same OUT with another plan is refused; the file's
SHA-256 is printed in report.md.

Test is read once: the table's test results are recorded under the plan's digest (test-read.json), and
a rerun of the same plan must come to the same numbers (its runs and evaluations are OUT's cached ones);
other numbers are refused, never reported in their place.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from pathlib import Path

from mosaictool.atomic import write_text
from mosaictool.demo import tuning
from mosaictool.demo.config import COLUMNS, DemoConfig, file_digest
from mosaictool.errors import MosaicError

NAME = "preregistration.json"
READ_NAME = "test-read.json"
# where and how fast the demo runs, not what it computes
RUNTIME = ("out", "cache_dir", "workers", "device", "loader_workers", "parallel_runs")


def _code(*modules: str) -> dict[str, str]:
    """{module path under mosaictool/: SHA-256 of its bytes}."""
    root = Path(__file__).resolve().parents[1]
    return {m: file_digest(root / m) for m in modules}


def _stated_claims(modules: list[str]) -> list[dict]:
    """Every Claim(...) the modules construct, as their source states it (the comparison, its regime, source,
    test, margin and family; an expression where the code computes it, e.g. per column): the findings and
    controls a claims.md will judge, listed before test is read."""
    root, fields = Path(__file__).resolve().parents[1], ("words", "source", "paper", "comparison", "regime")
    found = []
    for module in modules:
        for node in ast.walk(ast.parse((root / module).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Claim":
                stated = {**dict(zip(fields, node.args)), **{k.arg: k.value for k in node.keywords if k.arg in
                                                             ("test", "margin", "family", "role", "columns")}}
                found.append({"module": module, **{k: ast.literal_eval(v) if isinstance(v, ast.Constant) else ast.unparse(v)
                                                   for k, v in stated.items() if k != "words"}})
    return found


def _claims_plan() -> dict:
    from mosaictool.demo import claims
    from mosaictool.demo.experiments import claims as claims_experiment

    modules = ["demo/claims.py", "demo/experiments/claims.py", *(f"demo/experiments/{r}.py" for r in claims_experiment.REGIMES)]
    return {"alpha": claims.ALPHA,
            "rules": "each finding at the size the paper states (superiority, non-inferiority, equivalence by TOST), its "
                     "verdict read off a two-sided 1 − alpha/m interval (Bonferroni over the file's m findings); a verdict "
                     "only where its regime's positive control passed on its columns; the controls apart; one family per effect",
            "regimes": [claims.TABLE_REGIME, *claims_experiment.REGIMES],
            "stated": _stated_claims(modules),
            "code": _code(*modules)}


def plan(cfg: DemoConfig) -> dict:
    """What a demo on test declares before it reads test (see the module's docstring)."""
    from mosaictool.demo import significance as sig

    settings = json.loads(json.dumps(dataclasses.asdict(cfg)))
    measure = {col: f"{sub} {metric}" for col, sub, metric in COLUMNS}
    return {
        "about": "declared before any evaluation on the world's test split; never changed in this folder",
        "settings": {k: v for k, v in settings.items() if k not in RUNTIME},
        "tuning": tuning.plan(cfg) if cfg.select_on_val else "none: the settings' learning rates (finetune_lr, row_lrs)",
        "headline": {"comparison": f"{sig.HEADLINE_METHOD} − {sig.HEADLINE_REFERENCE}", "column": sig.HEADLINE_COLUMN,
                     "measure": measure[sig.HEADLINE_COLUMN], "alpha": sig.HEADLINE_ALPHA,
                     "test": "paired by seed and test case (two-way random effects), Student's t with seeds − 1 df, two-sided"},
        "control": {"comparison": f"{sig.CONTROL_TREATED} − {sig.CONTROL_REFERENCE}", "columns": list(sig.CONTROL_COLUMNS),
                    "alpha": sig.CONTROL_ALPHA, "test": "intersection-union: positive with p < alpha on every column"},
        "exploratory": "every other p in report.md, Holm-adjusted over the table it is printed in",
        "code": _code("demo/significance.py"),
        "claims": _claims_plan() if "claims" in cfg.experiments else None,
    }


def _text(value: dict) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _read_json(path: Path):
    """The JSON in `path`, or None where it is absent or unreadable (then it records nothing)."""
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def _differences(old, new, prefix: str = "") -> list[str]:
    """The dotted keys where two plans differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted(set(old) | set(new), key=str)
                for d in _differences(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [prefix.rstrip(".") or "the file"]


def declare(cfg: DemoConfig, out: Path) -> str:
    """Write OUT/preregistration.json, or find the same plan there; another plan is refused. Its SHA-256."""
    path, now = out / NAME, json.loads(_text(plan(cfg)))
    if path.is_file():
        before = _read_json(path)
        if before != now:
            changed = ", ".join(_differences(before, now)[:3])
            raise MosaicError(f"--out {out}: its {NAME} (sha256 {file_digest(path)[:12]}) declares another plan ({changed} differ) "
                              "and a pre-registration is never changed: rerun with its settings, or choose a new --out")
    else:
        write_text(path, _text(now))
    return file_digest(path)


def read_once(out: Path, digest: str, rows: list[dict]) -> None:
    """The table's test results under the pre-registration `digest`: recorded the first time (test-read.json),
    afterwards the same numbers or a refusal (one line, before results.jsonl or report.md is written)."""
    found = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
    path = out / READ_NAME
    record = _read_json(path)
    if isinstance(record, dict) and record.get("preregistration") == digest:
        if record.get("results") != found:
            raise MosaicError(f"{path}: test was read once for pre-registration {digest[:12]} (results sha256 "
                              f"{str(record.get('results'))[:12]}); this run scored other numbers ({found[:12]}) and they are "
                              "not reported: choose a new --out for a new pre-registration")
        return
    write_text(path, _text({"preregistration": digest, "results": found}))


def report_line(digest: str) -> str:
    """report.md's statement of the pre-registration."""
    return (f"Pre-registration: `{NAME}`, sha256 `{digest}`, written in this folder before any evaluation on test: the "
            "settings, every row's search on val (grid, budget, seed, trials) and its criterion, the headline measure and the "
            "confirmatory comparisons. A rerun here with another plan is refused, and test is read once "
            f"(`{READ_NAME}`).")
