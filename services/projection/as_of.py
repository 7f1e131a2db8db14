"""The reviewers' case ledger as it stood at a past revision, computed from the append-only ledger.

The live answer reads the case's view rows; this one makes the same rows from the ledger as of the revision
(`view_rows.case_rows`, the rebuild's own function) and answers the same reads from them in memory, so the
live code that shapes the answer runs unchanged over either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from services.projection.ports import ProjectionUnitOfWork
from services.projection.view_rows import CaseRows, ClaimRow, SourceRow, ViewState, case_rows
from shared.as_of import check_as_of
from shared.errors import NotFound

SOURCE_FIELDS = ("source_id", "publisher", "title", "url", "type", "publication_date", "snapshot_date",
                 "authority", "revision")
Answer = Callable[[Any, Any, ViewState], Awaitable[dict[str, Any]]]


def _claim_key(row: ClaimRow) -> tuple:
    return row.lane_rank, row.lane or "", row.order or 0, row.revision, row.claim_id


CLAIM_FOCUS = {  # view_repository.CLAIM_FOCUS, over rows in memory
    "all": _claim_key,
    "unresolved": lambda r: (not (r.health_items or r.open_items), *_claim_key(r)),
    "primary_evidence": lambda r: (not r.strong, *_claim_key(r)),
}


def _source_key(row: SourceRow) -> tuple:
    return row.revision, row.source_id


SOURCE_FOCUS = {"all": _source_key, "primary_evidence": lambda r: (not r.strong, *_source_key(r))}


class MemoryViews:
    """The reads of the view rows the ledger answer makes (view_repository.SqlViews), over rows in memory."""

    def __init__(self, rows: CaseRows, texts: dict[str, str], sources: dict[str, dict[str, Any]]) -> None:
        self.rows = rows
        self.texts = texts
        self.source_fields = sources
        self.claim_rows = {r.claim_id: r for r in rows.claims}
        self.source_rows = {r.source_id: r for r in rows.sources}

    async def counts(self, case_id: str) -> dict[str, int]:
        return dict(self.rows.counts)

    async def claims(self, case_id: str, claim_ids: Iterable[str]) -> dict[str, ClaimRow]:
        return {i: self.claim_rows[i] for i in set(claim_ids) if i in self.claim_rows}

    async def sources(self, case_id: str, source_ids: Iterable[str]) -> dict[str, SourceRow]:
        return {i: self.source_rows[i] for i in set(source_ids) if i in self.source_rows}

    async def claim_page(self, case_id: str, focus: str, offset: int, limit: int) -> list[tuple[ClaimRow, str]]:
        ordered = sorted(self.rows.claims, key=CLAIM_FOCUS.get(focus, _claim_key))[offset:offset + limit]
        return [(r, self.texts[r.claim_id]) for r in ordered]

    async def groups_around(self, case_id: str, claim_ids: Sequence[str]) -> dict[str, list[str]]:
        wanted = set(claim_ids)
        groups: dict[str, list[str]] = {}
        for group_id, claim_id in self.rows.members:
            if claim_id in wanted:
                groups.setdefault(group_id, []).append(claim_id)
        return groups

    async def members_of(self, case_id: str, group_ids: Sequence[str]) -> dict[str, list[str]]:
        wanted = set(group_ids)
        found: dict[str, list[str]] = {}
        for group_id, claim_id in sorted(self.rows.members, key=lambda m: m[1]):
            if group_id in wanted:
                found.setdefault(group_id, []).append(claim_id)
        return found

    async def open_types(self, case_id: str, claim_ids: Sequence[str]) -> dict[str, list[str]]:
        wanted = set(claim_ids)
        found: dict[str, list[str]] = {}
        for u in sorted(self.rows.unresolved, key=lambda u: (u.claim_id, u.band, u.position)):
            if u.claim_id in wanted:
                found.setdefault(u.claim_id, []).append(u.item["type"])
        return found

    def _shown(self, picked: Iterable[SourceRow]) -> list[dict[str, Any]]:
        return [{**{k: self.source_fields[r.source_id][k] for k in SOURCE_FIELDS},
                 "transcriptions": len(self.source_fields[r.source_id]["transcriptions"]), "derived": r.cited_by}
                for r in picked]

    async def source_page(self, case_id: str, focus: str, limit: int) -> list[dict[str, Any]]:
        return self._shown(sorted(self.rows.sources, key=SOURCE_FOCUS.get(focus, _source_key))[:limit])

    async def sources_shown(self, case_id: str, source_ids: Sequence[str]) -> list[dict[str, Any]]:
        wanted = set(source_ids)
        return self._shown(sorted((r for r in self.rows.sources if r.source_id in wanted), key=_source_key))

    async def uncited_sources(self, case_id: str, limit: int) -> list[dict[str, Any]]:
        return self._shown(sorted((r for r in self.rows.sources if r.cited_by == 0), key=_source_key)[:limit])


class ReadsAt:
    """The projection's reads of the ledger, its groups taken as of the revision (the others already are)."""

    def __init__(self, reads: Any, revision: int) -> None:
        self._reads = reads
        self._revision = revision

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reads, name)

    async def group_list(self, case_id: str) -> list[dict[str, Any]]:
        return await self._reads.group_list(case_id, self._revision)


class Past:
    """What the ledger answer reads, as of a revision: the ledger's reads and the view rows made from them."""

    def __init__(self, reads: ReadsAt, views: MemoryViews) -> None:
        self.reads = reads
        self.views = views


NOT_LEDGER = ("pendingProposals", "guidance")  # about now, not about a revision: an as-of answer leaves them out


async def ledger_at(uow: ProjectionUnitOfWork, case_id: str, revision: int, answer: Answer) -> dict[str, Any]:
    """`answer` (the live ledger answer) over the case as it stood at `revision`."""
    async with uow.read():
        case = await uow.reads.case_row(case_id)
        if case is None:
            raise NotFound(f"there is no case {case_id!r}", field="caseId", hint="list cases first")
        check_as_of(revision, case.revision)
        snapshot = await uow.reads.snapshot(case_id, revision)
        rows = case_rows(snapshot)
        shown = await uow.reads.sources_by_id(case_id, list(snapshot.source_types))
        views = MemoryViews(rows, {c.claim_id: c.text for c in snapshot.claims}, shown)
        found = await answer(Past(ReadsAt(uow.reads, revision), views), case, ViewState(revision, rows.verdict_id))
    return {**{k: v for k, v in found.items() if k not in NOT_LEDGER}, "asOf": revision}
