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
from shared.errors import InternalError, InvalidArgument, ThreadlineError, Unavailable, from_dict
from shared.logging import bound, get_logger
from shared.nats_auth import nats_options
from shared.observability import broker_middlewares, message_span, observe_command, tracing_enabled
from shared.outage import outage
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


def _reply_unexpected(exc: Exception) -> dict[str, Any]:
    if (unavailable := outage(exc)) is not None:
        log.warning("command_unavailable", reason=unavailable.message, error=repr(exc))
        return {"error": unavailable.to_dict()}
    log.error("command_failed", exc_info=exc)
    return {"error": InternalError("the service failed to handle the command; it has been logged").to_dict()}


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
            Exception: _reply_unexpected,
        }
    )
    return NatsBroker(
        **nats_options(settings, role, name=name).broker(),
        middlewares=[*broker_middlewares(name), CorrelationMiddleware, errors],
        logger=get_logger("faststream"),
        log_level=logging.DEBUG,  # its per-message lines; the histograms time every command
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        graceful_timeout=10.0,
    )


def health_reply(service: Service) -> dict[str, Any]:
    return ok({"service": service.value, "pid": os.getpid()})


def new_correlation_id() -> str:
    return uuid.uuid4().hex


def new_traceparent() -> str:
    """A fresh W3C trace context for a call that arrives without one."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


WATCH_AFTER_SECONDS = 0.5  # a call still unanswered this long gets its service watched
WATCH_EVERY_SECONDS = 0.5


class ServiceClient:
    """Calls service commands over NATS request/reply and unwraps their envelopes.

    A call whose service dies while handling it fails as soon as that is known, not at the timeout:
    while calls to a service wait, a watcher pings its health subject, and NATS answering "no
    responders" means no replica is left to reply. Losing the NATS connection fails waiting calls too.
    """

    def __init__(self, broker: NatsBroker, subjects: Subjects, timeout: float) -> None:
        self.broker = broker
        self.subjects = subjects
        self.timeout = timeout
        self._watches: dict[Service, _Watch] = {}

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
        # subscribers read (content type, correlation id) and the caller's trace context.
        headers = {"content-type": "application/json", "correlation_id": correlation_id or new_correlation_id()}
        if traceparent:
            headers[TRACEPARENT] = traceparent
        subject = self.subjects.command(command)
        if not self._connected():
            raise _nats_unreachable()
        with message_span(subject, "publish", headers) if tracing_enabled() else contextlib.nullcontext():
            request = asyncio.ensure_future(self.broker.connection.request(
                subject, orjson.dumps(payload), timeout=timeout or self.timeout, headers=headers))
        try:
            message = await self._reply(OWNER[command], request)
        except (TimeoutError, NatsTimeoutError) as exc:
            raise Unavailable(
                f"the {owner_name(command)} service did not answer in time",
                hint="retry shortly; if it persists, an operator should check that the service runs",
            ) from exc
        except NoRespondersError as exc:
            raise Unavailable(
                f"no {owner_name(command)} service is running",
                hint="an operator must start it (`threadline serve …` or `threadline up`)",
            ) from exc
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

    async def _reply(self, service: Service, request: asyncio.Future) -> Any:
        done, _ = await asyncio.wait({request}, timeout=WATCH_AFTER_SECONDS)
        if request in done:
            return request.result()
        watch = self._watches.get(service)
        if watch is None or watch.finished:
            watch = self._watches[service] = _Watch(self, service)
        with watch.waiting() as gone:
            done, _ = await asyncio.wait({request, gone}, return_when=asyncio.FIRST_COMPLETED)
        if request in done:
            return request.result()
        request.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await request
        raise gone.result()

    def _connected(self) -> bool:
        try:
            return self.broker.connection is not None and self.broker.connection.is_connected
        except Exception:  # noqa: BLE001 - not connected yet
            return False

    async def ping(self, service: Service, timeout: float = 1.0) -> dict[str, Any]:
        message = await self.broker.request({}, self.subjects.health(service), timeout=timeout)
        return (await message.decode())["result"]


def _nats_unreachable() -> Unavailable:
    return Unavailable("the message bus (NATS) is unreachable",
                       hint="retry shortly; the services reconnect on their own once NATS is back")


class _Watch:
    """Pings one service's health subject while calls to it wait; fails them when no replica is left."""

    _order = itertools.count()

    def __init__(self, client: ServiceClient, service: Service) -> None:
        self.client = client
        self.service = service
        self.waiters: dict[int, asyncio.Future] = {}
        self.finished = False
        self.task = asyncio.create_task(self._run(), name=f"watch-{service.value}")

    @contextlib.contextmanager
    def waiting(self) -> Iterator[asyncio.Future]:
        key = next(self._order)
        gone = asyncio.get_running_loop().create_future()
        self.waiters[key] = gone
        try:
            yield gone
        finally:
            self.waiters.pop(key, None)

    def _fail(self, before: int, error: Unavailable) -> None:
        for key, gone in list(self.waiters.items()):
            if key < before and not gone.done():
                gone.set_result(error)

    async def _run(self) -> None:
        try:
            while self.waiters:
                await asyncio.sleep(WATCH_EVERY_SECONDS)
                # Only calls already waiting when the probe is sent can have gone to a replica now dead.
                before = next(self._order)
                if not self.client._connected():
                    self._fail(before, _nats_unreachable())
                    continue
                try:
                    await self.client.ping(self.service, timeout=1.0)
                except NoRespondersError:
                    log.warning("service_gone_while_called", service=self.service.value,
                                waiting=len(self.waiters))
                    self._fail(before, Unavailable(
                        f"the {self.service.value} service stopped before answering",
                        hint="retry: repeating the call is harmless (an identical repeat returns the first outcome)"))
                except Exception:  # noqa: BLE001 - busy or slow is not gone: keep waiting
                    pass
        finally:
            self.finished = True
