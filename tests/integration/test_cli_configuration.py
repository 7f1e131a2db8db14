"""A command that needs a server nobody configured says what to set, in one line and with exit code 2, whichever
command it is (`backup` answers 1, as for its other refusals): never a traceback (`threadline migrate` printed one before the check moved to the entry point)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.processes import clean_environment, threadline


@pytest.mark.parametrize(("command", "said"), [
    (["migrate"], "no database: set THREADLINE_DATABASE_URL or start `threadline up`"),
    (["projection", "rebuild"], "no database: set THREADLINE_DATABASE_URL"),
    (["webhooks", "list"], "no NATS server: set THREADLINE_NATS_URL"),
    (["events", "tail", "--idle-exit", "1"], "no NATS server: set THREADLINE_NATS_URL"),
])
def test_a_command_with_no_server_configured_says_what_to_set(command, said, tmp_path):
    done = threadline(*command, "--data-dir", str(tmp_path / "data"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize(("command", "variable", "value", "said"), [
    (["up"], "THREADLINE_LOG_FORMAT", "bogus", "THREADLINE_LOG_FORMAT (it is 'bogus'): must match pattern"),
    (["token", "list"], "THREADLINE_HTTP_PORT", "abc", "THREADLINE_HTTP_PORT (it is 'abc'): must be a valid integer"),
    (["up"], "THREADLINE_REVIEW_CHECKS_DISABLED", "bogus", "THREADLINE_REVIEW_CHECKS_DISABLED (it is 'bogus'): "
                                                            "names no check bogus; the checks are"),
    (["serve", "staging"], "THREADLINE_RELAY_PARTITIONS", "0", "THREADLINE_RELAY_PARTITIONS (it is '0'): must be "
                                                                "greater than or equal to 1"),
    # A traceback from the logging module, from `up` and from every service (a pod's crash loop) alike.
    (["up"], "THREADLINE_LOG_LEVEL", "LOUD", "THREADLINE_LOG_LEVEL (it is 'LOUD'): must be one of DEBUG, INFO, "
                                             "WARNING, ERROR, CRITICAL"),
    (["serve", "staging"], "THREADLINE_LOG_LEVEL", "verbose", "THREADLINE_LOG_LEVEL (it is 'verbose'): must be one of"),
    # Named as the option --replicas, which the operator had not given.
    (["up"], "THREADLINE_REPLICAS", "relay=2,staging=0", "THREADLINE_REPLICAS: 'staging=0': run 1 to 16 processes of "
                                                         "a service"),
])
def test_an_invalid_variable_is_named_with_what_it_must_be_before_any_command_starts(command, variable, value, said,
                                                                                     tmp_path):
    data = tmp_path / "data"
    done = threadline(*command, "--data-dir", str(data), cwd=tmp_path, env=clean_environment(**{variable: value}))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: {said}") and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert not data.exists()  # refused at start: `up` started nothing


def test_what_a_service_process_runs_refuses_an_invalid_variable_alike(tmp_path):
    """`up` and a container start a service as `python -m services.cli.main serve …`, not through the script."""
    environment = clean_environment(THREADLINE_HTTP_PORT="abc")
    done = subprocess.run([sys.executable, "-m", "services.cli.main", "serve", "gateway"], cwd=tmp_path,
                          env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "error: THREADLINE_HTTP_PORT (it is 'abc'): must be a valid integer, unable to parse " \
                          "string as an integer\n", done.stderr
