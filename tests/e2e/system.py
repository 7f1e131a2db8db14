"""`threadline up` run as a user runs it: a subprocess with a fresh data dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from services.cli.embedded import free_port

THREADLINE = Path(sys.executable).parent / "threadline"


@dataclass
class RunningSystem:
    data_dir: Path
    process: subprocess.Popen
    output: list[str] = field(default_factory=list)

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

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60) -> int:
        self.process.send_signal(sig)
        code = self.process.wait(timeout=timeout)
        self.output += self.process.stdout.read().splitlines()
        return code


def start_system(data_dir: Path, *, demo: bool = False, env: dict[str, str] | None = None,
                 timeout: float = 120) -> RunningSystem:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("THREADLINE_")}
    environment.update({"THREADLINE_HTTP_PORT": str(free_port()), "THREADLINE_LOG_LEVEL": "INFO"})
    environment.update(env or {})
    process = subprocess.Popen(
        [str(THREADLINE), "up", "--data-dir", str(data_dir), "--demo" if demo else "--no-demo"],
        stdout=subprocess.PIPE,
        stderr=open(data_dir.parent / f"{data_dir.name}-up.log", "ab"),  # noqa: SIM115
        text=True,
        env=environment,
    )
    system = RunningSystem(data_dir, process)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            if process.poll() is not None:
                raise RuntimeError(f"threadline up exited with {process.returncode}: {system.output}")
            continue
        system.output.append(line.rstrip("\n"))
        if line.startswith("Threadline is up"):
            # The announcement continues; read it to its end (the bearer tokens or the credentials path).
            while not system.output[-1].strip().startswith(("agent ", "Bearer tokens:")):
                system.output.append(process.stdout.readline().rstrip("\n"))
            return system
    process.send_signal(signal.SIGTERM)
    raise TimeoutError(f"threadline up was not ready in {timeout}s: {system.output}")
