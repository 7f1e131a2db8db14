"""Webhook rules without I/O: what a webhook receives, when a failed delivery is tried again, which
targets are refused, and what a delivery log may keep of a response."""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from shared.errors import InvalidArgument

SECRET_PREFIX = "whsec_"
EXCERPT_CHARS = 200
ERROR_CHARS = 300


@dataclass(frozen=True)
class Webhook:
    webhook_id: str
    url: str
    case_id: str | None
    company_id: str | None
    types: tuple[str, ...]
    status: str
    start_after_seq: int

    def receives(self, aggregate: str, event_type: str, stream_seq: int) -> bool:
        """Whether an event (its aggregate `case:<id>`, type and stream sequence) is for this webhook."""
        if self.status == "deleted" or stream_seq <= self.start_after_seq:
            return False
        if aggregate == f"webhook:{self.webhook_id}":
            return False  # a webhook is not told about its own failures: it is the one not listening
        if self.types and event_type not in self.types:
            return False
        if self.case_id is not None:
            return aggregate == f"case:{self.case_id}"
        if self.company_id is not None:
            return aggregate == f"company:{self.company_id}"
        return True


def aggregate_of(envelope: dict) -> str | None:
    """`case:<id>`, `company:<id>` or `webhook:<id>`, from the CloudEvents subject (`case/<id>`)."""
    subject = envelope.get("subject")
    if not isinstance(subject, str) or "/" not in subject:
        return None
    kind, _, key = subject.partition("/")
    return f"{kind}:{key}" if kind in ("case", "company", "webhook") and key else None


def comes_next(position: int, stream_seq: int, first_after_position: int | None) -> bool:
    """Whether the event at `stream_seq` is the next to record after `position` (the last recorded).

    Events are recorded in stream order, whatever order the consumer hands them over in (a replica that
    died holding some gives them back later): the next is `position + 1`, unless the stream no longer has
    what lies between (`first_after_position`, the first event it holds after `position`, is this one).
    """
    if stream_seq == position + 1:
        return True
    return first_after_position is None or first_after_position >= stream_seq


@dataclass(frozen=True)
class Stream:
    """The event stream as it is now: its identity (creation time, None when the server gives none) and the
    last sequence it holds."""

    created: datetime | None
    last_seq: int


def is_new_stream(position: int, recorded_in: datetime | None, stream: Stream) -> bool:
    """Whether the recorded `position` (the last sequence recorded) counts in another stream than `stream`, so
    that its events are all new to the webhooks, from the first, and what was recorded moves below them.

    * A position beyond every sequence the stream holds is of another stream (a restore into a new data dir
      starts an empty one), unless the stream has the creation time recorded with it: then it is the same
      stream, rewound (`is_rewound`). An identity unknown on either side cannot tell them apart: a new stream.
    * Otherwise the creation time recorded with the position (`recorded_in`) decides, compared as a time. None
      (recorded before identities were) or the same time: the same stream.
    * Another time at position 0: a new stream. Nothing of it can have been recorded yet, so moving the old
      sequences (webhooks' starting points) below it loses nothing.
    * Another time at a position the stream holds: not new — the identity recorded is stale, and the new one is
      to be adopted. It means events of this stream were recorded under the old identity (as a version that
      checked the stream only on a gap did), so the durable consumer has acknowledged up to the position:
      counting from 0 again would wait for events that never come back. This should not happen otherwise; the
      one case it gets wrong, a new stream that grew past the position before the service first read it, loses
      at most `position` events, where counting again would stall every webhook.
    """
    if stream.last_seq < position:
        return not is_rewound(position, recorded_in, stream)
    if recorded_in is None or stream.created is None or recorded_in == stream.created:
        return False
    return position == 0


def is_rewound(position: int, recorded_in: datetime | None, stream: Stream) -> bool:
    """Whether `stream` is the one the recorded `position` counts in, restored from a backup that ends before
    it (docs/operations.md, "After a restore"): the creation time recorded (`recorded_in`), and fewer events
    than recorded. Its sequences up to its last are the events recorded at them, so recording goes on after its
    last sequence, and what was recorded moves below that. The events it lost come back at new sequences as the
    relay publishes them again: one recorded before gets no second delivery, but one no webhook wanted then
    (never recorded) can reach a webhook registered since.
    """
    return (stream.last_seq < position and recorded_in is not None and stream.created is not None
            and recorded_in == stream.created)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, for at most `give_up_after` seconds after the first attempt."""

    base_seconds: float
    max_delay_seconds: float
    give_up_after_seconds: float

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number `attempt` (1, 2, …): half fixed, half random, so
        receivers that come back are not hit by every replica's retries at the same instant."""
        ceiling = min(self.max_delay_seconds, self.base_seconds * 2 ** min(attempt - 1, 40))
        return ceiling / 2 + rng.uniform(0, ceiling / 2)

    def gives_up(self, first_attempt_at: datetime, now: datetime) -> bool:
        return now - first_attempt_at >= timedelta(seconds=self.give_up_after_seconds)


@dataclass(frozen=True)
class Outcome:
    """What one attempt leaves: the delivery's new status, and when to try again if it is pending."""

    status: str  # delivered | pending | failed
    retry_in_seconds: float | None = None

    @property
    def gave_up(self) -> bool:
        return self.status == "failed"


def outcome(succeeded: bool, attempt: int, first_attempt_at: datetime, now: datetime, policy: RetryPolicy,
            rng: random.Random) -> Outcome:
    if succeeded:
        return Outcome("delivered")
    if policy.gives_up(first_attempt_at, now):
        return Outcome("failed")
    return Outcome("pending", policy.delay(attempt, rng))


def accepted(status_code: int | None) -> bool:
    """A receiver accepts an event with any 2xx; a redirect is not followed, so it counts as a failure."""
    return status_code is not None and 200 <= status_code < 300


def check_url(url: str) -> tuple[str, str, int]:
    """The scheme, host and port of a webhook URL, or the reason it cannot be one."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise InvalidArgument("the webhook URL must be http:// or https://", field="url",
                              hint="give the receiver's full URL, e.g. https://example.com/threadline")
    if parts.username is not None or parts.password is not None:
        raise InvalidArgument("the webhook URL must not carry credentials (user:password@)", field="url",
                              hint="check the signature instead; a token may go in the path or the query")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise InvalidArgument("the webhook URL has an invalid port", field="url", hint="use a port 1-65535") from None
    if not parts.hostname:
        raise InvalidArgument("the webhook URL has no host", field="url", hint="give the receiver's host name")
    return parts.scheme, parts.hostname, port


def refused_address(address: str) -> str | None:
    """Why an address may not be a webhook target when private targets are not allowed (None: it may)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return f"{address} is a loopback address"
    if ip.is_unspecified or ip.is_multicast or ip.is_link_local:
        return f"{address} is not a unicast address one can deliver to"
    if ip.is_private or not ip.is_global:
        return f"{address} is a private address"
    return None


def excerpt(body: bytes) -> str | None:
    """What the log keeps of a response: a short, printable beginning, never the whole body."""
    if not body:
        return None
    text = body[: EXCERPT_CHARS * 4].decode("utf-8", errors="replace")
    text = "".join(ch if ch.isprintable() else " " for ch in text)[:EXCERPT_CHARS].strip()
    return text or None


def short_error(message: str) -> str:
    return message if len(message) <= ERROR_CHARS else f"{message[:ERROR_CHARS]}…"
