"""`threadline up` run as a user runs it: a subprocess with a fresh data dir."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import psutil

from services.cli.embedded import free_port
from tests.processes import THREADLINE, clean_environment
from tests.support import TLS


@dataclass
class RunningSystem:
    data_dir: Path
    process: subprocess.Popen
    output: list[str] = field(default_factory=list)
    stdout_lines: queue.Queue | None = None

    @property
    def runtime(self) -> dict:
        return json.loads((self.data_dir / "runtime.json").read_text())

    @property
    def credentials(self) -> dict:
        return json.loads((self.data_dir / "credentials.json").read_text())

    @property
    def http_url(self) -> str:
        return self.runtime["httpUrl"]

    def processes(self) -> list[psutil.Process]:
        """Every process the system runs: `up`, its children, and the embedded PostgreSQL server."""
        found = []
        try:
            root = psutil.Process(self.process.pid)
            found = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
        pid_file = self.data_dir / "postgres" / "postmaster.pid"
        if pid_file.exists():
            postmaster = psutil.Process(int(pid_file.read_text().splitlines()[0]))
            found += [postmaster, *postmaster.children(recursive=True)]
        return found

    def ready(self) -> bool:
        """The gateway's /readyz says every dependency answers."""
        try:
            return httpx2.get(f"{self.http_url}/readyz", timeout=5, verify=TLS).status_code == 200
        except httpx2.HTTPError:
            return False

    def pid_of(self, child: str) -> int | None:
        """The pid of one supervised child: a service, `nats-server` or `postgres` (the postmaster); None for
        `nats-server` between its death and its restart."""
        if child == "postgres":
            return int((self.data_dir / "postgres" / "postmaster.pid").read_text().split()[0])
        if child == "nats-server":
            return next((p.pid for p in psutil.Process(self.process.pid).children() if p.name() == "nats-server"),
                        None)
        return self.runtime["services"][child]["pid"]

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60) -> int:
        self.process.send_signal(sig)
        code = self.process.wait(timeout=timeout)
        time.sleep(0.1)  # the reader thread drains what the process printed last
        while self.stdout_lines is not None and not self.stdout_lines.empty():
            self.output.append(self.stdout_lines.get().rstrip("\n"))
        return code


def start_system(data_dir: Path, *, demo: bool = False, env: dict[str, str] | None = None,
                 timeout: float = 120, args: tuple[str, ...] = ()) -> RunningSystem:
    environment = {**clean_environment(THREADLINE_HTTP_PORT=str(free_port()), THREADLINE_LOG_LEVEL="INFO"),
                   **(env or {})}
    process = subprocess.Popen(
        [str(THREADLINE), "up", "--data-dir", str(data_dir), "--demo" if demo else "--no-demo", *args],
        stdout=subprocess.PIPE,
        stderr=open(data_dir.parent / f"{data_dir.name}-up.log", "ab"),  # noqa: SIM115
        text=True,
        env=environment,
    )
    system = RunningSystem(data_dir, process)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in iter(process.stdout.readline, "")],
                     daemon=True).start()  # reads stdout until the process closes it; the test never blocks on it
    deadline = time.monotonic() + timeout
    announced = False
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if process.poll() is not None and lines.empty():
                errors = (data_dir.parent / f"{data_dir.name}-up.log").read_text().splitlines()[-5:]
                raise RuntimeError(f"threadline up exited with {process.returncode}: {system.output}; "
                                   f"stderr ends: {errors}") from None
            continue
        system.output.append(line.rstrip("\n"))
        announced = announced or line.startswith("Threadline is up")
        # The announcement ends with the bearer tokens (first start) or the credentials path.
        if announced and line.strip().startswith(("agent ", "Bearer tokens:")):
            system.stdout_lines = lines
            return system
    process.send_signal(signal.SIGTERM)
    raise TimeoutError(f"threadline up was not ready in {timeout}s: {system.output}")
