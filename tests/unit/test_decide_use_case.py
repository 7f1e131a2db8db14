"""The decide use case against an in-memory unit of work: one revision per decision, items installed whole."""

from __future__ import annotations

from dataclasses import replace

import pytest

from services.review.use_cases import decide
from services.staging.use_cases import stage
from shared import kinds
from shared.contracts import Actor, Decide, ToolRequest
from shared.errors import InvalidArgument, NotFound, StaleRevision
from tests.factories import claim_item, relation_item, source_item, verdict_claim
from tests.fakes import FakeReviewUnitOfWork, FakeStagingUnitOfWork, Store

AGENT = Actor(name="agent-a", role="agent")
REVIEWER = Actor(name="rita", role="reviewer")


def ledger() -> Store:
    store = Store()
    store.add_case("case-a")
    store.add_record("case-a", "source", "s1")
    store.add_record("case-a", "claim", "c1", kind="observation", sources=["s1"])
    store.add_record("case-a", "claim", "c2", kind="observation", sources=["s1"])
    return store


async def staged(store: Store, kind: kinds.ItemKind, **items) -> str:
    revision = store.cases["case-a"]["revision"]
    args = kind.arguments.model_validate({"expectedCaseId": "case-a", "expectedRevision": revision, **items})
    answer = await stage(kind, ToolRequest(actor=AGENT, args=args, discovered_case_id="case-a"),
                         FakeStagingUnitOfWork(store))
    return answer["proposalId"]


def decision(proposal_id: str, revision: int, accept=(), reject=(), note=None) -> Decide:
    return Decide(actor=REVIEWER, proposal_id=proposal_id, accept=list(accept), reject=list(reject), note=note,
                  expected_revision=revision)


async def test_accepting_installs_the_items_in_one_revision_with_its_change_log_and_events():
    store = ledger()
    proposal = await staged(store, kinds.SOURCES, sources=[source_item("s2"), source_item("s3")])
    answer = await decide(decision(proposal, 0, accept=["s2"], reject=["s3"], note="s3 is a copy"),
                          FakeReviewUnitOfWork(store))
    assert (answer["revision"], answer["accepted"], answer["rejected"], answer["recorded"]) == (1, ["s2"], ["s3"], True)
    assert answer["status"] == "partially_accepted"
    assert store.status("case-a", "source", "s2") == "active" and store.status("case-a", "source", "s3") is None
    (step,) = store.change_log
    assert (step.revision, step.decision_id) == (1, answer["decisionId"])
    types = [e.event_type.value for e in store.outbox if e.event_type.value != "threadline.proposal.staged"]
    assert types == ["threadline.ledger.changed", "threadline.proposal.decided"]
    changed = store.events("threadline.ledger.changed")[0]
    assert changed["revision"] == 1 and changed["data"]["changes"]["sourcesAdded"][0]["provenance"]["decidedBy"] == "rita"


async def test_an_item_that_no_longer_fits_is_refused_and_a_decision_of_refusals_stores_nothing():
    store = ledger()
    proposal = await staged(store, kinds.CLAIMS, claims=[claim_item("c3", ["s1"])])
    store.records[("case-a", "source", "s1")]["status"] = "retired"  # the ledger moved on after staging
    answer = await decide(decision(proposal, 0, accept=["c3"], note="looks fine"), FakeReviewUnitOfWork(store))
    assert answer["recorded"] is False and answer["decisionId"] is None
    assert answer["refused"][0]["itemId"] == "c3" and "retired" in answer["refused"][0]["reason"]
    assert store.decisions == [] and store.change_log == [] and store.cases["case-a"]["revision"] == 0


async def test_a_decision_on_a_stale_view_is_refused_whole():
    store = ledger()
    proposal = await staged(store, kinds.SOURCES, sources=[source_item("s2")])
    store.cases["case-a"]["revision"] = 4
    with pytest.raises(StaleRevision):
        await decide(decision(proposal, 3, accept=["s2"]), FakeReviewUnitOfWork(store))
    assert store.decisions == [] and store.status("case-a", "source", "s2") is None


async def test_a_new_verdict_supersedes_the_old_one_and_ends_its_links():
    store = ledger()
    first = await staged(store, kinds.VERDICT, claim=verdict_claim("v1", ["s1"]),
                         relations=[relation_item("r1", "c1", "v1")])
    await decide(decision(first, 0, accept=["v1"]), FakeReviewUnitOfWork(store))
    second = await staged(store, kinds.VERDICT, claim=verdict_claim("v2", ["s1"]),
                          relations=[relation_item("r2", "c2", "v2")])
    answer = await decide(decision(second, 1, accept=["v2"]), FakeReviewUnitOfWork(store))
    assert answer["revision"] == 2
    assert store.status("case-a", "claim", "v1") == "superseded" and store.status("case-a", "relation", "r1") == "retired"
    changes = store.events("threadline.ledger.changed")[-1]["data"]["changes"]
    assert changes["superseded"] == [{"record": "claim", "id": "v1", "supersededBy": "v2"}]
    assert changes["claimsAdded"][0]["bases"] == ["r2"]


async def test_an_identical_decision_sent_again_returns_the_recorded_one_even_after_the_ledger_moved():
    store = ledger()
    proposal = await staged(store, kinds.SOURCES, sources=[source_item("s2"), source_item("s3")])
    first = await decide(decision(proposal, 0, accept=["s2"], note="primary"), FakeReviewUnitOfWork(store))
    other = await staged(store, kinds.SOURCES, sources=[source_item("s4")])
    await decide(decision(other, 1, accept=["s4"]), FakeReviewUnitOfWork(store))
    again = await decide(decision(proposal, 0, accept=["s2"], note="primary"), FakeReviewUnitOfWork(store))
    assert again["decisionId"] == first["decisionId"] and again["replayed"] is True
    assert (again["revision"], again["accepted"]) == (1, ["s2"])
    assert len(store.decisions) == 2 and store.cases["case-a"]["revision"] == 2


async def test_a_proposal_is_decided_by_a_unique_prefix_of_its_id_and_an_ambiguous_prefix_is_refused():
    store = ledger()
    proposal = await staged(store, kinds.SOURCES, sources=[source_item("s2")])
    answer = await decide(decision(proposal[:8], 0, accept=["s2"]), FakeReviewUnitOfWork(store))
    assert answer["proposalId"] == proposal and answer["accepted"] == ["s2"]
    twin = proposal[:8] + "-0000-4000-8000-000000000000"
    store.proposals[twin] = replace(store.proposals[proposal], proposal_id=twin)
    with pytest.raises(InvalidArgument) as ambiguous:
        await decide(decision(proposal[:8], 1, reject=["s2"]), FakeReviewUnitOfWork(store))
    assert ambiguous.value.field == "proposalId"
    assert f"several proposal ids: {min(proposal, twin)}, {max(proposal, twin)}" in ambiguous.value.message
    with pytest.raises(NotFound) as unknown:
        await decide(decision("zz" + proposal[2:8], 1, reject=["s2"]), FakeReviewUnitOfWork(store))
    assert unknown.value.field == "proposalId"
