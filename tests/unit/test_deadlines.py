"""Whether a service still handles a command: by its caller's deadline, never refusing every command for a clock."""

from __future__ import annotations

import pytest

from shared.deadlines import (
    SENT_AT,
    SKEW_FACTOR,
    TIMEOUT,
    Verdict,
    deadline,
    deadline_headers,
    expired_reply,
    verdict,
)

SENT = 1_765_119_024.123


def test_a_command_whose_caller_still_waits_is_handled():
    assert verdict(SENT, 10.0, SENT + 0.002) is Verdict.HANDLE
    assert verdict(SENT, 10.0, SENT + 9.999) is Verdict.HANDLE


def test_a_command_whose_caller_has_stopped_waiting_is_expired():
    assert verdict(SENT, 10.0, SENT + 10.001) is Verdict.EXPIRED
    assert verdict(SENT, 10.0, SENT + 39.0) is Verdict.EXPIRED


def test_a_receiver_clock_behind_the_senders_never_expires_a_command():
    assert verdict(SENT, 10.0, SENT - 3600.0) is Verdict.HANDLE


def test_an_elapsed_time_beyond_ten_timeouts_is_taken_for_skew_and_the_command_is_handled():
    assert verdict(SENT, 10.0, SENT + SKEW_FACTOR * 10.0 - 0.001) is Verdict.EXPIRED
    assert verdict(SENT, 10.0, SENT + SKEW_FACTOR * 10.0 + 0.001) is Verdict.SKEWED
    assert verdict(SENT, 10.0, SENT + 86_400.0) is Verdict.SKEWED
    assert verdict(SENT, 1.0, SENT + 11.0) is Verdict.SKEWED  # the bound follows the caller's timeout


def test_the_headers_a_caller_sends_are_read_back_as_its_deadline():
    headers = deadline_headers(7.5, now=SENT)
    assert headers == {SENT_AT: "1765119024.123", TIMEOUT: "7.5"}
    assert deadline({"correlation_id": "c", **headers}) == (SENT, 7.5)


@pytest.mark.parametrize("headers", [
    None, {}, {"correlation_id": "c"},  # health pings, other callers
    {SENT_AT: "1765119024.123"},  # no timeout
    {SENT_AT: "yesterday", TIMEOUT: "10"}, {SENT_AT: "1765119024.123", TIMEOUT: "ten"},
    {SENT_AT: "nan", TIMEOUT: "10"}, {SENT_AT: "1765119024.123", TIMEOUT: "inf"},
    {SENT_AT: "1765119024.123", TIMEOUT: "0"}, {SENT_AT: "1765119024.123", TIMEOUT: "-1"},
])
def test_a_request_without_a_readable_deadline_has_none_and_is_handled(headers):
    assert deadline(headers) is None


def test_the_answer_to_an_expired_command_says_nothing_was_done():
    error = expired_reply("staging", 12.34, 10.0)["error"]
    assert error["code"] == "unavailable"
    assert "stopped waiting" in error["message"] and "did nothing" in error["message"]
    assert "12.3 s" in error["message"] and "10 s" in error["message"]
    assert error["details"] == {"dependency": "service", "service": "staging", "mayHaveBeenApplied": False}
