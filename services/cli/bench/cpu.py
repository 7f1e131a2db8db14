"""Where a benchmark's CPU goes: each process's own CPU counters (user + system time, `/proc/<pid>/stat` through
psutil) read before and after a measured window.

A process is named as `threadline up` names it (`gateway`, `staging-2`, …) plus `nats-server` and `postgres` (the
postmaster and every backend under it) when `up` runs them embedded, and the anchors by their target. A process
that started inside the window counts with all its time; one that ended inside it is missed (the services' pools
keep their connections, so PostgreSQL's backends live through a run).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def embedded_servers(up_pid: int | None, data_dir: Path | None = None) -> dict[str, list[psutil.Process]]:
    """The NATS and PostgreSQL servers `up` (pid) runs embedded: NATS is its child; PostgreSQL's postmaster, started
    by pg_ctl, is found by the pid file in the data dir (its backends are its children)."""
    found: dict[str, list[psutil.Process]] = {}
    pid_file = data_dir / "postgres" / "postmaster.pid" if data_dir is not None else None
    if pid_file is not None and pid_file.exists():
        with contextlib.suppress(ValueError, IndexError, psutil.NoSuchProcess, OSError):
            found["postgres"] = [psutil.Process(int(pid_file.read_text().split()[0]))]
    if up_pid is None:
        return found
    try:
        descendants = psutil.Process(up_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return found
    for process in descendants:
        try:
            name = process.name()
            parent = process.parent()
            parent_name = parent.name() if parent is not None else ""
        except psutil.NoSuchProcess:
            continue
        if name == "nats-server":
            found.setdefault("nats-server", []).append(process)
        elif (name in ("postgres", "postmaster") and parent_name not in ("postgres", "postmaster")
              and "postgres" not in found):
            found.setdefault("postgres", []).append(process)
    return found


def system_pids(runtime: dict[str, Any], data_dir: Path | None = None) -> dict[str, list[int]]:
    """Every process of a running system by name, from its runtime.json (services) and `up`'s children."""
    pids = {name: [entry["pid"]] for name, entry in (runtime.get("services") or {}).items() if entry.get("pid")}
    for name, processes in embedded_servers(runtime.get("pid"), data_dir).items():
        pids[name] = [p.pid for p in processes]
    return pids


@dataclass
class CpuWindow:
    """CPU seconds of named process trees between `start()` and `stop()`."""

    pids: dict[str, list[int]]
    began: dict[str, dict[int, float]] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    _t0: float = 0.0

    def _read(self) -> dict[str, dict[int, float]]:
        readings: dict[str, dict[int, float]] = {}
        for name, roots in self.pids.items():
            found: dict[int, float] = {}
            for pid in roots:
                for process in _tree(pid):
                    try:
                        found[process.pid] = _cpu_seconds(process)
                    except psutil.NoSuchProcess:
                        continue
            readings[name] = found
        return readings

    def start(self) -> CpuWindow:
        self.began = self._read()
        self._t0 = time.perf_counter()
        return self

    def stop(self) -> CpuWindow:
        self.seconds = time.perf_counter() - self._t0
        ended = self._read()
        self.used = {name: sum(max(0.0, now - self.began.get(name, {}).get(pid, 0.0))
                               for pid, now in ended.get(name, {}).items()) for name in self.pids}
        return self

    def ms_per(self, count: int) -> dict[str, float | None]:
        """CPU milliseconds per unit of work (a call), each process."""
        return {name: (round(seconds * 1000 / count, 2) if count else None) for name, seconds in self.used.items()}

    def cores(self) -> dict[str, float]:
        """Each process's average CPU over the window, in cores."""
        return {name: round(seconds / self.seconds, 3) if self.seconds else 0.0 for name, seconds in self.used.items()}


def _tree(pid: int) -> Iterable[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
