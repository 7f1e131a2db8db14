"""The ledger's own history where its records do not keep it: every re-rating, at the revision that made it, and
every retirement with the reviewer's note.

`evidence_health` keeps each claim's current rating (one row, overwritten); a case read as of an older
revision needs the rating each claim had then, so review appends every rating here too, in the same
transaction. A retired record keeps who ended it and at which revision, not why: `retirements` keeps the note,
so agents read it (guidance, inspect_sources, inspect_claims) without reading the change log. Beside
shared/db/tables.py, which imports this module, only to keep each module short.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKeyConstraint,
    PrimaryKeyConstraint,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

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

retirements = Table(  # writer: review — one row per retirement, in its transaction: what a reviewer retired and why
    "retirements",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("revision", BigInteger, nullable=False),  # the revision the retirement made
    Column("reviewer", Text, nullable=False),
    Column("note", Text, nullable=False),
    Column("records", JSONB, nullable=False),  # the records named: [{"record", "id", "stagedBy"}], in their order
    Column("ended", JSONB, nullable=False),  # the links that ended with them: [{"record", "id"}]
    Column("staged_by", ARRAY(Text), nullable=False),  # the agents that staged the records named (guidance's `own`)
    Column("at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("case_id", "revision"),
    ForeignKeyConstraint(["case_id"], ["cases.case_id"]),
)
