"""The possible duplicates flagged at staging, beside each item of a proposal as reviewers read it: what each
item resembles, with that record's status now (canonical, pending, retired, or rejected when the pending
item it named was rejected)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

_FLAGGED = """
SELECT d.item_id, d.of_kind, d.of_id, d.of_proposal_id::text AS of_proposal_id, d.of_status, d.similarity,
  coalesce(
    (SELECT r.status FROM search_records r WHERE r.case_id = :case_id AND r.kind = d.of_kind AND r.record_id = d.of_id
       AND r.proposal_id = ''),
    (SELECT 'pending' FROM search_records r WHERE r.case_id = :case_id AND r.kind = d.of_kind
       AND r.record_id = d.of_id AND r.proposal_id = d.of_proposal_id::text),
    CASE WHEN d.of_status = 'pending' THEN 'rejected' ELSE d.of_status END) AS status_now
FROM possible_duplicates d WHERE d.proposal_id = CAST(:proposal_id AS uuid) ORDER BY d.item_id, d.rank
"""


async def possible_duplicates(connection: AsyncConnection, case_id: str, proposal_id: str) -> dict[str, list[dict[str, Any]]]:
    """Item id → [{itemId, of: {kind, id, status, proposalId?}, similarity, flaggedAs}] (flaggedAs: the
    record's status when the item was staged)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for r in await connection.execute(text(_FLAGGED), {"case_id": case_id, "proposal_id": proposal_id}):
        of = {"kind": r.of_kind, "id": r.of_id, "status": r.status_now,
              **({"proposalId": r.of_proposal_id} if r.of_proposal_id else {})}
        found.setdefault(r.item_id, []).append({"itemId": r.item_id, "of": of, "similarity": r.similarity,
                                                "flaggedAs": r.of_status})
    return found


def with_possible_duplicates(view: dict[str, Any], flags: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The proposal view with each item's possibleDuplicates ([] for none)."""
    for item in view.get("items", []):
        item["possibleDuplicates"] = flags.get(item.get("itemId"), [])
    return view
