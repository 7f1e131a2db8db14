"""The ledger read back in PostgreSQL: what changed between two revisions, a claim's life, export pages.

Every record keeps the revision that installed it and the one that ended it (retired or superseded), and
every re-rating is kept in `rating_history`, so each of these reads is a filter on revisions, never a replay.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, and_, case, cast, func, literal, literal_column, or_, select, tuple_, union_all
from sqlalchemy.dialects.postgresql import JSONPATH, aggregate_order_by
from sqlalchemy.ext.asyncio import AsyncConnection

from shared.db.history_tables import rating_history
from shared.db.queries import dicts
from shared.db.review_tables import prediction_resolutions
from shared.db.tables import (
    cases,
    change_log,
    claim_sources,
    claims,
    decisions,
    item_decisions,
    merge_group_members,
    merge_groups,
    proposal_items,
    proposals,
    relations,
    sources,
)
from shared.errors import InvalidArgument
from shared.grounding import grounding_around

RECORDS = (("source", sources, sources.c.source_id), ("claim", claims, claims.c.claim_id),
           ("relation", relations, relations.c.relation_id), ("group", merge_groups, merge_groups.c.group_id))
NULL_TEXT = literal_column("NULL::text")
# The change log, each entry with the decision it records and the proposal that decision was on (the ledger's
# history reads it too); both joins are outer (a retirement has no decision) and on primary keys: one row per entry.
LOGGED_DECISIONS = (change_log.outerjoin(decisions, decisions.c.decision_id == change_log.c.decision_id)
                    .outerjoin(proposals, proposals.c.proposal_id == decisions.c.proposal_id))
PROVENANCE = ("proposal_id", "staged_by", "staged_at", "decision_id", "decided_by", "decided_at", "revision")
CANDIDATES_AT_A_TIME = 500  # claims whose grounding may have changed, read and compared at a time (a diff, a timeline)


def _ended_at(table: Any, as_of: int) -> dict[str, Any]:
    """The record's status at `as_of`, and its ending (who, when, which revision, a retirement's note) if it had
    ended by then."""
    ended = table.c.ended_revision <= as_of
    record, key = next((name, key) for name, known, key in RECORDS if known is table)
    return {"status": case((ended, table.c.status), else_=literal("active")),
            "ended_note": case((ended, _retirement_note(table, record, key))),
            "ended_by": case((ended, table.c.ended_by)), "ended_at": case((ended, table.c.ended_at)),
            "ended_revision": case((ended, table.c.ended_revision)),
            "superseded_by": case((ended, table.c.superseded_by))}


def _logged(table: Any) -> Any:
    """The change log's entry of the revision a row was made in (who made the revision, and when)."""
    return and_(change_log.c.case_id == table.c.case_id, change_log.c.revision == table.c.revision)


def _retirement_note(table: Any, record: str, key: Any) -> Any:
    """The note the retirement that ended a row gave it (the change log's entry of that revision keeps it)."""
    path = cast(literal('$.retired[*] ? (@.record == $record && @.id == $id).note'), JSONPATH)
    note = func.jsonb_path_query_first(change_log.c.changes, path, func.jsonb_build_object("record", record, "id", key))
    return (select(note.op("#>>")(literal_column("'{}'")))  # the JSON string as text
            .where(change_log.c.case_id == table.c.case_id, change_log.c.revision == table.c.ended_revision,
                   table.c.status == "retired")
            .scalar_subquery())


def _capped(queries: list[Select], cap: int) -> Any:
    """Each query's first `cap` + 1 rows (so a cut shows), with how many it has in all, as one statement."""
    return union_all(*[q.add_columns(func.count().over().label("total")).limit(cap + 1).subquery().select()
                       for q in queries])


class SqlHistory:
    """Reads of the ledger's history (review owns the tables; these only read)."""

    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    # --- a diff ---------------------------------------------------------------------------------------

    async def diff(self, case_id: str, start: int, end: int, cap: int) -> dict[str, list[dict[str, Any]]]:
        """Records added and ended in revisions start+1..end, the ratings made (each with the claim's grounding
        before and after), the claims whose grounding alone changed (no re-rating of their evidence health at that
        revision), the predictions resolved and the log
        entries, each list its first `cap` + 1 entries in revision order, each row with the list's `total`."""
        added = [select(literal("added").label("change"), literal(record).label("record"), key.label("id"),
                        table.c.revision, table.c.decided_by.label("by"), NULL_TEXT.label("superseded_by"),
                        NULL_TEXT.label("note"))
                 .where(table.c.case_id == case_id, table.c.revision > start, table.c.revision <= end)
                 .order_by(table.c.revision, key) for record, table, key in RECORDS]
        ended = [select(literal(status).label("change"), literal(record).label("record"), key.label("id"),
                        table.c.ended_revision.label("revision"), table.c.ended_by.label("by"), table.c.superseded_by,
                        _retirement_note(table, record, key).label("note"))
                 .where(table.c.case_id == case_id, table.c.status == status, table.c.ended_revision > start,
                        table.c.ended_revision <= end)
                 .order_by(table.c.ended_revision, key)
                 for record, table, key in RECORDS for status in ("retired", "superseded")]
        rows = dicts(await self.connection.execute(_capped(added + ended, cap)))
        rerated = dicts(await self.connection.execute(
            select(rating_history.c.claim_id, rating_history.c.health, rating_history.c.lost, rating_history.c.revision,
                   change_log.c.actor, func.count().over().label("total"))
            .select_from(rating_history.join(change_log, _logged(rating_history)))
            .where(rating_history.c.case_id == case_id, rating_history.c.revision > start,
                   rating_history.c.revision <= end)
            .order_by(rating_history.c.revision, rating_history.c.claim_id).limit(cap + 1)))
        logged = dicts(await self.connection.execute(
            select(change_log.c.revision, change_log.c.decision_id, change_log.c.actor, change_log.c.at,
                   change_log.c.summary, decisions.c.proposal_id, proposals.c.agent_name.label("staged_by"),
                   func.count().over().label("total"))
            .select_from(LOGGED_DECISIONS)
            .where(change_log.c.case_id == case_id, change_log.c.revision > start, change_log.c.revision <= end)
            .order_by(change_log.c.revision).limit(cap + 1)))
        r = prediction_resolutions.c
        resolved = dicts(await self.connection.execute(
            select(r.resolution_id, r.claim_id, r.outcome, r.resolved_on, r.source_id, r.supersedes, r.note,
                   r.revision, r.resolved_by, func.count().over().label("total"))
            .where(r.case_id == case_id, r.revision > start, r.revision <= end)
            .order_by(r.revision, r.claim_id).limit(cap + 1)))
        regrounded = await self.grounding_changes(case_id, start, end, cap, unrated=True)
        keys = [(x["claim_id"], x["revision"]) for x in rerated[:cap]]
        grounding = await grounding_around(self.connection, case_id, keys)
        for x in rerated:
            x["grounding"] = grounding.get((x["claim_id"], x["revision"]))
        return {"records": rows, "rerated": rerated, "regrounded": regrounded, "log": logged, "resolved": resolved}

    async def grounding_changes(self, case_id: str, start: int, end: int | None, cap: int,
                                claim_id: str | None = None, unrated: bool = False) -> list[dict[str, Any]]:
        """Claims whose grounding changed in revisions start+1..end (`end` unset: up to now), each with its
        grounding before and after, who made the revision and the list's `total`; the first `cap` + 1 in revision
        order. Grounding is derived from the active sources, so only a source's ending changes it: the candidates are
        the claims citing a source that ended then. Each candidate is compared (by the grounding rules, which live
        in Python) before the cap is applied, so those whose label and number of origins stayed the same neither use
        up the cap nor count. The candidates are read and compared `CANDIDATES_AT_A_TIME` at a time in (revision,
        claim) order, each batch's groundings in one read, so memory holds one batch and the first `cap` + 1 changes
        however long the history, and `total` stays exact. `unrated`: only changes at a revision that did not re-rate
        the claim's evidence health."""
        ended = sources.c.ended_revision
        query = (select(claim_sources.c.claim_id, ended.label("revision"), change_log.c.actor, change_log.c.at)
                 .distinct()
                 .select_from(claim_sources
                              .join(sources, and_(sources.c.case_id == claim_sources.c.case_id,
                                                  sources.c.source_id == claim_sources.c.source_id))
                              .join(claims, and_(claims.c.case_id == claim_sources.c.case_id,
                                                 claims.c.claim_id == claim_sources.c.claim_id))
                              .join(change_log, and_(change_log.c.case_id == sources.c.case_id,
                                                     change_log.c.revision == ended)))
                 .where(claim_sources.c.case_id == case_id, ended > start,
                        claims.c.revision < ended,  # the claim was there before, and still was then
                        or_(claims.c.ended_revision.is_(None), claims.c.ended_revision > ended)))
        if end is not None:
            query = query.where(ended <= end)
        if claim_id is not None:
            query = query.where(claim_sources.c.claim_id == claim_id)
        if unrated:
            query = query.where(~select(rating_history.c.revision)
                                .where(rating_history.c.case_id == claim_sources.c.case_id,
                                       rating_history.c.claim_id == claim_sources.c.claim_id,
                                       rating_history.c.revision == ended).exists())
        position = tuple_(ended, claim_sources.c.claim_id)
        changed: list[dict[str, Any]] = []
        total, after = 0, None
        while True:
            batch = query if after is None else query.where(position > tuple_(*after))
            found = dicts(await self.connection.execute(
                batch.order_by(ended, claim_sources.c.claim_id).limit(CANDIDATES_AT_A_TIME)))
            grounding = await grounding_around(self.connection, case_id,
                                               [(x["claim_id"], x["revision"]) for x in found])
            for x in found:
                if (pair := grounding[(x["claim_id"], x["revision"])])["before"] != pair["after"]:
                    total += 1
                    if len(changed) <= cap:
                        changed.append({**x, "grounding": pair})
            if len(found) < CANDIDATES_AT_A_TIME:
                return [{**x, "total": total} for x in changed]
            after = (found[-1]["revision"], found[-1]["claim_id"])

    # --- a claim's timeline -------------------------------------------------------------------------------

    async def claim(self, case_id: str, claim_id: str) -> dict[str, Any] | None:
        """The claim's row with its staging (the proposal's time, pin and agent) and the claim it superseded."""
        superseded = (select(claims.c.claim_id).where(claims.c.case_id == case_id, claims.c.superseded_by == claim_id)
                      .limit(1).scalar_subquery())
        found = dicts(await self.connection.execute(
            select(claims, proposals.c.created_at.label("proposed_at"), proposals.c.pinned_revision,
                   proposals.c.staged_revision, superseded.label("supersedes"),
                   _retirement_note(claims, "claim", claims.c.claim_id).label("ended_note"))
            .select_from(claims.outerjoin(proposals, proposals.c.proposal_id == claims.c.proposal_id))
            .where(claims.c.case_id == case_id, claims.c.claim_id == claim_id)))
        return found[0] if found else None

    async def links_of(self, case_id: str, claim_id: str, cap: int) -> dict[str, list[dict[str, Any]]]:
        """The relations that run from or to the claim, the groups it is in, each re-rating it had, each change of
        its grounding (a source it cites ended), and each resolution of it (a prediction's); each list but the
        re-ratings its first `cap` + 1 (so a cut shows), each row with the list's `total`."""
        total = func.count().over().label("total")
        linked = dicts(await self.connection.execute(
            select(relations, total, _retirement_note(relations, "relation", relations.c.relation_id).label("ended_note"))
            .where(relations.c.case_id == case_id, or_(
                relations.c.source_claim_id == claim_id, relations.c.target_claim_id == claim_id))
            .order_by(relations.c.revision, relations.c.relation_id).limit(cap + 1)))
        grouped = dicts(await self.connection.execute(
            select(merge_groups, total).join(merge_group_members, and_(
                merge_group_members.c.case_id == merge_groups.c.case_id,
                merge_group_members.c.group_id == merge_groups.c.group_id))
            .where(merge_group_members.c.case_id == case_id, merge_group_members.c.claim_id == claim_id)
            .order_by(merge_groups.c.revision, merge_groups.c.group_id).limit(cap + 1)))
        rated = dicts(await self.connection.execute(
            select(rating_history, change_log.c.actor, change_log.c.at)
            .select_from(rating_history.join(change_log, _logged(rating_history)))
            .where(rating_history.c.case_id == case_id, rating_history.c.claim_id == claim_id)
            .order_by(rating_history.c.revision)))
        resolved = dicts(await self.connection.execute(
            select(prediction_resolutions, total).where(prediction_resolutions.c.case_id == case_id,
                                                        prediction_resolutions.c.claim_id == claim_id)
            .order_by(prediction_resolutions.c.revision).limit(cap + 1)))
        regrounded = await self.grounding_changes(case_id, 0, None, cap, claim_id)
        return {"relations": linked, "groups": grouped, "ratings": rated, "resolutions": resolved,
                "groundings": regrounded}

    async def stagings_of(self, case_id: str, claim_id: str, cap: int) -> list[dict[str, Any]]:
        """The first `cap` + 1 proposals that staged the claim (so a cut shows), accepted, rejected or still pending, in
        the order staged, each with the decision on it (the revision it is told at: the one the decision made, else the
        one it was made on) and the list's `total`."""
        decided = and_(item_decisions.c.proposal_id == proposal_items.c.proposal_id,
                       item_decisions.c.item_id == proposal_items.c.item_id)
        return dicts(await self.connection.execute(
            select(proposals.c.proposal_id, proposals.c.kind, proposals.c.agent_name, proposals.c.created_at,
                   proposals.c.pinned_revision, proposals.c.staged_revision, proposal_items.c.payload,
                   item_decisions.c.outcome, decisions.c.decision_id, decisions.c.reviewer, decisions.c.decided_at,
                   decisions.c.note,
                   func.coalesce(decisions.c.revision_after, decisions.c.expected_revision).label("decided_revision"),
                   func.count().over().label("total"))
            .select_from(proposals.join(proposal_items, proposal_items.c.proposal_id == proposals.c.proposal_id)
                         .outerjoin(item_decisions, decided)
                         .outerjoin(decisions, decisions.c.decision_id == item_decisions.c.decision_id))
            .where(proposals.c.case_id == case_id, proposals.c.kind.in_(("claims", "verdict")),
                   proposal_items.c.item_id == claim_id)
            .order_by(proposals.c.created_at, proposals.c.proposal_id).limit(cap + 1)))

    # --- export pages: the records installed by a revision, in id order, each with its status then -------

    async def case_row(self, case_id: str) -> dict[str, Any] | None:
        found = dicts(await self.connection.execute(select(cases).where(cases.c.case_id == case_id)))
        return found[0] if found else None

    async def sources_page(self, case_id: str, as_of: int, after: str | None, limit: int) -> list[dict[str, Any]]:
        # Metadata only: evidence text (up to 4,000 characters each) stays out, so that a page fits a NATS message.
        fields = [sources.c[name] for name in ("source_id", "publisher", "title", "url", "publication_date",
                                               "snapshot_date", "type", "authority", *PROVENANCE)]
        return await self._page(sources, sources.c.source_id, fields, case_id, as_of, after, limit)

    async def claims_page(self, case_id: str, as_of: int, after: str | None, limit: int) -> list[dict[str, Any]]:
        cited = (select(func.array_agg(aggregate_order_by(claim_sources.c.source_id, claim_sources.c.position)))
                 .where(claim_sources.c.case_id == claims.c.case_id, claim_sources.c.claim_id == claims.c.claim_id)
                 .scalar_subquery())
        rating = (select(rating_history.c.health)
                  .where(rating_history.c.case_id == claims.c.case_id, rating_history.c.claim_id == claims.c.claim_id,
                         rating_history.c.revision <= as_of)
                  .order_by(rating_history.c.revision.desc()).limit(1).scalar_subquery())
        fields = [claims.c.claim_id, claims.c.text, claims.c.kind, claims.c.confidence, claims.c.transformation_note,
                  *(claims.c[name] for name in PROVENANCE), cited.label("source_ids"), rating.label("health")]
        return await self._page(claims, claims.c.claim_id, fields, case_id, as_of, after, limit)

    async def relations_page(self, case_id: str, as_of: int, after: str | None, limit: int) -> list[dict[str, Any]]:
        fields = [relations.c.relation_id, relations.c.source_claim_id, relations.c.target_claim_id, relations.c.type,
                  relations.c.rationale, relations.c.verdict_basis, *(relations.c[name] for name in PROVENANCE)]
        return await self._page(relations, relations.c.relation_id, fields, case_id, as_of, after, limit)

    async def outgoing_page(self, case_id: str, as_of: int, after: str | None, limit: int) -> list[dict[str, Any]]:
        """Relations in the order of the claim each runs from; `after` is "<source claim id> <relation id>"."""
        fields = [relations.c.relation_id, relations.c.source_claim_id, relations.c.target_claim_id, relations.c.type,
                  relations.c.revision]
        query = (select(*fields, *(v.label(k) for k, v in _ended_at(relations, as_of).items()))
                 .where(relations.c.case_id == case_id, relations.c.revision <= as_of))
        if after is not None:
            source, _, relation = after.partition(" ")
            query = query.where(tuple_(relations.c.source_claim_id, relations.c.relation_id) > tuple_(source, relation))
        return dicts(await self.connection.execute(
            query.order_by(relations.c.source_claim_id, relations.c.relation_id).limit(limit)))

    async def groups_page(self, case_id: str, as_of: int, after: str | None, limit: int) -> list[dict[str, Any]]:
        members = (select(func.array_agg(aggregate_order_by(merge_group_members.c.claim_id, merge_group_members.c.claim_id)))
                   .where(merge_group_members.c.case_id == merge_groups.c.case_id,
                          merge_group_members.c.group_id == merge_groups.c.group_id).scalar_subquery())
        fields = [merge_groups.c.group_id, merge_groups.c.label, merge_groups.c.confidence, merge_groups.c.rationale,
                  *(merge_groups.c[name] for name in PROVENANCE), members.label("members")]
        return await self._page(merge_groups, merge_groups.c.group_id, fields, case_id, as_of, after, limit)

    async def resolutions_page(self, case_id: str, as_of: int, after: str | None,
                               limit: int) -> list[dict[str, Any]]:
        """Predictions' resolutions made by `as_of`, by claim, each claim's in revision order (its last the one
        that stands then); `after` is "<claim id> <revision>"."""
        r = prediction_resolutions.c
        query = (select(r.resolution_id, r.claim_id, r.outcome, r.source_id, r.resolved_on, r.note, r.resolved_by,
                        r.revision, r.supersedes, r.at)
                 .where(r.case_id == case_id, r.revision <= as_of))
        if after is not None:
            claim_id, _, revision = after.rpartition(" ")
            if not revision.isdigit():
                raise InvalidArgument(f"after {after!r} is not a resolution cursor", field="after",
                                      hint="pass the `next` of the previous page of resolutions")
            query = query.where(tuple_(r.claim_id, r.revision) > tuple_(claim_id, int(revision)))
        return dicts(await self.connection.execute(query.order_by(r.claim_id, r.revision).limit(limit)))

    async def _page(self, table: Any, key: Any, fields: list[Any], case_id: str, as_of: int, after: str | None,
                    limit: int) -> list[dict[str, Any]]:
        query = (select(*fields, *(v.label(k) for k, v in _ended_at(table, as_of).items()))
                 .where(table.c.case_id == case_id, table.c.revision <= as_of))
        if after is not None:
            query = query.where(key > after)
        return dicts(await self.connection.execute(query.order_by(key).limit(limit)))

    async def revisions_page(self, case_id: str, as_of: int, after: int, limit: int) -> list[dict[str, Any]]:
        """The change log's entries after `after` up to `as_of`: each revision's reviewer, time, decision."""
        return dicts(await self.connection.execute(
            select(change_log.c.revision, change_log.c.decision_id, change_log.c.actor, change_log.c.at,
                   change_log.c.summary, decisions.c.proposal_id)
            .select_from(LOGGED_DECISIONS)
            .where(change_log.c.case_id == case_id, change_log.c.revision > after, change_log.c.revision <= as_of)
            .order_by(change_log.c.revision).limit(limit)))
