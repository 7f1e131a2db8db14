"""What review checks flagged at staging, and how predictions resolved (migration 0016_review_checks).
Beside shared/db/tables.py, which imports this module, only to keep each module short."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKeyConstraint,
    Index,
    PrimaryKeyConstraint,
    Table,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import UUID

from shared.db.base import metadata

review_check_flags = Table(  # writer: staging — written with the proposal, in the stage statement; immutable
    "review_check_flags",
    metadata,
    Column("proposal_id", UUID(as_uuid=False), nullable=False),
    Column("item_id", Text, nullable=False),
    Column("check", Text, nullable=False),
    Column("case_id", Text, nullable=False),
    Column("agent_name", Text, nullable=False),  # who staged it: track records count these
    Column("severity", Text, nullable=False),
    Column("message", Text, nullable=False),
    PrimaryKeyConstraint("proposal_id", "item_id", "check"),
    CheckConstraint("severity IN ('warning', 'info')", name="severity_known"),
)
Index("ix_review_check_flags_agent", review_check_flags.c.agent_name)

prediction_resolutions = Table(  # writer: review — append-only; a later row for a claim supersedes earlier ones
    "prediction_resolutions",
    metadata,
    Column("resolution_id", UUID(as_uuid=False), nullable=False),
    Column("case_id", Text, nullable=False),
    Column("claim_id", Text, nullable=False),
    Column("outcome", Text, nullable=False),
    Column("source_id", Text, nullable=False),
    Column("resolved_on", Text, nullable=False),  # YYYY-MM-DD, not after the day it was recorded
    Column("note", Text),
    Column("resolved_by", Text, nullable=False),
    Column("revision", BigInteger, nullable=False),  # the case revision the resolution made
    Column("supersedes", UUID(as_uuid=False)),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("resolution_id"),
    ForeignKeyConstraint(["case_id", "claim_id"], ["claims.case_id", "claims.claim_id"]),
    ForeignKeyConstraint(["case_id", "source_id"], ["sources.case_id", "sources.source_id"]),
    CheckConstraint("outcome IN ('true', 'false', 'void')", name="outcome_known"),
)
Index("ix_prediction_resolutions_claim", prediction_resolutions.c.case_id, prediction_resolutions.c.claim_id,
      prediction_resolutions.c.revision)
