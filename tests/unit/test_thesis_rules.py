"""Thesis rules: delta checks, the diff they produce, idempotency digests and commit tokens."""

from __future__ import annotations

import pytest

from services.thesis_delta import domain, use_cases
from services.thesis_delta.repository import SqlThesisUnitOfWork
from shared.contracts import Actor, DecideDelta
from shared.errors import IdempotencyConflict, InvalidArgument, InvalidCommitToken
from shared.replies import CompanyContext
from shared.service import Meta, ServiceContext
from shared.settings import Settings
from shared.subjects import Service, Subjects

A, B, C = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222", \
    "33333333-3333-4333-8333-333333333333"
CLAIMS = {
    A: domain.ThesisClaim(A, "Old text.", "INFERRED", "Growth", "https://x.org/a", "active"),
    B: domain.ThesisClaim(B, "Gone.", "UNVERIFIED", "Risk", None, "retired"),
    C: domain.ThesisClaim(C, "Margins hold.", "CONFIRMED", "Margins", None, "active"),
}
SOURCE = domain.SourceFile("f1", "co", "Q3", "https://x.org/q3")


def payload(*proposed, **extra):
    return {"companyId": "co", "sourceFileId": "f1", "category": "weakened", "summary": "s",
            "idempotencyKey": "k", "mode": "preview", "proposedClaims": list(proposed), **extra}


def change(action, target=None, text="New text."):
    return {"text": text, "label": "CONFIRMED", "section": "Growth", "action": action,
            **({"targetClaimId": target} if target else {})}


def test_a_delta_is_a_diff_of_the_thesis():
    delta = domain.build_delta(payload(change("update", A), change("add"), change("retire", C, "no longer")),
                               CLAIMS, SOURCE, 5)
    assert delta["baseRevision"] == 5
    assert delta["claims"]["updated"][0]["before"]["text"] == "Old text."
    assert delta["claims"]["updated"][0]["after"]["text"] == "New text."
    assert delta["claims"]["updated"][0]["after"]["sourceUrl"] == "https://x.org/a"  # kept when not given
    assert delta["claims"]["added"][0]["sourceUrl"] == "https://x.org/q3"  # the source file's, when not given
    assert delta["claims"]["retired"] == [{"claimId": C, "before": CLAIMS[C].public(), "reason": "no longer"}]


@pytest.mark.parametrize(("proposed", "field"), [
    ([change("update")], "proposedClaims[0].targetClaimId"),
    ([change("add", A)], "proposedClaims[0].targetClaimId"),
    ([change("retire", B)], "proposedClaims[0].targetClaimId"),
    ([change("update", "44444444-4444-4444-8444-444444444444")], "proposedClaims[0].targetClaimId"),
    ([change("update", A), change("retire", A)], "proposedClaims[1].targetClaimId"),
])
def test_invalid_claim_changes_are_refused_naming_the_item(proposed, field):
    with pytest.raises(InvalidArgument) as refused:
        domain.build_delta(payload(*proposed), CLAIMS, SOURCE, 0)
    assert refused.value.field == field


def test_the_source_file_must_be_the_companys_and_match_what_the_agent_cites():
    domain.check_source_file(payload(), SOURCE, "co")
    with pytest.raises(InvalidArgument) as refused:
        domain.check_source_file(payload(), SOURCE, "other-co")
    assert refused.value.field == "sourceFileId"
    for bad, field in ((payload(sourceUrl="https://other.org"), "sourceUrl"), (payload(sourceTitle="Q4"), "sourceTitle")):
        with pytest.raises(InvalidArgument) as refused:
            domain.build_delta(bad, CLAIMS, SOURCE, 0)
        assert refused.value.field == field


def test_every_fault_of_a_delta_is_named_in_one_refusal():
    bad = payload(change("update"), change("update", A), change("retire", A), change("retire", B),
                  sourceUrl="https://other.org", affectedClaimIds=[C, "44444444-4444-4444-8444-444444444444", C])
    with pytest.raises(InvalidArgument) as refused:
        domain.build_delta(bad, CLAIMS, SOURCE, 0)
    assert [p["field"] for p in refused.value.problems] == [
        "sourceUrl", "affectedClaimIds[1]", "affectedClaimIds[2]", "proposedClaims[0].targetClaimId",
        "proposedClaims[2].targetClaimId", "proposedClaims[3].targetClaimId"]
    assert refused.value.field == "sourceUrl" and "(and 5 more problems: see problems)" in refused.value.message


def test_the_idempotency_digest_ignores_key_order_but_not_content():
    assert domain.payload_digest({"a": 1, "b": [1, 2]}) == domain.payload_digest({"b": [1, 2], "a": 1})
    assert domain.payload_digest({"a": 1}) != domain.payload_digest({"a": 2})
    domain.check_same_payload("k", "d1", "d1")
    with pytest.raises(IdempotencyConflict, match="'k'"):
        domain.check_same_payload("k", "d1", "d2")


def test_commit_tokens_are_bound_to_the_operation_and_the_secret():
    token = domain.commit_token(b"secret", "op-1")
    domain.verify_commit_token(b"secret", "op-1", token)
    for secret, operation in ((b"secret", "op-2"), (b"other", "op-1")):
        with pytest.raises(InvalidCommitToken):
            domain.verify_commit_token(secret, operation, token)


def test_an_affected_claim_listed_twice_is_refused_naming_the_second_mention():
    with pytest.raises(InvalidArgument) as refused:
        domain.build_delta(payload(affectedClaimIds=[A, C, A.upper()]), CLAIMS, SOURCE, 0)
    assert refused.value.field == "affectedClaimIds[2]"
    assert "affectedClaimIds[0]" in refused.value.message and refused.value.hint


def test_affected_claims_are_bounded_beyond_the_schema():
    many = {f"{i:08x}-0000-4000-8000-000000000000": domain.ThesisClaim(
        f"{i:08x}-0000-4000-8000-000000000000", "t", "INFERRED", "s", None, "active")
        for i in range(domain.MAX_AFFECTED_CLAIMS + 1)}
    at_limit = list(many)[: domain.MAX_AFFECTED_CLAIMS]
    delta = domain.build_delta(payload(affectedClaimIds=at_limit), many, SOURCE, 0)
    assert [c["claimId"] for c in delta["affectedClaims"]] == at_limit
    with pytest.raises(InvalidArgument) as refused:
        domain.build_delta(payload(affectedClaimIds=list(many)), many, SOURCE, 0)
    assert refused.value.field == "affectedClaimIds" and str(domain.MAX_AFFECTED_CLAIMS) in refused.value.message


def test_the_commit_token_is_compared_in_constant_time(monkeypatch):
    calls = []

    def compare_digest(expected, given):
        calls.append((expected, given))
        return False  # the check must obey it, not compare by itself

    token = domain.commit_token(b"secret", "op-1")
    monkeypatch.setattr(domain.hmac, "compare_digest", compare_digest)
    with pytest.raises(InvalidCommitToken):
        domain.verify_commit_token(b"secret", "op-1", token)
    assert calls == [(token.encode(), token.encode())]


@pytest.mark.parametrize("note", [None, "", "   \n"])
def test_a_rejection_without_a_reason_is_refused_naming_the_note(note):
    with pytest.raises(InvalidArgument) as refused:
        domain.check_decision("reject", note)
    assert refused.value.field == "note" and "note" in refused.value.hint


async def test_deciding_a_delta_refuses_a_rejection_without_a_note_before_touching_the_database():
    no_database = ServiceContext(Service.THESIS_DELTA, Settings(secret="s"), None, Subjects("t"))
    # model_construct: the service's own rule, whatever the command contract lets through
    command = DecideDelta.model_construct(actor=Actor(name="r", role="reviewer"), operation_id=A, decision="reject",
                                          note=" ")
    with pytest.raises(InvalidArgument) as refused:
        await use_cases.decide_delta(command, SqlThesisUnitOfWork.of(no_database, Meta()))
    assert refused.value.field == "note"


def test_an_acceptance_needs_no_note_and_a_rejection_with_one_passes():
    domain.check_decision("accept", None)
    domain.check_decision("reject", "The filing says 12%, not 14%.")


WIDE = "\U0001f600"  # escaped as a surrogate pair: 12 bytes of JSON for one character


def company_context(reviews: int = 12) -> dict:
    """get_company_context's answer as it travels (reviews at their longest, the lists the block reads no
    further than their totals left empty)."""
    review = {"operationId": "op", "status": "rejected", "category": "weakened", "summary": WIDE * 300,
              "caller": "agent", "baseRevision": 1, "decidedBy": "r", "decidedAt": "2026-01-01T00:00:00+00:00",
              "note": WIDE * 2000}
    return {
        "companyId": "co", "ticker": "T", "name": "T plc", "thesisRevision": 7,
        "claims": {"total": 40, "omitted": 0, "items": []},
        "retiredClaims": {"total": 2, "omitted": 0, "items": []},
        "sourceFiles": {"total": 3, "omitted": 0, "items": []},
        "pendingDeltas": {"total": 1, "items": []},
        "recentReviews": {"total": reviews, "items": [review] * min(reviews, 10)},
        "evidenceHealth": {"unverifiedClaims": 1, "inferredClaims": 2, "claimsWithoutSource": 3,
                           "retiredClaims": 2, "pendingDeltas": 1},
        "next": "Propose a delta.",
    }


def typed(answer: dict) -> CompanyContext:
    return CompanyContext.model_validate(answer)


def current(claim_id: str, revision: int, text: str = "Now.", status: str = "active",
            section: str = "Growth") -> domain.ThesisClaim:
    return domain.ThesisClaim(claim_id, text, "INFERRED", section, None, status, revision)


def test_the_touched_claims_are_the_claims_the_delta_names_each_once():
    delta = domain.build_delta(payload(change("update", A), change("retire", C, "gone"), affectedClaimIds=[C, A]),
                               CLAIMS, SOURCE, 5)
    assert domain.touched_claim_ids(delta) == [C, A]


def test_the_context_block_reports_counts_health_reviews_and_the_touched_claims_now():
    block = domain.context_block(typed(company_context()), [current(A, 5), current(C, 6, status="retired")], 2, 5)
    assert block["thesisRevision"] == 7
    assert block["counts"] == {"activeClaims": 40, "retiredClaims": 2, "sourceFiles": 3, "pendingDeltas": 1,
                               "reviews": 12}
    assert block["evidenceHealth"] == company_context()["evidenceHealth"]
    assert [(c["claimId"], c["status"], c["changedSincePreview"]) for c in block["touchedClaims"]["items"]] == [
        (A, "active", False), (C, "retired", True)]
    assert block["recentReviews"]["omitted"] == 12 - domain.CONTEXT_REVIEWS_CAP


def test_the_context_block_is_bounded_with_omitted_counts():
    many = [current(f"{i:08x}-0000-4000-8000-000000000000", 1, text=WIDE * 5000, section=WIDE * 120)
            for i in range(400)]
    block = domain.context_block(typed(company_context()), many[: domain.TOUCHED_CLAIMS_CAP], len(many), 1)
    touched = block["touchedClaims"]
    assert (touched["total"], touched["omitted"], len(touched["items"])) == (
        400, 400 - domain.TOUCHED_CLAIMS_CAP, domain.TOUCHED_CLAIMS_CAP)
    assert all(len(c["excerpt"]) == domain.EXCERPT_CHARACTERS for c in touched["items"])
    assert len(block["recentReviews"]["items"]) == domain.CONTEXT_REVIEWS_CAP
    # Even with every text at its longest and escaped to 12 bytes a character, the block stays small.
    assert domain.encoded_size(domain.context_block(typed(company_context()), many, len(many), 1)) < 256 * 1024
