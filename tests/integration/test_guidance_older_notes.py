"""The older notes' summary on guidance's last page, counted by the database, says what counting every note past
that page one by one says: how many, case guidance, retirements and resolutions among them, rejected items, proposals,
records retired, predictions resolved, the most frequent texts; and guidance lists an agent's own notes first."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert

from services.projection.guidance import OLDER_NOTES, OLDER_PROPOSALS, older_notes_summary
from services.projection.repository import SqlReads
from shared.db.history_tables import retirements
from shared.db.review_tables import prediction_resolutions
from shared.db.session import Database
from shared.db.tables import (
    cases,
    claims,
    decisions,
    guidance_notes,
    item_decisions,
    proposal_items,
    proposals,
    sources,
)
from tests.factories import unique
from tests.support import new_deployment, remove_deployment

ME, OTHER = "me", "other"
TEXTS = ["Duplicate.", "No source.", "Too vague.", "Off topic."]


def counted(older: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary as counting every older note in Python has it (as guidance did before the database counted)."""
    proposal_ids = list(dict.fromkeys(e["proposalId"] for e in older if e.get("proposalId")))
    retired = [{"record": r["record"], "id": r["id"]} for e in older for r in e.get("records", [])]
    resolved = list(dict.fromkeys(e["claimId"] for e in older if e["type"] == "resolution_note"))
    said = Counter(e["note"] for e in older if e["note"] is not None)
    return {"total": len(older), "caseGuidance": sum(1 for e in older if e["type"] == "case_guidance"),
            "rejected": sum(len(e.get("rejected", [])) for e in older), "proposals": len(proposal_ids),
            "proposalIds": proposal_ids[:OLDER_PROPOSALS],
            "retirements": sum(1 for e in older if e["type"] == "retirement_note"), "retired": len(retired),
            "retiredRecords": retired[:OLDER_PROPOSALS],
            "resolutions": sum(1 for e in older if e["type"] == "resolution_note"), "resolved": len(resolved),
            "resolvedClaimIds": resolved[:OLDER_PROPOSALS],
            "notes": [{"note": note, "count": count} for note, count in said.most_common(OLDER_NOTES)]}


def _ledger_record(case_id: str, agent: str | None) -> dict[str, Any]:
    return {"case_id": case_id, "staged_by": agent, "decided_by": "rita", "decided_at": datetime.now(UTC), "revision": 1}


async def _seed_retirements_and_resolutions(connection: Any, case_id: str, now: datetime) -> None:
    """Sources retired by twelve retirements (one to three each, staged by either agent or recorded by a reviewer,
    some at the same moment as a decision) and six resolutions of two predictions, two of them without a note."""
    stagers = [OTHER, ME, None]  # retirement i names 1 + i % 3 sources; the first staged by stagers[i % 3]
    named = {i: [(f"s{i}-{k}", stagers[(i + k) % 3]) for k in range(1 + i % 3)] for i in range(12)}
    await connection.execute(insert(sources), [
        {**_ledger_record(case_id, by), "source_id": source_id, "publisher": "p", "title": "t", "url": "u",
         "publication_date": "2026-01-01", "snapshot_date": "2026-01-01", "type": "primary", "authority": "a",
         "evidence_text": "e", "provenance_note": "n", "status": "retired"} for records in named.values()
        for source_id, by in records])
    await connection.execute(insert(claims), [
        {**_ledger_record(case_id, agent), "claim_id": f"p-{agent}", "text": "t", "kind": "prediction",
         "confidence": "supported", "transformation_note": "n"} for agent in (ME, OTHER)])
    rows = [{"case_id": case_id, "revision": 100 + i, "reviewer": "rita",
             "note": TEXTS[i % 4] if i % 5 else f"Bad source ({i}).",
             "records": [{"record": "source", "id": n, "stagedBy": by} for n, by in records],
             "ended": [{"record": "relation", "id": f"r{i}-{k}"} for k in range(i)],
             "staged_by": sorted({by for _, by in records if by}), "at": now + timedelta(seconds=i * 4)}
            for i, records in named.items()]
    await connection.execute(insert(retirements), rows)
    await connection.execute(insert(prediction_resolutions), [
        {"resolution_id": str(uuid.uuid4()), "case_id": case_id, "claim_id": f"p-{ME if i % 2 else OTHER}",
         "outcome": "false", "source_id": "s0-0", "resolved_on": "2026-01-02", "note": None if i < 2 else TEXTS[i % 4],
         "resolved_by": "rita", "revision": 200 + i, "at": now + timedelta(seconds=i * 7)} for i in range(6)])


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
        await _seed_retirements_and_resolutions(connection, case_id, now)


def _mine(entry: dict[str, Any]) -> bool:
    return {"decision_note": entry.get("agent") == ME, "case_guidance": True,
            "retirement_note": bool(entry.get("yours")), "resolution_note": entry.get("agent") == ME}[entry["type"]]


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
            assert len(every) == total == 120
            for offset in (0, 10, 40, 96, 101, 110, 119, 120):
                summary = await reads.older_guidance(case_id, ME, offset, OLDER_PROPOSALS, OLDER_NOTES)
                assert summary == counted(every[offset:]), offset
                assert older_notes_summary(summary, case_id)["total"] == total - offset
            many = await reads.older_guidance(case_id, ME, 0, OLDER_PROPOSALS, OLDER_NOTES)
            assert many["proposals"] == 90 and many["caseGuidance"] == 12
            assert many["retirements"] == 12 and many["resolutions"] == 6 and many["resolved"] == 2
            summarised = older_notes_summary(many, case_id)
            assert summarised["proposalsOmitted"] == 90 - OLDER_PROPOSALS
            assert summarised["retiredRecordsOmitted"] == 0 and len(summarised["retiredRecords"]) == many["retired"] == 24
            assert summarised["inspect"][0]["arguments"] == {"expectedCaseId": case_id,
                                                             "sourceIds": [r["id"] for r in many["retiredRecords"][:9]]}
            # The agent's own first: its proposals' notes, case guidance, retirements of what it staged, resolutions
            # of its predictions; then the others, each part newest first.
            own = [_mine(e) for e in every]
            assert own == sorted(own, reverse=True) and own.count(True) == 60 + 12 + 8 + 3
            for part in (True, False):
                times = [e["at"] for e, mine in zip(every, own, strict=True) if mine is part]
                assert times == sorted(times, reverse=True)
            retired = [e for e in every if e["type"] == "retirement_note"]
            assert all(e["yours"] == [r["id"] for r in e["records"] if r["stagedBy"] == ME] for e in retired)
            assert {len(e["alsoEnded"]) for e in retired} == set(range(11)) and retired[0]["alsoEndedOmitted"] in (0, 1)
            resolved = [e for e in every if e["type"] == "resolution_note"]
            assert [e["agent"] for e in resolved] == [ME] * 3 + [OTHER] * 3 and {e["outcome"] for e in resolved} == {"false"}
            assert [n["count"] for n in many["notes"]] == sorted((n["count"] for n in many["notes"]), reverse=True)
            assert many["notes"][0]["count"] > 20
    finally:
        await db.dispose()
        await remove_deployment(servers, deployment)
