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
"""

from __future__ import annotations

import asyncio
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

from shared.logging import get_logger

log = get_logger(__name__)

PR_SET_PDEATHSIG = 1
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
GONE_POLL_SECONDS = 0.2


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
    os.setsid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != request["parent"]:  # the starter died before the line above: so must this
        return 1
    for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
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
    """The starter process: import, then fork on request until stdin closes."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
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


class StartedProcess:
    """A service process the starter forked, as `up` handles it: the surface of asyncio's Process it uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._ended = asyncio.Event()

    def ended(self, code: int | None) -> None:
        if not self._ended.is_set():
            self.returncode = code
            self._ended.set()

    async def wait(self) -> int | None:
        await self._ended.wait()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Starter:
    """`up`'s side: runs the starter process (again, after it died) and asks it for service processes."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.process: asyncio.subprocess.Process | None = None
        self._answers: asyncio.Queue[StartedProcess | None] = asyncio.Queue()
        self._started: dict[int, StartedProcess] = {}
        self._reader: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self._closing = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def _run(self) -> None:
        from services.cli.embedded import die_with_parent

        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / "starter.log", "ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "services.cli.starter", "--data-dir", self.env.get("THREADLINE_DATA_DIR", ""),
                env=self.env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
                start_new_session=True, preexec_fn=die_with_parent, limit=1 << 20)
        self._answers = asyncio.Queue()
        self._reader = asyncio.create_task(self._read(self.process), name="starter-answers")

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            message = json.loads(line)
            if "ended" in message:
                started = self._started.pop(message["ended"], None)
                if started is not None:
                    started.ended(message["code"])
            else:  # registered here, before the next line: its end may be the very next line
                started = self._started[message["pid"]] = StartedProcess(message["pid"])
                await self._answers.put(started)
        code = await process.wait()
        if not self._closing:
            log.warning("service_starter_died", pid=process.pid, code=code, services=len(self._started),
                        log=str(self.log_dir / "starter.log"))
        await self._answers.put(None)  # a request still waiting for its answer gets none
        # The starter's processes die with it (SIGTERM): each ends when its pid is gone, its status unknown.
        orphans, self._started = self._started, {}
        await asyncio.gather(*(_until_gone(started) for started in orphans.values()))

    async def spawn(self, service: str, env: dict[str, str], log: Path, title: str) -> StartedProcess:
        async with self._lock:
            if self.process is None or self.process.returncode is not None:
                await self._run()
            assert self.process is not None and self.process.stdin is not None
            request = {"service": service, "env": env, "log": str(log), "title": title}
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            await self.process.stdin.drain()
            started = await self._answers.get()
            if started is None:
                raise RuntimeError(f"the service starter exited with {self.process.returncode}; see "
                                   f"{self.log_dir / 'starter.log'}")
            return started

    async def stop(self) -> None:
        """After the services stopped: close the starter's stdin, and it ends."""
        if self.process is None or self.process.returncode is not None:
            return
        assert self.process.stdin is not None
        self._closing = True
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), timeout=5)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        if self._reader is not None:
            await self._reader


async def _until_gone(started: StartedProcess) -> None:
    """Wait for a process that is no longer ours to wait for (its parent died) to end."""
    import psutil

    while True:
        try:
            if psutil.Process(started.pid).status() == psutil.STATUS_ZOMBIE:  # ended; its new parent has not reaped it
                break
        except psutil.NoSuchProcess:
            break
        await asyncio.sleep(GONE_POLL_SECONDS)
    started.ended(None)


if __name__ == "__main__":
    main()
