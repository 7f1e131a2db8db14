"""Review rules: what a decision accepts, rejects or refuses, and the proposal's status after it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.review import domain
from shared.errors import InvalidArgument, StaleRevision
from shared.ledger import LedgerFacts


def proposal(*items, kind="sources"):
    return domain.StoredProposal("p1", "case", kind, 0, "agent", None, None, datetime.now(UTC), list(items))


def source_item(item_id, outcome=None):
    payload = {"id": item_id, "publisher": "p", "title": "t", "url": "https://x.org", "publicationDate": "living",
               "snapshotDate": "2024-01-01", "type": "primary", "authority": "a", "evidenceText": "e",
               "provenanceNote": "n"}
    return domain.StoredItem(item_id, 0, payload, outcome=outcome, decided_by="rita" if outcome else None)


def test_a_plan_accepts_what_fits_rejects_what_is_rejected_and_refuses_the_rest():
    p = proposal(source_item("a"), source_item("b"), source_item("c", outcome="accepted"), source_item("d"))
    plan = domain.plan(p, ["a", "c", "d"], ["b"], LedgerFacts(revision=4, sources={"d": "active"}))
    assert [i.item_id for i in plan.accepted] == ["a"]
    assert [i.item_id for i in plan.rejected] == ["b"]
    assert [(r["itemId"], r["reason"].split(" ")[0]) for r in plan.refused] == [("c", "already"), ("d", "id:")]
    assert domain.status_after(p, plan) == "pending"  # d was refused, so it still waits
    rest = domain.plan(p, [], ["d"], LedgerFacts(revision=5))
    assert domain.status_after(domain.StoredProposal(**{**p.__dict__, "items": [
        source_item("a", "accepted"), source_item("b", "rejected"), source_item("c", "accepted"), source_item("d")]}),
        rest) == "partially_accepted"


def test_status_is_pending_until_every_item_is_decided():
    p = proposal(source_item("a"), source_item("b"))
    plan = domain.plan(p, ["a"], [], LedgerFacts(revision=0))
    assert domain.status_after(p, plan) == "pending"
    assert domain.proposal_status(["accepted", "accepted"]) == "accepted"
    assert domain.proposal_status(["rejected", "rejected"]) == "rejected"


@pytest.mark.parametrize(("accept", "reject", "field"), [
    ([], [], "accept"), (["zzz"], [], "accept[0]"), (["a", "a"], [], "accept[1]"), (["a"], ["a"], "reject")])
def test_malformed_decisions_are_refused_naming_the_field(accept, reject, field):
    with pytest.raises(InvalidArgument) as refused:
        domain.check_request(proposal(source_item("a")), accept, reject)
    assert refused.value.field == field


def test_a_stale_view_is_refused_and_no_expectation_means_no_check():
    domain.check_expected_revision(None, 7)
    domain.check_expected_revision(7, 7)
    with pytest.raises(StaleRevision) as stale:
        domain.check_expected_revision(6, 7)
    assert stale.value.details == {"currentRevision": 7}


def test_an_expected_revision_ahead_of_the_case_is_not_called_a_change_since_it_was_loaded():
    with pytest.raises(StaleRevision) as ahead:
        domain.check_expected_revision(9, 7)
    assert ahead.value.message == "expectedRevision 9 is ahead of the case, which is at revision 7"
    assert "changed" not in ahead.value.message and "caseRevision" in ahead.value.hint
    assert ahead.value.field == "expectedRevision" and ahead.value.details == {"currentRevision": 7}


@pytest.mark.parametrize(("reject", "note", "refused"), [
    (["a"], None, True), (["a"], "  ", True), (["a"], "no source says so", False), ([], None, False)])
def test_a_rejection_needs_a_note_and_an_acceptance_does_not(reject, note, refused):
    if refused:
        with pytest.raises(InvalidArgument) as error:
            domain.check_rejection_note(reject, note)
        assert error.value.field == "note" and "note" in error.value.hint
    else:
        domain.check_rejection_note(reject, note)
