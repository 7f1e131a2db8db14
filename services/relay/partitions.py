"""The relay's partitions: which of `THREADLINE_RELAY_PARTITIONS` this relay process leads.

Each outbox row belongs to partition `slot % partitions`, where `slot` is a stable hash of its aggregate (a case
or a company; shared/db/outbox_table.py), so all of one case's events go through one partition and stay in order.
Each partition has one leader at a time and relays share the partitions evenly (shared/partition_leases.py: a
session advisory lock per partition on the relay's direct connection; a standby takes a dead leader's partitions
within a second; relays that disagree on the count never lead side by side).

One more safety catch: a relay from before partitions (one leader for everything, an exclusive lock on
`LEGACY_LEADER_LOCK`) excludes the partitioned ones and vice versa: each partitioned relay holds that lock shared,
so a rolling upgrade never has an old and a new leader publishing at once.
"""

from __future__ import annotations

import hashlib

import asyncpg

from shared.db.outbox_table import SLOTS
from shared.observability import service_gauge
from shared.partition_leases import LeaseKind, PartitionLeases

PARTITION_LOCK = 0x74726C70  # "trlp": (PARTITION_LOCK, partitions * LOCK_SPAN + p) is held by partition p's leader
MEMBER_LOCK = 0x74726C6D  # "trlm": (MEMBER_LOCK, partitions) is held shared by every partitioned relay
LEGACY_LEADER_LOCK = 0x7468726C6E  # the single relay leader's lock before partitions; held shared here

RELAY = LeaseKind(
    name="relay", setting="THREADLINE_RELAY_PARTITIONS", partition_lock=PARTITION_LOCK, member_lock=MEMBER_LOCK,
    leader=service_gauge("threadline_relay_leader", "1 while this relay process leads at least one partition, else 0"),
    partition_leader=service_gauge("threadline_relay_partition_leader", "1 for each outbox partition this relay process leads",
                           ("partition",)),
    led=service_gauge("threadline_relay_partitions_led", "How many outbox partitions this relay process leads"),
    partitions=service_gauge("threadline_relay_partitions", "The outbox partitions (THREADLINE_RELAY_PARTITIONS)"),
    members=service_gauge("threadline_relay_members", "Relay processes sharing the partitions, as this relay last counted"),
)


def slot_of(aggregate: str) -> int:
    """The aggregate's slot, as PostgreSQL computes it for `outbox.slot`."""
    return int(hashlib.md5(aggregate.encode()).hexdigest()[:3], 16) % SLOTS  # noqa: S324 - a hash, not security


def partition_of(aggregate: str, partitions: int) -> int:
    return slot_of(aggregate) % partitions


class Partitions(PartitionLeases):
    """The partitions one relay session leads."""

    def __init__(self, count: int) -> None:
        super().__init__(RELAY, count)

    async def join(self, db: asyncpg.Connection) -> bool:
        """Become one of the relays sharing the partitions; False while a relay of the older kind leads."""
        if not await db.fetchval("SELECT pg_try_advisory_lock_shared($1::bigint)", LEGACY_LEADER_LOCK):
            return False
        return await super().join(db)
