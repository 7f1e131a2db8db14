"""Preview, commit and review of thesis deltas against an in-memory unit of work — its clock, not a sleep."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from services.thesis_delta.repository import SqlThesisUnitOfWork
from services.thesis_delta.use_cases import (
    add_thesis_claim,
    decide_delta,
    get_company,
    get_delta,
    propose_claim_delta,
)
from shared.contracts import (
    Actor,
    AddThesisClaim,
    CompanyRef,
    DecideDelta,
    DeltaRef,
    ProposeClaimDeltaRequest,
)
from shared.errors import (
    Conflict,
    Expired,
    IdempotencyConflict,
    InvalidArgument,
    InvalidCommitToken,
    NotFound,
)
from shared.service import Meta, ServiceContext
from shared.settings import Settings
from shared.subjects import Service, Subjects
from tests.factories import preview_args
from tests.fakes import CompanyStore, FakeCompanyContexts, FakeThesisUnitOfWork

AGENT = Actor(name="agent-a", role="agent")
REVIEWER = Actor(name="rita", role="reviewer")
TTL = timedelta(minutes=10)


def thesis() -> tuple[CompanyStore, dict]:
    """A company with three thesis claims (revision 3) and a source file, as tests/factories.new_company makes."""
    store = CompanyStore()
    company = store.add_company()
    growth = store.add_thesis_claim(company.company_id, "Revenue grows 10% a year.", "INFERRED", "Growth",
                                    "https://example.org/plan")
    margins = store.add_thesis_claim(company.company_id, "Margins are stable.", "UNVERIFIED", "Margins")
    moat = store.add_thesis_claim(company.company_id, "The brand is the moat.", "CONFIRMED", "Moat",
                                  "https://example.org/survey")
    source = store.add_source_file(company.company_id)
    return store, {"companyId": company.company_id, "sourceFileId": source.source_file_id,
                   "claims": [growth.claim_id, margins.claim_id, moat.claim_id]}


async def call(store: CompanyStore, args: dict, **uow) -> dict:
    return await propose_claim_delta(ProposeClaimDeltaRequest(actor=AGENT, args=args), FakeThesisUnitOfWork(store, ttl=TTL, **uow))


def commit_of(preview: dict, token: str | None = None) -> dict:
    return {"mode": "commit", "operationId": preview["operationId"], "commitToken": token or preview["commitToken"]}


async def decide(store: CompanyStore, operation_id: str, decision: str, note: str | None = None) -> dict:
    return await decide_delta(DecideDelta(actor=REVIEWER, operation_id=operation_id, decision=decision, note=note),
                              FakeThesisUnitOfWork(store))


def event_types(store: CompanyStore) -> list[tuple[str, int]]:
    return [(e.event_type.value, e.envelope["revision"]) for e in store.outbox]


async def test_a_preview_stores_one_operation_and_a_retry_returns_it_with_the_same_token():
    store, company = thesis()
    preview = await call(store, preview_args(company, "key-1"))
    assert preview["status"] == "previewed" and preview["baseRevision"] == 3
    assert preview["expiresAt"] == (store.operations[preview["operationId"]].created_at + TTL).isoformat()
    assert [c["claimId"] for c in preview["delta"]["claims"]["retired"]] == [company["claims"][1]]
    retry = await call(store, preview_args(company, "key-1"))
    assert (retry["operationId"], retry["commitToken"]) == (preview["operationId"], preview["commitToken"])
    assert len(store.operations) == 1 and store.outbox == []  # a preview changes nothing anyone subscribes to


async def test_the_same_key_with_another_payload_is_an_idempotency_conflict_and_stores_nothing():
    store, company = thesis()
    first = await call(store, preview_args(company, "key-1"))
    with pytest.raises(IdempotencyConflict) as conflict:
        await call(store, preview_args(company, "key-1", summary="A different summary."))
    assert conflict.value.field == "idempotencyKey" and "key-1" in conflict.value.message
    assert list(store.operations) == [first["operationId"]]
    other_key = await call(store, preview_args(company, "key-2", summary="A different summary."))
    assert other_key["operationId"] != first["operationId"] and other_key["commitToken"] != first["commitToken"]


async def test_a_commit_with_a_token_of_another_operation_is_refused_and_commits_nothing():
    store, company = thesis()
    first = await call(store, preview_args(company, "key-1"))
    second = await call(store, preview_args(company, "key-2"))
    for token in (second["commitToken"], first["commitToken"][:-2] + "xx"):
        with pytest.raises(InvalidCommitToken) as refused:
            await call(store, commit_of(first, token))
        assert refused.value.field == "commitToken"
    assert store.operations[first["operationId"]].status == "previewed" and store.outbox == []


async def test_a_commit_is_idempotent_one_committed_delta_one_event():
    store, company = thesis()
    preview = await call(store, preview_args(company, "key-1"))
    committed = await call(store, commit_of(preview))
    again = await call(store, commit_of(preview))
    assert committed["status"] == again["status"] == "committed" and committed["delta"] == preview["delta"]
    assert again["committedAt"] == committed["committedAt"]
    assert "waits for human review" in again["next"]
    assert event_types(store) == [("threadline.thesis.delta.committed", 3)]
    assert store.events("threadline.thesis.delta.committed")[0]["data"]["delta"] == preview["delta"]
    after = await call(store, preview_args(company, "key-1"))  # the key still names the committed operation
    assert (after["operationId"], after["status"]) == (preview["operationId"], "committed")


async def test_a_commit_after_the_thesis_moved_is_refused_as_stale():
    store, company = thesis()
    preview = await call(store, preview_args(company, "key-1", proposedClaims=[], affectedClaimIds=[]))
    await add_thesis_claim(AddThesisClaim(actor=Actor(name="op", role="admin"), company_id=company["companyId"],
                                          text="New fact.", label="CONFIRMED", section="Moat"),
                           FakeThesisUnitOfWork(store))
    with pytest.raises(Conflict) as stale:
        await call(store, commit_of(preview))
    assert "preview again" in stale.value.hint
    assert stale.value.details == {"baseRevision": 3, "currentRevision": 4}
    assert store.operations[preview["operationId"]].status == "previewed"
    assert event_types(store) == [("threadline.thesis.changed", 4)]


async def test_a_commit_after_expiry_is_refused():
    store, company = thesis()
    preview = await call(store, preview_args(company, "key-1"))
    store.clock += TTL  # the unit of work's clock moves on; nothing sleeps
    with pytest.raises(Expired) as expired:
        await call(store, commit_of(preview))
    assert expired.value.code == "expired" and "preview" in expired.value.hint
    assert store.operations[preview["operationId"]].status == "previewed" and store.outbox == []
    shown = await get_delta(DeltaRef(actor=REVIEWER, operation_id=preview["operationId"]), FakeThesisUnitOfWork(store))
    assert shown["status"] == "expired"


async def test_the_preview_context_is_the_projections_with_the_touched_claims_as_they_read_now():
    store, company = thesis()
    growth, margins, moat = company["claims"]
    preview = await call(store, preview_args(company, "key-1", affectedClaimIds=[growth, moat]))
    context = preview["context"]
    assert context["counts"] == {"activeClaims": 3, "retiredClaims": 0, "sourceFiles": 1, "pendingDeltas": 0,
                                 "reviews": 0}
    assert context["evidenceHealth"] == {"unverifiedClaims": 1, "inferredClaims": 1, "claimsWithoutSource": 1,
                                         "retiredClaims": 0, "pendingDeltas": 0}
    assert [(c["claimId"], c["revision"], c["changedSincePreview"]) for c in context["touchedClaims"]["items"]] == [
        (growth, 1, False), (moat, 3, False), (margins, 2, False)]


async def test_a_preview_answers_without_context_when_the_projection_does_not():
    store, company = thesis()
    down = FakeCompanyContexts(store, unavailable="no projection service is running")
    preview = await call(store, preview_args(company, "key-1"), contexts=down)
    assert preview["status"] == "previewed" and preview["commitToken"]
    assert preview["context"] == {"unavailable": "no projection service is running",
                                  "hint": "call get_company_context for the thesis around it"}


async def test_accepting_applies_every_claim_change_in_one_revision_and_emits_change_then_decision():
    store, company = thesis()
    growth, margins, moat = company["claims"]
    preview = await call(store, preview_args(company, "key-1"))
    await call(store, commit_of(preview))
    accepted = await decide(store, preview["operationId"], "accept", "Matches the filing.")
    assert (accepted["status"], accepted["thesisRevision"], accepted["revisionAfter"]) == ("accepted", 4, 4)
    claims = store.thesis_claims[company["companyId"]]
    assert (claims[growth].text, claims[growth].label, claims[growth].revision) == (
        "Revenue grows 14% a year.", "CONFIRMED", 4)
    assert claims[margins].status == "retired" and claims[moat].revision == 3
    (added,) = [c for c in claims.values() if c.claim_id not in company["claims"]]
    assert added.text == "Services attach rate drives growth." and added.source_url == "https://example.org/q3"
    assert [(h["action"], h["revision"], h["operationId"]) for h in store.claim_history] == [
        ("add", 4, preview["operationId"]), ("update", 4, preview["operationId"]),
        ("retire", 4, preview["operationId"])]
    assert event_types(store)[1:] == [("threadline.thesis.changed", 4), ("threadline.thesis.delta.decided", 3)]
    changed = store.events("threadline.thesis.changed")[0]["data"]
    assert changed["changes"]["added"][0]["claimId"] == added.claim_id and changed["reviewer"] == "rita"
    again = await call(store, commit_of(preview))
    assert again["status"] == "accepted" and again["next"] == "This operation was already decided: accepted."
    assert again["context"]["recentReviews"]["items"][0]["note"] == "Matches the filing."


async def test_a_rejection_records_its_reason_and_leaves_the_thesis_as_it_was():
    store, company = thesis()
    preview = await call(store, preview_args(company, "key-1"))
    await call(store, commit_of(preview))
    rejected = await decide(store, preview["operationId"], "reject", "The filing says 12%, not 14%.")
    assert (rejected["status"], rejected["thesisRevision"], rejected["note"]) == (
        "rejected", 3, "The filing says 12%, not 14%.")
    assert "revisionAfter" not in rejected and store.claim_history == []
    assert store.companies[company["companyId"]].thesis_revision == 3
    with pytest.raises(Conflict) as twice:
        await decide(store, preview["operationId"], "accept")
    assert twice.value.message.startswith("the delta was already rejected by rita at 20")
    assert twice.value.field == "operationId" and "new delta" in twice.value.hint


async def test_a_delta_is_named_by_a_unique_prefix_of_its_id_and_an_ambiguous_one_lists_the_candidates():
    store, company = thesis()
    whole = (await call(store, preview_args(company, "key-1")))["operationId"]

    def twin(twin_id: str) -> None:
        store.operations[twin_id] = replace(store.operations[whole], operation_id=twin_id)

    await assert_named_by_prefix(
        lambda prefix: get_delta(DeltaRef(actor=REVIEWER, operation_id=prefix), FakeThesisUnitOfWork(store)),
        "operationId", whole, twin)


async def test_a_company_is_named_by_a_unique_prefix_of_its_id_and_an_ambiguous_one_lists_the_candidates():
    store, ids = thesis()
    whole = ids["companyId"]

    def twin(twin_id: str) -> None:
        store.companies[twin_id] = replace(store.companies[whole], company_id=twin_id, ticker="TWIN")

    await assert_named_by_prefix(
        lambda prefix: get_company(CompanyRef(actor=REVIEWER, company_id=prefix), FakeThesisUnitOfWork(store)),
        "companyId", whole, twin)


async def assert_named_by_prefix(read, field: str, whole: str, add_twin) -> None:  # noqa: ANN001
    """Eight characters of the id name the record; once a second record's id starts the same way, they are
    refused naming both; a prefix of none is not found."""
    assert (await read(whole[:8]))[field] == whole
    twin = whole[:8] + "-0000-4000-8000-000000000000"
    add_twin(twin)
    with pytest.raises(InvalidArgument) as ambiguous:
        await read(whole[:8])
    assert ambiguous.value.field == field
    assert whole in ambiguous.value.message and twin in ambiguous.value.message
    for unknown in ("ffff" if not whole.startswith("ffff") else "0000", "not-hex", ""):
        with pytest.raises(NotFound):
            await read(unknown)


async def test_only_a_committed_delta_that_still_applies_can_be_accepted():
    store, company = thesis()
    preview = await call(store, preview_args(company, "key-1"))
    with pytest.raises(Conflict) as uncommitted:
        await decide(store, preview["operationId"], "accept")
    assert "commit" in uncommitted.value.hint
    await call(store, commit_of(preview))
    other = await call(store, preview_args(company, "key-2", proposedClaims=[], affectedClaimIds=[]))
    await call(store, commit_of(other))
    await decide(store, other["operationId"], "accept")  # the thesis moves to revision 4
    with pytest.raises(Conflict) as stale:
        await decide(store, preview["operationId"], "accept")
    assert stale.value.details == {"baseRevision": 3, "currentRevision": 4}
    assert store.operations[preview["operationId"]].status == "committed"


def test_the_sql_unit_of_work_takes_the_ttl_and_the_secret_from_the_settings():
    settings = Settings(secret="s3cret", operation_ttl_seconds=1)
    uow = SqlThesisUnitOfWork.of(ServiceContext(Service.THESIS_DELTA, settings, None, Subjects("t")), Meta())
    assert (uow.operation_ttl, uow.secret) == (timedelta(seconds=1), b"s3cret")
