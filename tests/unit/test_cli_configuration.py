"""A command that needs a server nobody configured says what to set, in one line and with exit code 2, whichever
command it is (`backup` answers 1, as for its other refusals): never a traceback (`threadline migrate` printed one before the check moved to the entry point)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

THREADLINE = Path(sys.executable).parent / "threadline"


@pytest.mark.parametrize(("command", "said"), [
    (["migrate"], "no database: set THREADLINE_DATABASE_URL or start `threadline up`"),
    (["projection", "rebuild"], "no database: set THREADLINE_DATABASE_URL"),
    (["webhooks", "list"], "no NATS server: set THREADLINE_NATS_URL"),
    (["events", "tail", "--idle-exit", "1"], "no NATS server: set THREADLINE_NATS_URL"),
])
def test_a_command_with_no_server_configured_says_what_to_set(command, said, tmp_path):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("THREADLINE_")}
    done = subprocess.run([str(THREADLINE), *command, "--data-dir", str(tmp_path / "data")], cwd=tmp_path,
                          env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
