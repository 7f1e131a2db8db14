"""Logs are readable lines on a terminal and JSON when piped, or whenever THREADLINE_LOG_FORMAT=json."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest

from tests.processes import clean_environment

PROBE = ("from shared.logging import configure_logging, get_logger; from shared.settings import Settings; "
         "configure_logging('probe', 'INFO', Settings().log_format); "
         "get_logger('probe').info('probe_logged', items=3)")


# What asyncpg logs while PostgreSQL is away, each time its pool fails to reconnect the connections it keeps.
OUTAGE = ("from shared.logging import configure_logging; import logging; configure_logging('probe', 'INFO', 'json'); "
          "logging.getLogger('asyncpg.pool').warning('Failed to restore the pool connection floor; retrying', "
          "exc_info=ConnectionRefusedError(111, 'Connect call failed'))")

# A broker built as the services build it, logging what it logs when NATS goes away (no NATS needed: the logger is
# set up as `connect` sets it up).
BROKER = ("import logging; from shared.logging import configure_logging; from shared.messaging import create_broker; "
          "from shared.settings import Settings; configure_logging('probe', 'INFO', 'json'); "
          "broker = create_broker(Settings(nats_url='nats://127.0.0.1:4222'), role='gateway', name='probe'); "
          "broker._setup_logger(); "
          "broker.config.logger.log('Connection broken with UnexpectedEOF()', logging.WARNING, {}, "
          "exc_info=EOFError())")


def logged(*, terminal: bool, log_format: str | None = None) -> str:
    """What one process logs on its stderr: a pseudo-terminal, or a pipe."""
    env = clean_environment()
    if log_format is not None:
        env["THREADLINE_LOG_FORMAT"] = log_format
    if not terminal:
        return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                              timeout=60, check=True).stderr
    reader, writer = pty.openpty()
    try:
        subprocess.run([sys.executable, "-c", PROBE], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=writer, timeout=60, check=True)
        os.close(writer)
        writer = -1
        chunks = []
        while True:
            try:
                chunk = os.read(reader, 65536)
            except OSError:  # the terminal's other end is closed: everything was read
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(reader)
        if writer != -1:
            os.close(writer)


def test_on_a_terminal_a_log_line_is_for_people():
    line = logged(terminal=True).strip()
    assert "probe_logged" in line and "items" in line and "3" in line
    with pytest.raises(ValueError):
        json.loads(line)
    assert not line.lstrip().startswith("{"), line


def test_piped_a_log_line_is_json():
    entry = json.loads(logged(terminal=False))
    assert entry["event"] == "probe_logged" and entry["items"] == 3 and entry["level"] == "info"


def test_with_threadline_log_format_json_a_terminal_gets_json_too():
    entry = json.loads(logged(terminal=True, log_format="json").strip())
    assert entry["event"] == "probe_logged"


def test_with_threadline_log_format_console_a_pipe_gets_readable_lines():
    line = logged(terminal=False, log_format="console").strip()
    assert "probe_logged" in line and not line.startswith("{")


def test_a_reconnect_that_failed_during_an_outage_is_one_line_without_a_traceback():
    env = clean_environment()
    written = subprocess.run([sys.executable, "-c", OUTAGE], env=env, capture_output=True, text=True, timeout=60,
                             check=True).stderr
    entry = json.loads(written)
    assert entry["level"] == "warning" and entry["logger"] == "asyncpg.pool"
    assert entry["event"].startswith("Failed to restore the pool connection floor; retrying: ConnectionRefusedError")
    assert "exception" not in entry and "Traceback" not in written


def test_the_brokers_own_warning_is_json_like_every_other_line():
    env = clean_environment()
    written = subprocess.run([sys.executable, "-c", BROKER], env=env, capture_output=True, text=True, timeout=60,
                             check=True).stderr
    lines = written.splitlines()
    assert lines, "the broker logged nothing"
    entries = [json.loads(line) for line in lines]
    assert any(entry["event"] == "Connection broken with UnexpectedEOF()" and entry["level"] == "warning"
               for entry in entries), written
