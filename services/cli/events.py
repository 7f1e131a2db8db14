"""`threadline events tail`: change events as they arrive, from now, the start, a sequence or a time."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any, TextIO

import nats
import nats.js.errors
import typer
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from shared import event_loop
from shared.nats_auth import OPERATOR, nats_options
from shared.settings import Settings
from shared.subjects import Subjects


def consumer_config(from_start: bool, from_seq: int | None, since: datetime | None) -> ConsumerConfig:
    if from_seq is not None:
        return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=from_seq,
                              ack_policy=AckPolicy.NONE)
    if since is not None:
        return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since,
                              ack_policy=AckPolicy.NONE)
    return ConsumerConfig(deliver_policy=DeliverPolicy.ALL if from_start else DeliverPolicy.NEW,
                          ack_policy=AckPolicy.NONE)


class PastTheEnd(Exception):
    """A --from-seq beyond the next event the stream will hold: from another stream, or one restored since."""


def line(sequence: int, subject: str, event: dict[str, Any]) -> str:
    revision = f" r{event['revision']}" if "revision" in event else ""
    data = event.get("data", {})
    about = data.get("summary") or ", ".join(f"{k}={v}" for k, v in data.items() if isinstance(v, (str, int)))[:160]
    return f"#{sequence} {event.get('time', '')[:23]} {event.get('type', '?')}{revision} {event.get('subject', '')} {about}"


async def tail(
    settings: Settings,
    *,
    case_id: str | None = None,
    from_start: bool = False,
    from_seq: int | None = None,
    since: datetime | None = None,
    as_json: bool = True,
    count: int | None = None,
    idle_timeout: float | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Print events until interrupted (or `count` events, or `idle_timeout` seconds without one)."""
    subjects = Subjects(settings.nats_prefix)
    connection = await nats.connect(**nats_options(settings, OPERATOR, name="threadline-events-tail").client())
    printed = 0
    try:
        if from_seq is not None:
            last = (await connection.jetstream().stream_info(settings.stream_name)).state.last_seq
            if from_seq > last + 1:  # last + 1 is a resume: the next event there is
                raise PastTheEnd(f"--from-seq {from_seq} is past the event stream's end (its last event is #{last}), "
                                 "so the tail would wait in silence until the stream reached it: the sequence is "
                                 "from another stream, or one restored since; resume from at most "
                                 f"{last + 1}, or read from --from-start")
        subscription = await connection.jetstream().subscribe(
            subjects.case_events(case_id) if case_id else subjects.events_wildcard,
            stream=settings.stream_name,
            ordered_consumer=True,
            config=consumer_config(from_start, from_seq, since),
        )
        while count is None or printed < count:
            try:
                message = await subscription.next_msg(timeout=idle_timeout or 3600 * 24 * 365)
            except (TimeoutError, nats.errors.TimeoutError):
                if idle_timeout:
                    break
                continue
            event = json.loads(message.data)
            sequence = message.metadata.sequence.stream
            if as_json:
                out.write(json.dumps({"streamSequence": sequence, "subject": message.subject, "event": event},
                                     ensure_ascii=False) + "\n")
            else:
                out.write(line(sequence, message.subject, event) + "\n")
            out.flush()
            printed += 1
    finally:
        await connection.close()
    return printed


def run_tail(settings: Settings, **options: Any) -> None:
    try:
        event_loop.run(tail(settings, **options))
    except KeyboardInterrupt:
        pass
    except PastTheEnd as refused:
        typer.secho(f"error: {refused}", fg="red", err=True)
        raise typer.Exit(2) from None
    except nats.js.errors.APIError as refused:  # the stream refused the consumer asked for (a sequence, a time)
        typer.secho(f"error: the event stream refused the subscription: {refused.description} "
                    f"(NATS error {refused.err_code})", fg="red", err=True)
        raise typer.Exit(2) from None
