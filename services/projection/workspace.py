"""The sections of `get_workspace`, each read by index from the case's view rows: only what it returns."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from services.projection import domain, health, view_rows
from services.projection.domain import ClaimView, LedgerSnapshot
from services.projection.ports import ProjectionUnitOfWork
from services.projection.view_rows import UNRESOLVED, SourceRow, ViewState
from shared.review_checks import years_in

WALK = 100  # claims read at a time while finding the sources behind the open claims


async def summary(uow: ProjectionUnitOfWork, case_id: str, state: ViewState, counts: dict[str, int]) -> dict[str, Any]:
    pending = await uow.reads.pending_by_kind(case_id)
    found = await verdict_section(uow, case_id, state) if state.verdict_id else None
    verdict = (found or {"state": "missing"}) | {"pendingProposals": pending.get("verdict", 0)}
    unsupported = await uow.views.unsupported(case_id, health.NAMED_CAP)
    ledger = view_rows.ledger_counts(counts)
    unresolved_count = counts.get(UNRESOLVED, 0)
    return {
        "counts": {
            **ledger,
            "pendingProposals": {"total": sum(pending.values()), "byKind": pending},
            "unresolved": unresolved_count,
        },
        "verdict": verdict,
        "predictionsDue": await predictions_due(uow, case_id, state, health.NAMED_CAP),
        "evidenceHealth": view_rows.evidence_health(counts, state.verdict_id is not None, unsupported,
                                                    verdict.get("health", "missing")),
        "nextSteps": domain.next_steps(
            sources=ledger["sources"]["total"],
            claims=ledger["claims"]["total"],
            relations=ledger["relations"]["total"],
            has_verdict=verdict["state"] == "accepted",
            pending=sum(pending.values()),
            unresolved_count=unresolved_count,
        ),
        "sections": "get_workspace scope=claims|sources|proposals|unresolved|guidance|all for detail",
    }


async def verdict_section(uow: ProjectionUnitOfWork, case_id: str, state: ViewState) -> dict[str, Any] | None:
    """`domain.verdict_view`: the verdict and its bases from the ledger, its rating and the groups from the view."""
    found = await uow.reads.verdict(case_id, state.verdict_id, state.revision)
    if found is None:
        return None
    row = (await uow.views.claims(case_id, [state.verdict_id])).get(state.verdict_id)
    groups = await uow.views.groups_around(case_id, [r.source_claim_id for r in found.relations])
    grounding = await uow.reads.grounding(case_id, [state.verdict_id], state.revision)
    # Its own label; its `independentOrigins` stays the verdict view's (the origins of its bases' sources).
    return domain.verdict_view(replace(found, groups=groups, health={row.claim_id: row.rating} if row else {})) \
        | {"grounding": grounding[state.verdict_id]["grounding"]}


def claim_item(c: ClaimView, groups: list[str], support: dict[str, int], open_types: list[str],
               grounding: dict[str, Any] | None = None, resolution: dict[str, Any] | None = None) -> dict[str, Any]:
    ordered = sorted(groups)
    return (grounding or {}) | ({"resolution": resolution} if resolution else {}) | {
        "claimId": c.claim_id,
        "text": c.text,
        "kind": c.kind,
        "confidence": c.confidence,
        "lane": c.lane,
        "order": c.order,
        "sourceIds": list(c.source_ids),
        "revision": c.revision,
        "groups": ordered[: domain.GROUPS_PER_CLAIM_CAP],
        "groupsOmitted": max(0, len(ordered) - domain.GROUPS_PER_CLAIM_CAP),
        "independentSupport": support.get("supports", 0),
        "independentContradiction": support.get("contradicts", 0),
        "unresolved": open_types,
    }


def _groups_of(groups: dict[str, list[str]]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for group_id, members in groups.items():
        for member in members:
            found.setdefault(member, []).append(group_id)
    return found


async def claims(uow: ProjectionUnitOfWork, case_id: str, state: ViewState, focus: str,
                 counts: dict[str, int], cap: int = domain.CLAIMS_CAP, with_verdict: bool = True) -> dict[str, Any]:
    """The first `cap` claims in the focus order, read by index (the verdict among them unless not `with_verdict`)."""
    listed = await uow.views.claim_page(case_id, focus, 0, cap + (0 if with_verdict else 1))
    if not with_verdict:
        listed = [(row, text) for row, text in listed if row.claim_id != state.verdict_id][:cap]
    ids = [row.claim_id for row, _ in listed]
    groups_of = _groups_of(await uow.views.groups_around(case_id, ids))
    open_types = await uow.views.open_types(case_id, ids)
    edges = await uow.reads.relations_into(case_id, ids, state.revision, types=["supports", "contradicts"])
    around = await uow.views.groups_around(case_id, [e.source_claim_id for e in edges])
    support = domain.support(LedgerSnapshot(state.revision, relations=edges, groups=around))
    grounding = await uow.reads.grounding(case_id, ids, state.revision)
    resolved = await uow.reads.resolutions(case_id, [r.claim_id for r, _ in listed if r.kind == "prediction"],
                                           state.revision)
    total = counts.get("claims.all" if with_verdict else "claims", 0)
    return {
        "total": total,
        "omitted": max(0, total - len(listed)),
        "items": [
            claim_item(ClaimView(r.claim_id, text, r.kind, r.confidence, r.lane, r.order, r.source_ids, r.revision),
                       groups_of.get(r.claim_id, []), support.get(r.claim_id, {}), open_types.get(r.claim_id, []),
                       grounding.get(r.claim_id), resolved.get(r.claim_id))
            for r, text in listed
        ],
    }


async def sources_in_focus(uow: ProjectionUnitOfWork, case_id: str, focus: str, counts: dict[str, int],
                           cap: int) -> list[dict[str, Any]]:
    """`domain.sources_in_focus`, the first `cap` of them, read by index."""
    if focus == "unresolved":
        return await _behind_open_claims(uow, case_id, cap, counts.get("sources", 0) - counts.get("sources.uncited", 0))
    return await uow.views.source_page(case_id, focus, cap)


async def sources(uow: ProjectionUnitOfWork, case_id: str, focus: str, counts: dict[str, int]) -> dict[str, Any]:
    rows = await sources_in_focus(uow, case_id, focus, counts, domain.SOURCES_CAP)
    total = counts.get("sources", 0)
    return {
        "total": total,
        "omitted": max(0, total - len(rows)),
        "note": "metadata only; read evidence text with inspect_sources",
        "items": [
            {
                "sourceId": r["source_id"],
                "publisher": r["publisher"],
                "title": r["title"],
                "url": r["url"],
                "type": r["type"],
                "publicationDate": r["publication_date"],
                "snapshotDate": r["snapshot_date"],
                "authority": r["authority"],
                "revision": r["revision"],
                "transcriptions": r["transcriptions"],
                "derivedClaims": r["derived"],
            }
            for r in rows
        ],
    }


async def _behind_open_claims(uow: ProjectionUnitOfWork, case_id: str, cap: int, cited: int) -> list[dict[str, Any]]:
    """`domain.sources_in_focus` for `unresolved`, reading claims in focus order only until the page is full:
    the sources of the first claims first (ties in the ledger's order), then the uncited ones."""
    first_cited: dict[str, int] = {}
    found: dict[str, SourceRow] = {}
    offset = 0
    while len(found) < min(cap, cited):
        chunk = await uow.views.claim_page(case_id, "unresolved", offset, WALK)
        if not chunk:
            break
        new = []
        for position, (row, _) in enumerate(chunk, offset):
            for source_id in row.source_ids:
                if source_id not in first_cited:
                    first_cited[source_id] = position
                    new.append(source_id)
        found |= await uow.views.sources(case_id, new)
        offset += len(chunk)
    ordered = sorted(found.values(), key=lambda r: (first_cited[r.source_id], r.revision, r.source_id))[:cap]
    shown = {r["source_id"]: r for r in await uow.views.sources_shown(case_id, [r.source_id for r in ordered])}
    rows = [shown[r.source_id] for r in ordered]
    return rows + (await uow.views.uncited_sources(case_id, cap - len(rows)) if len(rows) < cap else [])


async def unresolved(uow: ProjectionUnitOfWork, case_id: str, cursor: int | None,
                     counts: dict[str, int], state: ViewState | None = None) -> dict[str, Any]:
    start = cursor or 0
    chunk = await uow.views.unresolved_page(case_id, start, domain.PAGE_SIZE)
    page = domain.page_of(chunk, start, counts.get(UNRESOLVED, 0), "unresolved")
    if state is not None:
        page["predictionsDue"] = await predictions_due(uow, case_id, state, domain.PAGE_SIZE)
    return page


async def predictions_due(uow: ProjectionUnitOfWork, case_id: str, state: ViewState, cap: int) -> dict[str, Any]:
    """Canonical predictions whose year has passed, not resolved yet: a reviewer should resolve them."""
    this_year = datetime.now(UTC).year
    due = []
    for claim_id, text in await uow.reads.open_predictions(case_id, state.revision):
        years = years_in(text)
        if years and max(years) < this_year:
            due.append({"type": "prediction_due", "claimId": claim_id, "year": max(years),
                        "action": f"its year {max(years)} has passed: a reviewer resolves it true, false or void "
                                  f"(POST /api/v1/cases/{case_id}/resolutions)"})
    return {"total": len(due), "items": due[:cap], "omitted": max(0, len(due) - cap)}

