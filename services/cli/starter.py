"""The service starter: one process that `threadline up` runs to start its services by forking.

Every service process runs `threadline serve <service>`, and every one of them would spend its first second and
a half of CPU importing the same libraries (FastStream, SQLAlchemy, pydantic, the MCP SDK). The starter imports
them once, then forks each service process, and each restart, from itself: `up` is ready sooner, a killed service
is back at once, and the processes share the pages those imports filled until they write to them. A forked
process runs `threadline serve <service>` as its own command would, in a session of its own, with the
environment, log file and command line (`ps`) it would have had.

Its protocol with `up`, one JSON object per line: `up` writes {"service", "env", "log", "title"} to the starter's
stdin; the starter answers {"pid"} on its stdout for each, in order, and {"ended": pid, "code": code} when a
process it started ends (`code` as `Popen.returncode`: negative for the signal that killed it). The starter ends
when its stdin closes, and dies with `up` however `up` ends; its processes die with it (each receives SIGTERM).
`up`'s side is `Starter` in services/cli/supervision.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import select
import signal
import sys
import traceback
from pathlib import Path

PR_SET_NAME = 15
# What `threadline serve <service>` imports, for every service (tests/unit/test_starter.py checks that it is all).
PRELOADED = (
    "services.cli.main",
    "services.registry",
    "services.staging.app",
    "services.review.app",
    "services.thesis_delta.app",
    "services.projection.app",
    "services.relay.app",
    "services.webhooks.app",
    "services.gateway.app",
    "shared.event_loop",
    "uvloop",
)


def _prctl(option: int, value: int | bytes) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def retitle(title: str) -> None:
    """Show `title` as this process's command line (`ps`, /proc/<pid>/cmdline), written over the memory that held
    its arguments, as setproctitle does; longer than that memory, it is cut. The kernel reads the command line
    from there; Python keeps its own copy (sys.argv), which is left alone."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start and arg_end, the 48th and 49th fields
    except (OSError, IndexError, ValueError):
        return
    room = end - start
    if room < 2:
        return
    words = title.encode()[: room - 1].replace(b" ", b"\0")
    ctypes.memmove(start, words + b"\0" * (room - len(words)), room)
    _prctl(PR_SET_NAME, ("tl-" + title.split(" ")[2] if title.count(" ") >= 2 else title).encode()[:15])


def _serve(request: dict) -> int:
    """In the forked process: become `threadline serve <service>` and run it; its exit code."""
    from services.cli.embedded import die_with_parent

    os.setsid()
    die_with_parent()
    if os.getppid() != request["parent"]:  # the starter died before the line above: so must this
        return 1
    # Every signal as the interpreter leaves it when a command starts it: Ctrl-C a KeyboardInterrupt; a write to a
    # socket whose peer is gone (PostgreSQL or NATS killed) an error the service handles (EPIPE), not its death by
    # SIGPIPE, and SIGXFSZ likewise.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, 256)
    os.environ.clear()
    os.environ.update(request["env"])
    retitle(request["title"])
    sys.argv = ["threadline", "serve", request["service"]]
    from services.cli.main import main

    try:
        main()
    except SystemExit as end:
        if end.code is None or isinstance(end.code, int):
            return end.code or 0
        print(end.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - reported as the command would report it
        traceback.print_exc()
        return 1
    return 0


def _fork(request: dict) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        code = _serve(request)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _reap() -> list[tuple[int, int]]:
    ended = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append((pid, os.waitstatus_to_exitcode(status)))


def main() -> None:
    """The starter process (`up` starts it to die with it): import, then fork on request until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is `up`'s to handle: it stops the services in order
    for name in PRELOADED:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()  # the imported objects are never collected: forked processes share their pages longer
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_write)
    pending = b""
    parent = os.getpid()

    def answer(message: dict) -> None:
        os.write(1, json.dumps(message).encode() + b"\n")

    while True:
        readable, _, _ = select.select([0, wake_read], [], [])
        if wake_read in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_read, 4096)
        for pid, code in _reap():
            answer({"ended": pid, "code": code})
        if 0 in readable:
            chunk = os.read(0, 65536)
            if not chunk:
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                answer({"pid": _fork({**json.loads(line), "parent": parent})})


if __name__ == "__main__":
    main()
