"""The ledger read back over /api/v1: what changed between two revisions, a claim's timeline, and exports
(W3C PROV-O, nanopublications, AIF), streamed page by page."""

from __future__ import annotations

from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import StreamingResponse

from services.gateway import api_models as m
from services.gateway.auth import Principal
from services.gateway.exports import FORMATS, Format, chunks
from services.gateway.exports.records import Iris, LedgerPages
from services.gateway.http_api import READERS, AsOf, CaseId, call, caller
from shared.history_contracts import CaseDiff, ClaimTimeline, ExportPage
from shared.subjects import Command

router = APIRouter(prefix="/api/v1", responses=m.ERROR_RESPONSES)
log = structlog.get_logger("gateway")

RevisionParam = dict(ge=0, le=9007199254740991)
ClaimId = Annotated[str, Path(min_length=1, max_length=96, pattern=r"^[a-z][a-z0-9-]*$",
                              description="The claim's id (a slug).")]


@router.get("/cases/{case_id}/diff", tags=["history"], response_model=m.View)
async def case_diff(
    case_id: CaseId,
    request: Request,
    start: Annotated[int, Query(alias="from", description="The earlier revision.", **RevisionParam)],
    end: Annotated[int | None, Query(alias="to", description="The later revision (default: the case's now).",
                                     **RevisionParam)] = None,
    principal: Principal = caller(*READERS),
) -> Any:
    """What changed from revision `from` to `to`: records added, retired and superseded, relations and groups
    added and ended, claims re-rated (evidence health; grounding before and after), predictions resolved, and
    the decisions (reviewer, revision, the agent that staged what they decided) that did it; each list bounded,
    `counts` and `omitted` say how many in all."""
    return await call(request, Command.CASE_DIFF,
                      CaseDiff(actor=principal.actor(), case_id=case_id, from_revision=start, to_revision=end))


@router.get("/cases/{case_id}/claims/{claim_id}/timeline", tags=["history"], response_model=m.View)
async def claim_timeline(case_id: CaseId, claim_id: ClaimId, request: Request,
                         principal: Principal = caller(*READERS)) -> Any:
    """One claim's life in revision order: staged, accepted, related, grouped, re-rated (its evidence health, its
    grounding before and after), resolved, superseded or retired, each with who and at which revision."""
    return await call(request, Command.CLAIM_TIMELINE,
                      ClaimTimeline(actor=principal.actor(), case_id=case_id, claim_id=claim_id))


AIF_SCHEMA = {"type": "object", "required": ["nodes", "edges", "locutions", "participants"],
              "properties": {part: {"type": "array", "items": {"type": "object"}}
                             for part in ("nodes", "edges", "locutions", "participants")}}
JSONLD_SCHEMA = {"type": "object", "required": ["@context", "@graph"],
                 "properties": {"@context": {"type": "object"}, "@graph": {"type": "array"}}}
EXPORTED = {"application/json": {"schema": AIF_SCHEMA}, "application/ld+json": {"schema": JSONLD_SCHEMA},
            "text/turtle": {"schema": {"type": "string", "description": "W3C PROV-O as Turtle"}},
            "application/trig": {"schema": {"type": "string", "description": "nanopublications as TriG"}}}


@router.get("/cases/{case_id}/export", tags=["history"], response_class=StreamingResponse,
            responses={200: {"content": EXPORTED, "description": "The export, streamed."}})
async def export(
    case_id: CaseId,
    request: Request,
    format: Annotated[Format, Query(description="prov-jsonld | prov-turtle | nanopub-trig | aif-json")],
    as_of: AsOf = None,
    principal: Principal = caller(*READERS),
) -> StreamingResponse:
    """Every record canonical at or before revision `asOf` (default: now) with its status then, in a standard
    format; streamed, so a case of any size is never held whole."""

    async def fetch(page: ExportPage) -> dict[str, Any]:
        return await call(request, Command.EXPORT_PAGE, page)

    pages = await LedgerPages(fetch, principal.actor(), case_id, as_of).open()  # refuses a bad asOf before streaming
    writer = FORMATS[format]
    iris = Iris(request.app.state.gateway.settings.public_base)  # the Host header would name one record many ways

    async def body() -> Any:
        try:
            async for data in chunks(writer.write(pages, iris)):
                yield data
        except Exception as error:  # noqa: BLE001 - the status went out; the log says why the body stopped
            log.error("export_stopped", case_id=case_id, format=format, error=repr(error))
            raise

    name = f"{case_id}-r{pages.as_of}.{writer.extension}"
    return StreamingResponse(body(), media_type=writer.media_type,
                             headers={"Content-Disposition": f'attachment; filename="{name}"',
                                      "X-Threadline-Revision": str(pages.as_of)})
