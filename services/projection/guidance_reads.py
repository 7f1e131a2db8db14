"""The reviewers' notes get_workspace scope=guidance reads — on decisions, case guidance, retirements, predictions'
resolutions: a page of them by key, their count, and the notes past the last page a cursor reaches counted in SQL,
so that no read grows with the case's history (retirements and resolutions are read from their own tables, never
from the change log)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from shared.db.history_tables import retirements
from shared.db.review_tables import prediction_resolutions
from shared.db.tables import decisions, guidance_notes, item_decisions, proposals

_noted = and_(decisions.c.note.is_not(None), decisions.c.note != "")

# Every note in guidance's order (the agent's own and case guidance first, newest first, then by kind and by id),
# numbered, and of those past `offset`: how many, how many are case guidance, retirements and resolutions, the items
# they reject, the proposals they are on (the first `shown` by where each first appears), the records retired and
# the predictions resolved (the first `shown` of each) and their most frequent texts (ties by where each first
# appears). Ids compare as text in byte order, as guidance sorts them (a uuid's text sorts as the uuid does).
_OLDER = """
WITH entries AS (
    SELECT d.decision_id::text AS id, 0 AS kind_order, d.proposal_id, d.note, d.decided_at AS at,
           coalesce(p.agent_name = :agent, false) AS own, count(*) FILTER (WHERE i.outcome = 'rejected') AS rejected,
           NULL::jsonb AS records, NULL::text AS claim_id
    FROM decisions d
    JOIN proposals p ON p.proposal_id = d.proposal_id
    JOIN item_decisions i ON i.decision_id = d.decision_id
    WHERE d.case_id = :case_id AND d.note IS NOT NULL AND d.note <> ''
    GROUP BY d.decision_id, p.agent_name
    UNION ALL
    SELECT g.note_id::text, 1, NULL, g.text, g.created_at, true, 0, NULL, NULL
    FROM guidance_notes g WHERE g.case_id = :case_id
    UNION ALL
    SELECT lpad(t.revision::text, 20, '0'), 2, NULL, t.note, t.at, coalesce(:agent = ANY(t.staged_by), false), 0,
           t.records, NULL
    FROM retirements t WHERE t.case_id = :case_id
    UNION ALL
    SELECT lpad(r.revision::text, 20, '0'), 3, NULL, r.note, r.at, coalesce(c.staged_by = :agent, false), 0, NULL,
           r.claim_id
    FROM prediction_resolutions r LEFT JOIN claims c ON c.case_id = r.case_id AND c.claim_id = r.claim_id
    WHERE r.case_id = :case_id
), older AS (
    SELECT * FROM (
        SELECT *, row_number() OVER (ORDER BY own DESC, at DESC, kind_order, id COLLATE "C" DESC) AS position
        FROM entries
    ) numbered WHERE position > :offset
)
SELECT
    (SELECT count(*) FROM older) AS total,
    (SELECT count(*) FROM older WHERE kind_order = 1) AS case_guidance,
    (SELECT count(*) FROM older WHERE kind_order = 2) AS retirements,
    (SELECT count(*) FROM older WHERE kind_order = 3) AS resolutions,
    (SELECT coalesce(sum(rejected), 0) FROM older) AS rejected,
    (SELECT count(DISTINCT proposal_id) FROM older) AS proposals,
    (SELECT coalesce(array_agg(proposal_id::text ORDER BY first), '{}') FROM (
        SELECT proposal_id, min(position) AS first FROM older WHERE proposal_id IS NOT NULL
        GROUP BY proposal_id ORDER BY first LIMIT :shown) named) AS proposal_ids,
    (SELECT coalesce(sum(jsonb_array_length(records)), 0) FROM older WHERE kind_order = 2) AS retired,
    (SELECT coalesce(jsonb_agg(record ORDER BY position, n), '[]') FROM (
        SELECT o.position, e.n, e.value - 'stagedBy' AS record
        FROM older o, jsonb_array_elements(o.records) WITH ORDINALITY e(value, n)
        WHERE o.kind_order = 2 ORDER BY o.position, e.n LIMIT :shown) listed) AS retired_records,
    (SELECT count(DISTINCT claim_id) FROM older) AS resolved,
    (SELECT coalesce(array_agg(claim_id ORDER BY first), '{}') FROM (
        SELECT claim_id, min(position) AS first FROM older WHERE claim_id IS NOT NULL
        GROUP BY claim_id ORDER BY first LIMIT :shown) named) AS resolved_claim_ids,
    (SELECT coalesce(json_agg(json_build_object('note', note, 'count', said) ORDER BY said DESC, first), '[]') FROM (
        SELECT note, count(*) AS said, min(position) AS first FROM older WHERE note IS NOT NULL
        GROUP BY note ORDER BY said DESC, first LIMIT :quoted) quoted) AS notes
"""

# Retirements and resolutions in guidance's order: the agent's own first, then newest first, then by revision.
_RETIREMENTS = """
SELECT revision, reviewer, note, records, ended, at, coalesce(CAST(:agent AS text) = ANY(staged_by), false) AS own
FROM retirements WHERE case_id = :case_id
ORDER BY own DESC, at DESC, revision DESC LIMIT :limit
"""
_RESOLUTIONS = """
SELECT r.revision, r.resolved_by, r.note, r.claim_id, r.outcome, r.source_id, r.resolved_on, r.at,
       c.staged_by, coalesce(c.staged_by = CAST(:agent AS text), false) AS own
FROM prediction_resolutions r LEFT JOIN claims c ON c.case_id = r.case_id AND c.claim_id = r.claim_id
WHERE r.case_id = :case_id
ORDER BY own DESC, r.at DESC, r.revision DESC LIMIT :limit
"""
ENDED_SHOWN = 10  # the links a retirement entry names (a claim's relations and groups end with it)


def _tie(revision: int) -> str:
    """A retirement's or resolution's id as _OLDER orders them: its revision, zero-padded."""
    return f"{revision:020d}"


class GuidanceReads:
    connection: AsyncConnection

    async def guidance(self, case_id: str, limit: int, agent: str | None = None) -> list[dict[str, Any]]:
        """Reviewers' decision notes, case guidance, retirements' notes and predictions' resolutions, newest first:
        the first `limit` of them.

        With `agent`, what is addressed to it comes first (the notes on its own proposals, case guidance, which is for
        every agent, and the retirements and resolutions of records it staged), so that other agents' many decisions
        never push a note meant for it (a "duplicate of X", "bad source: …") past the pages it can read."""
        keyed = [*await self._decision_notes(case_id, limit, agent), *await self._case_guidance(case_id, limit, agent),
                 *await self._retirements(case_id, limit, agent), *await self._resolutions(case_id, limit, agent)]
        # _OLDER's order: own first, newest first, then by kind, then by id (descending).
        keyed.sort(key=lambda k: (k[0], k[1]["at"], -k[2], k[3]), reverse=True)
        entries = [entry for _, entry, _, _ in keyed[:limit]]
        for entry in entries:
            entry["at"] = entry["at"].isoformat()
        return entries

    async def _decision_notes(self, case_id: str, limit: int, agent: str | None) -> list[tuple[bool, dict, int, str]]:
        own = proposals.c.agent_name == agent if agent is not None else None
        decided = await self.connection.execute(
            select(
                decisions.c.decision_id,
                decisions.c.proposal_id,
                decisions.c.reviewer,
                decisions.c.note,
                decisions.c.decided_at,
                proposals.c.kind,
                proposals.c.agent_name,
                func.array_agg(func.json_build_array(item_decisions.c.item_id, item_decisions.c.outcome)).label("items"),
            )
            .join(proposals, proposals.c.proposal_id == decisions.c.proposal_id)
            .join(item_decisions, item_decisions.c.decision_id == decisions.c.decision_id)
            .where(decisions.c.case_id == case_id, _noted)
            .group_by(decisions.c.decision_id, proposals.c.kind, proposals.c.agent_name)
            .order_by(*((own.desc(),) if own is not None else ()), decisions.c.decided_at.desc(),
                      decisions.c.decision_id.desc())
            .limit(limit)
        )
        return [(agent is not None and r.agent_name == agent, {
            "type": "decision_note",
            "at": r.decided_at,
            "reviewer": r.reviewer,
            "note": r.note,
            "proposalId": r.proposal_id,
            "proposalKind": r.kind,
            "agent": r.agent_name,
            "accepted": sorted(i for i, o in r.items if o == "accepted"),
            "rejected": sorted(i for i, o in r.items if o == "rejected"),
        }, 0, str(r.decision_id)) for r in decided]

    async def _case_guidance(self, case_id: str, limit: int, agent: str | None) -> list[tuple[bool, dict, int, str]]:
        notes = await self.connection.execute(select(guidance_notes).where(guidance_notes.c.case_id == case_id)
                                              .order_by(guidance_notes.c.created_at.desc(), guidance_notes.c.note_id.desc())
                                              .limit(limit))
        # Case guidance is for every agent: its own, when guidance is read for an agent.
        return [(agent is not None, {"type": "case_guidance", "at": r.created_at, "reviewer": r.author, "note": r.text}, 1,
                 str(r.note_id)) for r in notes]

    async def _retirements(self, case_id: str, limit: int, agent: str | None) -> list[tuple[bool, dict, int, str]]:
        rows = await self.connection.execute(text(_RETIREMENTS), {"case_id": case_id, "agent": agent, "limit": limit})
        return [(r.own, {
            "type": "retirement_note",
            "at": r.at,
            "reviewer": r.reviewer,
            "note": r.note,
            "revision": r.revision,
            "records": r.records,
            **({"yours": [x["id"] for x in r.records if x["stagedBy"] == agent]} if agent is not None else {}),
            "alsoEnded": r.ended[:ENDED_SHOWN],
            "alsoEndedOmitted": max(0, len(r.ended) - ENDED_SHOWN),
        }, 2, _tie(r.revision)) for r in rows]

    async def _resolutions(self, case_id: str, limit: int, agent: str | None) -> list[tuple[bool, dict, int, str]]:
        rows = await self.connection.execute(text(_RESOLUTIONS), {"case_id": case_id, "agent": agent, "limit": limit})
        return [(r.own, {
            "type": "resolution_note",
            "at": r.at,
            "reviewer": r.resolved_by,
            "note": r.note,
            "revision": r.revision,
            "claimId": r.claim_id,
            "outcome": r.outcome,
            "sourceId": r.source_id,
            "resolvedOn": r.resolved_on,
            "agent": r.staged_by,
        }, 3, _tie(r.revision)) for r in rows]

    async def retirements_at(self, case_id: str, revisions: list[int]) -> dict[int, dict[str, Any]]:
        """The retirements that made these revisions of the case: each one's reviewer, time and note, by revision."""
        if not revisions:
            return {}
        rows = await self.connection.execute(
            select(retirements.c.revision, retirements.c.reviewer, retirements.c.note, retirements.c.at)
            .where(retirements.c.case_id == case_id, retirements.c.revision.in_(revisions)))
        return {r.revision: {"revision": r.revision, "by": r.reviewer, "at": r.at.isoformat(), "note": r.note}
                for r in rows}

    async def guidance_total(self, case_id: str) -> int:
        """How many entries guidance holds: noted decisions, case guidance, retirements, resolutions (one statement)."""
        counts = [select(func.count()).select_from(table).where(table.c.case_id == case_id, *where).scalar_subquery()
                  for table, where in ((decisions, (_noted,)), (guidance_notes, ()), (retirements, ()),
                                       (prediction_resolutions, ()))]
        return (await self.connection.execute(select(sum(counts[1:], counts[0])))).scalar_one()

    async def older_guidance(self, case_id: str, agent: str, offset: int, shown: int, quoted: int) -> dict[str, Any]:
        """The notes past the first `offset` in guidance's order, counted: total, caseGuidance, rejected (items),
        proposals (how many), proposalIds (the first `shown`), retirements (how many), retired (records, how many)
        and retiredRecords (the first `shown`), resolutions (how many), resolved (claims, how many) and
        resolvedClaimIds (the first `shown`), and notes (the `quoted` most frequent texts, counted)."""
        row = (await self.connection.execute(text(_OLDER), {"case_id": case_id, "agent": agent, "offset": offset,
                                                           "shown": shown, "quoted": quoted})).one()
        return {"total": row.total, "caseGuidance": row.case_guidance, "rejected": int(row.rejected),
                "proposals": row.proposals, "proposalIds": list(row.proposal_ids), "retirements": row.retirements,
                "retired": int(row.retired), "retiredRecords": row.retired_records, "resolutions": row.resolutions,
                "resolved": row.resolved, "resolvedClaimIds": list(row.resolved_claim_ids), "notes": row.notes}
