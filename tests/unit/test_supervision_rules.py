"""The rules of keeping things running: restart pauses, and which failures are outages (`unavailable`)."""

from __future__ import annotations

import asyncio
import errno
import subprocess
import sys
import time

import asyncpg
import nats.errors
import pytest
from sqlalchemy import exc as sa_exc

from services.cli.up import HEALTHY_SECONDS, RESTART_FIRST_SECONDS, RESTART_MAX_SECONDS, Supervised
from shared.errors import Unavailable
from shared.outage import outage
from shared.service import keep_running


def child() -> Supervised:
    async def nothing() -> None:
        return None

    return Supervised("staging", nothing, nothing, lambda: None, started_at=0.0)


def test_the_pause_doubles_with_each_death_up_to_the_cap():
    supervised = child()
    pauses = [supervised.died(now=1.0 + n) for n in range(10)]
    assert pauses[:4] == [RESTART_FIRST_SECONDS, 2 * RESTART_FIRST_SECONDS, 4 * RESTART_FIRST_SECONDS,
                          8 * RESTART_FIRST_SECONDS]
    assert pauses[-1] == RESTART_MAX_SECONDS


def test_a_healthy_minute_makes_the_next_pause_small_again():
    supervised = child()
    for n in range(8):
        supervised.died(now=float(n))
    supervised.started_at = 100.0
    assert supervised.died(now=100.0 + HEALTHY_SECONDS - 1) > RESTART_FIRST_SECONDS  # not yet a minute
    supervised.started_at = 200.0
    assert supervised.died(now=200.0 + HEALTHY_SECONDS) == RESTART_FIRST_SECONDS


def test_a_failed_restart_waits_longer_each_time():
    supervised = child()
    first = supervised.died(now=1.0)
    assert supervised.failed_to_start() == 2 * first


@pytest.mark.parametrize("error", [
    ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
    FileNotFoundError(errno.ENOENT, "no such socket"),
    asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
    asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
    sa_exc.DBAPIError("SELECT 1", {}, Exception("gone"), connection_invalidated=True),
    nats.errors.ConnectionClosedError(),
    nats.errors.NoServersError(),
    TimeoutError(),
])
def test_cannot_reach_a_server_is_unavailable(error):
    assert outage(error).code == "unavailable"


def test_an_outage_is_found_behind_the_wrapping_error():
    try:
        try:
            raise ConnectionResetError(errno.ECONNRESET, "reset")
        except ConnectionResetError as inner:
            raise RuntimeError("while handling the command") from inner
    except RuntimeError as wrapped:
        assert outage(wrapped).code == "unavailable"


@pytest.mark.parametrize("error", [ValueError("bad"), KeyError("x"), PermissionError(errno.EACCES, "denied"),
                                   asyncpg.exceptions.UniqueViolationError("duplicate key")])
def test_a_bug_or_a_refusal_is_not_an_outage(error):
    assert outage(error) is None


def test_an_unavailable_error_stays_itself():
    original = Unavailable("no staging service is running", hint="start it")
    assert outage(original) is original


async def test_a_background_job_that_keeps_failing_is_started_again_until_the_service_stops(monkeypatch):
    import shared.service as service

    monkeypatch.setattr(service, "JOB_RESTART_FIRST_SECONDS", 0.01)
    runs = []
    stop = asyncio.Event()

    async def failing(ctx) -> None:  # noqa: ANN001
        runs.append(ctx)
        if len(runs) == 4:
            stop.set()
        raise RuntimeError("always")

    await asyncio.wait_for(keep_running(failing, "ctx", stop), 5)
    assert len(runs) == 4


async def test_a_background_job_that_swallows_its_cancellation_is_not_started_again(monkeypatch):
    """As nats-py does: a fetch cancelled while its connection closes raises ConnectionClosedError instead, so
    the job ends as if on its own. The task was asked to stop: it ends, and the job does not start again
    (once, such a restart outlived the test session's loop, which then waited on it for ever)."""
    import shared.service as service

    monkeypatch.setattr(service, "JOB_RESTART_FIRST_SECONDS", 0.01)
    runs = []
    running = asyncio.Event()

    async def swallowing(ctx) -> None:  # noqa: ANN001
        runs.append(ctx)
        running.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            if len(runs) > 1:
                raise
            raise ConnectionError("closed") from None  # the first run turns it into an ordinary error

    task = asyncio.create_task(keep_running(swallowing, "ctx", asyncio.Event()))
    await asyncio.wait_for(running.wait(), 5)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    try:
        assert task in done, "the task ended when cancelled"
        assert task.cancelled()
        assert runs == ["ctx"], "started once, not again after its stop"
    finally:
        task.cancel()  # a run started again takes its cancellation
        await asyncio.wait({task}, timeout=5)


def test_a_stop_that_hangs_ends_the_process_at_its_deadline_and_says_so():
    """What runs when a service's stop waits on something that never comes (nobody may be left to kill it)."""
    hanging = ("from shared.logging import configure_logging; from shared.service import exit_after; import time; "
               "configure_logging('probe', 'INFO', 'json'); exit_after(0.5); time.sleep(60)")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", hanging], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and time.monotonic() - started < 20
    assert '"service_stop_overran"' in done.stderr

    finished = ("from shared.service import exit_after; import time; exit_after(0.5).cancel(); time.sleep(1)")
    assert subprocess.run([sys.executable, "-c", finished], timeout=30).returncode == 0
