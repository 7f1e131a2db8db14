"""The relay's partitions: which of `THREADLINE_RELAY_PARTITIONS` this relay process leads.

Each outbox row belongs to partition `slot % partitions`, where `slot` is a stable hash of its aggregate (a case
or a company; shared/db/outbox_table.py), so all of one case's events go through one partition and stay in order.
Each partition has one leader at a time: a PostgreSQL session advisory lock `(PARTITION_LOCK, p)` on the relay's
direct connection, released by the server the moment that session ends (a relay killed, its host gone, its
session idle past the timeout). Relays share the partitions evenly: every relay holds the shared lock
`(MEMBER_LOCK, partitions)`, so each counts the relays alive from `pg_locks`, keeps at most its fair share
(ceil(partitions / relays)), hands back any above it between two publishing passes, and takes free partitions up to
it — a standby takes a dead leader's partitions at its next look, within a second.

Two safety catches. Relays that disagree on the number of partitions would split one case between two leaders, so
a partition's lock names the count too, `(PARTITION_LOCK, partitions * 4096 + p)`, and a relay takes no partition
while a relay with another count leads any (it checks again after taking, before it publishes): the relays already
leading keep going and a newcomer with another count waits, logging `relay_partition_count_mismatch`, until they
are gone — so a rolling restart changes the count safely. And a relay from before partitions (one leader for
everything, an exclusive lock on `LEGACY_LEADER_LOCK`) excludes the partitioned ones and vice versa: each
partitioned relay holds that lock shared, so a rolling upgrade never has an old and a new leader publishing at once.
"""

from __future__ import annotations

import hashlib
import math
import os
import time

import asyncpg
from prometheus_client import Gauge

from shared.db.outbox_table import SLOTS
from shared.logging import get_logger

log = get_logger(__name__)

PARTITION_LOCK = 0x74726C70  # "trlp": (PARTITION_LOCK, partitions * 4096 + p) is held by partition p's leader
MEMBER_LOCK = 0x74726C6D  # "trlm": (MEMBER_LOCK, partitions) is held shared by every partitioned relay
LEGACY_LEADER_LOCK = 0x7468726C6E  # the single relay leader's lock before partitions; held shared here
REBALANCE_EVERY_SECONDS = 1.0

RELAY_LEADER = Gauge("threadline_relay_leader", "1 while this relay process leads at least one partition, else 0")
PARTITION_LEADER = Gauge("threadline_relay_partition_leader",
                         "1 for each outbox partition this relay process leads", ["partition"])
PARTITIONS_LED = Gauge("threadline_relay_partitions_led", "How many outbox partitions this relay process leads")
PARTITIONS = Gauge("threadline_relay_partitions", "The outbox partitions (THREADLINE_RELAY_PARTITIONS)")
RELAYS_SEEN = Gauge("threadline_relay_members", "Relay processes sharing the partitions, as this relay last counted")

_THIS_DATABASE = ("locktype = 'advisory' AND granted AND objsubid = 2 AND classid = $1::bigint::oid "
                  "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
_RELAYS_SQL = f"SELECT count(DISTINCT pid) FROM pg_locks WHERE {_THIS_DATABASE} AND objid::bigint = $2"
_OTHER_COUNTS_SQL = (f"SELECT DISTINCT objid::bigint / {SLOTS} AS partitions FROM pg_locks "
                     f"WHERE {_THIS_DATABASE} AND objid::bigint / {SLOTS} <> $2 ORDER BY 1")
# Stops at the first `wanted` locks taken: a plain scan with a LIMIT pulls rows one at a time.
_TAKE_SQL = (f"SELECT p FROM unnest($2::int[]) AS p WHERE pg_try_advisory_lock($1::int, $3::int * {SLOTS} + p) "
             "LIMIT $4")


def slot_of(aggregate: str) -> int:
    """The aggregate's slot, as PostgreSQL computes it for `outbox.slot`."""
    return int(hashlib.md5(aggregate.encode()).hexdigest()[:3], 16) % SLOTS  # noqa: S324 - a hash, not security


def partition_of(aggregate: str, partitions: int) -> int:
    return slot_of(aggregate) % partitions


class Partitions:
    """The partitions one relay session leads; every method runs on that session's connection."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.led: set[int] = set()
        self.checked_at = 0.0
        self.relays = 0
        self.mismatch: list[int] = []
        PARTITIONS.set(count)

    async def join(self, db: asyncpg.Connection) -> bool:
        """Become one of the relays sharing the partitions; False while a relay of the older kind leads."""
        if not await db.fetchval("SELECT pg_try_advisory_lock_shared($1::bigint)", LEGACY_LEADER_LOCK):
            return False
        await db.execute("SELECT pg_advisory_lock_shared($1::int, $2::int)", MEMBER_LOCK, self.count)
        log.info("relay_joined", partitions=self.count)
        return True

    async def rebalance(self, db: asyncpg.Connection, *, force: bool = False) -> None:
        """Hand back partitions above the fair share and take free ones up to it (at most once a second)."""
        if not force and time.monotonic() - self.checked_at < REBALANCE_EVERY_SECONDS:
            return
        self.checked_at = time.monotonic()
        self.relays = max(1, await db.fetchval(_RELAYS_SQL, MEMBER_LOCK, self.count))
        RELAYS_SEEN.set(self.relays)
        share = math.ceil(self.count / self.relays)
        if len(self.led) > share:
            await self._release(db, set(sorted(self.led)[share:]))
        elif len(self.led) < share and not await self._other_counts(db):
            start = os.getpid() % self.count  # relays starting together try different partitions first
            order = [(start + i) % self.count for i in range(self.count)]
            free = [p for p in order if p not in self.led]
            rows = await db.fetch(_TAKE_SQL, PARTITION_LOCK, free, self.count, share - len(self.led))
            taken = {row["p"] for row in rows}
            if taken and await self._other_counts(db):  # one with another count took some at the same moment
                self.led |= taken
                await self._release(db, taken)
            elif taken:
                self.led |= taken
                log.info("relay_leading", partitions=sorted(taken), led=sorted(self.led), relays=self.relays)
                self._publish_metrics()

    async def _other_counts(self, db: asyncpg.Connection) -> bool:
        others = [row["partitions"] for row in await db.fetch(_OTHER_COUNTS_SQL, PARTITION_LOCK, self.count)]
        if others and others != self.mismatch:
            log.error("relay_partition_count_mismatch", partitions=self.count, others=others,
                      hint="relays with another THREADLINE_RELAY_PARTITIONS lead; this one takes no partition until "
                           "they are gone (every relay of a deployment must run with the same count)")
        self.mismatch = others
        return bool(others)

    async def _release(self, db: asyncpg.Connection, partitions: set[int]) -> None:
        if not partitions:
            return
        for partition in sorted(partitions):
            await db.execute("SELECT pg_advisory_unlock($1::int, $2::int)", PARTITION_LOCK,
                             self.count * SLOTS + partition)
        self.led -= partitions
        log.info("relay_partitions_handed_back", partitions=sorted(partitions), led=sorted(self.led),
                 relays=self.relays)
        self._publish_metrics()

    def forget(self) -> None:
        """The session is gone, and with it every lock: this relay leads nothing now."""
        self.led = set()
        self._publish_metrics()

    def _publish_metrics(self) -> None:
        RELAY_LEADER.set(1 if self.led else 0)
        PARTITIONS_LED.set(len(self.led))
        for partition in range(self.count):
            PARTITION_LEADER.labels(partition=str(partition)).set(1 if partition in self.led else 0)
