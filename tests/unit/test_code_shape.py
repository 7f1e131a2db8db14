"""The shape the code keeps (README, "Layout"): short modules, use cases free of SQL, kinds in one place.

These read the source tree, so a change that breaks the shape fails here rather than in a review.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "shared")
MAX_MODULE_LINES = 450
# Item kinds are described once (shared/kinds.py); code compares against a kind's name only where
# a string from outside arrives, never to dispatch.
KIND_COMPARISON = re.compile(
    r'(==|!=) ?"(sources|claims|relations|merge|verdict|groups)"|in \("(sources|claims|relations|merge|verdict)"'
)
MAX_KIND_COMPARISONS = 4


def _modules() -> list[Path]:
    found = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py")]
    return sorted(path for path in found if "migrations" not in path.parts)


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_tree_is_where_this_test_looks():
    assert len(_modules()) > 50


@pytest.mark.parametrize("path", _modules(), ids=_name)
def test_no_module_is_over_the_line_limit(path: Path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{_name(path)} has {lines} lines; split it by concern"


def test_no_use_case_module_imports_sqlalchemy():
    offenders = []
    for path in _modules():
        if path.name != "use_cases.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            offenders += [f"{_name(path)}: {name}" for name in names if name.split(".")[0] == "sqlalchemy"]
    assert offenders == []


def test_kinds_are_not_dispatched_by_name():
    hits = [
        f"{_name(path)}:{number}: {line.strip()}"
        for path in _modules()
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if KIND_COMPARISON.search(line)
    ]
    assert len(hits) <= MAX_KIND_COMPARISONS, "\n".join(hits)


SKIPS = {"skip", "skipif", "importorskip"}


def _skips_in(path: Path) -> list[str]:
    """`pytest.skip(…)`, `pytest.importorskip(…)`, `pytest.mark.skip…` in a test module, by line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr in SKIPS and "pytest" in ast.unparse(node.value):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_test_skips_itself_but_through_tests_dependencies():
    # A bare skip passes silently in CI; tests.dependencies.missing() skips on a developer's machine and fails
    # under CI=true, so a missing dependency shows.
    modules = sorted(p for p in (ROOT / "tests").rglob("*.py") if p != ROOT / "tests" / "dependencies.py")
    assert modules, "the tests are where this test looks"
    assert [skip for path in modules for skip in _skips_in(path)] == []
