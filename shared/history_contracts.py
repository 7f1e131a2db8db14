"""Message contracts of the ledger read back: the case as of a revision, a diff, a claim's timeline, exports."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from shared.contracts import Actor, Contract, Revision, Slug

EXPORT_PAGE_MAX = 2000
# `outgoing`: the relations in the order of the claims they run from (a nanopublication holds its claim's).
# `resolutions`: predictions' resolutions in the order of their claims, each claim's in revision order.
ExportPart = Literal["case", "sources", "claims", "relations", "outgoing", "groups", "revisions", "resolutions"]


class CaseAsOf(Contract):
    """A case's ledger or argument map: as it stands (`as_of` unset) or as it stood at revision `as_of`."""

    actor: Actor
    case_id: Slug
    as_of: Revision | None = None


class CaseDiff(Contract):
    """What changed from one revision to a later one (`to_revision` unset: the case's revision now)."""

    actor: Actor
    case_id: Slug
    from_revision: Revision
    to_revision: Revision | None = None


class ClaimTimeline(Contract):
    """One claim's life: staged, accepted, related, grouped, re-rated, superseded or retired."""

    actor: Actor
    case_id: Slug
    claim_id: Slug


class ExportPage(Contract):
    """One page of one part of the ledger as of a revision, for an export: records after `after` in id order."""

    actor: Actor
    case_id: Slug
    as_of: Revision | None = None
    part: ExportPart
    after: Annotated[str, Field(max_length=200)] | None = None
    limit: Annotated[int, Field(ge=1, le=EXPORT_PAGE_MAX)] = 500


def history_requests() -> dict[Any, type[BaseModel]]:
    """The request contract of each of these commands (shared.command_contracts.command_requests adds them)."""
    from shared.subjects import Command

    return {Command.CASE_LEDGER: CaseAsOf, Command.CASE_DIFF: CaseDiff,
            Command.CLAIM_TIMELINE: ClaimTimeline, Command.EXPORT_PAGE: ExportPage}
