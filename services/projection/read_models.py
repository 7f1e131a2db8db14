"""The projection's read models: each case's view, kept row by row from every ledger change, rebuildable.

A `ledger.changed` event carries its change; applying it rewrites only the rows the change touches and
moves the summary's counters by the difference, so its cost is the size of the change, never of the
ledger. Each case's view row records the revision it shows: an older event is skipped, the next one is
applied, and after a gap (revisions never seen) the missing ones are applied first, each from its change
in the ledger's change log; a view never built is rebuilt from the ledger. Writers hold the case's view
row only, never the case lock decisions take.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from services.projection import domain, view_rows
from services.projection.ports import ProjectionUnitOfWork
from services.projection.view_rows import GROUP_COUNTS, ORIGINS, UNRESOLVED, ClaimRow, SourceRow, ViewState
from shared.events import EventType
from shared.health import origin
from shared.streams import PROJECTION_EVENTS

APPLIED = PROJECTION_EVENTS  # the only events the projection's consumer is given (its subject filter)
_OF_A_CASE = {event.value for event in APPLIED}  # each names its case: its view is held while it applies


async def apply_event(envelope: dict[str, Any], stream_seq: int, uow: ProjectionUnitOfWork) -> bool:
    """Apply one change event to the read models, exactly once; False when it was applied before."""
    return bool(await apply_events([(envelope, stream_seq)], uow))


async def apply_events(batch: Sequence[tuple[dict[str, Any], int]], uow: ProjectionUnitOfWork) -> set[str]:
    """Apply events (each with its stream sequence), each exactly once; the ids of those applied now (the
    others were applied before).

    The proposals staged, of whatever cases, go into the search index in one transaction: their pending items
    are read from the proposals as they stand, so whether that happens before or after their cases' other
    events changes nothing. Each case's other events go in a transaction of their own, in stream order,
    holding that case's view only.

    Replicas fetch batches of the same cases, so a first round takes only the cases no other replica holds at
    that moment and leaves the rest for a second round, which waits for them: replicas work on different cases
    side by side instead of queueing case after case behind one another (behind a replica whose CPU quota ran out
    while it held a case, for the rest of the quota's period). A case's events that another replica applies
    first are caught up from the change log, or skipped as shown already (apply_revision)."""
    together: dict[tuple[str, str | None], list[tuple[dict[str, Any], int]]] = {}
    for envelope, stream_seq in batch:
        if envelope["type"] == EventType.PROPOSAL_STAGED.value:
            key: tuple[str, str | None] = ("staged", None)
        else:
            key = ("case", envelope["data"].get("caseId") if envelope["type"] in _OF_A_CASE else None)
        together.setdefault(key, []).append((envelope, stream_seq))
    applied: set[str] = set()
    later: list[list[tuple[dict[str, Any], int]]] = []
    for events in together.values():
        done, left = await _apply_together(events, uow, wait=False)
        applied |= done
        if left:
            later.append(left)
    for events in later:
        applied |= (await _apply_together(events, uow, wait=True))[0]
    return applied


async def _apply_together(batch: Sequence[tuple[dict[str, Any], int]], uow: ProjectionUnitOfWork, *,
                          wait: bool = True) -> tuple[set[str], list[tuple[dict[str, Any], int]]]:
    """Apply the events whose cases' views this transaction can hold (all of them when `wait`); the ids applied
    now, and the events left for later (their cases held by another writer)."""
    async with uow:
        held = await uow.views.lock_all((e["data"]["caseId"] for e, _ in batch if e["type"] in _OF_A_CASE),
                                        wait=wait)
        left = [(e, seq) for e, seq in batch if e["type"] in _OF_A_CASE and e["data"]["caseId"] not in held]
        if left:
            batch = [(e, seq) for e, seq in batch if e["type"] not in _OF_A_CASE or e["data"]["caseId"] in held]
            if not batch:
                return set(), left  # nothing written: the unit of work rolls back
        applied = await uow.reads.record_all_applied([(e["id"], e["type"], seq) for e, seq in batch])
        fresh = list({e["id"]: e for e, _ in batch if e["id"] in applied}.values())
        staged: list[tuple[str, str]] = []
        for envelope in fresh:
            data = envelope["data"]
            if envelope["type"] == EventType.LEDGER_CHANGED.value:
                await apply_revision(uow, data["caseId"], data["revision"], data["changes"])
            elif envelope["type"] == EventType.PROPOSAL_STAGED.value:  # its pending items, for search
                staged.append((data["caseId"], data["proposalId"]))
            elif envelope["type"] == EventType.PROPOSAL_DECIDED.value:
                await uow.search.decide(data["caseId"], data["proposalId"], [*data["accepted"], *data["rejected"]])
        await uow.search.stage_many(staged)
        await uow.commit()
    return applied, left


async def apply_revision(uow: ProjectionUnitOfWork, case_id: str, revision: int, changes: dict[str, Any]) -> None:
    state = await uow.views.lock(case_id)
    if state.revision >= revision:
        return  # shown already (applied before, or a catch-up covered it)
    if state.revision >= 0 and revision == state.revision + 1:
        await Change(uow, case_id, revision, state.verdict_id).apply(changes)
    else:
        await _bring_up_to(uow, case_id, state, revision)  # never built, or revisions it has not seen


async def catch_up(uow: ProjectionUnitOfWork, case_id: str) -> None:
    """Bring a case's view up to its ledger now (a read found it behind: its events are on their way)."""
    async with uow:
        state = await uow.views.lock(case_id)
        case = await uow.reads.case_row(case_id)
        if case is None or 0 <= case.revision <= state.revision:
            return
        await _bring_up_to(uow, case_id, state, case.revision)
        await uow.commit()


async def _bring_up_to(uow: ProjectionUnitOfWork, case_id: str, state: ViewState, revision: int) -> None:
    """The revisions the view lacks, each from its own change in the change log; a view never built, or one
    whose revisions the change log cannot all give, is rebuilt from the ledger instead."""
    steps = [] if state.revision < 0 else await uow.reads.changes_since(case_id, state.revision, revision)
    if len(steps) != revision - state.revision:
        await rebuild_case(uow, case_id)
        return
    verdict_id = state.verdict_id
    for step_revision, changes in steps:
        verdict_id = await Change(uow, case_id, step_revision, verdict_id).apply(changes)


async def rebuild_case(uow: ProjectionUnitOfWork, case_id: str) -> None:
    """Every row of a case's view from its ledger, at the ledger's revision (its view row held)."""
    case = await uow.reads.case_row(case_id)
    snapshot = await uow.reads.snapshot(case_id, case.revision)
    await uow.views.replace_all(case_id, view_rows.case_rows(snapshot))
    await uow.search.rebuild(case_id)


async def rebuild(uow: ProjectionUnitOfWork) -> int:
    """Recompute every case's view from the ledger (`threadline projection rebuild`), one case at a time."""
    async with uow.read():
        every_case = await uow.reads.case_ids()
    for case_id in every_case:
        async with uow:
            await uow.views.lock(case_id)
            await rebuild_case(uow, case_id)
            await uow.commit()
    return len(every_case)


class Change:
    """One revision's change applied to a case's view rows: records that left first, then those added,
    then what they change of the claims around them (merge units, ratings, grounding, contradictions, open
    items)."""

    def __init__(self, uow: ProjectionUnitOfWork, case_id: str, revision: int, verdict_id: str | None) -> None:
        self.views = uow.views
        self.reads = uow.reads
        self.search = uow.search
        self.case_id = case_id
        self.revision = revision
        self.verdict_id = verdict_id
        self.delta: Counter[str] = Counter()
        self.touched: set[str] = set()  # claims whose grounding or contradictions may have changed
        self.units: set[str] = set()  # merge units to compute again
        self.origins: Counter[str] = Counter()  # how many active sources each origin gains (or loses)

    async def apply(self, changes: dict[str, Any]) -> str | None:
        """Apply the change; the verdict it leaves."""
        verdict_before = self.verdict_id
        ended: dict[str, list[str]] = {"source": [], "claim": [], "relation": [], "group": []}
        for record in changes.get("superseded", []):
            ended[record["record"]].append(record["id"])
        for record in changes.get("retired", []):
            ended[record["record"]].append(record["id"])
        await self._end_claims(ended["claim"])
        await self._end_sources(ended["source"])
        await self._end_relations(ended["relation"])
        await self._end_groups(ended["group"])
        await self._add_sources(changes.get("sourcesAdded", []))
        await self.search.apply_change(self.case_id, changes)
        await self._add_claims(changes.get("claimsAdded", []))
        bases = {b for c in changes.get("claimsAdded", []) for b in c.get("bases", [])}
        await self._add_relations(changes.get("relationsAdded", []), bases)
        await self._add_groups(changes.get("groupsAdded", []))
        await self._regroup()
        await self._rerate(changes.get("rerated", []))
        await self._refresh()
        if self.verdict_id != verdict_before:
            await self._replace_unresolved([""], view_rows.case_unresolved(self.verdict_id))
        self.delta[ORIGINS] += await self.views.move_origins(self.case_id, self.origins)
        await self.views.add_counts(self.case_id, self.delta)
        await self.views.save_state(self.case_id, self.revision, self.verdict_id)
        return self.verdict_id

    # --- records leaving ----------------------------------------------------------------------------------

    async def _end_claims(self, claim_ids: list[str]) -> None:
        rows = await self.views.claims(self.case_id, claim_ids)
        if not rows:
            return
        self.delta.subtract(sum((r.counts() for r in rows.values()), Counter()))
        self.units |= {r.unit for r in rows.values() if not r.is_verdict}
        await self._cite(Counter({s: -1 for r in rows.values() for s in r.source_ids}))
        await self._replace_unresolved(list(rows), [])
        await self.views.drop_claims(self.case_id, list(rows))
        if self.verdict_id in rows:
            self.verdict_id = None

    async def _end_sources(self, source_ids: list[str]) -> None:
        rows = await self.views.sources(self.case_id, source_ids)
        if not rows:
            return
        self.delta.subtract(sum((r.counts() for r in rows.values()), Counter()))
        self.origins.subtract(r.origin for r in rows.values() if r.origin)
        await self.views.drop_sources(self.case_id, list(rows))
        self.touched |= set(await self.reads.claims_citing(self.case_id, list(rows)))

    async def _end_relations(self, relation_ids: list[str]) -> None:
        if not relation_ids:
            return
        for relation in await self.reads.relations_by_id(self.case_id, relation_ids):
            self.delta.subtract(view_rows.relation_counts(relation.type, relation.verdict_basis))
            if relation.type == "contradicts":
                self.touched.add(relation.target_claim_id)

    async def _end_groups(self, group_ids: list[str]) -> None:
        if not group_ids:
            return
        members = [m for found in (await self.views.members_of(self.case_id, group_ids)).values() for m in found]
        self.units |= {r.unit for r in (await self.views.claims(self.case_id, members)).values()}
        await self.views.drop_groups(self.case_id, group_ids)
        self.delta.subtract({name: n * len(group_ids) for name, n in GROUP_COUNTS.items()})

    # --- records added ------------------------------------------------------------------------------------

    async def _add_sources(self, added: list[dict[str, Any]]) -> None:
        rows = [SourceRow(s["id"], s["type"], self.revision, origin=origin(s["publisher"])) for s in added]
        self.origins.update(r.origin for r in rows if r.origin)
        await self.views.put_sources(self.case_id, rows)
        self.delta.update(sum((r.counts() for r in rows), Counter()))

    async def _add_claims(self, added: list[dict[str, Any]]) -> None:
        if not added:
            return
        cited = await self.views.sources(self.case_id, (s for c in added for s in c["sourceIds"]))
        types = {s: row.type for s, row in cited.items()}
        rows = [view_rows.new_claim(c, self.revision, types) for c in added]
        await self.views.put_claims(self.case_id, rows)
        self.delta.update(sum((r.counts() for r in rows), Counter()))
        await self._cite(Counter(s for r in rows for s in r.source_ids))
        self.touched |= {r.claim_id for r in rows}
        self.verdict_id = next((r.claim_id for r in rows if r.is_verdict), self.verdict_id)

    async def _add_relations(self, added: list[dict[str, Any]], bases: set[str]) -> None:
        for relation in added:
            self.delta.update(view_rows.relation_counts(relation["type"], relation["id"] in bases))
            if relation["type"] == "contradicts":
                self.touched.add(relation["targetClaimId"])

    async def _add_groups(self, added: list[dict[str, Any]]) -> None:
        if not added:
            return
        pairs = [(g["groupId"], m) for g in added for m in g["memberClaimIds"]]
        await self.views.add_members(self.case_id, pairs)
        self.units |= {r.unit for r in (await self.views.claims(self.case_id, [m for _, m in pairs])).values()}
        self.delta.update({name: n * len(added) for name, n in GROUP_COUNTS.items()})

    # --- what the records around them derive --------------------------------------------------------------

    async def _cite(self, citations: Counter[str]) -> None:
        """Move the counts of active claims citing these sources."""
        rows = await self.views.sources(self.case_id, [s for s, n in citations.items() if n])
        changed = [replace(r, cited_by=r.cited_by + citations[s]) for s, r in rows.items()]
        await self._put_sources(rows.values(), changed)

    async def _put_sources(self, before: Iterable[SourceRow], after: list[SourceRow]) -> None:
        self.delta.update(view_rows.moved((r.counts() for r in before), (r.counts() for r in after)))
        await self.views.put_sources(self.case_id, after)

    async def _regroup(self) -> None:
        if not self.units:
            return
        rows = {r.claim_id: r for r in await self.views.claims_in_units(self.case_id, self.units)}
        groups = await self.views.groups_around(self.case_id, list(rows))
        changed = view_rows.regrouped(rows.values(), groups)
        await self._put_claims([rows[r.claim_id] for r in changed], changed)

    async def _rerate(self, rerated: list[dict[str, Any]]) -> None:
        """The ratings a retirement (or a verdict resting on lost support) recorded, as the change carries them."""
        rows = await self.views.claims(self.case_id, (r["claimId"] for r in rerated))
        changed = {r["claimId"]: rows[r["claimId"]].rerated(r["health"], r["lost"]) for r in rerated
                   if r["claimId"] in rows}
        await self._put_claims([rows[c] for c in changed], list(changed.values()))
        self.touched |= set(changed)

    async def _refresh(self) -> None:
        """Ground the touched claims again, count what contradicts them, and rewrite their open items."""
        rows = await self.views.claims(self.case_id, self.touched)
        if not rows:
            return
        types = {s: r.type for s, r in
                 (await self.views.sources(self.case_id, (s for r in rows.values() for s in r.source_ids))).items()}
        against = domain.contradictions(
            await self.reads.relations_into(self.case_id, list(rows), self.revision, types=["contradicts"]))
        now = {c: replace(r, strong=domain.grounded(r.source_ids, types),
                          contradicted_by=tuple(sorted(against.get(c, [])))) for c, r in rows.items()}
        changed = [now[c] for c in rows if now[c] != rows[c]]
        await self._put_claims([rows[r.claim_id] for r in changed], changed)
        await self._replace_unresolved(list(rows), [u for r in now.values() for u in view_rows.claim_unresolved(r)])

    async def _put_claims(self, before: list[ClaimRow], after: list[ClaimRow]) -> None:
        self.delta.update(view_rows.moved((r.counts() for r in before), (r.counts() for r in after)))
        await self.views.put_claims(self.case_id, after)

    async def _replace_unresolved(self, claim_ids: list[str], rows: list[view_rows.UnresolvedRow]) -> None:
        removed = await self.views.replace_unresolved(self.case_id, claim_ids, rows)
        self.delta[UNRESOLVED] += len(rows) - removed
