"""The stage use case against an in-memory unit of work: what is stored, what is refused, what is emitted."""

from __future__ import annotations

import pytest

from services.staging.use_cases import stage
from shared import kinds
from shared.contracts import Actor, ToolRequest
from shared.errors import InvalidArgument, StaleRevision, WrongCase
from tests.factories import claim_item, relation_item, verdict_claim
from tests.fakes import FakeStagingUnitOfWork, Store

AGENT = Actor(name="agent-a", role="agent", token_id="00000000-0000-4000-8000-000000000001")


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


async def test_a_call_pinned_to_another_revision_or_case_is_refused():
    store = ledger(revision=3)
    relation = {"relations": [relation_item("r1", "c1", "c2")]}
    with pytest.raises(StaleRevision) as stale:
        await stage(kinds.RELATIONS, call(kinds.RELATIONS, revision=2, **relation), FakeStagingUnitOfWork(store))
    assert stale.value.details == {"currentRevision": 3}
    with pytest.raises(WrongCase):
        await stage(kinds.RELATIONS, call(kinds.RELATIONS, revision=3, discovered="case-b", **relation),
                    FakeStagingUnitOfWork(store))
    assert store.outbox == []


async def test_a_verdict_is_one_item_named_by_its_claim():
    store = ledger()
    patch = {"claim": verdict_claim("v1", ["s1"]), "relations": [relation_item("r1", "c1", "v1")]}
    answer = await stage(kinds.VERDICT, call(kinds.VERDICT, **patch), FakeStagingUnitOfWork(store))
    assert [i["itemId"] for i in answer["items"]] == ["v1"]
    assert store.proposals[answer["proposalId"]].items[0].payload["relations"][0]["id"] == "r1"
