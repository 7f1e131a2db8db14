"""The deployment files stay valid."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import yaml

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


def test_every_deployment_names_records_under_an_address_users_reach_not_the_one_it_binds():
    # A gateway binds 0.0.0.0 in a container; unset, THREADLINE_PUBLIC_URL would follow it and every export would
    # name its records under http://0.0.0.0:8700, an address of no machine.
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    public = {service: config["environment"].get("THREADLINE_PUBLIC_URL")
              for service, config in compose["services"].items() if "environment" in config and service != "postgres"}
    assert set(public.values()) == {"${THREADLINE_PUBLIC_URL:-http://localhost:8700}"}, public
    assert compose["services"]["gateway"]["ports"] == ["8700:8700"]
    k8s = ROOT / "deploy" / "k8s"
    for config in (k8s / "base" / "config.yaml", k8s / "overlays" / "production" / "patches" / "config.yaml"):
        url = urlsplit(yaml.safe_load(config.read_text())["data"]["THREADLINE_PUBLIC_URL"])
        assert url.scheme in ("http", "https") and url.hostname not in ("0.0.0.0", "::", "localhost"), config
