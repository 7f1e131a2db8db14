"""The projection's partitions: which of `THREADLINE_PROJECTION_PARTITIONS` this projection replica leads.

Each case's events reach the projection through one partition of its stream (shared/streams.py: nats-server puts
a case's events under `partition(count, caseId)`, an FNV-1a hash of the case id), each partition's through a durable
consumer of its own. Each partition has one leader at a time and replicas share them evenly (shared/
partition_leases.py), so one replica applies all of a case's events and replicas never wait on each other's cases.

Leading is for speed, not for correctness: applying is idempotent and a view skips revisions it already shows, so
for the moment two replicas might both pull a partition (a leader whose session PostgreSQL ended, still finishing
its fetch) nothing is applied twice or out of order.
"""

from __future__ import annotations

from shared.observability import service_gauge
from shared.partition_leases import LeaseKind

PARTITION_LOCK = 0x74727070  # "trpp": (PARTITION_LOCK, partitions * LOCK_SPAN + p) is held by partition p's leader
MEMBER_LOCK = 0x7472706D  # "trpm": (MEMBER_LOCK, partitions) is held shared by every projection replica

PROJECTION = LeaseKind(
    name="projection", setting="THREADLINE_PROJECTION_PARTITIONS", partition_lock=PARTITION_LOCK,
    member_lock=MEMBER_LOCK,
    leader=service_gauge("threadline_projection_leader", "1 while this projection replica leads at least one partition"),
    partition_leader=service_gauge("threadline_projection_partition_leader",
                           "1 for each partition of the projection's events this replica leads", ("partition",)),
    led=service_gauge("threadline_projection_partitions_led", "How many partitions this projection replica leads"),
    partitions=service_gauge("threadline_projection_partitions", "The projection's partitions "
                                                         "(THREADLINE_PROJECTION_PARTITIONS)"),
    members=service_gauge("threadline_projection_members",
                  "Projection replicas sharing the partitions, as this replica last counted"),
)

_FNV_OFFSET, _FNV_PRIME = 2166136261, 16777619


def partition_of(case_id: str, partitions: int) -> int:
    """The partition nats-server's `partition(n, …)` transform gives a case id (FNV-1a, 32 bits, modulo n)."""
    h = _FNV_OFFSET
    for byte in case_id.encode():
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return h % partitions
