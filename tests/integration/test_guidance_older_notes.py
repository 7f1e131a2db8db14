"""The older notes' summary on guidance's last page, counted by the database, says what counting every note past
that page one by one says: how many, case guidance among them, rejected items, proposals, the most frequent texts."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert

from services.projection.guidance import OLDER_NOTES, OLDER_PROPOSALS, older_notes_summary
from services.projection.repository import SqlReads
from shared.db.session import Database
from shared.db.tables import cases, decisions, guidance_notes, item_decisions, proposal_items, proposals
from tests.factories import unique
from tests.support import new_deployment, remove_deployment

ME, OTHER = "me", "other"
TEXTS = ["Duplicate.", "No source.", "Too vague.", "Off topic."]


def counted(older: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary as counting every older note in Python has it (as guidance did before the database counted)."""
    proposal_ids = list(dict.fromkeys(e["proposalId"] for e in older if e.get("proposalId")))
    said = Counter(e["note"] for e in older)
    return {"total": len(older), "caseGuidance": sum(1 for e in older if e["type"] == "case_guidance"),
            "rejected": sum(len(e.get("rejected", [])) for e in older), "proposals": len(proposal_ids),
            "proposalIds": proposal_ids[:OLDER_PROPOSALS],
            "notes": [{"note": note, "count": count} for note, count in said.most_common(OLDER_NOTES)]}


async def _seed(db: Database, case_id: str) -> None:
    """Notes of two agents on 90 proposals (texts repeated unevenly, one to three items each, some accepted, some at
    the same moment), and case guidance among them."""
    now = datetime.now(UTC)
    ids = [str(uuid.uuid4()) for _ in range(90)]
    async with db.engine.begin() as connection:
        await connection.execute(insert(cases).values(case_id=case_id, title="t", question="q?", created_by="admin"))
        await connection.execute(insert(proposals), [
            {"proposal_id": p, "case_id": case_id, "kind": "claims", "pinned_revision": 0,
             "agent_name": ME if i % 3 else OTHER, "item_count": 1 + i % 3} for i, p in enumerate(ids)])
        await connection.execute(insert(proposal_items), [
            {"proposal_id": p, "item_id": f"i{n}", "position": n, "payload": {}}
            for i, p in enumerate(ids) for n in range(1 + i % 3)])
        await connection.execute(insert(decisions), [
            {"decision_id": p, "proposal_id": p, "case_id": case_id, "reviewer": "rita",
             "note": TEXTS[i % 4] if i % 7 else f"Once ({i}).", "decided_at": now + timedelta(seconds=i // 2)}
            for i, p in enumerate(ids)])
        await connection.execute(insert(item_decisions), [
            {"proposal_id": p, "item_id": f"i{n}", "decision_id": p, "outcome": "accepted" if n == i % 2 else "rejected"}
            for i, p in enumerate(ids) for n in range(1 + i % 3)])
        await connection.execute(insert(guidance_notes), [
            {"note_id": str(uuid.uuid4()), "case_id": case_id, "author": "rita", "text": TEXTS[i % 2],
             "created_at": now + timedelta(seconds=i * 5)} for i in range(12)])


async def test_the_older_notes_summary_counted_by_the_database_equals_counting_every_older_note(servers):
    deployment = await new_deployment(servers)
    db = Database.from_url(deployment.resolved_database_url(), pool_size=2)
    try:
        case_id = unique("case")
        await _seed(db, case_id)
        async with db.engine.connect() as connection:
            reads = SqlReads(connection)
            total = await reads.guidance_total(case_id)
            every = await reads.guidance(case_id, total, ME)
            assert len(every) == total == 102
            for offset in (0, 10, 40, 96, 101, 102):
                summary = await reads.older_guidance(case_id, ME, offset, OLDER_PROPOSALS, OLDER_NOTES)
                assert summary == counted(every[offset:]), offset
                assert older_notes_summary(summary)["total"] == total - offset
            many = await reads.older_guidance(case_id, ME, 0, OLDER_PROPOSALS, OLDER_NOTES)
            assert many["proposals"] == 90 and many["caseGuidance"] == 12
            assert older_notes_summary(many)["proposalsOmitted"] == 90 - OLDER_PROPOSALS
            assert [n["count"] for n in many["notes"]] == sorted((n["count"] for n in many["notes"]), reverse=True)
            assert many["notes"][0]["count"] > 20
    finally:
        await db.dispose()
        await remove_deployment(servers, deployment)
