"""How fast the relays publish a backlog — and the projection applies one — read from the outbox (the projection's
inbox) itself rather than from samples of it.

The relay marks each pass's events published with one statement (`published_at = now()`, after JetStream acked
them), so the backlog's rows, grouped by partition and by that time, are the drain's exact curve: each partition's
events and when its leader finished them, whatever the sampling. In the relay sweep each relay leads one
partition, so a partition's rate (from its first events marked to its last) is its relay's rate while it had
work; their sum is what the relays publish
when every one of them has work, as they do under a steady load spread over many cases. A backlog spread
unevenly (one case busier than another) ends on one relay alone, so the whole backlog over the whole drain is
reported beside it, and the rate between 10% and 60% of the backlog gone.

The projection's inbox records each event it applied with its transaction's start time, so the same figures come
from it (projection_figures): the events applied from the first transaction of the drain to the last, over the time
between them, whichever replica applied them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from services.cli.bench.stats import rounded

BACKLOG_PER_RELAY = 8_000  # events: ten seconds and more of drain at the rates one relay reaches under its quota
BACKLOG_PER_PROJECTION = 1_000  # events the projection applies: ten seconds and more for one replica under its quota
BACKLOG_MAX_SECONDS = 240.0  # building it stops here, whatever it holds by then
MARK_SQL = "SELECT now() AS at, coalesce(max(id), 0) AS last FROM outbox"
PENDING_SQL = "SELECT count(*) FROM outbox WHERE published_at IS NULL"
# The events of the given kinds (those the projection applies) not yet published.
PENDING_OF_SQL = "SELECT count(*) FROM outbox WHERE published_at IS NULL AND event_type = ANY($1::text[])"
# The backlog's events not applied yet: every event of those kinds published after the relays resumed (or not yet)
# must reach the inbox. (A relay stopped mid-pass has events in the stream whose rows it marks only once resumed.)
UNAPPLIED_SQL = ("SELECT count(*) FROM outbox o WHERE o.event_type = ANY($1::text[]) "
                 "AND (o.published_at IS NULL OR o.published_at >= $2) "
                 "AND NOT EXISTS (SELECT 1 FROM projection_inbox i WHERE i.event_id = o.event_id)")
# The events the projection applied since a time, by when each was applied (its transaction's start).
APPLIED_SQL = ("SELECT extract(epoch FROM applied_at - $1)::float8 AS seconds, count(*) AS events FROM projection_inbox "
               "WHERE applied_at >= $1 GROUP BY 1 ORDER BY 1")
# The backlog: the rows unsent when the relays resumed (`last`, `at`), each pass's rows by partition.
PASSES_SQL = ("SELECT slot % $1 AS partition, extract(epoch FROM published_at - $2)::float8 AS seconds, "
              "count(*) AS events FROM outbox WHERE id <= $3 AND published_at >= $2 GROUP BY 1, 2 ORDER BY 2")


def drain_figures(passes: list[tuple[int, float, int]], backlog: int) -> dict[str, Any]:
    """From (partition, seconds after the relays resumed, events marked then): each partition's rate, their sum,
    the whole backlog's rate and the rate between 10% and 60% of it gone.

    A partition's rate runs from its first events marked to its last, so that it leaves out how long its relay
    took to start again after the pause (a session the server ended while the relay was stopped, say)."""
    marks: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for partition, seconds, count in passes:
        marks[partition].append((seconds, count))
    partitions = []
    for partition in sorted(marks):
        curve = sorted(marks[partition])
        events = sum(count for _, count in curve)
        (first, first_count), last = curve[0], curve[-1][0]
        rate = (events - first_count) / (last - first) if last > first else (events / last if last > 0 else None)
        partitions.append({"partition": partition, "events": events, "firstSeconds": rounded(first, 2),
                           "seconds": rounded(last, 2), "eventsPerSecond": rounded(rate, 1)})
    rates = [p["eventsPerSecond"] for p in partitions]
    drained = sum(p["events"] for p in partitions)
    seconds = max((p["seconds"] for p in partitions), default=0.0)
    return {"backlog": backlog, "published": drained, "drainSeconds": seconds,
            "eventsPerSecond": rounded(sum(rates), 1) if rates and None not in rates else None,
            "wholeBacklogPerSecond": rounded(drained / seconds, 1) if seconds else None,
            "tenToSixtyPerSecond": _window(passes, drained), "partitions": partitions}


def _window(passes: list[tuple[int, float, int]], drained: int) -> float | None:
    """Events/s from the pass that took the backlog past 10% gone to the one that took it past 60%."""
    by_time: dict[float, int] = defaultdict(int)
    for _, seconds, count in passes:
        by_time[seconds] += count
    gone, first, last = 0, None, None
    for seconds in sorted(by_time):
        gone += by_time[seconds]
        if first is None and gone >= 0.1 * drained:
            first = (seconds, gone)
        if gone >= 0.6 * drained:
            last = (seconds, gone)
            break
    if first is None or last is None or last[0] <= first[0]:
        return None
    return rounded((last[1] - first[1]) / (last[0] - first[0]), 1)


def projection_figures(applied: list[tuple[float, int]], backlog: int) -> dict[str, Any]:
    """From (seconds after the relays resumed, events applied in transactions started then): the events applied
    per second from the first transaction of the drain to the last, the whole backlog over the whole drain (from
    the resume) and the rate between 10% and 60% of it gone."""
    figures = drain_figures([(0, seconds, count) for seconds, count in applied], backlog)
    figures.pop("partitions")
    applied = figures.pop("published")
    return {**figures, "applied": applied}
