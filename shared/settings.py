"""Configuration from the environment (THREADLINE_*): the one place that reads it."""

from __future__ import annotations

import json
import os
import secrets
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
            return self.secret.get_secret_value().encode()
        path = self.data_dir / SECRET_FILE
        if not path.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(48))
        return path.read_text().strip().encode()


class ConfigurationError(RuntimeError):
    """The environment does not say how to reach a required server."""


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def child_environment(overrides: dict[str, str]) -> dict[str, str]:
    """This process's environment with `overrides`, for the service processes `threadline up` starts."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", **overrides}
