"""Configuration from the environment (THREADLINE_*): the one place that reads it."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

RUNTIME_FILE = "runtime.json"
CREDENTIALS_FILE = "credentials.json"
SECRET_FILE = "secret"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="THREADLINE_", extra="ignore", frozen=True)

    database_url: str | None = None
    nats_url: str | None = None
    http_host: str = "127.0.0.1"
    http_port: int = 8700
    data_dir: Path = Path(".threadline")
    log_level: str = "INFO"
    log_format: str = Field(default="auto", pattern="^(auto|json|console)$")
    secret: SecretStr | None = None

    # Subjects are "<prefix>.cmd.<service>.<command>" and "<prefix>.events.…"; the event stream is
    # "<PREFIX>_EVENTS". Distinct prefixes keep deployments (and test runs) on one NATS apart.
    nats_prefix: str = Field(default="threadline", pattern=r"^[a-z][a-z0-9_-]*$")
    request_timeout: float = 10.0
    db_pool_size: int = 10
    service_workers: int | None = None
    default_case: str | None = None
    allowed_hosts: str = ""
    events_duplicate_window_seconds: int = 24 * 3600
    events_max_age_days: int = 0
    relay_poll_interval: float = 1.0
    relay_batch_size: int = 500
    operation_ttl_seconds: int = 24 * 3600
    auth_cache_seconds: float = 2.0
    # Tests only: `exit_after_commit:stage_claims,…` makes a service process exit right after committing
    # the named command, before it replies — what a crash at the worst moment looks like to the caller.
    failpoints: str = ""

    # For CLI commands that act as a user: `serve gateway --stdio` (an agent token) and `review` (a
    # reviewer token, and the gateway's URL when it is not the data dir's).
    token: SecretStr | None = None
    url: str | None = None

    def failpoint_commands(self, moment: str) -> set[str]:
        return {command for point in self.failpoints.split(",") if point.strip()
                for name, _, command in [point.strip().partition(":")] if name == moment}

    @property
    def workers(self) -> int:
        return self.service_workers or self.db_pool_size

    @property
    def stream_name(self) -> str:
        return f"{self.nats_prefix.upper().replace('-', '_')}_EVENTS"

    def runtime(self) -> dict[str, str]:
        path = self.data_dir / RUNTIME_FILE
        if not path.exists():
            return {}
        return json.loads(path.read_text())

    def resolved_database_url(self) -> str:
        url = self.database_url or self.runtime().get("databaseUrl")
        if not url:
            raise ConfigurationError(
                "no database: set THREADLINE_DATABASE_URL or start `threadline up` (it writes "
                f"{self.data_dir / RUNTIME_FILE})"
            )
        return url

    def resolved_nats_url(self) -> str:
        url = self.nats_url or self.runtime().get("natsUrl")
        if not url:
            raise ConfigurationError(
                "no NATS server: set THREADLINE_NATS_URL or start `threadline up` (it writes "
                f"{self.data_dir / RUNTIME_FILE})"
            )
        return url

    def resolved_http_url(self) -> str:
        return self.runtime().get("httpUrl") or f"http://{self.http_host}:{self.http_port}"

    def resolved_secret(self) -> bytes:
        """The key that signs commit tokens; generated into the data dir on first use when unset."""
        if self.secret is not None:
            configured = self.secret.get_secret_value()
            if not configured.strip():
                raise ConfigurationError("THREADLINE_SECRET is set but empty: set it to a long random value")
            return configured.encode()
        path = self.data_dir / SECRET_FILE
        if not path.exists():
            _create_secret_file(path)
        secret = path.read_text().strip()
        if not secret:
            raise ConfigurationError(
                f"the secret file {path} is empty: delete it to generate a new one, or set THREADLINE_SECRET"
            )
        return secret.encode()


class ConfigurationError(RuntimeError):
    """The environment does not say how to reach a required server, or gives an unusable value."""


def _create_secret_file(path: Path) -> None:
    """Write a new secret beside `path` and hard-link it into place: the first writer wins.

    Readers see either no file or a complete one (never an empty file mid-write), and a process that
    loses the race keeps the winner's secret instead of failing, so every process signs alike.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(48))
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(temporary)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def child_environment(overrides: dict[str, str]) -> dict[str, str]:
    """This process's environment with `overrides`, for the service processes `threadline up` starts."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", **overrides}
