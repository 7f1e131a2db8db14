"""NATS plumbing shared by every service: the broker, reply envelopes, and the client that calls them.

Every reply is an envelope, `{"result": …}` or `{"error": {code, message, field?, hint?}}`, so a
handler that fails still answers at once instead of leaving its caller to time out.
"""

from __future__ import annotations

import os
import secrets
import time
import uuid
from typing import Any

import pydantic
from faststream import BaseMiddleware
from faststream.middlewares import ExceptionMiddleware
from faststream.nats import NatsBroker
from nats.errors import MaxPayloadError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from shared import problems
from shared.errors import InternalError, InvalidArgument, ThreadlineError, Unavailable, from_dict
from shared.logging import bound, get_logger
from shared.subjects import Command, Service, Subjects, owner_name

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
                    log.info("command_handled", subject=subject,
                             ms=round((time.perf_counter() - started) * 1000, 2))


def create_broker(nats_url: str, *, name: str) -> NatsBroker:
    errors = ExceptionMiddleware(
        publish_handlers={
            ThreadlineError: _reply_domain_error,
            pydantic.ValidationError: _reply_validation_error,
            Exception: _reply_unexpected,
        }
    )
    return NatsBroker(
        nats_url,
        name=name,
        middlewares=[CorrelationMiddleware, errors],
        logger=get_logger("faststream"),
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


class ServiceClient:
    """Calls service commands over NATS request/reply and unwraps their envelopes."""

    def __init__(self, broker: NatsBroker, subjects: Subjects, timeout: float) -> None:
        self.broker = broker
        self.subjects = subjects
        self.timeout = timeout

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
        headers = {TRACEPARENT: traceparent} if traceparent else None
        subject = self.subjects.command(command)
        try:
            message = await self.broker.request(
                payload,
                subject,
                correlation_id=correlation_id or new_correlation_id(),
                headers=headers,
                timeout=timeout or self.timeout,
            )
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
        body = await message.decode()
        if not isinstance(body, dict):
            raise InternalError("the service sent a malformed reply")
        if "error" in body:
            raise from_dict(body["error"])
        return body.get("result")

    async def ping(self, service: Service, timeout: float = 1.0) -> dict[str, Any]:
        message = await self.broker.request({}, self.subjects.health(service), timeout=timeout)
        return (await message.decode())["result"]
