"""The `threadline` command as tests run it: one command to its end (`threadline(…)`), or service processes
(`threadline serve …`) started, SIGKILLed and stopped like the pods of a crashing deployment, each with its own log."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

THREADLINE = Path(sys.executable).parent / "threadline"


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without the THREADLINE_* settings of whoever runs the tests, plus `extra`."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("THREADLINE_")}, **extra}


def threadline(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 60,
               input: str | None = None) -> subprocess.CompletedProcess:
    """Run `threadline ARGS` to its end, its output captured as text; `env` defaults to clean_environment()."""
    return subprocess.run([str(THREADLINE), *args], env=clean_environment() if env is None else env, cwd=cwd,
                          input=input, capture_output=True, text=True, timeout=timeout)


class ServiceProcesses:
    def __init__(self, name: str, env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.env = env
        self.log_dir = log_dir
        self.processes: list[subprocess.Popen] = []
        self.kills = 0

    def start(self, **env: str) -> subprocess.Popen:
        """Start one more process; `env` adds settings of its own (a port, say) to the shared ones."""
        log = open(self.log_dir / f"{self.name}-{len(self.processes)}.log", "ab")  # noqa: SIM115 - the child owns it
        process = subprocess.Popen([str(THREADLINE), "serve", self.name], env={**self.env, **env}, stdout=log,
                                   stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        self.processes.append(process)
        return process

    # A process's start (imports, connections, its consumer) takes 2-3 s on a quiet machine and has taken over
    # 30 s on one whose cores other runs keep busy: a bound for a hang, not a timing.
    async def started(self, logged: str, timeout: float = 90) -> subprocess.Popen:
        """Start one and return it once its log says `logged`."""
        process = self.start()
        await self.logs(process, logged, timeout)
        return process

    async def logs(self, process: subprocess.Popen, logged: str, timeout: float = 90) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while logged not in self.log_of(process):
            if process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {process.returncode}: {self.log_of(process)[-2000:]}")
            if loop.time() > deadline:
                raise RuntimeError(f"{self.name} did not log {logged!r} within {timeout}s")
            await asyncio.sleep(0.1)

    def log_of(self, process: subprocess.Popen) -> str:
        return (self.log_dir / f"{self.name}-{self.processes.index(process)}.log").read_text()

    def kill(self, process: subprocess.Popen) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.kills += 1

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=20)
