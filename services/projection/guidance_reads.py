"""The reviewers' notes and case guidance get_workspace scope=guidance reads: a page of them by key, their count, and
the notes past the last page a cursor reaches counted in SQL, so that no read grows with the case's history."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from shared.db.tables import decisions, guidance_notes, item_decisions, proposals

_noted = and_(decisions.c.note.is_not(None), decisions.c.note != "")

# Every note in guidance's order (the agent's own and case guidance first, newest first, then by id), numbered, and
# of those past `offset`: how many, how many are case guidance, the items they reject, the proposals they are on
# (the first `shown` by where each first appears) and their most frequent texts (ties by where each first appears).
_OLDER = """
WITH entries AS (
    SELECT d.decision_id AS id, 0 AS kind_order, d.proposal_id, d.note, d.decided_at AS at,
           coalesce(p.agent_name = :agent, false) AS own, count(*) FILTER (WHERE i.outcome = 'rejected') AS rejected
    FROM decisions d
    JOIN proposals p ON p.proposal_id = d.proposal_id
    JOIN item_decisions i ON i.decision_id = d.decision_id
    WHERE d.case_id = :case_id AND d.note IS NOT NULL AND d.note <> ''
    GROUP BY d.decision_id, p.agent_name
    UNION ALL
    SELECT g.note_id, 1, NULL, g.text, g.created_at, true, 0
    FROM guidance_notes g WHERE g.case_id = :case_id
), older AS (
    SELECT * FROM (
        SELECT *, row_number() OVER (ORDER BY own DESC, at DESC, kind_order, id DESC) AS position FROM entries
    ) numbered WHERE position > :offset
)
SELECT
    (SELECT count(*) FROM older) AS total,
    (SELECT count(*) FROM older WHERE kind_order = 1) AS case_guidance,
    (SELECT coalesce(sum(rejected), 0) FROM older) AS rejected,
    (SELECT count(DISTINCT proposal_id) FROM older) AS proposals,
    (SELECT coalesce(array_agg(proposal_id::text ORDER BY first), '{}') FROM (
        SELECT proposal_id, min(position) AS first FROM older WHERE proposal_id IS NOT NULL
        GROUP BY proposal_id ORDER BY first LIMIT :shown) named) AS proposal_ids,
    (SELECT coalesce(json_agg(json_build_object('note', note, 'count', said) ORDER BY said DESC, first), '[]') FROM (
        SELECT note, count(*) AS said, min(position) AS first FROM older
        GROUP BY note ORDER BY said DESC, first LIMIT :quoted) quoted) AS notes
"""


class GuidanceReads:
    connection: AsyncConnection

    async def guidance(self, case_id: str, limit: int, agent: str | None = None) -> list[dict[str, Any]]:
        """Reviewers' decision notes and case guidance, newest first: the first `limit` of them.

        With `agent`, what is addressed to it comes first (the notes on its own proposals, and case guidance, which
        is for every agent), so that other agents' many decisions never push a note meant for it (a "duplicate of
        X") past the pages it can read."""
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
        entries = [
            {
                "type": "decision_note",
                "at": r.decided_at,
                "reviewer": r.reviewer,
                "note": r.note,
                "proposalId": r.proposal_id,
                "proposalKind": r.kind,
                "agent": r.agent_name,
                "accepted": sorted(i for i, o in r.items if o == "accepted"),
                "rejected": sorted(i for i, o in r.items if o == "rejected"),
            }
            for r in decided
        ]
        notes = await self.connection.execute(select(guidance_notes).where(guidance_notes.c.case_id == case_id)
                                              .order_by(guidance_notes.c.created_at.desc(), guidance_notes.c.note_id.desc())
                                              .limit(limit))
        entries += [
            {"type": "case_guidance", "at": r.created_at, "reviewer": r.author, "note": r.text} for r in notes
        ]
        entries.sort(key=lambda e: (agent is not None and e.get("agent", agent) == agent, e["at"]), reverse=True)
        for entry in entries:
            entry["at"] = entry["at"].isoformat()
        return entries[:limit]

    async def guidance_total(self, case_id: str) -> int:
        notes = await self.connection.execute(
            select(func.count()).select_from(decisions).where(decisions.c.case_id == case_id, _noted))
        written = await self.connection.execute(
            select(func.count()).select_from(guidance_notes).where(guidance_notes.c.case_id == case_id))
        return notes.scalar_one() + written.scalar_one()

    async def older_guidance(self, case_id: str, agent: str, offset: int, shown: int, quoted: int) -> dict[str, Any]:
        """The notes past the first `offset` in guidance's order, counted: total, caseGuidance, rejected (items),
        proposals (how many), proposalIds (the first `shown`) and notes (the `quoted` most frequent texts, counted)."""
        row = (await self.connection.execute(text(_OLDER), {"case_id": case_id, "agent": agent, "offset": offset,
                                                           "shown": shown, "quoted": quoted})).one()
        return {"total": row.total, "caseGuidance": row.case_guidance, "rejected": int(row.rejected),
                "proposals": row.proposals, "proposalIds": list(row.proposal_ids), "notes": row.notes}
