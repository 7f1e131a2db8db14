"""Review's use cases over the ledger read back: a diff between two revisions, a claim's timeline, export pages.

Each is one read transaction; each refuses a revision the case does not have, naming the parameter.
"""

from __future__ import annotations

from typing import Any

from services.review import domain, history_views
from services.review.ports import ReviewUnitOfWork
from shared.as_of import check_as_of, check_range
from shared.errors import InvalidArgument, NotFound
from shared.history_contracts import CaseDiff, ClaimTimeline, ExportPage


async def _case(uow: ReviewUnitOfWork, case_id: str) -> dict[str, Any]:
    found = await uow.history.case_row(case_id)
    if found is None:
        raise domain.case_not_found(case_id)
    return found


async def case_diff(cmd: CaseDiff, uow: ReviewUnitOfWork) -> dict[str, Any]:
    async with uow.read():
        case = await _case(uow, cmd.case_id)
        end = case["revision"] if cmd.to_revision is None else cmd.to_revision
        check_range(cmd.from_revision, end, case["revision"])
        found = await uow.history.diff(cmd.case_id, cmd.from_revision, end, history_views.DIFF_CAP)
    return {**history_views.diff_view(cmd.case_id, cmd.from_revision, end, found), "revision": case["revision"]}


async def claim_timeline(cmd: ClaimTimeline, uow: ReviewUnitOfWork) -> dict[str, Any]:
    async with uow.read():
        case = await _case(uow, cmd.case_id)
        claim = await uow.history.claim(cmd.case_id, cmd.claim_id)
        stagings = await uow.history.stagings_of(cmd.case_id, cmd.claim_id, history_views.TIMELINE_CAP)
        if claim is None and not stagings:
            raise NotFound(f"{cmd.claim_id!r} is not a claim of the case {cmd.case_id!r}", field="claimId",
                           hint="name a claim the case's ledger or one of its proposals holds "
                                "(GET /api/v1/cases/{caseId}/ledger)")
        links = (await uow.history.links_of(cmd.case_id, cmd.claim_id, history_views.TIMELINE_CAP)
                 if claim is not None else history_views.NO_LINKS)
    return {**history_views.timeline_view(cmd.case_id, cmd.claim_id, claim, links, stagings), "revision": case["revision"]}


PAGES = {"sources": "sources_page", "claims": "claims_page", "relations": "relations_page",
         "outgoing": "outgoing_page", "groups": "groups_page", "resolutions": "resolutions_page"}
CURSORS = {"sources": lambda r: r["source_id"], "claims": lambda r: r["claim_id"],
           "relations": lambda r: r["relation_id"], "groups": lambda r: r["group_id"],
           "outgoing": lambda r: f"{r['source_claim_id']} {r['relation_id']}",
           "resolutions": lambda r: f"{r['claim_id']} {r['revision']}"}


async def export_page(cmd: ExportPage, uow: ReviewUnitOfWork) -> dict[str, Any]:
    """One page of one part of the ledger as of a revision (every record installed by then, with its status
    then) as one JSON text; `next` is the cursor of the page after, or None at the end."""
    async with uow.read():
        case = await _case(uow, cmd.case_id)
        as_of = case["revision"] if cmd.as_of is None else cmd.as_of
        check_as_of(as_of, case["revision"])
        answer: dict[str, Any] = {"caseId": cmd.case_id, "asOf": as_of, "revision": case["revision"],
                                  "part": cmd.part}
        if cmd.part == "case":
            return answer | {"records": history_views.exported_json([case]), "next": None}
        if cmd.part == "revisions":
            after = _revision_cursor(cmd.after)
            rows = await uow.history.revisions_page(cmd.case_id, as_of, after, cmd.limit)
            cursor = str(rows[-1]["revision"]) if len(rows) == cmd.limit else None
        else:
            rows = await getattr(uow.history, PAGES[cmd.part])(cmd.case_id, as_of, cmd.after, cmd.limit)
            cursor = CURSORS[cmd.part](rows[-1]) if len(rows) == cmd.limit else None
    return answer | {"records": history_views.exported_json(rows), "next": cursor}


def _revision_cursor(after: str | None) -> int:
    if after is None:
        return 0
    if not after.isdigit():
        raise InvalidArgument(f"after {after!r} is not a revision", field="after",
                              hint="pass the `next` of the previous page of revisions")
    return int(after)
