"""Predictions resolve: a reviewer resolves a canonical prediction claim true, false or void, citing a canonical
source and the day it resolved. A ledger change like any other (revision + 1, its change log entry, its
`ledger.changed` event) and a `prediction.resolved` event; never undone, only superseded by a later
resolution that says why in its note."""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from services.review import domain
from services.review.ports import ReviewUnitOfWork
from shared.db.review_tables import prediction_resolutions as resolutions
from shared.db.tables import claims, sources
from shared.errors import AlreadyExists, InvalidArgument, NotFound
from shared.events import LedgerChange, case
from shared.ledger import ACTIVE
from shared.resolution_contracts import ResolvePrediction
from shared.resolution_events import PredictionResolved, ResolvedPrediction

PREDICTION = "prediction"


class SqlResolutions:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def claim(self, case_id: str, claim_id: str) -> Any:
        return (await self.connection.execute(select(claims.c.kind, claims.c.status).where(
            claims.c.case_id == case_id, claims.c.claim_id == claim_id))).first()

    async def source_status(self, case_id: str, source_id: str) -> str | None:
        return (await self.connection.execute(select(sources.c.status).where(
            sources.c.case_id == case_id, sources.c.source_id == source_id))).scalar()

    async def latest(self, case_id: str, claim_id: str) -> dict[str, Any] | None:
        row = (await self.connection.execute(select(resolutions).where(
            resolutions.c.case_id == case_id, resolutions.c.claim_id == claim_id)
            .order_by(resolutions.c.revision.desc()).limit(1))).mappings().first()
        return dict(row) if row else None

    async def latest_in_case(self, case_id: str, as_of: int | None = None) -> dict[str, dict[str, Any]]:
        """Each resolved claim's latest resolution (at or before revision `as_of`)."""
        query = select(resolutions).where(resolutions.c.case_id == case_id).order_by(resolutions.c.revision)
        if as_of is not None:
            query = query.where(resolutions.c.revision <= as_of)
        return {row["claim_id"]: dict(row) for row in (await self.connection.execute(query)).mappings()}

    async def add(self, row: dict[str, Any]) -> None:
        await self.connection.execute(insert(resolutions).values(**row))


def _day(raw: str, today: date) -> date:
    day = date.fromisoformat(raw)  # a calendar day: the contract's Day checked it with the request's other fields
    if day > today:
        raise InvalidArgument(f"resolvedOn {raw} is in the future (today is {today.isoformat()})", field="resolvedOn",
                              hint="a prediction resolves on a day that has come: resolve it on or after that day")
    return day


async def _check(cmd: ResolvePrediction, uow: ReviewUnitOfWork, today: date) -> dict[str, Any] | None:
    """Refuse what cannot be resolved, naming the field; the claim's latest resolution, if any."""
    found = await uow.resolutions.claim(cmd.case_id, cmd.claim_id)
    if found is None:
        raise NotFound(f"case {cmd.case_id!r} has no claim {cmd.claim_id!r}", field="claimId",
                       hint="resolve a canonical prediction claim the case page lists")
    if found.kind != PREDICTION or found.status != ACTIVE:
        what = f"of kind {found.kind}" if found.kind != PREDICTION else f"a prediction whose status is {found.status}"
        raise InvalidArgument(f"claim {cmd.claim_id!r} is {what}, not a canonical prediction", field="claimId",
                              hint="only canonical (active) claims of kind prediction resolve")
    status = await uow.resolutions.source_status(cmd.case_id, cmd.source_id)
    if status != ACTIVE:
        said = "no such source" if status is None else f"the source is {status}"
        raise InvalidArgument(f"sourceId {cmd.source_id!r} is not a canonical source of the case ({said})",
                              field="sourceId", hint="record the source that shows the outcome first, then cite it")
    _day(cmd.resolved_on, today)
    if cmd.note is not None and not cmd.note.strip():
        raise InvalidArgument("note is blank", field="note",
                              hint="leave note out, or say why the resolution supersedes the earlier one")
    latest = await uow.resolutions.latest(cmd.case_id, cmd.claim_id)
    if latest is None:
        return None
    same = (latest["outcome"], latest["source_id"], latest["resolved_on"], latest["note"]) == (
        cmd.outcome, cmd.source_id, cmd.resolved_on, cmd.note)
    if same:
        raise AlreadyExists(f"claim {cmd.claim_id!r} is already resolved so (revision {latest['revision']})",
                            field="claimId", hint="nothing to do: the resolution stands")
    if not cmd.note:
        raise InvalidArgument(
            f"claim {cmd.claim_id!r} was resolved {latest['outcome']} at revision {latest['revision']}; a resolution is "
            "never undone, only superseded by a later one that says why", field="note",
            hint="give a note saying why the earlier resolution no longer holds")
    return latest


async def resolve_prediction(cmd: ResolvePrediction, uow: ReviewUnitOfWork) -> dict[str, Any]:
    async with uow:
        revision = await uow.cases.lock(cmd.case_id)
        if revision is None:
            raise domain.case_not_found(cmd.case_id)
        domain.check_expected_revision(cmd.expected_revision, revision)
        now = uow.now()  # one clock reading: the resolution's time and its revision's are the same instant
        latest = await _check(cmd, uow, now.date())
        step_revision = await uow.cases.bump(cmd.case_id)
        resolved = ResolvedPrediction(claim_id=cmd.claim_id, resolution_id=str(uuid.uuid4()), outcome=cmd.outcome,
                                      source_id=cmd.source_id, resolved_on=cmd.resolved_on,
                                      supersedes=latest["resolution_id"] if latest else None)
        await uow.resolutions.add({
            "resolution_id": resolved.resolution_id, "case_id": cmd.case_id, "claim_id": cmd.claim_id,
            "outcome": cmd.outcome, "source_id": cmd.source_id, "resolved_on": cmd.resolved_on, "note": cmd.note,
            "resolved_by": cmd.actor.name, "revision": step_revision, "supersedes": resolved.supersedes, "at": now})
        verb = "re-resolved" if latest else "resolved"
        step = domain.ledger_changed(cmd.case_id, step_revision, cmd.actor.name,
                                     f"{cmd.actor.name} {verb} prediction {cmd.claim_id} {cmd.outcome}",
                                     LedgerChange(resolved=[resolved]))
        await uow.ledger.log(step, now, uow.origin.correlation_id)
        uow.emit(case(cmd.case_id), step, revision=step_revision)
        uow.emit(case(cmd.case_id), PredictionResolved(
            **resolved.model_dump(), case_id=cmd.case_id, revision=step_revision, resolved_by=cmd.actor.name,
            note=cmd.note), revision=step_revision)
        await uow.commit()
    return {"caseId": cmd.case_id, "revision": step_revision, "resolved": resolved.model_dump(by_alias=True),
            "note": cmd.note, "resolvedBy": cmd.actor.name}


def node_resolution(row: dict[str, Any]) -> dict[str, Any]:
    """How the map and the pages show a resolved prediction."""
    return {"outcome": row["outcome"], "resolvedOn": row["resolved_on"], "sourceId": row["source_id"]}


def item_resolution(row: dict[str, Any]) -> dict[str, Any]:
    """How the proposal that made a prediction canonical shows its latest resolution: what the map shows, and
    who resolved it at which revision, with the note of a resolution that superseded another."""
    return {**node_resolution(row), "resolvedBy": row["resolved_by"], "revision": row["revision"],
            **({"note": row["note"]} if row["note"] else {})}
