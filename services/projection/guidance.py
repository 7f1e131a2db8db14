"""`get_workspace scope=guidance` that stays readable in a large case: reviewers' notes first (on decisions, case
guidance, retirements and predictions' resolutions; those on the calling agent's own proposals and records, and case
guidance, before the others), newest first, never pushed out of reach by computed
gaps; the gaps summarised in one entry on the first page (counts by kind, the first few, and the calls that list and
find them all); the notes past the last page a cursor reaches summarised in one entry on that page."""

from __future__ import annotations

from typing import Any

from services.projection import domain
from services.projection.ports import ProjectionUnitOfWork
from services.projection.view_rows import UNRESOLVED
from shared.search_contracts import EVERYTHING

FIRST_GAPS = 5  # the gaps the summary names; a search lists every claim with one
OLDER_PROPOSALS = 40  # the proposals the older notes' summary names
OLDER_NOTES = 5  # the most frequent of the older notes' texts it quotes
INSPECTED = 9  # the ids an inspect_sources / inspect_claims call takes


def gaps_summary(case_id: str, total: int, by_type: dict[str, tuple[int, list[str]]],
                 first: list[dict[str, Any]]) -> dict[str, Any]:
    """One guidance entry for the case's `total` computed gaps; `next` is the search that pages through every claim
    with a gap, however many (scope=unresolved's cursor stops at 96, as every get_workspace section's does)."""
    kinds = ", ".join(f"{count} {kind}" for kind, (count, _) in by_type.items())
    claims = [g["claimId"] for g in first if g.get("claimId")]
    if not any(ids for _, ids in by_type.values()):  # the case's own gaps only (no verdict): a search lists none
        return {
            "type": "gaps", "total": total, "byKind": {kind: count for kind, (count, _) in by_type.items()},
            "claimsByKind": {}, "first": [{"gap": g["type"]} for g in first],
            "note": f"{total} gap(s) the ledger shows ({kinds}); no claim has a gap. get_workspace scope=unresolved "
                    "says what to do about them.",
            "next": {"tool": "get_workspace", "arguments": {"scope": "unresolved"}},
        }
    return {
        "type": "gaps",
        "total": total,
        "byKind": {kind: count for kind, (count, _) in by_type.items()},
        # The claims of the first few gaps of every kind, so no kind is out of reach behind a more frequent one.
        "claimsByKind": {kind: ids for kind, (_, ids) in by_type.items() if ids},
        "first": [{"gap": g["type"], **({"claimId": g["claimId"]} if g.get("claimId") else {})} for g in first],
        "note": f"{total} gap(s) the ledger shows ({kinds}); the first {len(first)} are listed here, and the claims "
                f"of the first {FIRST_GAPS} of each kind. "
                "search_workspace with query * and gap=any (or gap=<kind>) lists every claim with a gap, page by "
                "page; get_workspace scope=unresolved says what to do about the first of them; inspect_claims reads "
                "a claim in full.",
        "next": {"tool": "search_workspace", "arguments": {"expectedCaseId": case_id, "query": EVERYTHING,
                                                           "kinds": ["claim"], "gap": "any"}},
        **({"inspect": {"tool": "inspect_claims", "arguments": {"expectedCaseId": case_id, "claimIds": claims}}}
           if claims else {}),
    }


def older_notes_summary(older: dict[str, Any], case_id: str) -> dict[str, Any]:
    """One guidance entry for the notes past the last page get_workspace's cursor reaches (it stops at 96): how many,
    the proposals they are on, the records retired and the predictions resolved, and the texts they say most often.
    No agent tool reads a decision's note but guidance, so the summary carries what they say, counted; a retirement's
    note and a prediction's resolutions are read in full with inspect_sources / inspect_claims on the ids named.
    `older` is those notes counted by the database (older_guidance)."""
    proposals = older["proposals"]
    retired = older["retiredRecords"]
    claims = older["resolvedClaimIds"]
    sources = [r["id"] for r in retired if r["record"] == "source"][:INSPECTED]
    read_claims = list(dict.fromkeys([r["id"] for r in retired if r["record"] == "claim"] + claims))[:INSPECTED]
    inspect = [{"tool": tool, "arguments": {"expectedCaseId": case_id, key: ids}}
               for tool, key, ids in (("inspect_sources", "sourceIds", sources), ("inspect_claims", "claimIds",
                                                                                  read_claims)) if ids]
    return {
        "type": "older_notes",
        "total": older["total"],
        "proposalIds": older["proposalIds"][:OLDER_PROPOSALS],
        "proposalsOmitted": max(0, proposals - OLDER_PROPOSALS),
        "rejected": older["rejected"],
        "caseGuidance": older["caseGuidance"],
        "retirements": older["retirements"],
        "retiredRecords": retired[:OLDER_PROPOSALS],
        "retiredRecordsOmitted": max(0, older["retired"] - OLDER_PROPOSALS),
        "resolutions": older["resolutions"],
        "resolvedClaimIds": claims[:OLDER_PROPOSALS],
        "resolvedClaimsOmitted": max(0, older["resolved"] - OLDER_PROPOSALS),
        "notes": older["notes"][:OLDER_NOTES],
        **({"inspect": inspect} if inspect else {}),
        "note": f"{older['total']} older reviewers' note(s) are past the last page get_workspace's cursor reaches; "
                f"they are on {proposals} proposal(s) (the first {min(proposals, OLDER_PROPOSALS)} "
                f"named here), {older['retirements']} retirement(s) and {older['resolutions']} prediction "
                "resolution(s) (the records and claims named here), and the texts they say most often are counted "
                "here. inspect_sources and inspect_claims give a retired record's note and a prediction's "
                "resolutions; no other tool reads a decision's note: get_workspace scope=proposals lists your "
                "recent proposals and their items' status.",
    }


async def guidance(uow: ProjectionUnitOfWork, case_id: str, cursor: int | None, counts: dict[str, int],
                   agent: str) -> dict[str, Any]:
    """Reviewers' notes on the agent's own proposals and case guidance, then the notes on other agents' proposals,
    each newest first, paged by offset. The first page also carries one summary of the gaps the ledger shows (the
    unresolved items), the last page a cursor reaches one summary of the notes past it: neither takes a note's place,
    so every note is on a page or in that summary, and the gaps are one call away however many notes there are."""
    start = cursor or 0
    notes = await uow.reads.guidance_total(case_id)
    # The last page a cursor reaches (its next cursor would pass 96), with notes past it.
    beyond = start + domain.PAGE_SIZE > domain.MAX_CURSOR and notes > start + domain.PAGE_SIZE
    read = await uow.reads.guidance(case_id, start + domain.PAGE_SIZE, agent) if start < notes else []
    page = domain.page_of(read[start:start + domain.PAGE_SIZE], start, notes, "guidance")
    gaps = counts.get(UNRESOLVED, 0)
    if gaps and start == 0:
        first = await uow.views.unresolved_page(case_id, 0, FIRST_GAPS)
        page["items"].append(gaps_summary(case_id, gaps, await uow.views.unresolved_by_type(case_id, FIRST_GAPS),
                                          first))
    if beyond:
        older = await uow.reads.older_guidance(case_id, agent, start + domain.PAGE_SIZE, OLDER_PROPOSALS, OLDER_NOTES)
        page["items"].append(older_notes_summary(older, case_id))
    page["total"] = notes + (1 if gaps else 0)
    return page
