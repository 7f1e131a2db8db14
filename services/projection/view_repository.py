"""The projection's own tables: the rows of each case's view, written change by change and read by index."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from services.projection.view_rows import NEVER_BUILT, CaseRows, ClaimRow, SourceRow, UnresolvedRow, ViewState
from shared.db.queries import dicts
from shared.db.tables import claims, sources
from shared.db.view_tables import (
    case_views,
    view_claims,
    view_counts,
    view_group_members,
    view_origins,
    view_sources,
    view_unresolved,
)
from shared.health import UNSUPPORTED

VIEW_TABLES = (view_counts, view_sources, view_origins, view_claims, view_group_members, view_unresolved)


def _claim_values(case_id: str, row: ClaimRow) -> dict[str, Any]:
    return {
        "case_id": case_id, "claim_id": row.claim_id, "kind": row.kind, "confidence": row.confidence,
        "lane": row.lane, "display_order": row.order, "revision": row.revision, "source_ids": list(row.source_ids),
        "lane_rank": row.lane_rank, "lane_key": row.lane or "", "order_key": row.order or 0,
        "strong": row.strong, "open": bool(row.health_items or row.open_items),
        "contradicted_by": list(row.contradicted_by), "unit": row.unit, "health": row.health, "lost": row.rating[1],
    }


def _claim_row(r: Any) -> ClaimRow:
    return ClaimRow(r.claim_id, r.kind, r.confidence, r.lane, r.display_order, r.revision, tuple(r.source_ids),
                    r.strong, tuple(r.contradicted_by), r.unit).rerated(r.health, r.lost)


def _unresolved_values(case_id: str, row: UnresolvedRow) -> dict[str, Any]:
    return {"case_id": case_id, "band": row.band, "claim_revision": row.claim_revision, "claim_id": row.claim_id,
            "position": row.position, "type": row.item["type"], "detail": row.item["detail"],
            "action": row.item["action"]}


def _item(r: Any) -> dict[str, Any]:
    return {"type": r.type, **({"claimId": r.claim_id} if r.claim_id else {}), "detail": r.detail,
            "action": r.action}


CLAIM_ORDER = (view_claims.c.lane_rank, view_claims.c.lane_key, view_claims.c.order_key, view_claims.c.revision,
               view_claims.c.claim_id)
CLAIM_FOCUS = {  # domain.focus_order, as the indexes of view_claims hold it
    "all": CLAIM_ORDER,
    "unresolved": (view_claims.c.open.desc(), *CLAIM_ORDER),
    "primary_evidence": (view_claims.c.strong.desc(), *CLAIM_ORDER),
}
SOURCE_ORDER = (view_sources.c.revision, view_sources.c.source_id)
SOURCE_FOCUS = {"all": SOURCE_ORDER, "primary_evidence": (view_sources.c.strong.desc(), *SOURCE_ORDER)}
SOURCE_FIELDS = (sources.c.source_id, sources.c.publisher, sources.c.title, sources.c.url, sources.c.type,
                 sources.c.publication_date, sources.c.snapshot_date, sources.c.authority, sources.c.revision,
                 func.jsonb_array_length(sources.c.transcriptions).label("transcriptions"))


# Only the views missing: an INSERT … ON CONFLICT that meets a row another transaction has just updated waits for
# that transaction to end (to know whether the row is still there), so it would queue behind the view's holder.
_LOCK_ALL = """
INSERT INTO case_views (case_id, revision)
SELECT c.case_id, CAST(:never AS bigint) FROM unnest(CAST(:case_ids AS text[])) AS c(case_id)
WHERE NOT EXISTS (SELECT 1 FROM case_views v WHERE v.case_id = c.case_id) ORDER BY 1
ON CONFLICT DO NOTHING
"""

class SqlViews:
    """Rows of the case views. Writers hold the case's view row (`lock`), never a ledger lock."""

    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    # --- the case's own row ----------------------------------------------------------------------------

    async def lock(self, case_id: str) -> ViewState:
        """Hold the case's view until commit (concurrent writers of one case go one after the other)."""
        await self.connection.execute(pg_insert(case_views).values(case_id=case_id, revision=NEVER_BUILT)
                                      .on_conflict_do_nothing())
        row = (await self.connection.execute(
            select(case_views.c.revision, case_views.c.verdict_id).where(case_views.c.case_id == case_id)
            .with_for_update())).one()
        return ViewState(row.revision, row.verdict_id)

    async def lock_all(self, case_ids: Iterable[str], *, wait: bool = True) -> set[str]:
        """Hold several cases' views until commit, taken in case id order, so that two writers holding
        several never wait on each other in a circle; the cases held. With `wait=False`, only those no other
        writer holds now (SKIP LOCKED): the caller comes back for the others."""
        ordered = sorted(set(case_ids))
        if not ordered:
            return set()
        await self.connection.execute(text(_LOCK_ALL), {"case_ids": ordered, "never": NEVER_BUILT})
        held = await self.connection.execute(text(
            "SELECT case_id FROM case_views WHERE case_id = ANY(CAST(:case_ids AS text[])) "
            f"ORDER BY case_id FOR UPDATE{'' if wait else ' SKIP LOCKED'}"), {"case_ids": ordered})
        return {row.case_id for row in held}

    async def state(self, case_id: str) -> ViewState | None:
        row = (await self.connection.execute(
            select(case_views.c.revision, case_views.c.verdict_id).where(case_views.c.case_id == case_id))).first()
        return ViewState(row.revision, row.verdict_id) if row else None

    async def save_state(self, case_id: str, revision: int, verdict_id: str | None) -> None:
        await self.connection.execute(update(case_views).where(case_views.c.case_id == case_id).values(
            revision=revision, verdict_id=verdict_id, updated_at=func.now()))

    async def replace_all(self, case_id: str, rows: CaseRows) -> None:
        """Every row of the case from scratch (a rebuild)."""
        for table in VIEW_TABLES:
            await self.connection.execute(delete(table).where(table.c.case_id == case_id))
        await self.put_sources(case_id, rows.sources)
        await self.put_claims(case_id, rows.claims)
        await self.add_members(case_id, rows.members)
        await self.move_origins(case_id, rows.origins)
        await self.add_unresolved(case_id, rows.unresolved)
        await self.add_counts(case_id, rows.counts)
        await self.save_state(case_id, rows.revision, rows.verdict_id)

    # --- counters ---------------------------------------------------------------------------------------

    async def add_counts(self, case_id: str, delta: Counter[str]) -> None:
        moved = [{"case_id": case_id, "name": name, "value": value} for name, value in sorted(delta.items()) if value]
        if moved:
            statement = pg_insert(view_counts)
            await self.connection.execute(statement.on_conflict_do_update(
                index_elements=[view_counts.c.case_id, view_counts.c.name],
                set_={"value": view_counts.c.value + statement.excluded.value}), moved)

    async def counts(self, case_id: str) -> dict[str, int]:
        rows = await self.connection.execute(
            select(view_counts.c.name, view_counts.c.value).where(view_counts.c.case_id == case_id))
        return {r.name: r.value for r in rows}

    async def move_origins(self, case_id: str, delta: Counter[str]) -> int:
        """Move how many active sources each origin has; by how many the number of origins moved."""
        moved = [{"case_id": case_id, "origin": name, "sources": value} for name, value in sorted(delta.items())
                 if value]
        if not moved:
            return 0
        statement = pg_insert(view_origins)
        now = dict((await self.connection.execute(statement.on_conflict_do_update(
            index_elements=[view_origins.c.case_id, view_origins.c.origin],
            set_={"sources": view_origins.c.sources + statement.excluded.sources})
            .returning(view_origins.c.origin, view_origins.c.sources), moved)).all())
        gone = [name for name, value in now.items() if value == 0]
        if gone:
            await self.connection.execute(delete(view_origins).where(
                view_origins.c.case_id == case_id, view_origins.c.origin.in_(gone)))
        return sum(int(now[name] > 0) - int(now[name] - value > 0) for name, value in delta.items() if value)

    # --- sources ----------------------------------------------------------------------------------------

    async def sources(self, case_id: str, source_ids: Iterable[str]) -> dict[str, SourceRow]:
        return await self._by_id(view_sources.c.source_id, case_id, source_ids,
                                 lambda r: SourceRow(r.source_id, r.type, r.revision, r.cited_by, r.origin))

    async def _by_id(self, key: Any, case_id: str, ids: Iterable[str], row: Any) -> dict[str, Any]:
        """The view's rows of the case with these ids (by the table's key column `key`), each made by `row`."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        rows = await self.connection.execute(select(key.table).where(key.table.c.case_id == case_id, key.in_(wanted)))
        return {getattr(r, key.name): row(r) for r in rows}

    async def put_sources(self, case_id: str, rows: Sequence[SourceRow]) -> None:
        if not rows:
            return
        statement = pg_insert(view_sources)
        await self.connection.execute(statement.on_conflict_do_update(
            index_elements=[view_sources.c.case_id, view_sources.c.source_id],
            set_={"cited_by": statement.excluded.cited_by}),
            [{"case_id": case_id, "source_id": r.source_id, "type": r.type, "revision": r.revision,
              "strong": r.strong, "cited_by": r.cited_by, "origin": r.origin} for r in rows])

    async def drop_sources(self, case_id: str, source_ids: Sequence[str]) -> None:
        await self.connection.execute(delete(view_sources).where(
            view_sources.c.case_id == case_id, view_sources.c.source_id.in_(source_ids)))

    # --- claims -----------------------------------------------------------------------------------------

    async def claims(self, case_id: str, claim_ids: Iterable[str]) -> dict[str, ClaimRow]:
        return await self._by_id(view_claims.c.claim_id, case_id, claim_ids, _claim_row)

    async def claims_in_units(self, case_id: str, units: Iterable[str]) -> list[ClaimRow]:
        rows = await self.connection.execute(select(view_claims).where(
            view_claims.c.case_id == case_id, view_claims.c.unit.in_(sorted(set(units)))))
        return [_claim_row(r) for r in rows]

    async def put_claims(self, case_id: str, rows: Sequence[ClaimRow]) -> None:
        if not rows:
            return
        statement = pg_insert(view_claims)
        columns = [c.name for c in view_claims.columns if c.name not in ("case_id", "claim_id")]
        await self.connection.execute(statement.on_conflict_do_update(
            index_elements=[view_claims.c.case_id, view_claims.c.claim_id],
            set_={name: statement.excluded[name] for name in columns}),
            [_claim_values(case_id, r) for r in rows])

    async def drop_claims(self, case_id: str, claim_ids: Sequence[str]) -> None:
        await self.connection.execute(delete(view_claims).where(
            view_claims.c.case_id == case_id, view_claims.c.claim_id.in_(claim_ids)))

    # --- merge groups -----------------------------------------------------------------------------------

    async def groups_around(self, case_id: str, claim_ids: Sequence[str]) -> dict[str, list[str]]:
        """The active groups holding any of the claims, with those of their members that are among them."""
        rows = await self.connection.execute(select(view_group_members.c.group_id, view_group_members.c.claim_id)
                                             .where(view_group_members.c.case_id == case_id,
                                                    view_group_members.c.claim_id.in_(sorted(set(claim_ids)))))
        groups: dict[str, list[str]] = {}
        for r in rows:
            groups.setdefault(r.group_id, []).append(r.claim_id)
        return groups

    async def members_of(self, case_id: str, group_ids: Sequence[str]) -> dict[str, list[str]]:
        """Each of these groups' members, in claim id order."""
        rows = await self.connection.execute(select(view_group_members.c.group_id, view_group_members.c.claim_id)
                                             .where(view_group_members.c.case_id == case_id,
                                                    view_group_members.c.group_id.in_(group_ids))
                                             .order_by(view_group_members.c.claim_id))
        found: dict[str, list[str]] = {}
        for r in rows:
            found.setdefault(r.group_id, []).append(r.claim_id)
        return found

    async def add_members(self, case_id: str, pairs: Sequence[tuple[str, str]]) -> None:
        if pairs:
            await self.connection.execute(pg_insert(view_group_members).on_conflict_do_nothing(),
                                          [{"case_id": case_id, "group_id": g, "claim_id": c} for g, c in pairs])

    async def drop_groups(self, case_id: str, group_ids: Sequence[str]) -> None:
        await self.connection.execute(delete(view_group_members).where(
            view_group_members.c.case_id == case_id, view_group_members.c.group_id.in_(group_ids)))

    # --- unresolved items -------------------------------------------------------------------------------

    async def add_unresolved(self, case_id: str, rows: Sequence[UnresolvedRow]) -> None:
        if rows:
            await self.connection.execute(view_unresolved.insert(), [_unresolved_values(case_id, r) for r in rows])

    async def replace_unresolved(self, case_id: str, claim_ids: Sequence[str], rows: Sequence[UnresolvedRow]) -> int:
        """Replace the items of these claims ('' for the case's own); how many there were before."""
        removed = await self.connection.execute(delete(view_unresolved).where(
            view_unresolved.c.case_id == case_id, view_unresolved.c.claim_id.in_(claim_ids))
            .returning(view_unresolved.c.position))
        await self.add_unresolved(case_id, rows)
        return len(removed.all())

    # --- reads by index, for the bounded sections -------------------------------------------------------

    async def unresolved_page(self, case_id: str, offset: int, limit: int) -> list[dict[str, Any]]:
        rows = await self.connection.execute(
            select(view_unresolved).where(view_unresolved.c.case_id == case_id)
            .order_by(view_unresolved.c.band, view_unresolved.c.claim_revision, view_unresolved.c.claim_id,
                      view_unresolved.c.position)
            .offset(offset).limit(limit))
        return [_item(r) for r in rows]

    async def unresolved_by_type(self, case_id: str, first: int) -> dict[str, tuple[int, list[str]]]:
        """The case's unresolved items by type, the most frequent first: how many, and the claims of the first
        `first` of them in page order."""
        u = view_unresolved.c
        ranked = select(u.type, u.claim_id, func.count().over(partition_by=u.type).label("n"),
                        func.row_number().over(partition_by=u.type, order_by=(u.band, u.claim_revision, u.claim_id,
                                                                               u.position)).label("at")
                        ).where(u.case_id == case_id).subquery()
        rows = await self.connection.execute(
            select(ranked.c.type, ranked.c.n, ranked.c.claim_id).where(ranked.c.at <= first)
            .order_by(ranked.c.n.desc(), ranked.c.type, ranked.c.at))
        found: dict[str, tuple[int, list[str]]] = {}
        for kind, count, claim_id in rows:
            found.setdefault(kind, (count, []))[1].extend([claim_id] if claim_id else [])
        return found

    async def unsupported(self, case_id: str, limit: int) -> list[str]:
        """The first claims left unsupported, in the ledger's order."""
        rows = await self.connection.execute(
            select(view_claims.c.claim_id).where(view_claims.c.case_id == case_id, view_claims.c.health == UNSUPPORTED)
            .order_by(view_claims.c.revision, view_claims.c.claim_id).limit(limit))
        return list(rows.scalars())

    async def claim_page(self, case_id: str, focus: str, offset: int, limit: int) -> list[tuple[ClaimRow, str]]:
        """Claims in the focus order, each with its text."""
        rows = [_claim_row(r) for r in await self.connection.execute(
            select(view_claims).where(view_claims.c.case_id == case_id)
            .order_by(*CLAIM_FOCUS.get(focus, CLAIM_ORDER)).offset(offset).limit(limit))]
        # The text by primary key, a query of its own: a join would read every claim of the case.
        texts = dict((await self.connection.execute(select(claims.c.claim_id, claims.c.text).where(
            claims.c.case_id == case_id, claims.c.claim_id.in_([r.claim_id for r in rows])))).all()) if rows else {}
        return [(r, texts[r.claim_id]) for r in rows]

    async def open_types(self, case_id: str, claim_ids: Sequence[str]) -> dict[str, list[str]]:
        rows = await self.connection.execute(
            select(view_unresolved.c.claim_id, view_unresolved.c.type)
            .where(view_unresolved.c.case_id == case_id, view_unresolved.c.claim_id.in_(claim_ids))
            .order_by(view_unresolved.c.claim_id, view_unresolved.c.band, view_unresolved.c.position))
        found: dict[str, list[str]] = {}
        for r in rows:
            found.setdefault(r.claim_id, []).append(r.type)
        return found

    async def _shown(self, case_id: str, query: Any) -> list[dict[str, Any]]:
        """The sources a query of view_sources picks, in its order, with what the section shows of each."""
        picked = (await self.connection.execute(query.where(view_sources.c.case_id == case_id))).all()
        if not picked:
            return []
        found = await self.connection.execute(select(*SOURCE_FIELDS).where(
            sources.c.case_id == case_id, sources.c.source_id.in_([p.source_id for p in picked])))
        by_id = {r["source_id"]: r for r in dicts(found)}
        return [by_id[p.source_id] | {"derived": p.cited_by} for p in picked]

    async def source_page(self, case_id: str, focus: str, limit: int) -> list[dict[str, Any]]:
        return await self._shown(case_id, select(view_sources.c.source_id, view_sources.c.cited_by)
                                 .order_by(*SOURCE_FOCUS.get(focus, SOURCE_ORDER)).limit(limit))

    async def sources_shown(self, case_id: str, source_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Active sources among these ids, in the ledger's order."""
        return await self._shown(case_id, select(view_sources.c.source_id, view_sources.c.cited_by)
                                 .where(view_sources.c.source_id.in_(source_ids)).order_by(*SOURCE_ORDER))

    async def uncited_sources(self, case_id: str, limit: int) -> list[dict[str, Any]]:
        return await self._shown(case_id, select(view_sources.c.source_id, view_sources.c.cited_by)
                                 .where(view_sources.c.cited_by == 0).order_by(*SOURCE_ORDER).limit(limit))

    async def everything(self, case_id: str) -> dict[str, Any]:
        """Every row of a case's view, in a stable order (what a rebuild must reproduce)."""
        state = await self.state(case_id)
        found: dict[str, Any] = {"revision": state.revision if state else None,
                                 "verdictId": state.verdict_id if state else None}
        for table in VIEW_TABLES:
            keys = [c for c in table.primary_key.columns]
            rows = await self.connection.execute(select(table).where(table.c.case_id == case_id).order_by(*keys))
            found[table.name] = [{k: v for k, v in dict(r).items() if k != "case_id"} for r in rows.mappings()
                                 if table is not view_counts or r["value"]]
        return found
