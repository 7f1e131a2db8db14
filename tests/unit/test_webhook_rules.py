"""Webhook rules: what a webhook receives, how retries back off, which targets are refused, what is logged."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from standardwebhooks import Webhook as Verifier

from services.webhooks.domain import (
    RetryPolicy,
    Stream,
    Webhook,
    accepted,
    aggregate_of,
    check_url,
    comes_next,
    excerpt,
    is_new_stream,
    is_rewound,
    outcome,
    refused_address,
)
from services.webhooks.sender import body_of, signed_headers
from shared.errors import InvalidArgument

CASE_HOOK = Webhook("w1", "https://example.org/h", "heat", None, (), "active", start_after_seq=10)


def test_a_case_webhook_receives_its_case_events_after_it_was_registered_and_nothing_else():
    assert CASE_HOOK.receives("case:heat", "threadline.ledger.changed", 11)
    assert not CASE_HOOK.receives("case:heat", "threadline.ledger.changed", 10), "published before registration"
    assert not CASE_HOOK.receives("case:other", "threadline.ledger.changed", 11)
    assert not CASE_HOOK.receives("company:heat", "threadline.thesis.changed", 11)


def test_types_narrow_a_webhook_and_one_without_scope_receives_everything_but_its_own_failures():
    typed = Webhook("w2", "u", None, "c0", ("threadline.thesis.changed",), "active", 0)
    assert typed.receives("company:c0", "threadline.thesis.changed", 1)
    assert not typed.receives("company:c0", "threadline.thesis.delta.committed", 1)
    everything = Webhook("w3", "u", None, None, (), "active", 0)
    assert everything.receives("case:any", "threadline.proposal.staged", 1)
    assert everything.receives("webhook:w1", "threadline.webhook.failing", 1)
    assert not everything.receives("webhook:w3", "threadline.webhook.failing", 1)
    deleted = Webhook("w4", "u", None, None, (), "deleted", 0)
    assert not deleted.receives("case:any", "threadline.proposal.staged", 1)


def test_the_aggregate_comes_from_the_cloudevents_subject():
    assert aggregate_of({"subject": "case/heat"}) == "case:heat"
    assert aggregate_of({"subject": "company/1234"}) == "company:1234"
    assert aggregate_of({"subject": "other/x"}) is None
    assert aggregate_of({}) is None


def test_events_are_recorded_in_stream_order_and_a_gap_only_where_the_stream_has_nothing():
    assert comes_next(4, 5, None)
    assert not comes_next(4, 7, first_after_position=5), "5 and 6 are still out: 7 waits for them"
    assert comes_next(4, 7, first_after_position=7), "5 and 6 are gone from the stream (retention)"
    assert comes_next(0, 120, first_after_position=None)


JAN = datetime(2025, 1, 1, tzinfo=UTC)
MARCH = datetime(2025, 3, 1, tzinfo=UTC)


def test_a_position_counts_in_the_stream_it_was_recorded_in_and_one_beyond_the_stream_is_of_another():
    assert not is_new_stream(52, JAN, Stream(JAN, 60))
    assert not is_new_stream(52, JAN, Stream(datetime(2025, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))), 60)), \
        "the same time, written otherwise"
    assert is_new_stream(52, JAN, Stream(MARCH, 3)), "made since, fewer events than recorded"
    assert is_new_stream(52, None, Stream(MARCH, 3)), "unknown stream, fewer events than recorded"
    assert not is_new_stream(52, None, Stream(MARCH, 52))


def test_another_stream_is_new_at_position_0_and_a_stale_identity_where_the_stream_holds_the_position():
    assert is_new_stream(0, JAN, Stream(MARCH, 0)), "nothing recorded yet: the new stream counts from its start"
    assert is_new_stream(0, JAN, Stream(MARCH, 5)), "its first events, before the service read any"
    assert not is_new_stream(7, JAN, Stream(MARCH, 7)), "events of this stream were recorded under the old identity"
    assert not is_new_stream(7, JAN, Stream(MARCH, 30))
    assert not is_new_stream(7, JAN, Stream(None, 30)), "no identity to compare"


def test_the_recorded_stream_with_fewer_events_than_recorded_is_rewound_not_new():
    assert is_rewound(52, JAN, Stream(JAN, 40)), "restored from an older backup of the same stream"
    assert not is_new_stream(52, JAN, Stream(JAN, 40))
    assert is_rewound(52, JAN, Stream(datetime(2025, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))), 0)), \
        "the same time, written otherwise; a backup taken while it was empty"
    assert not is_rewound(52, JAN, Stream(JAN, 52)) and not is_rewound(52, JAN, Stream(JAN, 60)), "it holds the position"
    assert not is_rewound(52, JAN, Stream(MARCH, 40)) and is_new_stream(52, JAN, Stream(MARCH, 40))
    assert not is_rewound(52, None, Stream(JAN, 40)) and is_new_stream(52, None, Stream(JAN, 40)), \
        "no identity recorded: cannot tell"
    assert not is_rewound(52, JAN, Stream(None, 40)) and is_new_stream(52, JAN, Stream(None, 40)), \
        "no identity given: cannot tell"


def test_retries_back_off_exponentially_with_jitter_up_to_the_cap():
    policy = RetryPolicy(base_seconds=5, max_delay_seconds=3600, give_up_after_seconds=86400)
    rng = random.Random(7)
    for attempt, ceiling in [(1, 5), (2, 10), (3, 20), (10, 2560), (11, 3600), (60, 3600)]:
        delays = [policy.delay(attempt, rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1, "jittered"


def test_an_attempt_delivers_retries_or_gives_up_after_the_retry_period():
    policy = RetryPolicy(base_seconds=1, max_delay_seconds=60, give_up_after_seconds=24 * 3600)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rng = random.Random(1)
    assert outcome(True, 3, start, start + timedelta(hours=30), policy, rng).status == "delivered"
    retry = outcome(False, 1, start, start, policy, rng)
    assert retry.status == "pending" and 0.5 <= retry.retry_in_seconds <= 1
    assert outcome(False, 20, start, start + timedelta(hours=23, minutes=59), policy, rng).status == "pending"
    gave_up = outcome(False, 21, start, start + timedelta(hours=24), policy, rng)
    assert gave_up.gave_up and gave_up.retry_in_seconds is None


@pytest.mark.parametrize("code, ok", [(200, True), (204, True), (299, True), (301, False), (410, False),
                                      (500, False), (None, False)])
def test_only_a_2xx_answer_is_a_delivery(code, ok):
    assert accepted(code) is ok


@pytest.mark.parametrize("address, refused", [
    ("127.0.0.1", "loopback"), ("::1", "loopback"), ("::ffff:127.0.0.1", "loopback"), ("10.0.0.8", "private"),
    ("172.16.3.4", "private"), ("192.168.1.1", "private"), ("100.64.0.1", "private"), ("fd00::1", "private"),
    ("169.254.169.254", "unicast"), ("fe80::1%eth0", "unicast"), ("0.0.0.0", "unicast"), ("224.0.0.1", "unicast"),
    ("93.184.215.14", None), ("2606:4700::1111", None),
])
def test_private_loopback_and_non_unicast_addresses_are_refused(address, refused):
    reason = refused_address(address)
    assert (reason is None) if refused is None else (refused in reason)


@pytest.mark.parametrize("url, field_message", [
    ("ftp://example.org/x", "http"), ("https://user:pw@example.org/x", "credentials"),
    ("https://example.org:99999/x", "port"), ("https:///x", "host"),
])
def test_a_webhook_url_must_be_plain_http_or_https_with_a_host(url, field_message):
    with pytest.raises(InvalidArgument) as refused:
        check_url(url)
    assert refused.value.field == "url" and field_message in refused.value.message


def test_the_log_keeps_a_short_printable_excerpt_of_a_response_never_the_body():
    assert excerpt(b"") is None
    assert excerpt(b"ok\n\x00done") == "ok  done"
    assert len(excerpt(b"x" * 100_000)) == 200


def test_a_delivery_is_signed_as_standard_webhooks_says_and_verifies_with_the_secret():
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    envelope = {"id": "ev-1", "type": "threadline.ledger.changed", "data": {"caseId": "heat", "note": "é"}}
    body = body_of(envelope)
    headers = signed_headers(secret, "ev-1", body)
    assert headers["webhook-id"] == "ev-1" and headers["content-type"] == "application/cloudevents+json"
    assert Verifier(secret).verify(body.encode(), headers) == envelope
