"""The possible duplicates flagged at staging, beside each item of a proposal as reviewers read it: what each
item resembles, what that record says, and its status now (canonical, pending, retired, or rejected when the
pending item it named was rejected); and, beside a pending item, the later pending items flagged as restating it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

# The status of what an item resembles is read from the ledger as it is now (the search index is a moment behind a
# decision): its canonical record's status, else whether the pending item it named is still undecided.
_FLAGGED = """
SELECT d.proposal_id::text AS proposal_id, d.item_id, d.of_kind, d.of_id, d.of_proposal_id::text AS of_proposal_id,
  d.of_status, d.similarity, false AS later, d.rank, coalesce(cl.status, so.status) AS record_status,
  od.outcome AS of_outcome, coalesce(c.headline, p.headline, s.payload->>'text', s.payload->>'title') AS said
FROM possible_duplicates d
LEFT JOIN claims cl ON d.of_kind = 'claim' AND cl.case_id = :case_id AND cl.claim_id = d.of_id
LEFT JOIN sources so ON d.of_kind = 'source' AND so.case_id = :case_id AND so.source_id = d.of_id
LEFT JOIN item_decisions od ON od.proposal_id = d.of_proposal_id AND od.item_id = d.of_id
LEFT JOIN search_records c ON c.case_id = :case_id AND c.kind = d.of_kind AND c.record_id = d.of_id
  AND c.proposal_id = ''
LEFT JOIN search_records p ON p.case_id = :case_id AND p.kind = d.of_kind AND p.record_id = d.of_id
  AND p.proposal_id = d.of_proposal_id::text
LEFT JOIN proposal_items s ON s.proposal_id = d.of_proposal_id AND s.item_id = d.of_id
WHERE d.proposal_id = ANY(CAST(:proposal_ids AS uuid[]))
UNION ALL
SELECT d.of_proposal_id::text, d.of_id, d.of_kind, d.item_id, d.proposal_id::text, 'pending', d.similarity, true, 0,
  NULL, NULL, coalesce(s.payload->>'text', s.payload->>'title')
FROM possible_duplicates d
JOIN proposal_items s ON s.proposal_id = d.proposal_id AND s.item_id = d.item_id
WHERE d.of_proposal_id = ANY(CAST(:proposal_ids AS uuid[]))
  AND NOT EXISTS (SELECT 1 FROM item_decisions i WHERE i.proposal_id = d.of_proposal_id AND i.item_id = d.of_id)
  AND NOT EXISTS (SELECT 1 FROM item_decisions i WHERE i.proposal_id = d.proposal_id AND i.item_id = d.item_id)
ORDER BY 1, 2, 8, 9, 7 DESC, 4
"""
STILL_OPEN = ("canonical", "pending")  # what a "duplicate of X" decision may still name

Flags = dict[tuple[str, str], list[dict[str, Any]]]


def _status(r: Any) -> str:
    if r.record_status is not None:
        return "canonical" if r.record_status == "active" else r.record_status
    if r.of_proposal_id is not None:
        return "pending" if r.of_outcome is None else r.of_outcome
    return r.of_status


async def possible_duplicates(connection: AsyncConnection, case_id: str, proposal_ids: Sequence[str]) -> Flags:
    """(proposal id, item id) → [{itemId, of: {kind, id, status, proposalId?, text}, open, similarity, flaggedAs}],
    the most similar first (flaggedAs: the record's status when the item was staged; open: that record is still
    canonical or pending, so the item may be rejected as its duplicate); then the later items still pending that were
    flagged as restating it while it is itself pending (`restatedLater`: staged after it)."""
    found: Flags = {}
    if not proposal_ids:
        return found
    rows = await connection.execute(text(_FLAGGED), {"case_id": case_id, "proposal_ids": list(proposal_ids)})
    for r in rows:
        of = {"kind": r.of_kind, "id": r.of_id, "status": "pending" if r.later else _status(r),
              **({"proposalId": r.of_proposal_id} if r.of_proposal_id else {}), "text": r.said}
        flag = {"itemId": r.item_id, "of": of, "open": of["status"] in STILL_OPEN, "similarity": round(r.similarity, 3),
                **({"restatedLater": True} if r.later else {"flaggedAs": r.of_status})}
        found.setdefault((r.proposal_id, r.item_id), []).append(flag)
    return found


def with_possible_duplicates(view: dict[str, Any], flags: Flags) -> dict[str, Any]:
    """The proposal view with each item's possibleDuplicates ([] for none)."""
    for item in view.get("items", []):
        item["possibleDuplicates"] = flags.get((view["proposalId"], item["itemId"]), [])
    return view
