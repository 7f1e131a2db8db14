"""inspect_claims: up to nine claims in full — text, kind, confidence, status, health and grounding, sources,
relations in and out (capped, with omitted counts), merge groups, provenance, a retired claim's retirement (when, by
whom, the reviewer's note), a prediction's resolutions (newest first) — read by id, one statement."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from services.projection.ports import ProjectionUnitOfWork
from shared import grounding, ledger
from shared.contracts import ToolRequest
from shared.kinds import KINDS
from shared.search_contracts import InspectClaimsArgs

RELATIONS_CAP = 12  # relations in, and out, of each claim
RESOLUTIONS_CAP = 10  # a prediction's resolutions, newest first

_CLAIMS = f"""
SELECT c.claim_id, c.text, c.kind, c.confidence, c.status, c.transformation_note, c.proposal_rationale,
       c.proposal_id::text AS proposal_id, c.staged_by, c.decided_by, c.revision, v.health,
       c.ended_revision, c.ended_by, c.ended_at, t.note AS retirement_note,
  (SELECT jsonb_build_object('n', count(*), 'first', coalesce((array_agg(jsonb_build_object(
            'outcome', r.outcome, 'sourceId', r.source_id, 'resolvedOn', r.resolved_on, 'note', r.note,
            'resolvedBy', r.resolved_by, 'revision', r.revision, 'at', r.at) ORDER BY r.revision DESC))[1:{RESOLUTIONS_CAP}],
            '{{}}'))
     FROM prediction_resolutions r WHERE r.case_id = c.case_id AND r.claim_id = c.claim_id) AS resolutions,
  (SELECT coalesce(jsonb_agg(jsonb_build_object('id', s.source_id, 'title', s.title, 'type', s.type,
                                                'publisher', s.publisher, 'status', s.status) ORDER BY cs.position), '[]')
     FROM claim_sources cs JOIN sources s ON s.case_id = cs.case_id AND s.source_id = cs.source_id
     WHERE cs.case_id = c.case_id AND cs.claim_id = c.claim_id) AS sources,
  (SELECT jsonb_build_object('n', count(*), 'first', coalesce((array_agg(jsonb_build_object(
            'id', r.relation_id, 'type', r.type, 'claimId', r.source_claim_id, 'status', r.status)
            ORDER BY r.status, r.revision, r.relation_id))[1:{RELATIONS_CAP}], '{{}}'))
     FROM relations r WHERE r.case_id = c.case_id AND r.target_claim_id = c.claim_id) AS into,
  (SELECT jsonb_build_object('n', count(*), 'first', coalesce((array_agg(jsonb_build_object(
            'id', r.relation_id, 'type', r.type, 'claimId', r.target_claim_id, 'status', r.status)
            ORDER BY r.status, r.revision, r.relation_id))[1:{RELATIONS_CAP}], '{{}}'))
     FROM relations r WHERE r.case_id = c.case_id AND r.source_claim_id = c.claim_id) AS out_of,
  (SELECT coalesce(jsonb_agg(jsonb_build_object('groupId', g.group_id, 'label', g.label, 'status', g.status)
                             ORDER BY g.group_id), '[]')
     FROM merge_group_members m JOIN merge_groups g ON g.case_id = m.case_id AND g.group_id = m.group_id
     WHERE m.case_id = c.case_id AND m.claim_id = c.claim_id) AS groups
FROM claims c LEFT JOIN view_claims v ON v.case_id = c.case_id AND v.claim_id = c.claim_id
  LEFT JOIN retirements t ON c.status = 'retired' AND t.case_id = c.case_id AND t.revision = c.ended_revision
WHERE c.case_id = :case_id AND c.claim_id = ANY(CAST(:ids AS text[]))
"""


# Ids staged as claims in undecided items of the case's proposals (each with its proposal): no claims of the case yet.
_PENDING = """
SELECT i.item_id, p.proposal_id::text AS proposal_id FROM proposals p JOIN proposal_items i USING (proposal_id)
WHERE p.case_id = :case_id AND p.kind = ANY(CAST(:kinds AS text[])) AND i.item_id = ANY(CAST(:ids AS text[]))
  AND NOT EXISTS (SELECT 1 FROM item_decisions d WHERE d.proposal_id = i.proposal_id AND d.item_id = i.item_id)
ORDER BY p.created_at, p.proposal_id
"""
STAGING_CLAIMS = [k.name for k in KINDS.values() if k.record == "claim"]
STAGING_SOURCES = [k.name for k in KINDS.values() if k.record == "source"]


# Ids that name the other kind of record an inspect tool reads (a source id sent to inspect_claims), each with
# the tool that reads it.
_OTHER = {"source": ("SELECT source_id FROM sources WHERE case_id = :case_id AND source_id = ANY(CAST(:ids AS text[]))",
                     "inspect_sources"),
          "claim": ("SELECT claim_id FROM claims WHERE case_id = :case_id AND claim_id = ANY(CAST(:ids AS text[]))",
                    "inspect_claims")}


async def other_records(connection: Any, case_id: str, record: str, ids: list[str]) -> list[dict[str, str]]:
    """Which of `ids` name a `record` of the case (source or claim), with the tool that reads it."""
    if not ids:
        return []
    query, tool = _OTHER[record]
    found = set((await connection.execute(text(query), {"case_id": case_id, "ids": ids})).scalars())
    return [{"id": i, "record": record, "readWith": tool} for i in ids if i in found]


async def staged_ids(connection: Any, case_id: str, kinds: list[str], ids: list[str]) -> list[dict[str, str]]:
    """Which of `ids` are staged, undecided, in proposals of `kinds`: each with its proposal."""
    if not ids:
        return []
    rows = await connection.execute(text(_PENDING), {"case_id": case_id, "kinds": kinds, "ids": ids})
    return [{"id": item_id, "proposalId": proposal_id} for item_id, proposal_id in rows]


def _claim(row: Any, case_id: str) -> dict[str, Any]:
    grounded = grounding.label((s["type"], s["publisher"]) for s in row.sources if s["status"] == "active")
    into, out = row.into, row.out_of
    return {
        "id": row.claim_id, "text": row.text, "kind": row.kind, "confidence": row.confidence,
        "status": "canonical" if row.status == "active" else row.status,
        "health": row.health or ("supported" if row.status == "active" else row.status),
        **grounded,
        "transformationNote": row.transformation_note, "proposalRationale": row.proposal_rationale,
        "sources": [{k: s[k] for k in ("id", "title", "type", "status")} for s in row.sources],
        "relations": _relations(row.claim_id, case_id, into, out),
        "groups": row.groups,
        "provenance": {"stagedBy": row.staged_by, "proposalId": row.proposal_id, "acceptedBy": row.decided_by,
                       "revision": row.revision},
        **({"retirement": {"revision": row.ended_revision, "by": row.ended_by,
                           "at": row.ended_at.isoformat() if row.ended_at else None, "note": row.retirement_note}}
           if row.status == "retired" else {}),
        **({"resolutions": list(row.resolutions["first"]),
            "resolutionsOmitted": row.resolutions["n"] - len(row.resolutions["first"])} if row.resolutions["n"] else {}),
    }


def _relations(claim_id: str, case_id: str, into: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """The first relations in and out; past the cap, the search that pages through every active relation of the
    claim (an exact claim id lists them after the claim)."""
    omitted = {"in": into["n"] - len(into["first"]), "out": out["n"] - len(out["first"])}
    more = {"tool": "search_workspace", "arguments": {"expectedCaseId": case_id, "query": claim_id,
                                                      "kinds": ["relation"]}}
    return {"in": list(into["first"]), "out": list(out["first"]), "omitted": omitted,
            **({"more": more} if any(omitted.values()) else {})}


async def inspect_claims(request: ToolRequest[InspectClaimsArgs], uow: ProjectionUnitOfWork) -> dict[str, Any]:
    args = request.args
    ledger.check_discovered(args.expected_case_id, request.discovered_case_id)
    async with uow.read():
        connection = uow.search.connection
        revision = (await connection.execute(text("SELECT revision FROM cases WHERE case_id = :c"),
                                             {"c": args.expected_case_id})).scalar_one_or_none()
        rows = {r.claim_id: r for r in await connection.execute(
            text(_CLAIMS), {"case_id": args.expected_case_id, "ids": list(args.claim_ids)})}
        missing = [c for c in args.claim_ids if c not in rows]
        pending = await staged_ids(connection, args.expected_case_id, STAGING_CLAIMS, missing)
        other = await other_records(connection, args.expected_case_id, "source",
                                    [c for c in missing if c not in {p["id"] for p in pending}])
    unknown = [c for c in missing if c not in {p["id"] for p in pending} | {o["id"] for o in other}]
    return {
        "caseId": args.expected_case_id, "workspaceRevision": revision,
        "claims": [_claim(rows[c], args.expected_case_id) for c in args.claim_ids if c in rows],
        "unknownClaimIds": unknown,
        **({"unknownHint": "these ids are no claims of the case: find claims with search_workspace"}
           if unknown else {}),
        **({"pendingClaimIds": pending,
            "pendingHint": "these ids are staged in the proposals named, pending review: not yet claims of the case; "
                           "search_workspace with status=pending finds them, with their text"} if pending else {}),
        **({"otherRecords": other} if other else {}),
    }
