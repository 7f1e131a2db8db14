"""CPU quotas for `threadline bench scaleout`: one Linux cgroup (v1 `cpu` controller) per process, its
`cpu.cfs_quota_us` set the way a Kubernetes CPU limit sets a pod's.

Every group lives under one parent made for the run (`<root>/cpu/threadline-scaleout-<pid>`); the `cpuacct`
controller, when mounted beside it, counts each group's CPU (else the bench sums its processes' own counters).
`close()` moves whatever is still inside back to the root group and removes every group, parent last.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

PERIOD_US = 100_000  # the kernel's and Kubernetes' default CFS period
MIN_QUOTA_US = 1_000  # the kernel refuses a smaller quota


class CgroupError(RuntimeError):
    """Cgroups cannot be made here (no v1 cpu controller, or not writable)."""


def check_writable(root: Path) -> None:
    """Refuse, with what to do, unless a cpu group can be made, given a quota and removed under `root`."""
    cpu = root / "cpu"
    if not (cpu / "cpu.cfs_quota_us").exists():
        raise CgroupError(f"no cgroup v1 cpu controller at {cpu} (cpu.cfs_quota_us is missing): the bench confines "
                          "each process with cpu.cfs_quota_us; run it where /sys/fs/cgroup/cpu is mounted")
    probe = cpu / f"threadline-scaleout-probe-{os.getpid()}"
    try:
        probe.mkdir()
        (probe / "cpu.cfs_quota_us").write_text(str(PERIOD_US))
    except OSError as error:
        raise CgroupError(f"cannot write cgroups under {cpu} ({error.strerror}): the bench needs root, or a "
                          "cgroup delegated to its user, to give each process a CPU quota") from None
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def _quota_us(cores: float) -> int:
    return max(MIN_QUOTA_US, round(cores * PERIOD_US))


class CpuGroups:
    """The run's groups: `make(name, cores)`, `add(name, pid)`, `usage(name)`, `throttled(name)`, `close()`."""

    def __init__(self, root: Path, run: str | None = None) -> None:
        self.root = root
        self.name = run or f"threadline-scaleout-{os.getpid()}"
        self.cpu = root / "cpu" / self.name
        acct = root / "cpuacct"
        self.acct = acct / self.name if (acct / "cpuacct.usage").exists() and acct.resolve() != (root / "cpu").resolve() \
            else None
        self.groups: dict[str, float] = {}
        self.members: dict[str, set[int]] = {}

    def open(self) -> CpuGroups:
        check_writable(self.root)
        self.cpu.mkdir(exist_ok=True)
        if self.acct is not None:
            self.acct.mkdir(exist_ok=True)
        return self

    def make(self, name: str, cores: float) -> None:
        """A group of its own for one process (or one server's process tree), limited to `cores`."""
        group = self.cpu / name
        group.mkdir(exist_ok=True)
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(_quota_us(cores)))
        if self.acct is not None:
            (self.acct / name).mkdir(exist_ok=True)
        self.groups[name] = cores
        self.members.setdefault(name, set())

    @contextlib.contextmanager
    def unconfined(self) -> Iterator[None]:
        """Every group without a quota for a while (work that prepares a measurement, not the measurement)."""
        try:
            for name in self.groups:
                (self.cpu / name / "cpu.cfs_quota_us").write_text("-1")
            yield
        finally:
            for name, cores in self.groups.items():
                with contextlib.suppress(OSError):
                    (self.cpu / name / "cpu.cfs_quota_us").write_text(str(_quota_us(cores)))

    def add(self, name: str, pid: int) -> None:
        """Move a process (all its threads) into the group; processes it forks later start there too."""
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):
            (self.cpu / name / "cgroup.procs").write_text(str(pid))
            if self.acct is not None:
                (self.acct / name / "cgroup.procs").write_text(str(pid))
            self.members[name].add(pid)

    def add_tree(self, name: str, pid: int) -> None:
        """A process and every process under it (a server's workers, PostgreSQL's backends)."""
        try:
            tree = [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
        except psutil.NoSuchProcess:
            return
        for member in tree:
            self.add(name, member)

    def usage(self, name: str) -> float:
        """CPU seconds the group has used since it was made."""
        if (self.cpu / name / "cpuacct.usage").exists():  # cpu and cpuacct mounted together
            return int((self.cpu / name / "cpuacct.usage").read_text()) / 1e9
        if self.acct is not None:
            return int((self.acct / name / "cpuacct.usage").read_text()) / 1e9
        total = 0.0
        for pid in _pids(self.cpu / name):
            with contextlib.suppress(psutil.NoSuchProcess):
                times = psutil.Process(pid).cpu_times()
                total += times.user + times.system
        return total

    def throttled(self, name: str) -> tuple[int, int]:
        """(periods, periods throttled) from the group's cpu.stat."""
        stat = dict(line.split() for line in (self.cpu / name / "cpu.stat").read_text().splitlines() if line.strip())
        return int(stat.get("nr_periods", 0)), int(stat.get("nr_throttled", 0))

    def leave(self) -> None:
        """Move the calling process to the root groups (a child the bench starts, before it runs anything: it must
        not inherit the load generator's quota)."""
        for base in (b for b in (self.cpu, self.acct) if b is not None):
            with contextlib.suppress(OSError):
                (base.parent / "cgroup.procs").write_text("0")

    def remove(self, name: str) -> None:
        """Remove one (empty) group: its process is gone."""
        for base in (b for b in (self.cpu, self.acct) if b is not None):
            with contextlib.suppress(OSError):
                (base / name).rmdir()
        self.groups.pop(name, None)
        self.members.pop(name, None)

    def pids(self) -> set[int]:
        return {pid for name in self.groups for pid in _pids(self.cpu / name)}

    def close(self, wait: float = 10.0) -> None:
        """Put anything left back in the root groups and remove every group of the run (parent last)."""
        for base in (b for b in (self.cpu, self.acct) if b is not None and b.exists()):
            deadline = time.monotonic() + wait
            for group in sorted((p for p in base.iterdir() if p.is_dir()), reverse=True):
                for pid in _pids(group):
                    with contextlib.suppress(OSError):
                        (base.parent / "cgroup.procs").write_text(str(pid))
                while True:
                    try:
                        group.rmdir()
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)
            base.rmdir()


def _pids(group: Path) -> list[int]:
    try:
        return [int(line) for line in (group / "cgroup.procs").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def leftover_groups(root: Path) -> list[Path]:
    """Groups a scaleout run left under `root` (none after a clean or an interrupted run)."""
    return sorted(p for base in ("cpu", "cpuacct") for p in (root / base).glob("threadline-scaleout-*"))
