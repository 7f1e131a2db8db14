"""`get_workspace scope=guidance` that stays readable in a large case: reviewers' notes first (those on the calling
agent's own proposals and case guidance before the others), newest first, never pushed out of reach by computed
gaps; the gaps summarised after them in one entry (counts by kind, the first few, and the calls that list and find
them all)."""

from __future__ import annotations

from typing import Any

from services.projection import domain
from services.projection.ports import ProjectionUnitOfWork
from services.projection.view_rows import UNRESOLVED
from shared.search_contracts import EVERYTHING

FIRST_GAPS = 5  # the gaps the summary names; a search lists every claim with one


def gaps_summary(case_id: str, total: int, by_type: dict[str, tuple[int, list[str]]],
                 first: list[dict[str, Any]]) -> dict[str, Any]:
    """One guidance entry for the case's `total` computed gaps; `next` is the search that pages through every claim
    with a gap, however many (scope=unresolved's cursor stops at 96, as every get_workspace section's does)."""
    kinds = ", ".join(f"{count} {kind}" for kind, (count, _) in by_type.items())
    claims = [g["claimId"] for g in first if g.get("claimId")]
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
        **({"inspect": {"tool": "inspect_claims", "arguments": {"claimIds": claims}}} if claims else {}),
    }


async def guidance(uow: ProjectionUnitOfWork, case_id: str, cursor: int | None, counts: dict[str, int],
                   agent: str) -> dict[str, Any]:
    """Reviewers' notes on the agent's own proposals and case guidance, then the notes on other agents' proposals,
    each newest first; then one summary of the gaps the ledger shows (the unresolved items)."""
    start = cursor or 0
    notes = await uow.reads.guidance_total(case_id)
    chunk = (await uow.reads.guidance(case_id, start + domain.PAGE_SIZE, agent))[start:] if start < notes else []
    gaps = counts.get(UNRESOLVED, 0)
    if gaps and len(chunk) < domain.PAGE_SIZE and start <= notes:
        first = await uow.views.unresolved_page(case_id, 0, FIRST_GAPS)
        chunk.append(gaps_summary(case_id, gaps, await uow.views.unresolved_by_type(case_id, FIRST_GAPS), first))
    return domain.page_of(chunk, start, notes + (1 if gaps else 0), "guidance")
