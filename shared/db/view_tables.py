"""The projection's case views (writer: projection), kept row by row from each ledger change, and its inbox.

The views are derived from the ledger and rebuildable at any time; the inbox records the events applied. Every id and sort key is in the "C" collation, so
that the database orders them as Python does. They live beside shared/db/tables.py, which imports this
module, only to keep each module short.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    SmallInteger,
    Table,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID

from shared.db.base import metadata

Key = Text(collation="C")

case_views = Table(  # writer: projection — one row per case: the ledger revision its view rows show
    "case_views",
    metadata,
    Column("case_id", Text, ForeignKey("cases.case_id"), primary_key=True),
    Column("revision", BigInteger, nullable=False),  # -1: never built (rebuild from the ledger)
    Column("verdict_id", Key),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

view_counts = Table(  # writer: projection — the summary's counters (`claims.byKind.observation`, …)
    "view_counts",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("name", Key, nullable=False),
    Column("value", BigInteger, nullable=False),
    PrimaryKeyConstraint("case_id", "name"),
)

view_sources = Table(  # writer: projection — the active sources, in the orders scope=sources pages by
    "view_sources",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("source_id", Key, nullable=False),
    Column("type", Text, nullable=False),
    Column("revision", BigInteger, nullable=False),
    Column("strong", Boolean, nullable=False),
    Column("cited_by", Integer, nullable=False),  # active claims citing it
    Column("origin", Text, nullable=False),  # its publisher, as independent origins count it
    PrimaryKeyConstraint("case_id", "source_id"),
)
Index("ix_view_sources_ledger_order", view_sources.c.case_id, view_sources.c.revision, view_sources.c.source_id)
Index("ix_view_sources_strong_first", view_sources.c.case_id, view_sources.c.strong.desc(), view_sources.c.revision,
      view_sources.c.source_id)

view_claims = Table(  # writer: projection — the active claims with what the read views derive of each
    "view_claims",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("claim_id", Key, nullable=False),
    Column("kind", Text, nullable=False),
    Column("confidence", Text, nullable=False),
    Column("lane", Text),
    Column("display_order", Integer),
    Column("revision", BigInteger, nullable=False),
    Column("source_ids", ARRAY(Text), nullable=False),
    Column("lane_rank", SmallInteger, nullable=False),  # 0 in the verdict lane, which comes first
    Column("lane_key", Key, nullable=False),
    Column("order_key", Integer, nullable=False),
    Column("strong", Boolean, nullable=False),  # grounded in an active primary or official source
    Column("open", Boolean, nullable=False),  # has unresolved items
    Column("contradicted_by", ARRAY(Text), nullable=False),
    Column("unit", Key, nullable=False),  # its independent unit: the least claim id of its merge component
    Column("health", Text, nullable=False),  # supported, or as a retirement re-rated it (unsupported, weakened)
    Column("lost", JSONB, nullable=False),  # [{"record", "id"}]: what took its support
    PrimaryKeyConstraint("case_id", "claim_id"),
)
_FOCUS_ORDER = (view_claims.c.lane_rank, view_claims.c.lane_key, view_claims.c.order_key, view_claims.c.revision,
                view_claims.c.claim_id)
Index("ix_view_claims_focus_all", view_claims.c.case_id, *_FOCUS_ORDER)
Index("ix_view_claims_focus_unresolved", view_claims.c.case_id, view_claims.c.open.desc(), *_FOCUS_ORDER)
Index("ix_view_claims_focus_primary", view_claims.c.case_id, view_claims.c.strong.desc(), *_FOCUS_ORDER)
Index("ix_view_claims_unit", view_claims.c.case_id, view_claims.c.unit)
Index("ix_view_claims_unsupported", view_claims.c.case_id, view_claims.c.revision, view_claims.c.claim_id,
      postgresql_where=view_claims.c.health == "unsupported")

view_origins = Table(  # writer: projection — the origins (publishers) of the active sources, and how many each
    "view_origins",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("origin", Text, nullable=False),
    Column("sources", Integer, nullable=False),
    PrimaryKeyConstraint("case_id", "origin"),
)

view_group_members = Table(  # writer: projection — members of the active merge groups
    "view_group_members",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("group_id", Key, nullable=False),
    Column("claim_id", Key, nullable=False),
    PrimaryKeyConstraint("case_id", "group_id", "claim_id"),
)
Index("ix_view_group_members_claim", view_group_members.c.case_id, view_group_members.c.claim_id)

view_unresolved = Table(  # writer: projection — the unresolved section, one row per item, in page order
    "view_unresolved",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("band", SmallInteger, nullable=False),  # 0: the case's and the verdict's, 1: what lost support, 2: the rest
    Column("claim_revision", BigInteger, nullable=False),  # -1 for the case's own items (no verdict)
    Column("claim_id", Key, nullable=False),  # '' for the case's own items
    Column("position", SmallInteger, nullable=False),
    Column("type", Text, nullable=False),
    Column("detail", Text, nullable=False),
    Column("action", Text, nullable=False),
    PrimaryKeyConstraint("case_id", "band", "claim_revision", "claim_id", "position"),
)
Index("ix_view_unresolved_claim", view_unresolved.c.case_id, view_unresolved.c.claim_id)

projection_inbox = Table(  # writer: projection — events already applied, recorded with their effect
    "projection_inbox",
    metadata,
    Column("event_id", UUID(as_uuid=False), primary_key=True),
    Column("event_type", Text, nullable=False),
    Column("stream_seq", BigInteger, nullable=False),
    Column("applied_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
