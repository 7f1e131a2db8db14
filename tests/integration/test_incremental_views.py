"""Case views kept change by change equal the views rebuilt from the ledger, after any long random history.

The real use cases (staging, review, the projection) run against real PostgreSQL; the events they write
to the outbox are applied one by one as the projection's consumer applies them, some late (a read caught
up from the change log first) and some never (the next event finds a gap), and the whole view is then
compared with the one a rebuild makes, and with what the read rules compute from the ledger directly.
Retirements re-rate what leaned on them (evidence health): some retire the only source of a claim or what
a verdict's basis rests on, so the ratings the changes carry are kept and compared too.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import and_, select, text

from services.projection import domain, read_models, use_cases, view_rows, workspace
from services.projection.repository import SqlProjectionUnitOfWork
from services.review import use_cases as review
from services.review.repository import SqlReviewUnitOfWork
from services.staging.domain import CHANGED_IDS
from services.staging.repository import PgStagingUnitOfWork
from services.staging.use_cases import stage
from shared import kinds
from shared.contracts import (
    Actor,
    Confidence,
    CreateCase,
    Decide,
    Focus,
    GetWorkspaceArgs,
    RecordSources,
    RelationType,
    RetireRecords,
    SetFocusArgs,
    SourceType,
    ToolRequest,
)
from shared.db.session import Database
from shared.db.tables import claim_sources, claims, outbox, relations, sources
from shared.events import Origin
from shared.history_contracts import CaseAsOf
from shared.subjects import Subjects
from tests.factories import claim_item, merge_item, relation_item, source_item, unique, verdict_claim
from tests.support import new_deployment, remove_deployment

# Random histories drawn: `make test` draws 10, `make test-full` (THREADLINE_FULL=1) 25.
HISTORIES = 25 if os.environ.get("THREADLINE_FULL") else 10

AGENT = Actor(name="agent-views", role="agent")
REVIEWER = Actor(name="rita", role="reviewer")
pick = st.integers(0, 1000)
accept = st.sampled_from([True, True, True, False])  # mostly accepted, some rejected
PUBLISHERS = ["Example Agency", "example  agency", "Another Lab", "ANOTHER LAB ", "Daily Press"]  # three origins
new_sources = st.tuples(st.just("sources"), st.lists(st.tuples(st.sampled_from(get_args(SourceType)),
                                                               st.sampled_from(PUBLISHERS)), min_size=1, max_size=3))
new_claims = st.tuples(st.just("claims"), st.lists(st.tuples(st.sampled_from(get_args(Confidence)),
                                                             st.lists(pick, min_size=1, max_size=3), accept),
                                                   min_size=1, max_size=4))
new_relations = st.tuples(st.just("relations"), st.lists(st.tuples(pick, pick, st.sampled_from(get_args(RelationType)),
                                                                   accept), min_size=1, max_size=3))
new_group = st.tuples(st.just("merge"), st.lists(pick, min_size=2, max_size=4), accept)
new_verdict = st.tuples(st.just("verdict"), pick, st.lists(st.tuples(pick, st.sampled_from(["supports", "contradicts"])),
                                                          min_size=1, max_size=2), accept)
retirement = st.tuples(st.just("retire"), st.sampled_from(["source", "claim", "claim"]), pick)
lonely_source = st.tuples(st.just("retire_lonely"), pick)  # the only active source of a claim
basis = st.tuples(st.just("retire_basis"), pick, st.sampled_from(["claim", "sources"]))  # a verdict basis, or its sources
operation = st.one_of(
    new_sources, new_claims, new_claims, new_claims, new_relations, new_relations, new_group, new_group, new_verdict,
    retirement, retirement, lonely_source, basis,
    st.tuples(st.just("focus"), st.sampled_from(get_args(Focus))),
    st.tuples(st.just("late")),  # the next operation's events are applied only after a read caught up
    st.tuples(st.just("lost")),  # the next operation's events never reach the projection (a gap follows)
)


class History:
    """One case, driven through the real use cases; its events applied as the projection's consumer would."""

    def __init__(self, db: Database, origin: Origin) -> None:
        self.db = db
        self.origin = origin
        self.case_id = unique("views")
        self.ids = itertools.count()
        self.applied_up_to = 0  # the outbox position of the last event handed to the projection
        self.next_events = "applied"  # what becomes of the next operation's events: applied, late or lost

    def projection(self) -> SqlProjectionUnitOfWork:
        return SqlProjectionUnitOfWork(self.db, self.origin, default_case=self.case_id)

    def review(self) -> SqlReviewUnitOfWork:
        return SqlReviewUnitOfWork(self.db, self.origin)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self.ids)}"

    async def revision(self) -> int:
        async with self.review().read() as uow:
            return (await uow.cases.get(self.case_id))["revision"]

    async def active(self, table: Any, key: str) -> list[str]:
        async with self.db.engine.connect() as connection:
            rows = await connection.execute(select(table.c[key]).where(
                table.c.case_id == self.case_id, table.c.status == "active").order_by(table.c[key]))
            return [r[0] for r in rows]

    async def stage_and_decide(self, kind: kinds.ItemKind, accepted: dict[str, bool], **items: Any) -> None:
        revision = await self.revision()
        args = kind.arguments.model_validate({"expectedCaseId": self.case_id, "expectedRevision": revision, **items})
        staged = await stage(kind, ToolRequest(actor=AGENT, args=args, discovered_case_id=self.case_id),
                             PgStagingUnitOfWork(self.db, self.origin, CHANGED_IDS))
        await review.decide(Decide(actor=REVIEWER, proposal_id=staged["proposalId"],
                                   accept=[i for i, yes in accepted.items() if yes],
                                   reject=[i for i, yes in accepted.items() if not yes],
                                   note="history", expected_revision=revision), self.review())

    async def run(self, step: tuple) -> None:
        name, *args = step
        events, self.next_events = self.next_events, name if name in ("late", "lost") else "applied"
        await getattr(self, f"_{name}")(*args)
        if events == "late":  # an agent reads first: the view catches up from the change log, the events after
            await use_cases.get_workspace(ToolRequest(actor=AGENT, args=GetWorkspaceArgs()), self.projection())
        await self.project(lost=events == "lost")

    async def project(self, lost: bool = False) -> None:
        """Apply every ledger change written since, in outbox order, as the consumer does (unless lost)."""
        async with self.db.engine.connect() as connection:
            rows = (await connection.execute(
                select(outbox.c.id, outbox.c.envelope).where(outbox.c.id > self.applied_up_to,
                                                             outbox.c.aggregate == f"case:{self.case_id}")
                .order_by(outbox.c.id))).all()
        for row in rows:
            if row.envelope["type"] in read_models.APPLIED and not lost:
                await read_models.apply_event(row.envelope, row.id, self.projection())
            self.applied_up_to = row.id

    async def _sources(self, wanted: list[tuple[str, str]]) -> None:
        """Titles with accents: the search index holds their words without them, kept as rebuilt."""
        await review.record_sources(RecordSources(actor=REVIEWER, case_id=self.case_id, sources=[
            source_item(source_id, type=t, publisher=p, title=f"Relevé {source_id} à Zürich")
            for source_id, (t, p) in ((self.new_id("s"), w) for w in wanted)]), self.review())

    async def _claims(self, wanted: list[tuple[str, list[int], bool]]) -> None:
        cited = await self.active(sources, "source_id")
        if not cited:
            return
        items = [claim_item(self.new_id("c"), sorted({cited[p % len(cited)] for p in picks}), confidence=confidence)
                 for confidence, picks, _ in wanted]
        await self.stage_and_decide(kinds.CLAIMS, {i["id"]: yes for i, (*_, yes) in zip(items, wanted, strict=True)},
                                    claims=items)

    async def _relations(self, wanted: list[tuple[int, int, str, bool]]) -> None:
        ends = await self.active(claims, "claim_id")
        items, accepted = [], {}
        for source, target, relation_type, yes in wanted:
            if ends and ends[source % len(ends)] != ends[target % len(ends)]:
                items.append(relation_item(self.new_id("r"), ends[source % len(ends)], ends[target % len(ends)],
                                           relation_type))
                accepted[items[-1]["id"]] = yes
        if items:
            await self.stage_and_decide(kinds.RELATIONS, accepted, relations=items)

    async def _merge(self, picks: list[int], yes: bool) -> None:
        ends = await self.active(claims, "claim_id")
        members = sorted({ends[p % len(ends)] for p in picks}) if ends else []
        if len(members) >= 2:
            group = merge_item(self.new_id("g"), members)
            await self.stage_and_decide(kinds.MERGE_GROUPS, {group["groupId"]: yes}, groups=[group])

    async def _verdict(self, source: int, bases: list[tuple[int, str]], yes: bool) -> None:
        cited, ends = await self.active(sources, "source_id"), await self.active(claims, "claim_id")
        if not cited or not ends:
            return
        verdict_id = self.new_id("v")
        relations = [relation_item(self.new_id("r"), ends[p % len(ends)], verdict_id, t) for p, t in bases]
        await self.stage_and_decide(kinds.VERDICT, {verdict_id: yes}, relations=relations,
                                    claim=verdict_claim(verdict_id, [cited[source % len(cited)]]))

    async def _retire(self, record: str, which: int) -> None:
        found = await self.active(*((sources, "source_id") if record == "source" else (claims, "claim_id")))
        if found:
            await self.retire([(record, found[which % len(found)])])

    async def retire(self, records: list[tuple[str, str]]) -> None:
        await review.retire_records(RetireRecords(actor=REVIEWER, case_id=self.case_id, note="history", records=[
            {"record": record, "id": record_id} for record, record_id in records]), self.review())

    async def cited_sources(self, claim_ids: list[str] | None = None) -> dict[str, list[str]]:
        """Per active claim (of these, or any but the verdict), the active sources it cites."""
        chosen = claims.c.kind != "verdict" if claim_ids is None else claims.c.claim_id.in_(claim_ids)
        query = (select(claim_sources.c.claim_id, claim_sources.c.source_id)
                 .join(sources, and_(sources.c.case_id == claim_sources.c.case_id,
                                     sources.c.source_id == claim_sources.c.source_id))
                 .join(claims, and_(claims.c.case_id == claim_sources.c.case_id,
                                    claims.c.claim_id == claim_sources.c.claim_id))
                 .where(claim_sources.c.case_id == self.case_id, sources.c.status == "active",
                        claims.c.status == "active", chosen)
                 .order_by(claim_sources.c.claim_id, claim_sources.c.source_id))
        async with self.db.engine.connect() as connection:
            found: dict[str, list[str]] = {}
            for row in await connection.execute(query):
                found.setdefault(row.claim_id, []).append(row.source_id)
            return found

    async def _retire_lonely(self, which: int) -> None:
        """Retire the only active source of a claim: the claim is left unsupported."""
        lonely = sorted(sources_of[0] for sources_of in (await self.cited_sources()).values() if len(sources_of) == 1)
        if lonely:
            await self.retire([("source", lonely[which % len(lonely)])])

    async def _retire_basis(self, which: int, what: str) -> None:
        """Retire a claim the verdict rests on, or every active source it cites: the verdict is weakened."""
        async with self.db.engine.connect() as connection:
            bases = list((await connection.execute(  # a superseded verdict can be the basis of the next one
                select(relations.c.source_claim_id)
                .join(claims, and_(claims.c.case_id == relations.c.case_id,
                                   claims.c.claim_id == relations.c.source_claim_id))
                .where(relations.c.case_id == self.case_id, relations.c.status == "active", relations.c.verdict_basis,
                       claims.c.status == "active")
                .order_by(relations.c.relation_id))).scalars())
        if not bases:
            return
        claim_id = bases[which % len(bases)]
        cited = (await self.cited_sources([claim_id])).get(claim_id, [])
        await self.retire([("claim", claim_id)] if what == "claim" or not cited else [("source", s) for s in cited])

    async def _focus(self, focus: str) -> None:
        await use_cases.set_focus(ToolRequest(actor=AGENT, args=SetFocusArgs(expected_case_id=self.case_id, focus=focus),
                                              discovered_case_id=self.case_id), self.projection())

    async def _late(self) -> None:
        """Nothing now: the next operation's events reach the projection after a read caught up."""

    async def _lost(self) -> None:
        """Nothing now: the next operation's events never reach the projection."""

    async def view(self) -> dict[str, Any]:
        """Every row of the case's view, and get_workspace as an agent reads it."""
        answer = await use_cases.get_workspace(ToolRequest(actor=AGENT, args=GetWorkspaceArgs(scope="all")),
                                               self.projection())
        async with self.projection().read() as uow:
            rows = await uow.views.everything(self.case_id)
            connection = uow.search.connection  # the search index too: its records and its words' counts
            index = (await connection.execute(text(
                "SELECT kind, record_id, proposal_id, status, headline, body, plain, tsv::text, dup_key FROM search_records "
                "WHERE case_id = :c ORDER BY kind, record_id, proposal_id"), {"c": self.case_id})).all()
            words = (await connection.execute(text(
                "SELECT word, n FROM search_words WHERE case_id = :c AND n <> 0 ORDER BY word"),
                {"c": self.case_id})).all()
            return {"rows": rows, "workspace": answer, "search": [tuple(r) for r in index],
                    "words": [tuple(w) for w in words]}


def claims_by_the_read_rules(snapshot: domain.LedgerSnapshot, focus: str, cap: int) -> dict[str, Any]:
    """Every claim but the verdict as the read rules order and describe them over the whole ledger."""
    ordered = [c for c in domain.focus_order(snapshot, focus) if not c.is_verdict]
    listed, omitted = domain.capped(ordered, cap)
    support = domain.support(snapshot)
    groups_of: dict[str, list[str]] = {}
    for group_id, members in snapshot.groups.items():
        for member in members:
            groups_of.setdefault(member, []).append(group_id)
    open_by_claim: dict[str, list[str]] = {}
    for item in domain.unresolved(snapshot):
        if "claimId" in item:
            open_by_claim.setdefault(item["claimId"], []).append(item["type"])
    return {
        "total": len(ordered),
        "omitted": omitted,
        "items": [workspace.claim_item(c, groups_of.get(c.claim_id, []), support.get(c.claim_id, {}),
                                       open_by_claim.get(c.claim_id, [])) for c in listed],
    }


MARKS = ("grounding", "independentOrigins", "resolution")  # read from the ledger beside the view (test_grounding.py)


def unmarked(claim: dict[str, Any], marks: tuple[str, ...] = MARKS) -> dict[str, Any]:
    return {key: value for key, value in claim.items() if key not in marks}


async def agrees_with_the_read_rules(history: History, view: dict[str, Any]) -> None:
    """The view says what the read rules compute from the whole ledger."""
    workspace = view["workspace"]
    async with history.projection().read() as uow:
        snapshot = await uow.reads.snapshot(history.case_id, workspace["workspaceRevision"])
        source_list = await uow.reads.source_list(history.case_id)
        unresolved = await uow.views.unresolved_page(history.case_id, 0, 10_000)
    assert workspace["counts"] | {"unresolved": 0, "pendingProposals": 0} == domain.ledger_counts(snapshot) | {
        "unresolved": 0, "pendingProposals": 0}
    assert workspace["evidenceHealth"] == domain.evidence_health(snapshot)
    assert unmarked(workspace["verdict"], ("grounding",)) | {"pendingProposals": 0} == domain.verdict_view(snapshot) | {
        "pendingProposals": 0}
    assert unresolved == domain.unresolved(snapshot)
    focus = workspace["focus"]
    listed = [unmarked(c) for c in workspace["claims"]["items"] if c["kind"] != "verdict"]
    assert listed == claims_by_the_read_rules(snapshot, focus, domain.CLAIMS_CAP)["items"][: len(listed)]
    in_focus = domain.sources_in_focus(source_list, domain.focus_order(snapshot, focus), focus)
    assert [s["sourceId"] for s in workspace["sources"]["items"]] == [
        s["source_id"] for s in in_focus][: domain.SOURCES_CAP]
    # The reviewers' case ledger, read from the view rows, says the same as the whole ledger.
    ledger = await use_cases.case_ledger(CaseAsOf(actor=REVIEWER, case_id=history.case_id), history.projection())
    assert ledger["revision"] == snapshot.revision
    expected = claims_by_the_read_rules(snapshot, focus, use_cases.LEDGER_CLAIMS_CAP)
    assert ledger["claims"] | {"items": None} == expected | {"items": None}
    assert [{k: v for k, v in unmarked(c).items() if k != "provenance"}
            for c in ledger["claims"]["items"]] == expected["items"]
    assert all(c["provenance"]["proposalId"] for c in ledger["claims"]["items"])
    assert {k: v for k, v in unmarked(ledger["verdict"], ("grounding",)).items() if k != "provenance"} == domain.verdict_view(snapshot)
    assert [(s["sourceId"], s["derivedClaims"]) for s in ledger["sources"]] == [
        (s["source_id"], s["derived"]) for s in in_focus]
    assert sorted(r["relationId"] for r in ledger["relations"]) == sorted(r.relation_id for r in snapshot.relations)
    assert {g["groupId"]: g["members"] for g in ledger["groups"]} == {
        g: sorted(members) for g, members in snapshot.groups.items()}
    assert ledger["unresolved"] == len(domain.unresolved(snapshot))
    assert view_rows.case_rows(snapshot).counts.get("unresolved", 0) == workspace["counts"]["unresolved"]


@pytest.fixture(scope="module")
async def ledger(servers):
    deployment = await new_deployment(servers)
    db = Database.from_url(deployment.resolved_database_url(), pool_size=4)
    yield db, Origin(Subjects(deployment.nats_prefix), "tests")
    await db.dispose()
    await remove_deployment(servers, deployment)


async def kept_equals_rebuilt(ledger: tuple[Database, Origin], steps: list[tuple]) -> dict[str, Any]:
    """Run the history; its view kept change by change agrees with the read rules and with a rebuild."""
    history = History(*ledger)
    await review.create_case(CreateCase(actor=REVIEWER, case_id=history.case_id, title="Views",
                                        question="Do the views agree?"), history.review())
    for step in [("sources", [("primary", PUBLISHERS[0]), ("social", PUBLISHERS[2])]), *steps]:
        await history.run(step)
    await history.project()
    kept = await history.view()
    await agrees_with_the_read_rules(history, kept)
    async with history.projection() as uow:
        await uow.views.lock(history.case_id)
        await read_models.rebuild_case(uow, history.case_id)
        await uow.commit()
    assert await history.view() == kept
    return kept["workspace"]


@pytest.mark.slow
@settings(max_examples=HISTORIES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(steps=st.lists(operation, min_size=20, max_size=32))
async def test_the_view_kept_change_by_change_equals_the_view_rebuilt_from_the_ledger(ledger, steps):
    health = (await kept_equals_rebuilt(ledger, steps))["evidenceHealth"]
    event(f"unsupported claims: {min(health['unsupported']['total'], 2)}, verdict: {health['verdictHealth']}")


async def test_retirements_that_rerate_claims_and_the_verdict_are_kept_as_the_rebuild_has_them(ledger):
    steps = [
        ("sources", [("official", PUBLISHERS[1]), ("analysis", PUBLISHERS[3])]),  # s2, s3
        ("claims", [("supported", [1], True), ("supported", [2], True), ("disputed", [2, 3], True)]),  # c4–c6
        ("verdict", 0, [(0, "supports"), (1, "supports"), (2, "contradicts")], True),  # v7 on c4, c5, c6
        ("late",), ("retire_lonely", 0),  # s1, c4's only source: c4 unsupported, the verdict weakened
        ("retire_basis", 2, "claim"),  # c5 (bases by relation id: r10, r8, r9): its basis relation ends with it
        ("lost",), ("retire_basis", 0, "sources"),  # c6's s2 and s3: unsupported, the verdict weakened again
        ("sources", [("primary", PUBLISHERS[4])]),  # s11: its change finds the gap, caught up from the change log
    ]
    workspace = await kept_equals_rebuilt(ledger, steps)
    health = workspace["evidenceHealth"]
    assert health["unsupported"]["claimIds"] == ["c4", "c6"] and health["verdictHealth"] == "weakened"
    assert health["independentOrigins"] == 2  # s0 (Example Agency) and s11 (Daily Press) are left
    assert workspace["verdict"]["lost"][:2] == [{"record": "claim", "id": "c4"}, {"record": "source", "id": "s1"}]
    assert [(i["type"], i.get("claimId")) for i in workspace["unresolved"]["items"][:3]] == [
        ("verdict_weakened", "v7"), ("claim_unsupported", "c4"), ("claim_unsupported", "c6")]

