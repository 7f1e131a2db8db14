"""A test whose dependency (a program, a browser, a folder) is missing skips on a developer's machine and
fails in CI: under `CI=true` (what `.ci/run` runs with) every test must run, so a missing install shows."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def required() -> bool:
    """Whether a missing dependency fails the test: `CI` is true, or an older THREADLINE_REQUIRE_* is set."""
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        return True
    return any(os.environ.get(name) for name in ("THREADLINE_REQUIRE_BROWSER", "THREADLINE_REQUIRE_PGBOUNCER"))


def missing(reason: str) -> NoReturn:
    """Skip for `reason`, or fail under CI (where the suite must run whole)."""
    if required():
        pytest.fail(f"{reason} (CI=true: a missing dependency fails instead of skipping)", pytrace=False)
    pytest.skip(reason)
