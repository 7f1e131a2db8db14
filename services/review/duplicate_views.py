"""The possible duplicates flagged at staging, beside each item of a proposal as reviewers read it: what each
item resembles, what that record says, and its status now (canonical, pending, retired, or rejected when the
pending item it named was rejected)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

_FLAGGED = """
SELECT d.proposal_id::text AS proposal_id, d.item_id, d.of_kind, d.of_id, d.of_proposal_id::text AS of_proposal_id,
  d.of_status, d.similarity, c.status AS status_now, (p.record_id IS NOT NULL) AS still_pending,
  coalesce(c.headline, p.headline, s.payload->>'text', s.payload->>'title') AS said
FROM possible_duplicates d
LEFT JOIN search_records c ON c.case_id = :case_id AND c.kind = d.of_kind AND c.record_id = d.of_id
  AND c.proposal_id = ''
LEFT JOIN search_records p ON p.case_id = :case_id AND p.kind = d.of_kind AND p.record_id = d.of_id
  AND p.proposal_id = d.of_proposal_id::text
LEFT JOIN proposal_items s ON s.proposal_id = d.of_proposal_id AND s.item_id = d.of_id
WHERE d.proposal_id = ANY(CAST(:proposal_ids AS uuid[])) ORDER BY d.proposal_id, d.item_id, d.rank
"""

Flags = dict[tuple[str, str], list[dict[str, Any]]]


async def possible_duplicates(connection: AsyncConnection, case_id: str, proposal_ids: Sequence[str]) -> Flags:
    """(proposal id, item id) → [{itemId, of: {kind, id, status, proposalId?, text}, similarity, flaggedAs}],
    the most similar first (flaggedAs: the record's status when the item was staged)."""
    found: Flags = {}
    if not proposal_ids:
        return found
    rows = await connection.execute(text(_FLAGGED), {"case_id": case_id, "proposal_ids": list(proposal_ids)})
    for r in rows:
        status = r.status_now or ("pending" if r.still_pending else
                                  "rejected" if r.of_status == "pending" else r.of_status)
        of = {"kind": r.of_kind, "id": r.of_id, "status": status,
              **({"proposalId": r.of_proposal_id} if r.of_proposal_id else {}), "text": r.said}
        found.setdefault((r.proposal_id, r.item_id), []).append(
            {"itemId": r.item_id, "of": of, "similarity": round(r.similarity, 3), "flaggedAs": r.of_status})
    return found


def with_possible_duplicates(view: dict[str, Any], flags: Flags) -> dict[str, Any]:
    """The proposal view with each item's possibleDuplicates ([] for none)."""
    for item in view.get("items", []):
        item["possibleDuplicates"] = flags.get((view["proposalId"], item["itemId"]), [])
    return view
