"""Thesis rules: delta checks, the diff they produce, idempotency digests and commit tokens."""

from __future__ import annotations

import pytest

from services.thesis_delta import domain
from shared.errors import IdempotencyConflict, InvalidArgument, InvalidCommitToken

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
    for bad, field in ((payload(), "sourceFileId"), (payload(sourceUrl="https://other.org"), "sourceUrl")):
        with pytest.raises(InvalidArgument) as refused:
            domain.check_source_file(bad, SOURCE, "co" if field != "sourceFileId" else "other-co")
        assert refused.value.field == field


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
