"""The transactional outbox: every service writes its events here in the transaction of the change; the relay
publishes them and marks them published. Beside shared/db/tables.py (which re-exports it), to keep that short.

`slot` is a stable hash of the aggregate (a case or a company) from 0 to 4095, computed by PostgreSQL itself (a
generated column), so every row has one, including those written before the column existed or by an older
writer. The relay's partition of a row is `slot % THREADLINE_RELAY_PARTITIONS` (services/relay/partitions.py).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Computed,
    DateTime,
    Identity,
    Index,
    SmallInteger,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

from shared.db.base import _now, metadata

SLOTS = 4096
# The first three hex digits of md5(aggregate): twelve bits, the same on every PostgreSQL and in Python.
SLOT_SQL = "(('x'::text || substr(md5(aggregate), 1, 3)))::bit(12)::integer"

outbox = Table(  # writers: every service, in the transaction of the change; relay: marks published
    "outbox",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("event_id", UUID(as_uuid=False), nullable=False, unique=True),
    Column("aggregate", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("event_type", Text, nullable=False),
    Column("envelope", JSONB, nullable=False),
    Column("headers", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    _now(),
    Column("published_at", DateTime(timezone=True)),
    Column("stream_seq", BigInteger),
    Column("slot", SmallInteger, Computed(SLOT_SQL, persisted=True), nullable=False),
)
Index("ix_outbox_pending", outbox.c.id, postgresql_where=text("published_at IS NULL"))
