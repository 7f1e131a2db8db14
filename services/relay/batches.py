"""One case's chain of events published as a JetStream atomic batch: one round trip for the chain, not one per event.

A relay that waits for each event's ack before sending the next is bound by round trips, not by CPU: the
events a pass can publish are (the cases in flight) × (one ack each), so halving the cases a relay leads halves
what it publishes, and a second relay added nothing. An atomic batch (nats-server 2.12 and later, on a stream
that allows it: shared/streams.py) is stored all or nothing, in the order sent, and acknowledged once, so a case's
order holds whatever fails. The events before the last are sent without a reply subject; the last carries
`Nats-Batch-Commit` and is a request, whose answer is the pub ack of the last event (the others have the
sequences just before it).

When the server refuses a batch it stored none of it, and the chain goes out one event at a time, as before.
That is also how a chain holding an event JetStream already has is published (a relay died between the ack and
marking the row): a batch holding a duplicate `Nats-Msg-Id` is refused whole, one publish at a time the duplicate
window drops just the copies. Without an answer in time the chain waits for the next pass, as a single publish
that timed out does.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext

BATCH_ID = "Nats-Batch-Id"
BATCH_SEQUENCE = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"
DUPLICATE_IN_BATCH = 10201  # JetStream's err_code: "atomic publish batch contains duplicate message id"
# JetStream takes at most 50 batches in flight on a stream; the relays sharing the partitions share these.
MAX_BATCHES_IN_FLIGHT = 40


@dataclass(frozen=True)
class Message:
    subject: str
    body: bytes
    headers: dict[str, str]


class BatchRefused(Exception):
    """JetStream answered the commit with an error: nothing of the batch was stored."""

    def __init__(self, code: int, description: str, *, unsupported: bool = False) -> None:
        super().__init__(f"{description} (err_code {code})")
        self.code = code
        self.duplicate = code == DUPLICATE_IN_BATCH
        self.unsupported = unsupported  # the answer was not a batch's: publish one at a time from now on


async def stream_takes_batches(js: JetStreamContext, stream: str) -> bool:
    """Whether the stream stores atomic batches. A server before 2.12 neither knows the setting nor echoes it back
    (and would store a batch's events one by one), so only a stream that says so gets batches."""
    try:
        info = await js.stream_info(stream)
    except nats.errors.Error:
        return False
    return bool(getattr(info.config, "allow_atomic", False))


def in_flight_per_relay(relays: int) -> int:
    """This relay's share of the stream's batches in flight."""
    return max(1, MAX_BATCHES_IN_FLIGHT // max(1, relays))


async def publish_batch(nc: Client, messages: list[Message], timeout: float) -> list[int]:
    """Publish `messages` as one atomic batch; return each one's stream sequence. Raises BatchRefused when
    JetStream stored none of them, or a NATS error (a timeout: stored or not, unknown)."""
    batch_id = uuid.uuid4().hex
    *first, last = messages
    for n, message in enumerate(first, start=1):
        await nc.publish(message.subject, message.body,
                         headers={**message.headers, BATCH_ID: batch_id, BATCH_SEQUENCE: str(n)})
    reply = await nc.request(last.subject, last.body, timeout=timeout,
                             headers={**last.headers, BATCH_ID: batch_id, BATCH_SEQUENCE: str(len(messages)),
                                      BATCH_COMMIT: "1"})
    answer = json.loads(reply.data or b"{}")
    if "error" in answer:
        error = answer["error"]
        raise BatchRefused(int(error.get("err_code", 0)), str(error.get("description", "refused")))
    if answer.get("count") != len(messages) or "seq" not in answer:
        # A plain pub ack: a server that stored the events one by one. They are in order (one connection) and each
        # has its Nats-Msg-Id, so publishing the chain again one at a time only finds duplicates.
        raise BatchRefused(0, f"the server does not take atomic batches (it answered {answer})", unsupported=True)
    last_seq = int(answer["seq"])
    return [last_seq - (len(messages) - n) for n in range(1, len(messages) + 1)]
