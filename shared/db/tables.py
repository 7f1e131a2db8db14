"""Every PostgreSQL table, with the one service that writes it named beside its definition."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

from shared.db.base import _now, metadata


def _provenance() -> list[Column]:
    """Where a canonical record came from: the proposal and agent, the reviewer, the revision."""
    return [Column("proposal_id", UUID(as_uuid=False)), Column("staged_by", Text),
            Column("staged_at", DateTime(timezone=True)), Column("decision_id", UUID(as_uuid=False)),
            Column("decided_by", Text, nullable=False), Column("decided_at", DateTime(timezone=True), nullable=False),
            Column("revision", BigInteger, nullable=False)]


def _retirement() -> list[Column]:
    """Canonical records are never deleted: they are superseded or retired, with who and when."""
    return [Column("status", Text, nullable=False, server_default="active"), Column("ended_by", Text),
            Column("ended_at", DateTime(timezone=True)), Column("ended_revision", BigInteger),
            Column("superseded_by", Text)]


# --- canonical ledger (writer: review) -------------------------------------------------------------

cases = Table(  # writer: review
    "cases",
    metadata,
    Column("case_id", Text, primary_key=True),
    Column("title", Text, nullable=False),
    Column("question", Text, nullable=False),
    Column("revision", BigInteger, nullable=False, server_default="0"),
    Column("created_by", Text, nullable=False),
    _now(),
    CheckConstraint("revision >= 0", name="revision_non_negative"),
)

sources = Table(  # writer: review
    "sources",
    metadata,
    Column("case_id", Text, ForeignKey("cases.case_id"), nullable=False),
    Column("source_id", Text, nullable=False),
    Column("publisher", Text, nullable=False),
    Column("title", Text, nullable=False),
    Column("url", Text, nullable=False),
    # The URL as duplicates compare it (shared/search_text.normalise_url). Nullable: rows written by a previous release
    # during a rollout or after a rollback have none until filled (0024; `threadline migrate` fills them).
    Column("url_key", Text, nullable=True),
    Column("publication_date", Text, nullable=False),
    Column("snapshot_date", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("authority", Text, nullable=False),
    Column("evidence_text", Text, nullable=False),
    Column("provenance_note", Text, nullable=False),
    Column("transcriptions", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    *_provenance(),
    *_retirement(),
    PrimaryKeyConstraint("case_id", "source_id"),
)
Index("ix_sources_url_key", sources.c.case_id, sources.c.url_key)  # a source staged again (review checks)

claims = Table(  # writer: review
    "claims",
    metadata,
    Column("case_id", Text, ForeignKey("cases.case_id"), nullable=False),
    Column("claim_id", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("confidence", Text, nullable=False),
    Column("transformation_note", Text, nullable=False),
    Column("proposal_rationale", Text),
    Column("lane", Text),
    Column("display_order", Integer),
    *_provenance(),
    *_retirement(),
    PrimaryKeyConstraint("case_id", "claim_id"),
)
Index("ix_claims_case_status", claims.c.case_id, claims.c.status)
# One verdict slot per case: at most one active verdict claim.
Index("uq_claims_active_verdict", claims.c.case_id, unique=True,
      postgresql_where=text("kind = 'verdict' AND status = 'active'"))

claim_sources = Table(  # writer: review
    "claim_sources",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("claim_id", Text, nullable=False),
    Column("source_id", Text, nullable=False),
    Column("position", Integer, nullable=False),
    PrimaryKeyConstraint("case_id", "claim_id", "source_id"),
    ForeignKeyConstraint(["case_id", "claim_id"], ["claims.case_id", "claims.claim_id"]),
    ForeignKeyConstraint(["case_id", "source_id"], ["sources.case_id", "sources.source_id"]),
)
Index("ix_claim_sources_source", claim_sources.c.case_id, claim_sources.c.source_id)

relations = Table(  # writer: review
    "relations",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("relation_id", Text, nullable=False),
    Column("source_claim_id", Text, nullable=False),
    Column("target_claim_id", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("rationale", Text, nullable=False),
    Column("verdict_basis", Boolean, nullable=False, server_default=text("false")),
    *_provenance(),
    *_retirement(),
    PrimaryKeyConstraint("case_id", "relation_id"),
    ForeignKeyConstraint(["case_id", "source_claim_id"], ["claims.case_id", "claims.claim_id"]),
    ForeignKeyConstraint(["case_id", "target_claim_id"], ["claims.case_id", "claims.claim_id"]),
    CheckConstraint("source_claim_id <> target_claim_id", name="no_self_relation"),
)
Index("ix_relations_target", relations.c.case_id, relations.c.target_claim_id)
Index("ix_relations_source", relations.c.case_id, relations.c.source_claim_id)

merge_groups = Table(  # writer: review
    "merge_groups",
    metadata,
    Column("case_id", Text, ForeignKey("cases.case_id"), nullable=False),
    Column("group_id", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("confidence", Text, nullable=False),
    Column("rationale", Text, nullable=False),
    *_provenance(),
    *_retirement(),
    PrimaryKeyConstraint("case_id", "group_id"),
)

merge_group_members = Table(  # writer: review
    "merge_group_members",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("group_id", Text, nullable=False),
    Column("claim_id", Text, nullable=False),
    PrimaryKeyConstraint("case_id", "group_id", "claim_id"),
    ForeignKeyConstraint(["case_id", "group_id"], ["merge_groups.case_id", "merge_groups.group_id"]),
    ForeignKeyConstraint(["case_id", "claim_id"], ["claims.case_id", "claims.claim_id"]),
)
Index("ix_merge_group_members_claim", merge_group_members.c.case_id, merge_group_members.c.claim_id)

change_log = Table(  # writer: review — one row per case revision
    "change_log",
    metadata,
    Column("case_id", Text, ForeignKey("cases.case_id"), nullable=False),
    Column("revision", BigInteger, nullable=False),
    Column("decision_id", UUID(as_uuid=False)),
    Column("actor", Text, nullable=False),
    Column("summary", Text, nullable=False),
    Column("changes", JSONB, nullable=False),
    Column("correlation_id", Text),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("case_id", "revision"),
)

evidence_health = Table(  # writer: review — what a retirement re-rated, in the retirement's transaction
    "evidence_health",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("claim_id", Text, nullable=False),  # a claim, or the case's verdict
    Column("health", Text, nullable=False),
    # The records whose retirement took its support: [{"record": "source"|"claim"|"relation", "id": ...}].
    Column("lost", JSONB, nullable=False),
    Column("revision", BigInteger, nullable=False),  # the revision that re-rated it
    PrimaryKeyConstraint("case_id", "claim_id"),
    ForeignKeyConstraint(["case_id", "claim_id"], ["claims.case_id", "claims.claim_id"]),
    CheckConstraint("health IN ('unsupported', 'weakened')", name="health_known"),
)

guidance_notes = Table(  # writer: review — guidance reviewers write for a case's agents
    "guidance_notes",
    metadata,
    Column("note_id", UUID(as_uuid=False), primary_key=True),
    Column("case_id", Text, ForeignKey("cases.case_id"), nullable=False),
    Column("author", Text, nullable=False),
    Column("text", Text, nullable=False),
    _now(),
)
Index("ix_guidance_notes_case", guidance_notes.c.case_id, guidance_notes.c.created_at)

# --- proposals (writer: staging) and decisions (writer: review) ------------------------------------

proposals = Table(  # writer: staging — immutable once stored
    "proposals",
    metadata,
    Column("proposal_id", UUID(as_uuid=False), primary_key=True),
    Column("case_id", Text, ForeignKey("cases.case_id"), nullable=False),
    Column("kind", Text, nullable=False),
    Column("pinned_revision", BigInteger, nullable=False),
    # The revision the call was checked against and stored at: its pin, or the newer one it was rebased onto.
    Column("staged_revision", BigInteger),
    Column("agent_name", Text, nullable=False),
    Column("token_id", UUID(as_uuid=False)),
    Column("correlation_id", Text),
    Column("item_count", Integer, nullable=False),
    # The digest of the call (case, pin, items as canonical JSON): an identical repeat returns this proposal.
    Column("request_digest", Text),
    _now(),
)
Index("ix_proposals_case_created", proposals.c.case_id, proposals.c.created_at)
Index("uq_proposals_agent_request", proposals.c.agent_name, proposals.c.request_digest, unique=True,
      postgresql_where=text("request_digest IS NOT NULL"))

proposal_items = Table(  # writer: staging — immutable once stored
    "proposal_items",
    metadata,
    Column("proposal_id", UUID(as_uuid=False), ForeignKey("proposals.proposal_id"), nullable=False),
    Column("item_id", Text, nullable=False),
    Column("position", Integer, nullable=False),
    Column("payload", JSONB, nullable=False),
    PrimaryKeyConstraint("proposal_id", "item_id"),
)

possible_duplicates = Table(  # writer: staging — what a staged item resembles, flagged at staging; never a refusal
    "possible_duplicates",
    metadata,
    Column("proposal_id", UUID(as_uuid=False), nullable=False),
    Column("item_id", Text, nullable=False),
    Column("rank", Integer, nullable=False),  # 0 = the most similar
    Column("of_kind", Text, nullable=False),
    Column("of_id", Text, nullable=False),
    Column("of_status", Text, nullable=False),
    Column("of_proposal_id", UUID(as_uuid=False)),  # the pending record's proposal
    Column("similarity", Float, nullable=False),  # 0..1: trigram similarity of normalised text; 1 for the same URL
    PrimaryKeyConstraint("proposal_id", "item_id", "of_kind", "of_id"),
    ForeignKeyConstraint(["proposal_id", "item_id"], ["proposal_items.proposal_id", "proposal_items.item_id"]),
    CheckConstraint("of_kind IN ('claim', 'source')", name="of_kind_known"),
    CheckConstraint("of_status IN ('canonical', 'pending')", name="of_status_known"),
)
# A pending item's later restatements (read beside it) and the queue's duplicates filter look flags up by what they name.
Index("ix_possible_duplicates_of_item", possible_duplicates.c.of_proposal_id, possible_duplicates.c.of_id)

decisions = Table(  # writer: review
    "decisions",
    metadata,
    Column("decision_id", UUID(as_uuid=False), primary_key=True),
    Column("proposal_id", UUID(as_uuid=False), ForeignKey("proposals.proposal_id"), nullable=False),
    Column("case_id", Text, ForeignKey("cases.case_id"), nullable=False),
    Column("reviewer", Text, nullable=False),
    Column("note", Text),
    Column("expected_revision", BigInteger),
    Column("revision_after", BigInteger),
    Column("refused", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("correlation_id", Text),
    Column("decided_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # The digest of the request (items, note, expected revision): an identical repeat returns this decision.
    Column("request_digest", Text),
)
Index("ix_decisions_case", decisions.c.case_id, decisions.c.decided_at)
Index("uq_decisions_request", decisions.c.proposal_id, decisions.c.reviewer, decisions.c.request_digest,
      unique=True, postgresql_where=text("request_digest IS NOT NULL"))

item_decisions = Table(  # writer: review — the primary key makes every item decided at most once
    "item_decisions",
    metadata,
    Column("proposal_id", UUID(as_uuid=False), nullable=False),
    Column("item_id", Text, nullable=False),
    Column("decision_id", UUID(as_uuid=False), ForeignKey("decisions.decision_id"), nullable=False),
    Column("outcome", Text, nullable=False),
    PrimaryKeyConstraint("proposal_id", "item_id"),
    ForeignKeyConstraint(["proposal_id", "item_id"], ["proposal_items.proposal_id", "proposal_items.item_id"]),
    CheckConstraint("outcome IN ('accepted', 'rejected')", name="outcome_known"),
)

closed_proposals = Table(  # writer: review — a proposal whose every item is decided, from the decision deciding its last
    "closed_proposals",
    metadata,
    Column("proposal_id", UUID(as_uuid=False), ForeignKey("proposals.proposal_id"), primary_key=True),
    Column("case_id", Text, ForeignKey("cases.case_id"), nullable=False),
    Column("status", Text, nullable=False),
    Column("closed_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("status IN ('accepted', 'rejected', 'partially_accepted')", name="status_known"),
)
# Pending is "staged, not closed": an anti-join on the primary key, where counting every item's outcome
# read each proposal the case ever had. The recently decided read newest first by this index.
Index("ix_closed_proposals_case_closed", closed_proposals.c.case_id, closed_proposals.c.closed_at)

# --- identity (writer: gateway) and per-agent state ------------------------------------------------

api_tokens = Table(  # writer: gateway (and `threadline token create`, which runs the gateway's use case)
    "api_tokens",
    metadata,
    Column("token_id", UUID(as_uuid=False), primary_key=True),
    Column("name", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("token_hash", LargeBinary, nullable=False, unique=True),
    Column("created_by", Text, nullable=False),
    _now(),
    Column("revoked_at", DateTime(timezone=True)),
    CheckConstraint("role IN ('agent', 'reviewer', 'admin', 'subscriber')", name="role_known"),
)

ui_sessions = Table(  # writer: gateway — reviewers' signed-in browsers; the cookie holds the session id only
    "ui_sessions",
    metadata,
    Column("session_hash", LargeBinary, primary_key=True),
    Column("token_id", UUID(as_uuid=False), ForeignKey("api_tokens.token_id"), nullable=False),
    _now(),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True)),
)

agents = Table(  # writer: gateway — operators' assignment of an agent to a case
    "agents",
    metadata,
    Column("name", Text, primary_key=True),
    Column("assigned_case_id", Text, ForeignKey("cases.case_id")),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

agent_discoveries = Table(  # writer: gateway — the case each agent most recently discovered
    "agent_discoveries",
    metadata,
    Column("agent_name", Text, primary_key=True),
    Column("case_id", Text, ForeignKey("cases.case_id"), nullable=False),
    Column("revision", BigInteger, nullable=False),
    Column("discovered_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

case_focus = Table(  # writer: projection — presentation only, never canonical
    "case_focus",
    metadata,
    Column("case_id", Text, ForeignKey("cases.case_id"), primary_key=True),
    Column("focus", Text, nullable=False),
    Column("updated_by", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# --- Prism theses (writer: thesis-delta) -----------------------------------------------------------

companies = Table(  # writer: thesis-delta
    "companies",
    metadata,
    Column("company_id", UUID(as_uuid=False), primary_key=True),
    Column("ticker", Text, nullable=False, unique=True),
    Column("name", Text, nullable=False),
    Column("thesis_revision", BigInteger, nullable=False, server_default="0"),
    Column("created_by", Text, nullable=False),
    _now(),
)

thesis_claims = Table(  # writer: thesis-delta
    "thesis_claims",
    metadata,
    Column("claim_id", UUID(as_uuid=False), primary_key=True),
    Column("company_id", UUID(as_uuid=False), ForeignKey("companies.company_id"), nullable=False),
    Column("text", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("section", Text, nullable=False),
    Column("source_url", Text),
    Column("status", Text, nullable=False, server_default="active"),
    Column("revision", BigInteger, nullable=False),
    Column("origin_operation_id", UUID(as_uuid=False)),
    _now(),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("retired_at", DateTime(timezone=True)),
    Column("retired_by", Text),
    CheckConstraint("label IN ('CONFIRMED', 'INFERRED', 'UNVERIFIED')", name="label_known"),
)
Index("ix_thesis_claims_company", thesis_claims.c.company_id, thesis_claims.c.status)

thesis_claim_history = Table(  # writer: thesis-delta — every version a thesis claim has had
    "thesis_claim_history",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("claim_id", UUID(as_uuid=False), ForeignKey("thesis_claims.claim_id"), nullable=False),
    Column("company_id", UUID(as_uuid=False), nullable=False),
    Column("revision", BigInteger, nullable=False),
    Column("action", Text, nullable=False),
    Column("before", JSONB),
    Column("after", JSONB),
    Column("actor", Text, nullable=False),
    Column("operation_id", UUID(as_uuid=False)),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
Index("ix_thesis_claim_history_company", thesis_claim_history.c.company_id, thesis_claim_history.c.revision)

source_files = Table(  # writer: thesis-delta
    "source_files",
    metadata,
    Column("source_file_id", UUID(as_uuid=False), primary_key=True),
    Column("company_id", UUID(as_uuid=False), ForeignKey("companies.company_id"), nullable=False),
    Column("title", Text, nullable=False),
    Column("url", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("created_by", Text, nullable=False),
    _now(),
)
Index("ix_source_files_company", source_files.c.company_id)

delta_operations = Table(  # writer: thesis-delta
    "delta_operations",
    metadata,
    Column("operation_id", UUID(as_uuid=False), primary_key=True),
    Column("company_id", UUID(as_uuid=False), ForeignKey("companies.company_id"), nullable=False),
    Column("caller", Text, nullable=False),
    Column("idempotency_key", Text, nullable=False),
    Column("payload_digest", Text, nullable=False),
    Column("payload", JSONB, nullable=False),
    Column("delta", JSONB, nullable=False),
    Column("base_revision", BigInteger, nullable=False),
    Column("status", Text, nullable=False, server_default="previewed"),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("correlation_id", Text),
    _now(),
    Column("committed_at", DateTime(timezone=True)),
    Column("decided_at", DateTime(timezone=True)),
    Column("decided_by", Text),
    Column("note", Text),
    Column("revision_after", BigInteger),
    UniqueConstraint("company_id", "caller", "idempotency_key"),
    CheckConstraint("status IN ('previewed', 'committed', 'accepted', 'rejected')", name="status_known"),
)
Index("ix_delta_operations_company_status", delta_operations.c.company_id, delta_operations.c.status)
Index("ix_delta_operations_caller", delta_operations.c.caller)  # an agent's track record counts its deltas

# --- events: the outbox, in outbox_table.py (with the relay's partition slot), re-exported here ---

# --- webhooks, read models, history: their own modules on base.py's metadata, imported so it holds them ---

from shared.db import history_tables, review_tables, search_tables, view_tables, webhook_tables  # noqa: E402, F401
from shared.db.outbox_table import outbox  # noqa: E402, F401
