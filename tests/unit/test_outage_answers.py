"""What an outage answer may say: which server failed and where, whether the call may have been applied, and
whether repeating it is harmless — for every command, by its kind."""

from __future__ import annotations

import asyncpg
import pytest

from services.cli.supervision import RESTART_MAX_SECONDS
from shared.messaging import LOST_NATS, RESTART_WINDOW_SECONDS, SERVICE_GONE, answer_lost, nats_unreachable
from shared.outage import PostgreSQLUnreachable, outage, stale_connection
from shared.repeats import REPEAT, Repeat, after_lost_answer, may_have_applied
from shared.subjects import Command


def test_every_command_says_what_repeating_it_does():
    assert set(REPEAT) == set(Command)


def test_the_restart_window_outlasts_ups_longest_pause_and_a_start():
    assert RESTART_WINDOW_SECONDS >= RESTART_MAX_SECONDS + 10


@pytest.mark.parametrize("command", [c for c, kind in REPEAT.items() if kind is Repeat.REPLAYED])
def test_a_lost_answer_to_a_replayed_write_says_it_may_have_applied_and_a_repeat_is_harmless(command):
    lost = answer_lost(command, LOST_NATS)
    assert lost.code == "unavailable"
    assert lost.message.endswith("the call may have been applied") and "NATS" in lost.message
    assert "repeating it is harmless" in lost.hint and "replayed" in lost.hint
    assert lost.details["mayHaveBeenApplied"] is True


def test_a_lost_read_promises_nothing_was_applied_and_a_write_that_adds_says_to_look_first():
    assert may_have_applied(Command.GET_WORKSPACE) == ""
    assert answer_lost(Command.GET_WORKSPACE, SERVICE_GONE).details["mayHaveBeenApplied"] is False
    assert "a read changes nothing" in after_lost_answer(Command.LIST_CASES)
    assert "look before repeating" in after_lost_answer(Command.REGISTER_WEBHOOK)
    assert "the review service stopped before answering: the call may have been applied" == \
        answer_lost(Command.DECIDE, SERVICE_GONE).message


def test_nats_unreachable_before_sending_says_nothing_was_sent():
    refusal = nats_unreachable()
    assert "NATS" in refusal.message and "not sent" in refusal.message and "nothing was changed" in refusal.hint


def test_an_outage_names_the_server_and_the_service_that_could_not_reach_it():
    refusal = outage(asyncpg.exceptions.ConnectionDoesNotExistError("closed mid-operation"), "review")
    assert refusal.message == "PostgreSQL is unreachable from the review service"
    assert refusal.details == {"dependency": "postgresql", "service": "review"}


def test_a_refused_postgresql_connect_names_postgresql_and_a_bare_refusal_names_no_server():
    refused = ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")
    try:
        raise PostgreSQLUnreachable("cannot connect to PostgreSQL") from refused
    except PostgreSQLUnreachable as error:
        named = outage(error, "gateway")
    assert named.message == "PostgreSQL is unreachable from the gateway service"
    assert named.details == {"dependency": "postgresql", "service": "gateway"}
    assert outage(refused).details == {"dependency": "unknown"}


@pytest.mark.parametrize(("error", "stale"), [
    (asyncpg.exceptions.InterfaceError("connection is closed"), True),
    (asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"), True),
    (asyncpg.exceptions.CannotConnectNowError("the database system is starting up"), False),
    (ConnectionRefusedError(111, "refused"), False),
])
def test_only_a_pooled_connection_found_dead_is_worth_a_second_read(error, stale):
    assert stale_connection(error) is stale
