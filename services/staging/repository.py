"""Persistence for staging: one read and one write per stage call, straight on asyncpg (two round trips)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from services.staging import duplicates
from services.staging.domain import CHANGED_IDS, RECORD_ID_KEYS, Prior, Proposal, StageFacts
from services.staging.ports import REPLAYED, STORED, LedgerMoved, StagingUnitOfWork
from shared import outbox, review_check_facts
from shared.db.session import Database
from shared.events import Event, Origin
from shared.ledger import VERDICT, ClaimFact, LedgerFacts, RecordHistory, References
from shared.review_checks import CheckFacts
from shared.service import Meta, ServiceContext, origin

# Everything a stage call is checked against, in one statement: the case's revision; each named record
# with its status and when it came and went; the active verdict and when the verdict slot last changed;
# an identical earlier call of the agent; and, when the case moved on since the pin, a digest of the change
# log in between (per kind of change: a count and the first ids). Indexed reads only.
RECORD_ID = ", ".join(f"record->>'{key}'" for key in RECORD_ID_KEYS)
STAGE_FACTS = f"""
SELECT c.revision,
  (SELECT coalesce(jsonb_agg(jsonb_build_array(source_id, status, revision, ended_revision)), '[]')
     FROM sources WHERE case_id = $1 AND source_id = ANY($2::text[])) AS sources,
  (SELECT coalesce(jsonb_agg(jsonb_build_array(claim_id, kind, status, revision, ended_revision)), '[]')
     FROM claims WHERE case_id = $1 AND (claim_id = ANY($3::text[])
       OR (kind = '{VERDICT}' AND (status = 'active' OR ended_revision > $6)))) AS claims,
  (SELECT coalesce(jsonb_agg(jsonb_build_array(relation_id, status, revision, ended_revision)), '[]')
     FROM relations WHERE case_id = $1 AND relation_id = ANY($4::text[])) AS relations,
  (SELECT coalesce(jsonb_agg(jsonb_build_array(group_id, status, revision, ended_revision)), '[]')
     FROM merge_groups WHERE case_id = $1 AND group_id = ANY($5::text[])) AS groups,
  (SELECT jsonb_build_array(p.proposal_id, p.kind, p.pinned_revision, coalesce(p.staged_revision, p.pinned_revision),
          (SELECT jsonb_agg(i.item_id ORDER BY i.position) FROM proposal_items i WHERE i.proposal_id = p.proposal_id))
     FROM proposals p WHERE p.agent_name = $7 AND p.request_digest = $8) AS prior,
  CASE WHEN c.revision > $6 THEN (
    SELECT coalesce(jsonb_object_agg(kind, jsonb_build_object('count', n, 'first', to_jsonb(first))), '{{}}')
    FROM (SELECT change.key AS kind, count(*) AS n,
                 (array_agg(coalesce({RECORD_ID}) ORDER BY log.revision))[1:$9] AS first
          FROM change_log log, jsonb_each(log.changes) AS change, jsonb_array_elements(change.value) AS record
          WHERE log.case_id = $1 AND log.revision > $6
          GROUP BY change.key) AS digest) END AS since_pin,""" + duplicates.SIMILAR_COLUMNS + """
FROM cases c WHERE c.case_id = $1
"""

# The proposal, its items and its event (threadline_stage), and in the same statement the possible duplicates
# flagged for its items ($16) and what the review checks flagged ($17-$20), both only when it stored.
STAGE_WRITE = """
WITH staged AS (SELECT outcome, proposal_id FROM threadline_stage($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,
                                                                  $13, $14, $15)),
flagged AS (
  INSERT INTO possible_duplicates (proposal_id, item_id, rank, of_kind, of_id, of_status, of_proposal_id, similarity)
  SELECT $3::uuid, d.item_id, d.rank, d.of_kind, d.of_id, d.of_status, d.of_proposal_id::uuid, d.similarity
  FROM staged, jsonb_to_recordset($16::jsonb) AS d(item_id text, rank int, of_kind text, of_id text, of_status text,
                                                   of_proposal_id text, similarity float8)
  WHERE staged.outcome = 'stored'),
checked AS (
  INSERT INTO review_check_flags (proposal_id, item_id, "check", case_id, agent_name, severity, message)
  SELECT $3, f.item_id, f.check_name, $1, $6, f.severity, f.message
  FROM staged, unnest($17::text[], $18::text[], $19::text[], $20::text[]) AS f(item_id, check_name, severity, message)
  WHERE staged.outcome = 'stored'
  ON CONFLICT DO NOTHING)
SELECT outcome, proposal_id::text FROM staged
"""


class PgStageReads:
    def __init__(self, connection: asyncpg.Connection, changed_ids: int) -> None:
        self.connection = connection
        self.changed_ids = changed_ids

    async def stage_facts(self, case_id: str, pin: int, refs: References, agent: str,
                          digest: str, compared: tuple[list[str], list[str]] = ([], [])) -> StageFacts | None:
        row = await self.connection.fetchrow(
            STAGE_FACTS, case_id, list(refs.sources), list(refs.claims), list(refs.relations), list(refs.groups),
            pin, agent, digest, self.changed_ids, compared[0], duplicates.THRESHOLD, compared[1],
        )
        if row is None:
            return None
        facts = LedgerFacts(revision=row["revision"])
        for source_id, status, introduced, ended in row["sources"]:
            facts.sources[source_id] = status
            facts.history[("source", source_id)] = RecordHistory(status, introduced, ended)
        for claim_id, kind, status, introduced, ended in row["claims"]:
            if kind == VERDICT:
                facts.verdict_slot_changed = max(facts.verdict_slot_changed, introduced, ended or 0)
            if claim_id in refs.claims or status == "active":
                facts.claims[claim_id] = ClaimFact(kind, status)
                facts.history[("claim", claim_id)] = RecordHistory(status, introduced, ended)
        for record, table, rows in (("relation", facts.relations, row["relations"]),
                                    ("group", facts.groups, row["groups"])):
            for record_id, status, introduced, ended in rows:
                table.add(record_id)
                facts.history[(record, record_id)] = RecordHistory(status, introduced, ended)
        prior = Prior(*row["prior"][:4], item_ids=row["prior"][4] or []) if row["prior"] else None
        return StageFacts(row["revision"], facts, prior, row["since_pin"] or {}, row["similar_claims"],
                          row["same_urls"])

    async def review_facts(self, case_id: str, items: Sequence[Any], relations: bool) -> CheckFacts:
        return await review_check_facts.load(self.connection, case_id, items, relations)


class PgProposals:
    def __init__(self) -> None:
        self.queued: Proposal | None = None

    def add(self, proposal: Proposal) -> None:
        self.queued = proposal

    async def write(self, connection: asyncpg.Connection, events: list[Event]) -> Any:
        proposal = self.queued
        assert proposal is not None and len(events) == 1, "a stage call stores one proposal and one event"
        (event,) = events
        outcome, proposal_id = await connection.fetchrow(
            STAGE_WRITE, proposal.case_id, proposal.staged_revision, proposal.proposal_id, proposal.kind,
            proposal.pinned_revision, proposal.agent_name, proposal.token_id, proposal.correlation_id,
            proposal.request_digest, [list(item) for item in proposal.items], event.event_id, event.subject,
            event.event_type.value, event.envelope, outbox.headers(event), duplicates.rows(proposal.duplicates),
            [f.item_id for f in proposal.flags], [f.check for f in proposal.flags],
            [f.severity for f in proposal.flags], [f.message for f in proposal.flags],
        )
        if outcome == "moved":
            raise LedgerMoved
        return STORED if outcome == STORED else (REPLAYED, proposal_id)


class PgStagingUnitOfWork(StagingUnitOfWork):
    """Two round trips: the read, and the write at commit; no transaction is opened around them (the write
    is one statement, and the read needs no lock: the write checks the revision again under the lock)."""

    def __init__(self, db: Database, origin: Origin, changed_ids: int) -> None:
        super().__init__(origin)
        self.db = db
        self.changed_ids = changed_ids
        self.connection: asyncpg.Connection | None = None
        self.proposals = PgProposals()

    @classmethod
    def of(cls, ctx: ServiceContext, meta: Meta) -> PgStagingUnitOfWork:
        return cls(ctx.db, origin(ctx, meta), CHANGED_IDS)

    async def _begin(self, read_only: bool = False) -> None:
        self.connection = await self.db.acquire()
        self.ledger = PgStageReads(self.connection, self.changed_ids)
        self.proposals = PgProposals()

    async def _commit(self, events: list[Event]) -> Any:
        assert self.connection is not None
        try:
            written = await self.proposals.write(self.connection, events)
        except BaseException as error:
            await self._release(error)
            raise
        await self._release()
        return written

    async def _rollback(self) -> None:
        await self._release(self.failure)

    async def _release(self, error: BaseException | None = None) -> None:
        if self.connection is not None:
            connection, self.connection = self.connection, None
            await self.db.release(connection, error)

