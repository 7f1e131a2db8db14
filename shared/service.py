"""Runs one backend service process: logging, database, broker, health subject, graceful stop."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from faststream.nats import NatsMessage, NatsRouter

from shared.command_contracts import command_requests
from shared.db.session import Database
from shared.events import Origin
from shared.health_server import HealthServer
from shared.logging import configure_logging, get_logger
from shared.messaging import TRACEPARENT, ServiceClient, create_broker, health_reply, ok, stop_broker
from shared.observability import configure_tracing, shutdown_tracing
from shared.outage import stale_connection
from shared.repeats import is_read
from shared.settings import Settings
from shared.subjects import Command, Service, Subjects

log = get_logger(__name__)

BACKGROUND_STOP_SECONDS = 10.0
# A process asked to stop is gone within this, whatever its dependencies do: nobody else may be there to kill it
# (`up` was killed outright, and its children got SIGTERM from the kernel). Under Kubernetes' 30 s grace.
STOP_DEADLINE_SECONDS = 25.0
JOB_RESTART_FIRST_SECONDS = 0.5
JOB_RESTART_MAX_SECONDS = 30.0
JOB_HEALTHY_SECONDS = 60.0  # a job that ran this long before failing restarts at the first delay again
FAILPOINT_PAUSE_SECONDS = 5.0


@dataclass(frozen=True)
class ServiceContext:
    """What a service's use cases need: settings, the database, subject names."""

    service: Service
    settings: Settings
    db: Database
    subjects: Subjects
    client: ServiceClient | None = None  # for the rare use case that asks another service (over NATS)

    @property
    def queue(self) -> str:
        return self.subjects.queue(self.service)


@dataclass(frozen=True)
class Meta:
    """Per-message metadata carried in NATS headers."""

    correlation_id: str | None = None
    traceparent: str | None = None

    @classmethod
    def of(cls, message: NatsMessage) -> Meta:
        headers = message.headers or {}
        return cls(correlation_id=message.correlation_id, traceparent=headers.get(TRACEPARENT))


RouterFactory = Callable[[ServiceContext], NatsRouter]
Background = Callable[[ServiceContext], Awaitable[Any]]


def health_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()

    @router.subscriber(ctx.subjects.health(ctx.service), queue=ctx.queue)
    async def health() -> dict[str, Any]:
        return health_reply(ctx.service)

    return router


async def run_service(
    service: Service,
    settings: Settings,
    build_router: RouterFactory,
    *,
    background: list[Background] | None = None,
    stop: asyncio.Event | None = None,
    own_process: bool = True,
) -> None:
    """Serve until SIGINT/SIGTERM (or `stop` is set), then drain in-flight messages and exit.

    `own_process=False` runs the service inside a host process (tests): no logging setup, no signals.
    """
    if own_process:
        configure_logging(service.value, settings.log_level, settings.log_format)
        configure_tracing(service.value, settings)
    db = Database.from_url(
        settings.resolved_database_url(), pool_size=settings.db_pool_size, application_name=f"threadline-{service}",
        transaction_pooler=settings.database_transaction_pooler,
    )
    broker = create_broker(settings, role=service.value, name=f"threadline-{service}")
    subjects = Subjects(settings.nats_prefix)
    ctx = ServiceContext(service, settings, db, subjects, ServiceClient(broker, subjects, settings.request_timeout))
    broker.include_router(build_router(ctx))
    broker.include_router(health_router(ctx))

    stop = stop or asyncio.Event()
    if own_process:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

    await broker.start()
    if own_process:
        freeze_heap()  # before it reports ready: a full collection of everything it started with costs a moment
    health = probe_server(settings, broker, db)
    if health is not None:
        await health.start()
    tasks = [asyncio.create_task(keep_running(job, ctx, stop), name=getattr(job, "__name__", "background"))
             for job in background or []]
    log.info("service_started", queue=ctx.queue)
    try:
        await stop.wait()
    finally:
        log.info("service_stopping")
        deadline = exit_after(STOP_DEADLINE_SECONDS) if own_process else None
        stop.set()  # also when this was cancelled rather than stopped: no background job starts again
        for task in tasks:
            task.cancel()
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=BACKGROUND_STOP_SECONDS)
            for task in stuck:
                log.error("background_task_did_not_stop", task=task.get_name())
        if health is not None:
            await health.stop()
        await stop_broker(broker)
        await db.dispose()
        shutdown_tracing()
        if deadline is not None:
            deadline.cancel()
        log.info("service_stopped")


def exit_after(seconds: float) -> threading.Timer:
    """End this process in `seconds` unless the timer is cancelled first: a stop that hangs is cut short."""
    def overran() -> None:
        log.error("service_stop_overran", seconds=seconds)
        os._exit(1)

    timer = threading.Timer(seconds, overran)
    timer.daemon = True
    timer.start()
    return timer


def freeze_heap() -> None:
    """Take what a started service holds for its whole life (modules, classes, routers, pools) out of the garbage
    collector's sight. Otherwise every full collection walks all of it for nothing: in a relay confined to 0.04
    of a core, 75 ms of CPU every five seconds collecting almost nothing, a third of its quota (docs/performance.md).
    Garbage made later is collected as before; only a process's own entry point calls this."""
    gc.collect()
    gc.freeze()


async def keep_running(job: Background, ctx: ServiceContext, stop: asyncio.Event) -> None:
    """Run a background job for the life of the service: when it fails or ends, log it and start it again
    after a pause that doubles up to JOB_RESTART_MAX_SECONDS. A job never takes its service down."""
    name = getattr(job, "__name__", "background")
    me = asyncio.current_task()
    failures = 0
    while not stop.is_set():
        started = time.monotonic()
        try:
            await job(ctx)
            log.warning("background_job_ended", job=name)
        except Exception as error:  # noqa: BLE001 - logged; the job starts again
            log.error("background_job_failed", job=name, exc_info=error)
        if me is not None and me.cancelling():
            # Asked to stop while the job ran, and the job ended anyway — some library code turns a cancellation
            # into an ordinary error or return (nats-py answers a cancelled wait on a closed connection with
            # ConnectionClosedError). Starting it again would outlive the stop, or hang whoever awaits this task.
            raise asyncio.CancelledError
        failures = 1 if time.monotonic() - started >= JOB_HEALTHY_SECONDS else failures + 1
        delay = min(JOB_RESTART_MAX_SECONDS, JOB_RESTART_FIRST_SECONDS * 2 ** (failures - 1))
        log.info("background_job_restarting", job=name, restart_in=delay, failures=failures)
        try:
            await asyncio.wait_for(stop.wait(), timeout=delay)
        except TimeoutError:
            continue

def probe_server(settings: Settings, broker: Any, db: Database) -> HealthServer | None:
    """The process's /healthz, /readyz and /metrics on THREADLINE_METRICS_PORT, when it is set."""
    if settings.metrics_port is None:
        return None
    return HealthServer(settings.http_host, settings.metrics_port,
                        {"nats": lambda: broker.ping(timeout=2.0), "postgres": db.ping})


# --- command routing: one subscriber per command, each calling one use case in a fresh unit of work -----

UseCase = Callable[[Any, Any], Awaitable[Any]]
UnitOfWorkFactory = Callable[[ServiceContext, Meta], Any]


def origin(ctx: ServiceContext, meta: Meta) -> Origin:
    """Where the events of a message's change come from: this service, and the caller's ids."""
    return Origin(ctx.subjects, ctx.service.value, meta.correlation_id, meta.traceparent)


def command_router(ctx: ServiceContext, routes: Mapping[Command, UseCase], unit_of_work: UnitOfWorkFactory) -> NatsRouter:
    """A router with one subscriber per command: parse its contract, run its use case, reply.

    The contract of each command is the one `shared.command_contracts.command_requests()` names, so the
    subscriber validates exactly what the AsyncAPI document describes.
    """
    router = NatsRouter()
    contracts = command_requests()
    for command, use_case in routes.items():
        router.subscriber(ctx.subjects.command(command), queue=ctx.queue, max_workers=ctx.settings.workers)(
            _handler(ctx, command, contracts[command], use_case, unit_of_work)
        )
    return router


async def _wake_relay(ctx: ServiceContext) -> None:
    # The relay polls too: a signal that does not go out only delays the events until its next poll.
    try:
        await ctx.client.outbox_committed()
    except Exception as error:  # noqa: BLE001 - the change is committed; its answer must go out
        log.debug("outbox_signal_failed", error=repr(error))


def _handler(ctx: ServiceContext, command: Command, contract: type, use_case: UseCase,
             unit_of_work: UnitOfWorkFactory) -> Callable[..., Awaitable[dict[str, Any]]]:
    crash_after_commit = command.value in ctx.settings.failpoint_commands("exit_after_commit")
    pause_after_commit = command.value in ctx.settings.failpoint_commands("pause_after_commit")
    read = is_read(command)
    # The message comes from FastStream's context rather than as an injected parameter: fast_depends
    # resolves such a parameter through a worker thread, one thread hop per command.
    context = ctx.client.broker.context

    async def handle(body: Any) -> dict[str, Any]:
        meta = Meta.of(context.get_local("message"))
        uow = unit_of_work(ctx, meta)
        try:
            result = await use_case(body, uow)
        except Exception as error:
            # A read that met a pooled connection PostgreSQL had dropped (a restart) ran nothing the server
            # kept: once more, on a fresh connection, rather than an outage answer once the server is back.
            if not (read and stale_connection(error)):
                raise
            log.info("read_retried", command=command.value, error=repr(error))
            uow = unit_of_work(ctx, meta)
            result = await use_case(body, uow)
        if getattr(uow, "committed_events", None):
            await _wake_relay(ctx)
        if crash_after_commit:  # a failpoint for tests: die as if killed between the commit and the reply
            log.warning("failpoint_exit_after_commit", command=command.value)
            os._exit(137)
        if pause_after_commit:  # a failpoint for tests: a slow reply, so an outage can strike while it waits
            log.warning("failpoint_pause_after_commit", command=command.value, seconds=FAILPOINT_PAUSE_SECONDS)
            await asyncio.sleep(FAILPOINT_PAUSE_SECONDS)
        return ok(result)

    # FastStream validates the body against the parameter's annotation: the command's contract.
    handle.__annotations__ = {"body": contract, "return": dict[str, Any]}
    handle.__name__ = handle.__qualname__ = command.value
    return handle
