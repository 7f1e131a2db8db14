"""The projection's read models: each case's view, kept by change events and rebuildable from the ledger."""

from __future__ import annotations

from typing import Any

from services.projection import domain
from services.projection.ports import ProjectionUnitOfWork
from shared.events import EventType


async def current_view(uow: ProjectionUnitOfWork, case: Any) -> dict[str, Any]:
    """The case's read model when it is up to date with the ledger and its guidance; else computed now."""
    stored = await uow.reads.stored_view(case.case_id)
    marker = await uow.reads.guidance_marker(case.case_id)
    if stored is not None and stored["revision"] == case.revision and stored["guidance_marker"] == marker:
        return stored
    return await compute_view(uow, case.case_id, case.revision) | {"guidance_marker": marker}


async def compute_view(uow: ProjectionUnitOfWork, case_id: str, revision: int) -> dict[str, Any]:
    snapshot = await uow.reads.snapshot(case_id, revision)
    return domain.case_view(snapshot, await uow.reads.guidance(case_id))


REFRESHING = {
    EventType.CASE_CREATED.value,
    EventType.LEDGER_CHANGED.value,
    EventType.PROPOSAL_DECIDED.value,
    EventType.GUIDANCE_ADDED.value,
}


async def apply_event(envelope: dict[str, Any], stream_seq: int, uow: ProjectionUnitOfWork) -> bool:
    """Apply one change event to the read models, exactly once; False when it was applied before."""
    async with uow:
        if not await uow.reads.record_applied(envelope["id"], envelope["type"], stream_seq):
            return False
        if envelope["type"] in REFRESHING:
            await refresh_view(uow, envelope["data"]["caseId"])
        await uow.commit()
    return True


async def refresh_view(uow: ProjectionUnitOfWork, case_id: str) -> None:
    """Recompute a case's view from the ledger. The shared case lock keeps decisions out meanwhile, so
    concurrent refreshes (several replicas) each see a settled ledger and write in ledger order."""
    await uow.reads.lock_case_shared(case_id)
    case = await uow.reads.case_row(case_id)
    if case is None:
        return
    marker = await uow.reads.guidance_marker(case_id)
    await uow.reads.save_view(case_id, await compute_view(uow, case_id, case.revision), marker)


async def rebuild(uow: ProjectionUnitOfWork) -> int:
    """Recompute every case's view from the ledger (`threadline projection rebuild`), one case at a time."""
    async with uow.read():
        every_case = await uow.reads.case_ids()
    for case_id in every_case:
        async with uow:
            await refresh_view(uow, case_id)
            await uow.commit()
    return len(every_case)
