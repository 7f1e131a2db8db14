"""Partitions shared by the replicas of one service: which of `count` partitions this process leads.

The relay (services/relay/partitions.py: the outbox's partitions) and the projection (services/projection/
partitions.py: its event consumers' partitions) each split their work into partitions and let each partition have
one leader at a time, so that one case's work stays with one process. A partition's leader holds a PostgreSQL
session advisory lock `(kind.partition_lock, count * 4096 + p)` on its direct connection, released by the server
the moment that session ends (a process killed, its host gone, its session idle past the timeout). Replicas share
the partitions evenly: every replica holds the shared lock `(kind.member_lock, count)`, so each counts the replicas
alive from `pg_locks`, keeps at most its fair share (ceil(count / replicas)), hands back any above it when its
caller asks (between two passes of work), and takes free partitions up to it — a standby takes a dead leader's
partitions at its next look, within a second.

Replicas that disagree on the number of partitions would split one case between two leaders, so a partition's lock
names the count too, and a replica takes no partition while a replica with another count leads any (it checks again
after taking, before it works): the replicas already leading keep going and a newcomer with another count waits,
logging `partition_count_mismatch` (with its kind), until they are gone — so a rolling restart changes the count safely.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg
from prometheus_client import Gauge

from shared.db.session import asyncpg_dsn, connect
from shared.logging import get_logger
from shared.settings import Settings

log = get_logger(__name__)

# A leader's session is gone (and with it every lock it held): the connection failed or was refused, the server
# ended it, or its protocol was left mid-error (InternalClientError), as when the server ended an idle session
# (idle_session_timeout) while this process's loop was held up. A new session heals each of them.
SESSION_LOST = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError)
LOCK_SPAN = 4096  # a lock's second key: count * LOCK_SPAN + partition (at most 4096 partitions)
REBALANCE_EVERY_SECONDS = 1.0

_THIS_DATABASE = ("locktype = 'advisory' AND granted AND objsubid = 2 AND classid = $1::bigint::oid "
                  "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
_MEMBERS_SQL = f"SELECT count(DISTINCT pid) FROM pg_locks WHERE {_THIS_DATABASE} AND objid::bigint = $2"
_OTHER_COUNTS_SQL = (f"SELECT DISTINCT objid::bigint / {LOCK_SPAN} AS partitions FROM pg_locks "
                     f"WHERE {_THIS_DATABASE} AND objid::bigint / {LOCK_SPAN} <> $2 ORDER BY 1")
# Stops at the first `wanted` locks taken: a plain scan with a LIMIT pulls rows one at a time.
_TAKE_SQL = (f"SELECT p FROM unnest($2::int[]) AS p WHERE pg_try_advisory_lock($1::int, $3::int * {LOCK_SPAN} + p) "
             "LIMIT $4")


@dataclass(frozen=True)
class LeaseKind:
    """Whose partitions: the locks that name them, the setting that counts them, and the metrics that show them."""

    name: str  # "relay", "projection": the `kind` of its log events
    setting: str  # the environment variable every replica must agree on
    partition_lock: int
    member_lock: int
    leader: Gauge  # 1 while this process leads at least one partition
    partition_leader: Gauge  # labelled by partition: 1 for each it leads
    led: Gauge
    partitions: Gauge
    members: Gauge

    def metrics(self) -> tuple[Gauge, ...]:
        return self.leader, self.partition_leader, self.led, self.partitions, self.members


Release = Callable[[set[int]], Awaitable[None]]


class PartitionLeases:
    """The partitions one process leads; every method runs on that process's session connection."""

    def __init__(self, kind: LeaseKind, count: int) -> None:
        self.kind = kind
        self.count = count
        self.led: set[int] = set()
        self.checked_at = 0.0
        self.members = 0
        self.mismatch: list[int] = []
        kind.partitions.set(count)

    async def join(self, db: asyncpg.Connection) -> bool:
        """Become one of the replicas sharing the partitions."""
        await db.execute("SELECT pg_advisory_lock_shared($1::int, $2::int)", self.kind.member_lock, self.count)
        log.info("partitions_joined", kind=self.kind.name, partitions=self.count)
        return True

    async def rebalance(self, db: asyncpg.Connection, *, force: bool = False,
                        before_release: Release | None = None) -> set[int]:
        """Hand back partitions above the fair share and take free ones up to it (at most once a second); the
        partitions taken now. `before_release(partitions)` runs before a partition's lock goes (its work stops)."""
        if not force and time.monotonic() - self.checked_at < REBALANCE_EVERY_SECONDS:
            return set()
        self.checked_at = time.monotonic()
        self.members = max(1, await db.fetchval(_MEMBERS_SQL, self.kind.member_lock, self.count))
        self.kind.members.set(self.members)
        share = math.ceil(self.count / self.members)
        if len(self.led) > share:
            await self._release(db, set(sorted(self.led)[share:]), before_release)
        elif len(self.led) < share and not await self._other_counts(db):
            start = os.getpid() % self.count  # replicas starting together try different partitions first
            order = [(start + i) % self.count for i in range(self.count)]
            free = [p for p in order if p not in self.led]
            rows = await db.fetch(_TAKE_SQL, self.kind.partition_lock, free, self.count, share - len(self.led))
            taken = {row["p"] for row in rows}
            if taken and await self._other_counts(db):  # one with another count took some at the same moment
                self.led |= taken
                await self._release(db, taken, None)  # nothing was started on them yet
            elif taken:
                self.led |= taken
                log.info("partitions_leading", kind=self.kind.name, partitions=sorted(taken), led=sorted(self.led),
                         members=self.members)
                self._publish_metrics()
                return taken
        return set()

    async def _other_counts(self, db: asyncpg.Connection) -> bool:
        others = [row["partitions"] for row in await db.fetch(_OTHER_COUNTS_SQL, self.kind.partition_lock,
                                                                self.count)]
        if others and others != self.mismatch:
            log.error("partition_count_mismatch", kind=self.kind.name, partitions=self.count, others=others,
                      hint=f"replicas with another {self.kind.setting} lead; this one takes no partition until they "
                           f"are gone (every {self.kind.name} of a deployment must run with the same count)")
        self.mismatch = others
        return bool(others)

    async def _release(self, db: asyncpg.Connection, partitions: set[int], before: Release | None) -> None:
        if not partitions:
            return
        if before is not None:
            await before(partitions)
        for partition in sorted(partitions):
            await db.execute("SELECT pg_advisory_unlock($1::int, $2::int)", self.kind.partition_lock,
                             self.count * LOCK_SPAN + partition)
        self.led -= partitions
        log.info("partitions_handed_back", kind=self.kind.name, partitions=sorted(partitions), led=sorted(self.led),
                 members=self.members)
        self._publish_metrics()

    def forget(self) -> None:
        """The session is gone, and with it every lock: this process leads nothing now."""
        self.led = set()
        self._publish_metrics()

    def _publish_metrics(self) -> None:
        self.kind.leader.set(1 if self.led else 0)
        self.kind.led.set(len(self.led))
        for partition in range(self.count):
            self.kind.partition_leader.labels(partition=str(partition)).set(1 if partition in self.led else 0)


async def session(settings: Settings, application_name: str, *, idle_seconds: float) -> asyncpg.Connection:
    """A leader's session, on the direct connection (THREADLINE_RELAY_DATABASE_URL when the usual one is a
    transaction pooler). Its advisory locks last as long as the session, so the server must notice when the leader
    is gone: TCP keepalives for a vanished host, and an idle-session timeout for a leader that is frozen (it must
    query at least every `idle_seconds`)."""
    keepalives = {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3",
                  "application_name": application_name}
    idle = {"idle_session_timeout": str(int(idle_seconds * 1000))}
    dsn = asyncpg_dsn(settings.resolved_relay_database_url())
    try:
        return await connect(dsn, server_settings={**keepalives, **idle})
    except asyncpg.UndefinedObjectError:  # PostgreSQL before 14 has no idle_session_timeout
        return await connect(dsn, server_settings=keepalives)
