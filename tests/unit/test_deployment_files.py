"""The deployment files stay valid."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_compose_file_passes_compose_config():
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip("docker-compose is not installed (Debian package docker-compose validates without an engine)")
    result = subprocess.run([compose, "config", "-q"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_ci_script_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make up" in readme and "make test" in readme
