"""Callers' deadlines on commands: a service does no work for a caller that has stopped waiting (as gRPC deadlines).

ServiceClient.call stamps each request with when it was sent and how long its caller waits, in wall-clock seconds
(SENT_AT, TIMEOUT). Before a handler runs, DeadlineMiddleware compares them with this process's clock: a command
whose caller gave up is answered `unavailable` without being handled, so a replica behind its callers spends its
time on the commands someone still waits for. The two clocks are different machines': see `verdict`.
"""

from __future__ import annotations

import math
import time
from enum import StrEnum
from typing import Any

from faststream import BaseMiddleware

from shared.errors import Unavailable
from shared.logging import bound, get_logger
from shared.observability import COMMANDS_EXPIRED
from shared.subjects import Subjects

log = get_logger(__name__)

SENT_AT = "threadline-sent-at"  # when the caller sent the request: Unix epoch seconds, to the millisecond
TIMEOUT = "threadline-timeout"  # how many seconds from then the caller waits for the answer

# Core NATS keeps no message: a request waits only in the replica's queue, and one waiting ten times its caller's
# timeout would mean a backlog ten timeouts deep. Further past than that, the sender's clock is more likely behind
# this one's: such a request is handled, as if it carried no deadline, rather than every request refused.
SKEW_FACTOR = 10
SKEW_WARN_EVERY_SECONDS = 60.0


class Verdict(StrEnum):
    HANDLE = "handle"  # no deadline, or its caller still waits
    EXPIRED = "expired"  # its caller has stopped waiting: do nothing
    SKEWED = "skewed"  # past its deadline by more than a queue could hold it: the clocks disagree; handle it


def deadline(headers: dict[str, Any] | None) -> tuple[float, float] | None:
    """(sent at, timeout) from a request's headers; None when absent or unreadable (the request is handled)."""
    if not headers or SENT_AT not in headers:
        return None
    try:
        sent_at, timeout = float(headers[SENT_AT]), float(headers[TIMEOUT])
    except (KeyError, TypeError, ValueError):
        return None
    if not (math.isfinite(sent_at) and math.isfinite(timeout)) or timeout <= 0:
        return None
    return sent_at, timeout


def verdict(sent_at: float, timeout: float, now: float) -> Verdict:
    """Whether a request sent at `sent_at` (the sender's clock) by a caller waiting `timeout` s is still awaited
    `now` (this process's clock). Skew must never refuse every request: a receiver's clock behind the sender's
    makes the elapsed time short or negative, and the request is handled; an elapsed time beyond SKEW_FACTOR
    timeouts is taken for a sender's clock behind this one's, and the request is handled too."""
    elapsed = now - sent_at
    if elapsed <= timeout:
        return Verdict.HANDLE
    if elapsed > SKEW_FACTOR * timeout:
        return Verdict.SKEWED
    return Verdict.EXPIRED


def deadline_headers(timeout: float, now: float | None = None) -> dict[str, str]:
    """The headers a request carries for a caller that waits `timeout` s from `now` (the time of sending)."""
    return {SENT_AT: f"{time.time() if now is None else now:.3f}", TIMEOUT: f"{timeout:g}"}


def expired_reply(service: str, waited: float, timeout: float) -> dict[str, Any]:
    """The envelope of a command not handled: nobody reads it, but every request gets one."""
    return {"error": Unavailable(
        f"the caller had stopped waiting ({waited:.1f} s after sending, its timeout {timeout:g} s), so the {service} "
        "service did nothing", hint="retry: the command was not applied",
        details={"dependency": "service", "service": service, "mayHaveBeenApplied": False}).to_dict()}


class DeadlineMiddleware(BaseMiddleware):
    """Answers a command whose caller has stopped waiting without running its handler (logged, counted).

    Placed before CorrelationMiddleware: a command not handled is neither timed nor logged as handled.
    """

    _skew_warned = -math.inf  # monotonic time of this process's last clock_skew_suspected

    async def consume_scope(self, call_next, msg):  # noqa: ANN001, ANN201
        limits = deadline(msg.headers)
        if limits is None:
            return await call_next(msg)
        subject = msg.raw_message.subject if msg.raw_message is not None else ""
        now = time.time()
        judged = verdict(*limits, now)
        if judged is Verdict.HANDLE or not Subjects.is_command(subject):
            return await call_next(msg)
        sent_at, timeout = limits
        if judged is Verdict.SKEWED:
            self._warn_skew(subject, now - sent_at, timeout)
            return await call_next(msg)
        *_, service, command = subject.split(".")
        COMMANDS_EXPIRED.labels(service=service, command=command).inc()
        with bound(correlation_id=msg.correlation_id):
            log.info("command_expired", subject=subject, waited_ms=round((now - sent_at) * 1000),
                     timeout_ms=round(timeout * 1000))
        return expired_reply(service, now - sent_at, timeout)

    @classmethod
    def _warn_skew(cls, subject: str, elapsed: float, timeout: float) -> None:
        if time.monotonic() - cls._skew_warned < SKEW_WARN_EVERY_SECONDS:
            return
        cls._skew_warned = time.monotonic()
        log.warning("clock_skew_suspected", subject=subject, elapsed_ms=round(elapsed * 1000),
                    timeout_ms=round(timeout * 1000),
                    reason=f"sent more than {SKEW_FACTOR} timeouts ago by this clock: the sender's clock is taken to "
                           "be behind, and the command is handled; check that every machine keeps time (NTP)")
