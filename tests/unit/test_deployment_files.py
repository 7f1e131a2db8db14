"""The deployment files stay valid."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.dependencies import missing

ROOT = Path(__file__).resolve().parents[2]


def compose_command() -> list[str] | None:
    """`docker compose` (v2) when the plugin is there, else Debian's `docker-compose` (v1); neither needs an engine."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_file_passes_compose_config():
    compose = compose_command()
    if compose is None:
        missing("neither `docker compose` nor `docker-compose` is installed (apt install docker-compose)")
    result = subprocess.run([*compose, "config", "-q"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_ci_script_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make up" in readme and "make test" in readme
