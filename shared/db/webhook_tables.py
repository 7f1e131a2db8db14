"""The webhooks service's tables (writer: webhooks), on the same metadata as every other table.

They live beside shared/db/tables.py, which imports this module, only to keep each module short.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    PrimaryKeyConstraint,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

from shared.db.base import _now, metadata

webhooks = Table(  # writer: webhooks — receivers registered by admins
    "webhooks",
    metadata,
    Column("webhook_id", UUID(as_uuid=False), primary_key=True),
    Column("url", Text, nullable=False),
    Column("case_id", Text),
    Column("company_id", Text),
    Column("types", JSONB, nullable=False, server_default=text("'[]'::jsonb")),  # empty: every type
    # The signing key, as the receiver holds it: Standard Webhooks signs with the secret itself.
    Column("secret", Text, nullable=False),
    Column("status", Text, nullable=False, server_default="active"),
    # Events at or below this stream sequence were published before the webhook existed.
    Column("start_after_seq", BigInteger, nullable=False),
    Column("created_by", Text, nullable=False),
    _now(),
    Column("failing_since", DateTime(timezone=True)),
    Column("deleted_at", DateTime(timezone=True)),
    CheckConstraint("status IN ('active', 'failing', 'deleted')", name="status_known"),
    CheckConstraint("case_id IS NULL OR company_id IS NULL", name="one_scope"),
)

webhook_ingest = Table(  # writer: webhooks — one row: the last stream sequence turned into deliveries
    "webhook_ingest",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("stream_seq", BigInteger, nullable=False),
    # Which stream `stream_seq` counts in: its creation time as JetStream reports it (None: not known yet).
    Column("stream_created", Text),
    CheckConstraint("id = 1", name="one_row"),
)

webhook_events = Table(  # writer: webhooks — each event some webhook must receive, kept for its deliveries
    "webhook_events",
    metadata,
    Column("event_id", UUID(as_uuid=False), primary_key=True),
    Column("stream_seq", BigInteger, nullable=False),
    Column("aggregate", Text, nullable=False),
    Column("event_type", Text, nullable=False),
    Column("revision", BigInteger),
    Column("envelope", JSONB, nullable=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

webhook_deliveries = Table(  # writer: webhooks — one event to one webhook: its state and last outcome
    "webhook_deliveries",
    metadata,
    Column("webhook_id", UUID(as_uuid=False), ForeignKey("webhooks.webhook_id"), nullable=False),
    Column("event_id", UUID(as_uuid=False), ForeignKey("webhook_events.event_id"), nullable=False),
    Column("stream_seq", BigInteger, nullable=False),
    Column("aggregate", Text, nullable=False),
    Column("status", Text, nullable=False, server_default="pending"),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("first_attempt_at", DateTime(timezone=True)),
    Column("last_attempt_at", DateTime(timezone=True)),
    Column("delivered_at", DateTime(timezone=True)),
    Column("lease_token", UUID(as_uuid=False)),
    Column("lease_until", DateTime(timezone=True)),
    Column("response_code", Integer),
    Column("latency_ms", Integer),
    Column("last_error", Text),
    _now(),
    PrimaryKeyConstraint("webhook_id", "event_id"),
    CheckConstraint("status IN ('pending', 'delivered', 'failed')", name="status_known"),
)
# The order a webhook's events go out in: per aggregate (a case or a company), by stream sequence. Only
# the undelivered matter to the order, and they stay few however long the history grows.
Index("ix_webhook_deliveries_chain", webhook_deliveries.c.webhook_id, webhook_deliveries.c.aggregate,
      webhook_deliveries.c.stream_seq, postgresql_where=text("status <> 'delivered'"))
Index("ix_webhook_deliveries_due", webhook_deliveries.c.next_attempt_at,
      postgresql_where=text("status = 'pending'"))

webhook_attempts = Table(  # writer: webhooks — the delivery log: every attempt, never a whole response body
    "webhook_attempts",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("webhook_id", UUID(as_uuid=False), nullable=False),
    Column("event_id", UUID(as_uuid=False), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("response_code", Integer),
    Column("latency_ms", Integer, nullable=False),
    Column("error", Text),
    Column("response_excerpt", Text),
    ForeignKeyConstraint(["webhook_id", "event_id"],
                         ["webhook_deliveries.webhook_id", "webhook_deliveries.event_id"]),
)
Index("ix_webhook_attempts_delivery", webhook_attempts.c.webhook_id, webhook_attempts.c.event_id)
