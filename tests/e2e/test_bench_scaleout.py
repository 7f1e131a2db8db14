"""`threadline bench scaleout` refuses what it cannot run before starting anything, and an interrupted run leaves
no process and no cgroup behind; `bench stage` charges each call's CPU to every process and to both anchors."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from services.cli.bench.cgroups import CgroupError, check_writable
from tests.dependencies import missing
from tests.e2e.system import start_system
from tests.processes import THREADLINE, threadline

pytestmark = pytest.mark.e2e

CGROUPS = Path("/sys/fs/cgroup")


def scaleout(*args: str, **popen) -> subprocess.Popen:  # noqa: ANN003
    return subprocess.Popen([str(THREADLINE), "bench", "scaleout", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def groups_of(pid: int) -> list[Path]:
    return [p for base in ("cpu", "cpuacct") if (p := CGROUPS / base / f"threadline-scaleout-{pid}").exists()]


@pytest.mark.parametrize(("args", "said"), [
    (("--quota", "0"), "--quota 0: a process's quota is a share of the machine's"),
    (("--quota", "-1"), "above 0"),
    (("--quota", str(os.cpu_count() + 1)), "at most"),
    (("--service", "webhooks"), "the services that can be swept are staging, gateway, relay, projection"),
    (("--max-replicas", "3"), "a power of two"),
    (("--rounds", "0"), "--rounds must be at least 1"),
    (("--service", "staging", "--hold", "staging=1"), "--hold staging=1: staging is the service swept"),
    (("--hold", "webhooks=1"), "the services that can be held are gateway, staging, relay, projection, review"),
    (("--max-replicas", "64"), "the machine cannot hold"),
    (("--quota", str(os.cpu_count())), "the machine cannot hold"),
    (("--cgroup-root", "/nonexistent"), "no cgroup v1 cpu controller at /nonexistent/cpu"),
    (("--plot", "/dev/null/plot.png"), "--plot /dev/null/plot.png: cannot write it"),
])
def test_bad_arguments_are_refused_before_anything_starts(args, said, tmp_path):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    bench = scaleout(*args, cwd=tmp_path)
    try:
        out, err = bench.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # not refused: a run started; its own Ctrl-C stops it and removes its groups
        bench.send_signal(signal.SIGINT)
        out, err = bench.communicate(timeout=120)
        pytest.fail(f"{args} started a run instead of being refused:\n{err[-2000:]}")
    assert bench.returncode == 2, (out, err)
    assert said in " ".join(err.split()), err
    assert out == ""
    assert groups_of(bench.pid) == [], "no cgroup was made"
    assert list(tmp_path.iterdir()) == [], "no data dir, no system"
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def require_writable_cgroups() -> None:
    """Skip where cgroups cannot be written (not root), fail so under CI."""
    try:
        check_writable(CGROUPS)
    except CgroupError as error:
        missing(f"needs writable cgroup v1 cpu groups (root): {error}")


@pytest.mark.slow
def test_ctrl_c_stops_every_process_and_removes_every_cgroup():
    require_writable_cgroups()
    # The run's own temporary folder (another bench beside it makes its own), short enough for the embedded
    # PostgreSQL's socket path.
    scratch = Path(tempfile.mkdtemp(prefix="tl-"))
    # The other scaled services held at 1: a service of each kind, fewer processes to start under their quotas.
    bench = scaleout("--service", "gateway", "--max-replicas", "2", "--hold", "staging=1,review=1,relay=1,projection=1",
                     "--agents", "4", "--cases", "2", "--seconds", "60", env={**os.environ, "TMPDIR": str(scratch)})
    confined: set[int] = set()
    deadline = time.monotonic() + 300
    try:
        # Until the system is up and every process is in its group (the gateway's is the last a point needs).
        while time.monotonic() < deadline and bench.poll() is None:
            groups = groups_of(bench.pid)
            if groups and (groups[0] / "gateway" / "cgroup.procs").exists():
                confined = {int(pid) for group in groups[0].iterdir() if group.is_dir()
                            for pid in (group / "cgroup.procs").read_text().split()}
                if len(confined) > 12:
                    break
            time.sleep(0.5)
        assert bench.poll() is None, bench.communicate()[1][-2000:]
        assert len(confined) > 12, "the service processes, `up`, NATS, PostgreSQL and the bench, each confined"
        time.sleep(2)
        bench.send_signal(signal.SIGINT)
        _, err = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
    assert bench.returncode == 130, err[-2000:]
    assert "interrupted" in err
    assert groups_of(bench.pid) == [], "every cgroup of the run is removed"
    alive = [pid for pid in confined if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert alive == [], f"processes left behind: {alive}"
    left = list(scratch.glob("threadline-scaleout-*"))
    shutil.rmtree(scratch)  # and what the embedded PostgreSQL's library keeps under $TMPDIR/runtime-<uid>
    assert left == [], "the scratch data dir is removed"


def test_bench_stage_reports_cpu_ms_per_call_of_every_process_and_both_anchors(tmp_path):
    system = start_system(tmp_path / "data")
    try:
        done = threadline("bench", "stage", "--agents", "4", "--seconds", "2", "--rounds", "1", "--settle", "0",
                          "--json", "--data-dir", str(system.data_dir), timeout=300,
                          env={**os.environ, "THREADLINE_LOG_LEVEL": "WARNING"})
    finally:
        system.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    cpu = {run["target"]: run["cpuMsPerCall"] for run in report["rounds"][0]}
    services = {"gateway", "staging", "review", "thesis-delta", "projection", "relay", "webhooks"}
    assert services | {"nats-server", "postgres"} <= set(cpu["threadline"]), cpu["threadline"]
    assert set(cpu["echo"]) == {"echo"} and set(cpu["direct"]) == {"direct", "postgres"}
    for measured in ("gateway", "staging", "postgres"):
        assert cpu["threadline"][measured] > 0, f"{measured} did work for each call"
    assert cpu["echo"]["echo"] > 0 and cpu["direct"]["direct"] > 0 and cpu["direct"]["postgres"] > 0
    assert report["medians"]["threadline"]["cpuMsPerCall"].keys() == cpu["threadline"].keys()
