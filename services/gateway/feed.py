"""The HTTP event feed, GET /api/v1/events: the event stream as Server-Sent Events, or as JSON pages.

Every request reads the stream through its own ephemeral JetStream consumer, filtered by the case's or
company's subject and starting after the sequence the caller gives. Each event's `id:` is its stream
sequence, so a client resumes where it stopped with `Last-Event-ID` (EventSource sends it by itself
when it reconnects) or `?after=`. The feed reads as fast as its client takes events: a slow client
holds back only its own consumer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import nats
from fastapi import APIRouter, Header, Query, Request
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from sse_starlette import EventSourceResponse, ServerSentEvent

from services.gateway import api_models as m
from services.gateway.http_api import call, caller
from shared import contracts as c
from shared import webhook_contracts as wc
from shared.errors import Conflict, InvalidArgument, Unavailable
from shared.logging import get_logger
from shared.subjects import Command, Subjects

log = get_logger(__name__)

router = APIRouter(prefix="/api/v1", responses=m.ERROR_RESPONSES)

FEED_ROLES = ("subscriber", "reviewer", "admin")
WAIT_SECONDS = 10.0  # one pull's wait for new events; the stream's keep-alive pings go out meanwhile
PING_SECONDS = 15
SEND_TIMEOUT_SECONDS = 30.0  # a client that takes no bytes for this long is dropped
# An abandoned consumer (its gateway died) is removed by the server after this long without pulls.
INACTIVE_SECONDS = 120.0


@router.get("/events", tags=["events"], response_model=None, responses={200: {
    "model": m.EventPage, "description": "An event stream (text/event-stream), or with format=json one page.",
    "content": {"text/event-stream": {"schema": {"type": "string"}}}}})
async def events(
    request: Request,
    case_id: Annotated[c.Slug | None, Query(alias="caseId", description="Only this case's events.")] = None,
    company_id: Annotated[wc.Uuid | None, Query(alias="companyId", description="Only this company's events.")] = None,
    after: Annotated[int, Query(ge=0, description="Start after this stream sequence (0: from the first).")] = 0,
    format: Annotated[Literal["sse", "json"], Query(description="sse (a stream) or json (one page).")] = "sse",
    limit: Annotated[int, Query(ge=1, le=500, description="JSON pages: at most this many events.")] = 100,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", description="Resume after this id.")] = None,
    principal: Any = caller(*FEED_ROLES),
) -> Any:
    """Change events as Server-Sent Events (`id:` the stream sequence, `event:` the type, `data:` the
    CloudEvents JSON), or with `format=json` one page `{events, nextAfter, more}`."""
    if case_id is not None and company_id is not None:
        raise InvalidArgument("follow one case or one company, not both", field="companyId",
                              hint="send caseId or companyId (or neither, for every event)")
    start = _resume_point(after, last_event_id)
    subjects = Subjects(request.app.state.gateway.settings.nats_prefix)
    if case_id is not None:
        await call(request, Command.GET_CASE, c.CaseRef(actor=principal.actor(), case_id=case_id))
        subject = subjects.case_events(case_id)
    elif company_id is not None:
        await call(request, Command.GET_COMPANY, c.CompanyRef(actor=principal.actor(), company_id=company_id))
        subject = subjects.company_events(company_id)
    else:
        subject = subjects.events_wildcard
    if start:
        await _within_the_stream(request, start, "Last-Event-ID" if last_event_id and last_event_id.strip() else "after")
    if format == "json":
        return await _page(request, subject, start, limit)
    return EventSourceResponse(_stream(request, subject, start), ping=PING_SECONDS,
                               send_timeout=SEND_TIMEOUT_SECONDS)


def _resume_point(after: int, last_event_id: str | None) -> int:
    """`Last-Event-ID` wins over `after`: a reconnecting EventSource sends it with the original URL."""
    if last_event_id is None or not last_event_id.strip():
        return after
    if not last_event_id.strip().isdigit():
        raise InvalidArgument("Last-Event-ID must be a stream sequence (a whole number)", field="Last-Event-ID",
                              hint="send the id: of the last event received")
    return int(last_event_id.strip())


async def _within_the_stream(request: Request, start: int, field: str) -> None:
    """A resume point past the stream's last event is from another stream (a restore starts it anew at 1): said,
    rather than waiting in silence until this stream reaches it, every event meanwhile missed."""
    js = request.app.state.gateway.broker.connection.jetstream()
    try:
        last = (await js.stream_info(request.app.state.gateway.settings.stream_name)).state.last_seq
    except (nats.errors.Error, TimeoutError) as error:
        raise Unavailable("the event stream cannot be read now", hint="retry shortly") from error
    if start > last:
        raise Conflict(f"{start} is past the event stream's last event ({last}): it is from another stream, or one "
                       "restored since", field=field,
                       hint="read again from the start (after=0, no Last-Event-ID), skipping the revisions you applied")


@asynccontextmanager
async def _reader(request: Request, subject: str, start: int) -> AsyncIterator[Any]:
    settings = request.app.state.gateway.settings
    js = request.app.state.gateway.broker.connection.jetstream()
    config = ConsumerConfig(
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start + 1, ack_policy=AckPolicy.NONE,
        inactive_threshold=INACTIVE_SECONDS, mem_storage=True, num_replicas=1,
    )
    try:
        subscription = await js.pull_subscribe(subject, stream=settings.stream_name, config=config)
    except (nats.errors.Error, TimeoutError) as error:
        log.warning("feed_unavailable", error=repr(error))
        raise Unavailable("the event stream cannot be read now", hint="retry shortly") from error
    try:
        yield subscription
    finally:
        try:
            name = config.name
            await subscription.unsubscribe()
            if name:
                await js.delete_consumer(settings.stream_name, name)
        except Exception as error:  # noqa: BLE001 - the server drops an idle consumer anyway
            log.debug("feed_consumer_not_deleted", error=repr(error))


def _entry(message: Any) -> dict[str, Any]:
    return {"sequence": message.metadata.sequence.stream, "subject": message.subject,
            "event": json.loads(message.data)}


async def _page(request: Request, subject: str, start: int, limit: int) -> dict[str, Any]:
    """One page. Whether more follow is asked of the stream itself (the next matching message), not
    taken from a consumer's pending count, which is not exact for every filter."""
    found: list[dict[str, Any]] = []
    try:
        if await _next_after(request, subject, start) is not None:
            async with _reader(request, subject, start) as subscription:
                while len(found) < limit:
                    found += [_entry(m) for m in await subscription.fetch(limit - len(found), timeout=5.0)]
                    if await _next_after(request, subject, found[-1]["sequence"]) is None:
                        break
        last = found[-1]["sequence"] if found else start
        more = bool(found) and await _next_after(request, subject, last) is not None
    except (nats.errors.Error, TimeoutError) as error:
        raise Unavailable("the event stream did not answer in time", hint="retry shortly") from error
    return {"events": found, "nextAfter": last, "more": more}


async def _next_after(request: Request, subject: str, sequence: int) -> int | None:
    """The sequence of the first event on `subject` after `sequence`, if there is one yet."""
    js = request.app.state.gateway.broker.connection.jetstream()
    try:
        found = await js.get_msg(request.app.state.gateway.settings.stream_name, seq=sequence + 1, subject=subject,
                                 next=True)
    except NotFoundError:
        return None
    return found.seq


async def _stream(request: Request, subject: str, start: int) -> AsyncIterator[ServerSentEvent]:
    async with _reader(request, subject, start) as subscription:
        while True:
            try:
                messages = await subscription.fetch(64, timeout=WAIT_SECONDS)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            except nats.errors.Error as error:
                # The client reconnects with Last-Event-ID and misses nothing.
                log.warning("feed_stream_ended", error=repr(error))
                return
            for message in messages:
                event_type = (message.headers or {}).get("ce-type")
                if event_type is None:
                    event_type = json.loads(message.data).get("type", "message")
                yield ServerSentEvent(data=message.data.decode(), id=str(message.metadata.sequence.stream),
                                      event=event_type)
