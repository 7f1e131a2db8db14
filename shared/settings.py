"""Configuration from the environment (THREADLINE_*): the one place that reads it."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

RUNTIME_FILE = "runtime.json"
CREDENTIALS_FILE = "credentials.json"
SECRET_FILE = "secret"


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="THREADLINE_", extra="ignore", frozen=True)

    database_url: str | None = None
    nats_url: str | None = None
    # An external NATS's authentication (the embedded one's users live in the data dir): a credentials
    # file (JWT + NKey seed), or a user and password; a CA to trust for its TLS certificate.
    nats_creds: Path | None = None
    nats_user: str | None = None
    nats_password: SecretStr | None = None
    nats_tls_ca: Path | None = None
    http_host: str = "127.0.0.1"
    http_port: int = 8700
    http_reuse_port: bool = False  # bind the gateway's port with SO_REUSEPORT, so replicas can share it
    # The address the deployment is reached by (behind a proxy: the proxy's), under which exports name their
    # records; unset: http://{http_host}:{http_port}. Never the request's Host header: one record, one IRI.
    public_url: str | None = None
    # Processes per service under `threadline up`: "staging=2,gateway=2" (unset: what suits the machine).
    replicas: str | None = None
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
    # Each case's or company's events go through one of these partitions; one relay leads each (every relay of
    # a deployment must agree on the number).
    relay_partitions: int = Field(default=16, ge=1, le=4096)
    # Each case's events reach the projection through one of these partitions (a consumer each, led by one
    # projection replica): shared/streams.py. `migrate` makes them; every replica must agree on the number.
    projection_partitions: int = Field(default=8, ge=1, le=256)
    operation_ttl_seconds: int = 24 * 3600
    auth_cache_seconds: float = 2.0
    # Tests only: `exit_after_commit:stage_claims,…` makes a service process exit right after committing
    # the named command, before it replies — what a crash at the worst moment looks like to the caller;
    # `pause_after_commit:decide` holds the reply a few seconds (an outage can then strike while it waits).
    failpoints: str = ""
    # Review checks turned off, by name ("prediction-without-year,merge-across-kinds"; docs/review-checks.md).
    review_checks_disabled: str = ""

    # Operations beyond one machine. The event stream's replicas: unset keeps what the stream has (1 for a
    # new one), so `migrate` never undoes an operator's change; 3 on a three-server NATS cluster.
    events_replicas: int | None = Field(default=None, ge=1, le=5)
    # A direct (session) connection for the relay's and the projection's advisory locks, when database_url is a
    # transaction pooler; with database_transaction_pooler every other connection goes through it
    # without server-side statement caches.
    relay_database_url: str | None = None
    database_transaction_pooler: bool = False
    # This process's /healthz, /readyz and /metrics (unset: none besides the gateway's own HTTP port).
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    # The standard OpenTelemetry variable (no THREADLINE_ prefix): traces are exported only when it is set.
    otel_exporter_otlp_endpoint: str | None = Field(
        default=None,
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
    )

    # Webhooks. Loopback and private targets are refused unless allowed; unset means "not said": `up`
    # allows them (receivers on the same machine), a bare `serve webhooks` (a container) refuses them.
    webhook_allow_private: bool | None = None
    webhook_timeout_seconds: float = Field(default=10.0, gt=0)
    webhook_concurrency: int = Field(default=16, ge=1)
    webhook_in_flight_per_webhook: int = Field(default=4, ge=1)
    # Failed attempts are retried after base * 2^(attempt-1) seconds (capped, with jitter) until
    # webhook_retry_for_seconds have passed since the first attempt; then the webhook is marked failing.
    webhook_retry_base_seconds: float = Field(default=5.0, gt=0)
    webhook_retry_max_delay_seconds: float = Field(default=3600.0, gt=0)
    webhook_retry_for_seconds: float = Field(default=24 * 3600.0, gt=0)
    # How long a replica holds a delivery it is sending; another replica takes it over after that.
    webhook_lease_seconds: float = Field(default=60.0, gt=0)
    webhook_poll_interval: float = Field(default=1.0, gt=0)

    # For CLI commands that act as a user: `serve gateway --stdio` (an agent token) and `review` (a
    # reviewer token, and the gateway's URL when it is not the data dir's).
    token: SecretStr | None = None
    url: str | None = None

    @field_validator("log_level")
    @classmethod
    def _a_log_level(cls, value: str) -> str:
        """Else the logging module's traceback, from `up` and from every service as it starts."""
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return value.upper()

    @field_validator("review_checks_disabled")
    @classmethod
    def _known_review_checks(cls, value: str) -> str:
        """A misspelt name would leave its check on while the operator believes it off: refused at start."""
        named = [name.strip() for name in value.split(",") if name.strip()]
        if not named:
            return value
        from shared.review_checks import CHECKS  # only when set: the checks' module is not light to import

        if unknown := [name for name in named if name not in CHECKS]:
            raise ValueError(f"THREADLINE_REVIEW_CHECKS_DISABLED names no check {', '.join(unknown)}; "
                             f"the checks are {', '.join(CHECKS)}")
        return value

    def failpoint_commands(self, moment: str) -> set[str]:
        return {command for point in self.failpoints.split(",") if point.strip()
                for name, _, command in [point.strip().partition(":")] if name == moment}

    @property
    def disabled_review_checks(self) -> frozenset[str]:
        return frozenset(name.strip() for name in self.review_checks_disabled.split(",") if name.strip())

    @property
    def workers(self) -> int:
        return self.service_workers or self.db_pool_size

    @property
    def webhook_lease(self) -> float:
        """A lease outlasts the longest attempt, so a live sender never loses its delivery mid-request."""
        return max(self.webhook_lease_seconds, self.webhook_timeout_seconds + 2.0)

    @property
    def stream_name(self) -> str:
        return f"{self.nats_prefix.upper().replace('-', '_')}_EVENTS"

    def runtime(self) -> dict[str, str]:
        path = self.data_dir / RUNTIME_FILE
        if not path.exists():
            return {}
        return json.loads(path.read_text())

    def _configured_or_running(self, configured: str | None, key: str, what: str, variable: str) -> str:
        """A URL set in the settings, else the one a running `threadline up` wrote into runtime.json."""
        url = configured or self.runtime().get(key)
        if not url:
            raise ConfigurationError(f"no {what}: set {variable} or start `threadline up` (it writes "
                                     f"{self.data_dir / RUNTIME_FILE})")
        return url

    def resolved_database_url(self) -> str:
        return self._configured_or_running(self.database_url, "databaseUrl", "database", "THREADLINE_DATABASE_URL")

    def resolved_relay_database_url(self) -> str:
        """The relay's session connection: the direct URL when one is given, else the usual one."""
        return self.relay_database_url or self.resolved_database_url()

    def resolved_nats_url(self) -> str:
        return self._configured_or_running(self.nats_url, "natsUrl", "NATS server", "THREADLINE_NATS_URL")

    @property
    def public_base(self) -> str:
        return (self.public_url or f"http://{self.http_host}:{self.http_port}").rstrip("/")

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


def environment_problems(error: ValidationError) -> list[str]:
    """One line per variable the environment got wrong, named as it is set (THREADLINE_LOG_FORMAT), with what
    it must be: what `Settings()` refused, said without pydantic's dump."""
    problems = []
    for problem in error.errors(include_url=False):
        field = str(problem["loc"][0]) if problem["loc"] else ""
        known = Settings.model_fields.get(field)
        variable = f"{Settings.model_config['env_prefix']}{field.upper()}" if known and not known.validation_alias \
            else field
        if problem["type"] == "value_error":
            rule = str(problem["ctx"]["error"]).removeprefix(f"{variable} ")
        else:
            rule = problem["msg"].replace("Input should", "must").replace("String should", "must")
        secret = known is not None and SecretStr in (known.annotation, *getattr(known.annotation, "__args__", ()))
        given = "" if secret else f" (it is {problem['input']!r})"
        problems.append(f"{variable}{given}: {rule}")
    return problems


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
