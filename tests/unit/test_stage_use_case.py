"""The stage use case against an in-memory unit of work: what is stored, what is refused, what is emitted."""

from __future__ import annotations

import pytest

from services.review.use_cases import decide
from services.staging.use_cases import stage
from shared import kinds
from shared.contracts import Actor, Decide, ToolRequest
from shared.errors import InvalidArgument, StaleRevision, WrongCase
from tests.factories import claim_item, relation_item, source_item, verdict_claim
from tests.fakes import FakeReviewUnitOfWork, FakeStagingUnitOfWork, Store

AGENT = Actor(name="agent-a", role="agent", token_id="00000000-0000-4000-8000-000000000001")
REVIEWER = Actor(name="rita", role="reviewer")


def ledger(revision: int = 2) -> Store:
    store = Store()
    store.add_case("case-a", revision=revision)
    store.add_record("case-a", "source", "s1")
    store.add_record("case-a", "source", "s-old", status="retired")
    store.add_record("case-a", "claim", "c1", kind="observation")
    store.add_record("case-a", "claim", "c2", kind="observation")
    return store


def call(kind: kinds.ItemKind, revision: int = 2, discovered: str | None = "case-a", **items) -> ToolRequest:
    args = kind.arguments.model_validate({"expectedCaseId": "case-a", "expectedRevision": revision, **items})
    return ToolRequest(actor=AGENT, args=args, discovered_case_id=discovered)


async def test_a_fitting_call_is_stored_as_one_pending_proposal_with_its_event():
    store = ledger()
    answer = await stage(kinds.CLAIMS, call(kinds.CLAIMS, claims=[claim_item("c3", ["s1"]), claim_item("c4", ["s1"])]),
                         FakeStagingUnitOfWork(store))
    assert answer["status"] == "pending" and answer["pinnedRevision"] == 2
    assert [i["itemId"] for i in answer["items"]] == ["c3", "c4"]
    stored = store.proposals[answer["proposalId"]]
    assert (stored.kind, stored.agent_name, stored.correlation_id) == ("claims", "agent-a", "corr-1")
    (staged,) = store.events("threadline.proposal.staged")
    assert staged["data"]["itemIds"] == ["c3", "c4"] and staged["revision"] == 2
    assert store.cases["case-a"]["revision"] == 2  # staging never moves the ledger


async def test_every_misfit_of_the_call_is_named_in_one_refusal_and_nothing_is_stored():
    store = ledger()
    bad = [claim_item("c1", ["s1"]), claim_item("c5", ["nope", "s-old"]), claim_item("c5", ["s1"])]
    with pytest.raises(InvalidArgument) as refused:
        await stage(kinds.CLAIMS, call(kinds.CLAIMS, claims=bad), FakeStagingUnitOfWork(store))
    fields = [p["field"] for p in refused.value.problems]
    assert fields == ["claims[2].id", "claims[0].id", "claims[1].sourceIds[0]", "claims[1].sourceIds[1]"]
    assert "nothing was staged" in refused.value.message
    assert store.proposals == {} and store.outbox == []


async def test_a_call_pinned_ahead_of_the_case_or_to_another_case_is_refused():
    store = ledger(revision=3)
    relation = {"relations": [relation_item("r1", "c1", "c2")]}
    with pytest.raises(StaleRevision) as stale:
        await stage(kinds.RELATIONS, call(kinds.RELATIONS, revision=4, **relation), FakeStagingUnitOfWork(store))
    assert stale.value.details == {"currentRevision": 3}
    with pytest.raises(WrongCase):
        await stage(kinds.RELATIONS, call(kinds.RELATIONS, revision=3, discovered="case-b", **relation),
                    FakeStagingUnitOfWork(store))
    assert store.outbox == []


async def test_a_call_pinned_behind_is_rebased_when_nothing_it_depends_on_changed():
    store = ledger()
    moved = await stage(kinds.SOURCES, call(kinds.SOURCES, sources=[source_item("s9")]), FakeStagingUnitOfWork(store))
    await decide(Decide(actor=REVIEWER, proposal_id=moved["proposalId"], accept=["s9"], expected_revision=2),
                 FakeReviewUnitOfWork(store))
    answer = await stage(kinds.CLAIMS, call(kinds.CLAIMS, revision=2, claims=[claim_item("c3", ["s1"])]),
                         FakeStagingUnitOfWork(store))
    assert (answer["pinnedRevision"], answer["workspaceRevision"]) == (2, 3)
    assert answer["rebased"]["changes"] == {"sourcesAdded": {"count": 1, "first": ["s9"]}}
    staged = store.events("threadline.proposal.staged")[-1]
    assert staged["revision"] == 3 and staged["data"]["pinnedRevision"] == 2 and staged["data"]["stagedRevision"] == 3


async def test_a_call_whose_cited_record_changed_after_its_pin_is_refused_naming_it():
    store = ledger(revision=5)
    store.records[("case-a", "claim", "c1")].update(status="retired", ended=4)  # retired after the pin
    store.add_record("case-a", "source", "s-new", revision=5)  # created after the pin
    with pytest.raises(StaleRevision) as stale:
        await stage(kinds.RELATIONS, call(kinds.RELATIONS, revision=3,
                                          relations=[relation_item("r1", "c1", "c2")]), FakeStagingUnitOfWork(store))
    assert stale.value.details["changed"] == [{"record": "claim", "id": "c1", "change": "retired", "revision": 4}]
    with pytest.raises(StaleRevision) as stale:
        await stage(kinds.CLAIMS, call(kinds.CLAIMS, revision=3, claims=[claim_item("c9", ["s1", "s-new"])]),
                    FakeStagingUnitOfWork(store))
    assert "source 's-new' created at revision 5" in stale.value.message
    assert store.proposals == {} and store.outbox == []


async def test_a_verdict_staged_behind_a_verdict_accepted_since_its_pin_says_so_in_words():
    store = ledger(revision=5)
    store.add_record("case-a", "claim", "v0", kind="verdict", revision=4)
    patch = {"claim": verdict_claim("v1", ["s1"]), "relations": [relation_item("r1", "c1", "v1")]}
    with pytest.raises(StaleRevision) as stale:
        await stage(kinds.VERDICT, call(kinds.VERDICT, revision=3, **patch), FakeStagingUnitOfWork(store))
    assert "the case's verdict changed at revision 4 (one was accepted or superseded)" in stale.value.message
    assert "'slot'" not in stale.value.message
    assert stale.value.details["changed"] == [{"record": "verdict", "id": "slot", "change": "changed", "revision": 4}]


async def test_an_identical_call_returns_the_first_proposal_and_stores_nothing_new():
    store = ledger()
    first = await stage(kinds.CLAIMS, call(kinds.CLAIMS, claims=[claim_item("c3", ["s1"])]), FakeStagingUnitOfWork(store))
    again = await stage(kinds.CLAIMS, call(kinds.CLAIMS, claims=[claim_item("c3", ["s1"])]), FakeStagingUnitOfWork(store))
    assert again["proposalId"] == first["proposalId"] and again["replayed"] is True
    assert len(store.proposals) == 1 and len(store.events("threadline.proposal.staged")) == 1


async def test_a_verdict_is_one_item_named_by_its_claim():
    store = ledger()
    patch = {"claim": verdict_claim("v1", ["s1"]), "relations": [relation_item("r1", "c1", "v1")]}
    answer = await stage(kinds.VERDICT, call(kinds.VERDICT, **patch), FakeStagingUnitOfWork(store))
    assert [i["itemId"] for i in answer["items"]] == ["v1"]
    assert store.proposals[answer["proposalId"]].items[0].payload["relations"][0]["id"] == "r1"
