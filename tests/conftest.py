"""Session-wide fixtures: real NATS and PostgreSQL servers, and a fresh deployment on them."""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from shared.logging import configure_logging
from tests.support import TEST_LOG_LEVEL, Servers, Stack, new_deployment, remove_deployment

configure_logging("tests", TEST_LOG_LEVEL, "console")

# Property tests judge what is generated, not how fast: on CI's two shared cores, kept busy, generating inputs can
# be slow enough for Hypothesis' too_slow health check (or an example's deadline) to fail a test that holds.
settings.register_profile("threadline", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("threadline")


def _dump_tasks(*_: object) -> None:
    """`kill -USR1 <pytest pid>` prints every asyncio task's stack: for diagnosing a hang."""
    loop = asyncio.get_event_loop_policy().get_event_loop()
    for task in asyncio.all_tasks(loop):
        print(f"--- {task.get_name()}", file=sys.stderr)
        task.print_stack(file=sys.stderr)


signal.signal(signal.SIGUSR1, _dump_tasks)


SERVERS_USED: list[str] = []
TASKS_END_SECONDS = 30.0


def pytest_configure(config) -> None:  # noqa: ANN001
    # Each run its own temporary root, outside /tmp/pytest-of-<user>: every other pytest run on the machine
    # sets that back to mode 0700, which locks out the unprivileged user the embedded PostgreSQL runs as
    # when the tests run as root (its data dirs live under tmp_path).
    if not config.option.basetemp:
        config.option.basetemp = tempfile.mkdtemp(prefix="threadline-pytest-")
        config._threadline_basetemp = config.option.basetemp


def pytest_collection_modifyitems(config, items) -> None:  # noqa: ANN001
    """The files that hold a `slow` test first, each file's tests in their order. pytest-xdist hands out whole files
    (`--dist loadfile`) in collection order when told not to sort them by their number of tests (the Makefile's
    `--no-loadscope-reorder`); a long file handed out last keeps one worker busy alone at the end (it once made
    the last 5% of the tests take a third of the run)."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


def pytest_unconfigure(config) -> None:  # noqa: ANN001
    made = getattr(config, "_threadline_basetemp", None)
    if made:
        shutil.rmtree(made, ignore_errors=True)


def pytest_sessionfinish(session) -> None:  # noqa: ANN001
    # Under pytest-xdist each worker has its own servers: it hands its line to the controller.
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["servers_used"] = list(SERVERS_USED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # noqa: ANN001
    SERVERS_USED.extend(getattr(node, "workeroutput", {}).get("servers_used", []))


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001
    for line in dict.fromkeys(SERVERS_USED):
        terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ANN001
    """Under pytest-xdist, a test marked `alone` runs while no other worker runs one: it waits for the tests
    running elsewhere to end, and the others wait for it. A bound on time that such a test checks is then met on
    the machine its criterion describes (its own busy loops, say), not on whatever another worker's test adds.

    Two lock files in the controller's temporary root: each test holds `room` shared from its fixtures' set-up to
    their teardown; an `alone` test takes `gate` first, which keeps new tests out while it waits for `room`."""
    if getattr(item.config, "workerinput", None) is None:
        return (yield)
    shared_dir = Path(item.config.option.basetemp).parent  # each worker's root is in the controller's
    with open(shared_dir / "tests-gate.lock", "a") as gate, open(shared_dir / "tests-room.lock", "a") as room:
        if item.get_closest_marker("alone"):
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(room, fcntl.LOCK_EX)
        else:
            fcntl.flock(gate, fcntl.LOCK_SH)
            fcntl.flock(room, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        return (yield)  # closing the files releases what is still held


@pytest.fixture(scope="session")
async def servers():
    scratch = Path(tempfile.mkdtemp(prefix="threadline-servers-"))
    found = await Servers.find_or_start(scratch)
    SERVERS_USED.append(f"threadline tests ran against NATS {found.nats_url} with authentication and PostgreSQL "
                        f"{found.admin_database_url} ({found.origin})")
    yield found
    await found.stop()
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="session")
async def deployment(servers):
    settings = await new_deployment(servers)
    yield settings
    await remove_deployment(servers, settings)


@pytest.fixture(scope="session")
async def stack(deployment):
    running = await Stack(deployment).start()
    yield running
    await running.stop()


@pytest.fixture(scope="session", autouse=True)
async def _every_task_ends_with_the_session():
    """What the tests left running is cancelled at the end of the session, and must end. A task that outlives its
    cancellation would hang the closing of the session's loop for ever (it did once, in CI: a service's background
    job started again after nats-py turned its cancellation into ConnectionClosedError); instead its stack is
    printed and the worker exits with an error, which fails the run."""
    yield
    me = asyncio.current_task()
    left = [task for task in asyncio.all_tasks() if task is not me]
    for task in left:
        task.cancel()
    if not left:
        return
    _, stuck = await asyncio.wait(left, timeout=TASKS_END_SECONDS)
    if stuck:
        print(f"{len(stuck)} task(s) did not end within {TASKS_END_SECONDS:.0f} s of being cancelled at the end of "
              "the session:", file=sys.stderr)
        for task in stuck:
            task.print_stack(file=sys.stderr)
        sys.stderr.flush()
        os._exit(70)
