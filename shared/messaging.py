"""NATS plumbing shared by every service: the broker, reply envelopes, and the client that calls them.

Every reply is an envelope, `{"result": …}` or `{"error": {code, message, field?, hint?}}`, so a
handler that fails still answers at once instead of leaving its caller to time out.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import secrets
import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pydantic
from faststream import BaseMiddleware
from faststream.middlewares import ExceptionMiddleware
from faststream.nats import NatsBroker
from nats.errors import MaxPayloadError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from shared import problems
from shared.deadlines import DeadlineMiddleware, deadline_headers
from shared.errors import InternalError, InvalidArgument, ThreadlineError, Unavailable, from_dict
from shared.logging import bound, get_logger
from shared.nats_auth import nats_options
from shared.nats_client import DRAIN_SECONDS, finished_within, let_go
from shared.observability import broker_middlewares, message_span, observe_command, tracing_enabled
from shared.outage import outage
from shared.repeats import after_lost_answer, is_read, may_have_applied
from shared.settings import Settings
from shared.subjects import OWNER, Command, Service, Subjects, owner_name

log = get_logger(__name__)

TRACEPARENT = "traceparent"


def ok(result: Any) -> dict[str, Any]:
    return {"result": result}


def invalid_message(error: pydantic.ValidationError) -> ThreadlineError:
    """Every fault of a message that breaks its contract (bounded), each with the fix for its kind.

    The rejected value itself is never echoed: an agent may have sent megabytes. The first location
    names the handler's parameter (`request`, `cmd`), not a field of the message.
    """
    errors = [{**e, "loc": e["loc"][1:]} for e in error.errors(include_url=False, include_input=False)]
    return InvalidArgument.of(problems.from_pydantic(errors))


def _reply_domain_error(exc: ThreadlineError) -> dict[str, Any]:
    log.info("command_refused", code=exc.code, field=exc.field, reason=exc.message)
    return {"error": exc.to_dict()}


def _reply_validation_error(exc: pydantic.ValidationError) -> dict[str, Any]:
    return _reply_domain_error(invalid_message(exc))


def _reply_unexpected(role: str) -> Any:
    """The reply to an exception no handler expected: `unavailable` naming the server `role` could not reach,
    else `internal` (logged)."""

    def reply(exc: Exception) -> dict[str, Any]:
        if (unavailable := outage(exc, role)) is not None:
            log.warning("command_unavailable", reason=unavailable.message, error=repr(exc))
            return {"error": unavailable.to_dict()}
        log.error("command_failed", exc_info=exc)
        return {"error": InternalError("the service failed to handle the command; it has been logged").to_dict()}

    return reply


class CorrelationMiddleware(BaseMiddleware):
    """Binds the caller's correlation id (and trace parent) to every log line of the handler."""

    async def consume_scope(self, call_next, msg):  # noqa: ANN001, ANN201
        headers = msg.headers or {}
        fields = {"correlation_id": msg.correlation_id}
        if headers.get(TRACEPARENT):
            fields["traceparent"] = headers[TRACEPARENT]
        with bound(**fields):
            started = time.perf_counter()
            try:
                return await call_next(msg)
            finally:
                subject = msg.raw_message.subject if msg.raw_message is not None else ""
                if Subjects.is_command(subject):  # not health pings, nor replies arriving at a client's inbox
                    seconds = time.perf_counter() - started
                    observe_command(subject, seconds)
                    log.info("command_handled", subject=subject, ms=round(seconds * 1000, 2))


def create_broker(settings: Settings, *, role: str, name: str) -> NatsBroker:
    """The FastStream broker of one process, connected as `role` (shared.nats_auth says what it may do)."""
    errors = ExceptionMiddleware(
        publish_handlers={
            ThreadlineError: _reply_domain_error,
            pydantic.ValidationError: _reply_validation_error,
            Exception: _reply_unexpected(role),
        }
    )
    return NatsBroker(
        **nats_options(settings, role, name=name).broker(),
        # A command whose caller stopped waiting is answered before it is timed or logged as handled.
        middlewares=[*broker_middlewares(name), DeadlineMiddleware, CorrelationMiddleware, errors],
        logger=get_logger("faststream"),
        log_level=logging.DEBUG,  # its per-message lines; the histograms time every command
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        graceful_timeout=GRACEFUL_SECONDS,
    )


GRACEFUL_SECONDS = 10.0  # how long a stopping broker lets the messages in hand finish
BROKER_STOP_SECONDS = GRACEFUL_SECONDS + DRAIN_SECONDS + 1


async def stop_broker(broker: NatsBroker, seconds: float = BROKER_STOP_SECONDS) -> None:
    """Stop a process's broker within `seconds`: the messages in hand finish and the connection drains when NATS
    is there; when it is not (or does not answer), the connection is closed at once, with no traceback."""
    connection = broker._connection  # FastStream's stop() forgets it, and raises what drain() raises
    if not await finished_within(broker.stop(), seconds) and connection is not None:
        await let_go(connection)


def health_reply(service: Service) -> dict[str, Any]:
    return ok({"service": service.value, "pid": os.getpid()})


def new_correlation_id() -> str:
    return uuid.uuid4().hex


def new_traceparent() -> str:
    """A fresh W3C trace context for a call that arrives without one."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


WATCH_AFTER_SECONDS = 0.5  # a call still unanswered this long gets its service watched
WATCH_EVERY_SECONDS = 0.5
# After this process's NATS connection came back, the services' connections may take a moment longer (each
# retries every second): "no responders" then means "not resubscribed yet", and the call is sent again.
RESUBSCRIBE_SECONDS = 3.0
RESUBSCRIBE_POLL_SECONDS = 0.1
# How long a service may be silent while `threadline up` brings it back: its supervisor restarts a child after
# a pause of 0.5 s doubling to 30 s (services/cli/supervision.py), and a service takes seconds to start.
RESTART_WINDOW_SECONDS = 45.0
LOST_NATS = "nats"  # why a waiting call failed: its NATS connection went away after it was sent
SERVICE_GONE = "service"  # or no replica of its service was left to answer


class ServiceClient:
    """Calls service commands over NATS request/reply and unwraps their envelopes.

    A call whose service dies while handling it fails as soon as that is known, not at the timeout:
    while calls to a service wait, a watcher pings its health subject, and NATS answering "no
    responders" means no replica is left to reply. Losing the NATS connection fails waiting calls too.
    Every such answer says whether the call may have been applied and whether repeating it is harmless
    (shared/repeats.py), and a service that does not answer at all is told apart from one restarting.
    """

    def __init__(self, broker: NatsBroker, subjects: Subjects, timeout: float, *, presume_running: bool = False) -> None:
        self.broker = broker
        self.subjects = subjects
        self.timeout = timeout
        self._watches: dict[Service, _Watch] = {}
        self._answered: dict[Service, float] = {}  # when each service last answered this client
        # A long-lived caller (the gateway) takes every service as heard from when it started: just after a
        # (re)start under `up`, a service it has not called yet and that no replica answers is restarting.
        self._started = time.monotonic() if presume_running else None
        self._reconnects = 0
        self._reconnected_at = float("-inf")

    async def call(
        self,
        command: Command,
        payload: dict[str, Any] | pydantic.BaseModel,
        *,
        correlation_id: str | None = None,
        traceparent: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        if isinstance(payload, pydantic.BaseModel):
            payload = payload.model_dump(mode="json", by_alias=True, exclude_none=True)
        # Straight on the broker's NATS connection: the request is one message with the headers FastStream's
        # subscribers read (content type, correlation id), the caller's trace context and its deadline
        # (shared/deadlines.py: a service does nothing for a caller that has stopped waiting).
        headers = {"content-type": "application/json", "correlation_id": correlation_id or new_correlation_id()}
        if traceparent:
            headers[TRACEPARENT] = traceparent
        subject = self.subjects.command(command)
        service, data, seconds = OWNER[command], orjson.dumps(payload), timeout or self.timeout
        while True:
            if not self._connected():
                raise nats_unreachable()
            epoch = self._epoch()
            headers |= deadline_headers(seconds)  # each send waits `seconds` anew
            with message_span(subject, "publish", headers) if tracing_enabled() else contextlib.nullcontext():
                request = asyncio.ensure_future(self.broker.connection.request(
                    subject, data, timeout=seconds, headers=headers))
            try:
                message = await self._reply(service, request, epoch)
                break
            except NoRespondersError as exc:  # delivered to no one: sending it again is always safe
                if not self._resubscribing():
                    raise self._no_responders(service) from exc
                await asyncio.sleep(RESUBSCRIBE_POLL_SECONDS)
            except (TimeoutError, NatsTimeoutError) as exc:
                name = owner_name(command)
                raise Unavailable(
                    f"the {name} service did not answer within {seconds:g} s{may_have_applied(command)}",
                    hint=f"{after_lost_answer(command)}; if calls keep timing out, an operator should check that the "
                         f"{name} service runs and is not overloaded",
                    details=_lost_details("service", command)) from exc
            except _AnswerLost as lost:
                raise answer_lost(command, lost.reason) from None
            except MaxPayloadError as exc:
                # NATS carries at most max_payload bytes (1 MiB by default) per message.
                raise InvalidArgument(
                    "the request is larger than one NATS message may be",
                    hint="send less at once: fewer or shorter items per call",
                ) from exc
            except Exception as exc:
                if (unavailable := outage(exc)) is not None:
                    raise unavailable from exc
                raise
        self._answered[service] = time.monotonic()
        try:
            body = orjson.loads(message.data)
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            raise InternalError("the service sent a malformed reply")
        if "error" in body:
            raise from_dict(body["error"])
        return body.get("result")

    async def outbox_committed(self) -> None:
        """Wake the relay: events were just committed. Fire and forget — the relay also polls, so a signal
        lost on the way delays an event by at most its poll interval."""
        if self._connected():
            await self.broker.connection.publish(self.subjects.outbox_committed, b"")

    async def _reply(self, service: Service, request: asyncio.Future, epoch: int) -> Any:
        done, _ = await asyncio.wait({request}, timeout=WATCH_AFTER_SECONDS)
        if request in done:
            return request.result()
        watch = self._watches.get(service)
        if watch is None or watch.finished:
            watch = self._watches[service] = _Watch(self, service)
        with watch.waiting(epoch) as gone:
            done, _ = await asyncio.wait({request, gone}, return_when=asyncio.FIRST_COMPLETED)
        if request in done:
            return request.result()
        request.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await request
        raise _AnswerLost(gone.result())

    def _connected(self) -> bool:
        try:
            return self.broker.connection is not None and self.broker.connection.is_connected
        except Exception:  # noqa: BLE001 - not connected yet
            return False

    def _epoch(self) -> int:
        """How often the connection has reconnected; notes when a new reconnect is first seen."""
        reconnects = self.broker.connection.stats["reconnects"]
        if reconnects != self._reconnects:
            self._reconnects, self._reconnected_at = reconnects, time.monotonic()
        return reconnects

    def _resubscribing(self) -> bool:
        return time.monotonic() - self._reconnected_at < RESUBSCRIBE_SECONDS

    def _no_responders(self, service: Service) -> Unavailable:
        """No replica of `service` is subscribed: restarting, or not running — told apart by how long it
        has been silent."""
        name, heard = service.value, self._answered.get(service)
        answered = heard if heard is not None else self._started
        details = {"dependency": "service", "service": name, "mayHaveBeenApplied": False}
        if answered is None:
            return Unavailable(f"no {name} service answers: the call was not delivered", details=details,
                               hint="if it is restarting, retry in a few seconds; if it is not running, an operator "
                                    f"must start it (`threadline serve {name}` or `threadline up`)")
        silent = time.monotonic() - answered
        if silent <= RESTART_WINDOW_SECONDS:
            return Unavailable(f"the {name} service is restarting: no replica answers right now, and the call was "
                               "not delivered", hint="retry in a few seconds: a stopped service is restarted on its own",
                               details=details)
        since = (f"one last answered {silent:.0f} s ago" if heard is not None
                 else f"none has answered since this gateway started {silent:.0f} s ago")
        return Unavailable(f"no {name} service is running: {since}, and the call was not delivered", details=details,
                           hint=f"an operator must start it (`threadline serve {name}` or `threadline up`); if it keeps "
                                "failing to start, its log says why")

    async def ping(self, service: Service, timeout: float = 1.0) -> dict[str, Any]:
        message = await self.broker.request({}, self.subjects.health(service), timeout=timeout)
        answer = (await message.decode())["result"]
        self._answered[service] = time.monotonic()
        return answer


class _AnswerLost(Exception):
    """A waiting call's answer can no longer come: LOST_NATS or SERVICE_GONE."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def answer_lost(command: Command, reason: str) -> Unavailable:
    """The answer to a call that was sent and whose answer was lost: it may have been applied."""
    name = owner_name(command)
    if reason == LOST_NATS:
        return Unavailable(
            f"the connection to NATS (the message bus) was lost while the {name} service had the call"
            f"{may_have_applied(command)}",
            hint=f"{after_lost_answer(command)}, in a few seconds: the processes reconnect on their own once NATS "
                 "is back", details=_lost_details("nats", command))
    return Unavailable(f"the {name} service stopped before answering{may_have_applied(command)}",
                       hint=f"{after_lost_answer(command)}, in a few seconds: a stopped service is restarted on its own",
                       details=_lost_details("service", command))


def _lost_details(dependency: str, command: Command) -> dict[str, Any]:
    return {"dependency": dependency, "service": owner_name(command), "mayHaveBeenApplied": not is_read(command)}


def nats_unreachable() -> Unavailable:
    return Unavailable("NATS (the message bus) is unreachable: the call was not sent",
                       hint="retry shortly: nothing was changed, and the processes reconnect on their own once NATS "
                            "is back", details={"dependency": "nats", "mayHaveBeenApplied": False})


class _Watch:
    """Pings one service's health subject while calls to it wait; fails them when no replica is left, or when
    the NATS connection they were sent on went away."""

    _order = itertools.count()

    def __init__(self, client: ServiceClient, service: Service) -> None:
        self.client = client
        self.service = service
        self.waiters: dict[int, tuple[int, asyncio.Future]] = {}
        self.finished = False
        self.task = asyncio.create_task(self._run(), name=f"watch-{service.value}")

    @contextlib.contextmanager
    def waiting(self, epoch: int) -> Iterator[asyncio.Future]:
        key = next(self._order)
        gone = asyncio.get_running_loop().create_future()
        self.waiters[key] = (epoch, gone)
        try:
            yield gone
        finally:
            self.waiters.pop(key, None)

    def _fail(self, before: int, reason: str, *, sent_before: int | None = None) -> None:
        """Fail the calls waiting since before the probe `before` (those sent on a connection older than
        `sent_before` only, when given)."""
        for key, (epoch, gone) in list(self.waiters.items()):
            if key < before and not gone.done() and (sent_before is None or epoch < sent_before):
                gone.set_result(reason)

    async def _run(self) -> None:
        try:
            while self.waiters:
                await asyncio.sleep(WATCH_EVERY_SECONDS)
                # Only calls already waiting when the probe is sent can have gone to a replica now dead.
                before = next(self._order)
                if not self.client._connected():
                    self._fail(before, LOST_NATS)
                    continue
                # A call sent before the connection came back: its answer had no way back to this process.
                self._fail(before, LOST_NATS, sent_before=self.client._epoch())
                try:
                    await self.client.ping(self.service, timeout=1.0)
                except NoRespondersError:
                    log.warning("service_gone_while_called", service=self.service.value,
                                waiting=len(self.waiters))
                    self._fail(before, SERVICE_GONE)
                except Exception:  # noqa: BLE001 - busy or slow is not gone: keep waiting
                    pass
        finally:
            self.finished = True
