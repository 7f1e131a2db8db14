"""Each agent's track record, computed from the ledger: what it staged and how reviewers decided, the notes
they gave when rejecting, the possible duplicates and review checks its items were flagged with, the
Brier score and calibration of its resolved predictions (shared/track_record.py), and the thesis deltas it
committed and how they were decided."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from services.review.ports import ReviewUnitOfWork
from shared import track_record
from shared.errors import NotFound
from shared.resolution_contracts import AgentRecordRef

NOTES_SHOWN = 20

RECORD = {
    "known": "SELECT EXISTS (SELECT 1 FROM agents WHERE name = :a) OR EXISTS (SELECT 1 FROM proposals "
             "WHERE agent_name = :a) OR EXISTS (SELECT 1 FROM delta_operations WHERE caller = :a)",
    "proposals": "SELECT count(*) FROM proposals WHERE agent_name = :a",
    "items": """SELECT coalesce(d.outcome, 'pending') AS outcome, count(*) AS n
                FROM proposals p JOIN proposal_items i ON i.proposal_id = p.proposal_id
                LEFT JOIN item_decisions d ON d.proposal_id = i.proposal_id AND d.item_id = i.item_id
                WHERE p.agent_name = :a GROUP BY 1""",
    "notes": """SELECT coalesce(nullif(btrim(dec.note), ''), '(no note)') AS note, count(*) AS n
                FROM proposals p JOIN item_decisions d ON d.proposal_id = p.proposal_id
                JOIN decisions dec ON dec.decision_id = d.decision_id
                WHERE p.agent_name = :a AND d.outcome = 'rejected' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT :cap""",
    # An item that resembles several records is one row each: the agent staged one possible duplicate.
    "duplicates": """SELECT count(DISTINCT (pd.proposal_id, pd.item_id)) FROM proposals p
                     JOIN possible_duplicates pd ON pd.proposal_id = p.proposal_id WHERE p.agent_name = :a""",
    # An agent that proposes thesis deltas: those it committed for review, and how reviewers decided them.
    "deltas": """SELECT status, count(*) AS n FROM delta_operations WHERE caller = :a AND status <> 'previewed'
                 GROUP BY 1""",
    "checks": 'SELECT "check", count(*) AS n FROM review_check_flags WHERE agent_name = :a GROUP BY 1 ORDER BY 1',
    "predictions": """SELECT c.case_id, c.claim_id, c.confidence, r.outcome
                      FROM claims c JOIN LATERAL (
                        SELECT outcome FROM prediction_resolutions r
                        WHERE r.case_id = c.case_id AND r.claim_id = c.claim_id ORDER BY r.revision DESC LIMIT 1) r
                        ON true
                      WHERE c.staged_by = :a AND c.kind = 'prediction' ORDER BY c.case_id, c.claim_id""",
}


async def agent_record(cmd: AgentRecordRef, uow: ReviewUnitOfWork) -> dict[str, Any]:
    async with uow.read():
        connection = uow.resolutions.connection  # type: ignore[attr-defined]

        async def rows(name: str) -> list[Any]:
            return list(await connection.execute(text(RECORD[name]), {"a": cmd.agent, "cap": NOTES_SHOWN}))

        if not (await rows("known"))[0][0]:
            raise NotFound(f"no agent {cmd.agent!r} is known", field="name",
                           hint="name an agent a proposal or a page names")
        proposals = (await rows("proposals"))[0][0]
        items = {row.outcome: row.n for row in await rows("items")}
        notes = [{"note": row.note, "count": row.n} for row in await rows("notes")]
        duplicates = (await rows("duplicates"))[0][0]
        checks = {row.check: row.n for row in await rows("checks")}
        deltas = {row.status: row.n for row in await rows("deltas")}
        predictions = await rows("predictions")
    decided = items.get("accepted", 0) + items.get("rejected", 0)
    resolved = [(row.confidence, row.outcome) for row in predictions]
    return {
        "agent": cmd.agent,
        "proposals": proposals,
        "items": {"accepted": items.get("accepted", 0), "rejected": items.get("rejected", 0),
                  "pending": items.get("pending", 0)},
        "acceptanceRate": round(items.get("accepted", 0) / decided, 6) if decided else None,
        "rejectionNotes": notes,
        "duplicatesFlagged": duplicates,
        "checks": checks,
        "thesisDeltas": {"accepted": deltas.get("accepted", 0), "rejected": deltas.get("rejected", 0),
                         "pending": deltas.get("committed", 0)},
        "predictions": {
            "resolved": len(track_record.scored(resolved)),
            "void": sum(outcome == "void" for _, outcome in resolved),
            "brier": track_record.brier(resolved),
            "calibration": track_record.calibration(resolved),
            "outcomes": [{"caseId": row.case_id, "claimId": row.claim_id, "confidence": row.confidence,
                          "outcome": row.outcome} for row in predictions[:100]],
        },
    }
