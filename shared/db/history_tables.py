"""The ledger's own history where its records do not keep it: every re-rating, at the revision that made it.

`evidence_health` keeps each claim's current rating (one row, overwritten); a case read as of an older
revision needs the rating each claim had then, so review appends every rating here too, in the same
transaction. Beside shared/db/tables.py, which imports this module, only to keep each module short.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    ForeignKeyConstraint,
    PrimaryKeyConstraint,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB

from shared.db.base import metadata

rating_history = Table(  # writer: review — append-only: one row per claim re-rated, per revision
    "rating_history",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("claim_id", Text, nullable=False),  # a claim, or the case's verdict
    Column("revision", BigInteger, nullable=False),  # the revision that re-rated it
    Column("health", Text, nullable=False),
    Column("lost", JSONB, nullable=False),  # [{"record", "id"}], as evidence_health has it
    PrimaryKeyConstraint("case_id", "claim_id", "revision"),
    ForeignKeyConstraint(["case_id", "claim_id"], ["claims.case_id", "claims.claim_id"]),
    CheckConstraint("health IN ('unsupported', 'weakened')", name="health_known"),
)
