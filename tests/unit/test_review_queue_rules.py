"""The queue's rules without a database: words of `q`, cursors bound to their query, and which "duplicate of X"
requests the proposal alone can refuse (the records X may name are checked under the case lock, in tests/e2e)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.review import domain, queue
from shared.contracts import Actor, Decide, DuplicateOf, ListProposals
from shared.errors import InvalidArgument

ACTOR = Actor(name="reviewer", role="reviewer")


def proposal(kind: str = "claims", *ids: str) -> domain.StoredProposal:
    items = [domain.StoredItem(item_id, i, {}) for i, item_id in enumerate(ids or ("a", "b"))]
    return domain.StoredProposal("p1", "case", kind, 0, "agent", None, None, datetime(2026, 1, 1, tzinfo=UTC), items)


def decide(*duplicates: tuple[str, str], **more) -> Decide:
    return Decide(actor=ACTOR, proposal_id="p1", expected_revision=0,
                  duplicates=[DuplicateOf(item_id=i, of=o) for i, o in duplicates], **more)


def test_words_of_q_are_distinct_and_bounded():
    assert queue.words_of("  heat   pumps heat ") == ("heat", "pumps")
    assert queue.words_of(None) == ()
    with pytest.raises(InvalidArgument) as refused:
        queue.words_of(" ".join(f"w{i}" for i in range(queue.MAX_WORDS + 1)))
    assert refused.value.field == "q"


def test_a_cursor_reads_back_only_with_the_query_it_was_given_for():
    listing = ListProposals(actor=ACTOR, case_id="case", kind="claims")
    bound = queue._fingerprint(listing, (), False)
    cursor = queue.encode_cursor(proposal(), bound)
    assert queue.decode_cursor(cursor, bound) == (datetime(2026, 1, 1, tzinfo=UTC), "p1")
    other = queue._fingerprint(ListProposals(actor=ACTOR, case_id="case", kind="sources"), (), False)
    assert other != bound and queue._fingerprint(listing, (), True) != bound
    for wrong in (other, "0" * 16):
        with pytest.raises(InvalidArgument, match="other filters"):
            queue.decode_cursor(cursor, wrong)
    for garbage in ("", "x", "e30", "W10", cursor[:-3], "!!"):
        with pytest.raises(InvalidArgument) as refused:
            queue.decode_cursor(garbage, bound)
        assert refused.value.field == "cursor"


def test_only_unfiltered_decided_listings_keep_the_most_recently_decided_order():
    assert queue.plain_listing(ListProposals(actor=ACTOR, case_id="c", status="decided"))
    assert not queue.plain_listing(ListProposals(actor=ACTOR, case_id="c", status="decided", sort="newest"))
    assert not queue.plain_listing(ListProposals(actor=ACTOR, case_id="c", status="accepted", agent="x"))
    assert not queue.plain_listing(ListProposals(actor=ACTOR, case_id="c", status="pending"))


@pytest.mark.parametrize(("kind", "request_", "field", "says"), [
    ("claims", decide(("ghost", "x")), "duplicates[0].itemId", "not an item"),
    ("claims", decide(("a", "x"), ("a", "y")), "duplicates[1].itemId", "listed twice"),
    ("claims", decide(("a", "x"), accept=["a"]), "duplicates[0].itemId", "also listed in accept"),
    ("claims", decide(("b", "x"), reject=["b"]), "duplicates[0].itemId", "also listed in reject"),
    ("claims", decide(("a", "a")), "duplicates[0].of", "itself"),
    ("relations", decide(("a", "x")), "duplicates[0].itemId", "not claims or sources"),
    ("verdict", decide(("a", "x")), "duplicates[0].itemId", "not claims or sources"),
])
def test_duplicates_the_proposal_alone_refuses_name_the_field(kind, request_, field, says):
    with pytest.raises(InvalidArgument) as refused:
        queue.check_duplicates(proposal(kind), request_)
    assert refused.value.field == field and says in str(refused.value)


def test_every_fault_of_a_decisions_duplicates_is_named_in_one_refusal():
    with pytest.raises(InvalidArgument) as refused:
        queue.check_duplicates(proposal("claims"), decide(("ghost", "x"), ("a", "a"), ("b", "y"), reject=["b"]))
    assert [(p["field"], p["message"].split(" ", 1)[1][:20]) for p in refused.value.problems] == [
        ("duplicates[0].itemId", "is not an item of pr"), ("duplicates[1].of", "cannot be a duplicat"),
        ("duplicates[2].itemId", "is also listed in re")]
    assert refused.value.field == "duplicates[0].itemId" and "and 2 more problems" in str(refused.value)


def test_a_request_with_duplicates_has_its_own_digest_and_one_without_keeps_the_old():
    plain = domain.request_digest(["a"], [], None, 3)
    assert domain.request_digest(["a"], [], None, 3, ()) == plain
    with_dups = domain.request_digest(["a"], [], None, 3, [("b", "x")])
    assert with_dups != plain and with_dups != domain.request_digest(["a"], [], None, 3, [("b", "y")])
    queue.check_duplicates(proposal("sources"), decide(("a", "x"), ("b", "x"), note="n"))  # both fine
