"""The service starter `up` forks its services from: what it imports first, and the command line it shows."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from services.cli.starter import PRELOADED
from services.registry import APP_MODULES


def test_the_starter_imports_every_services_entry_point_before_it_forks():
    assert set(APP_MODULES.values()) <= set(PRELOADED)
    assert {"services.gateway.app", "services.cli.main"} <= set(PRELOADED)


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), "with", "room", "for", "a", "long", "title"],
                          capture_output=True, text=True, timeout=60)


def test_a_retitled_process_shows_the_command_it_runs_to_ps_and_keeps_its_own_argv():
    done = run_python("""
        import sys
        from pathlib import Path
        from services.cli.starter import retitle
        before = list(sys.argv)
        retitle("threadline serve staging --data-dir /srv/tl")
        print(Path("/proc/self/cmdline").read_bytes().rstrip(b"\\0").split(b"\\0"))
        print(Path("/proc/self/comm").read_text().strip())
        print(sys.argv == before)
    """)
    assert done.returncode == 0, done.stderr
    cmdline, comm, argv_kept = done.stdout.splitlines()
    assert cmdline == str([b"threadline", b"serve", b"staging", b"--data-dir", b"/srv/tl"])
    assert comm == "tl-staging"
    assert argv_kept == "True"


def test_a_title_longer_than_the_arguments_it_replaces_is_cut_and_still_ends():
    done = run_python("""
        from pathlib import Path
        from services.cli.starter import retitle
        room = len(Path("/proc/self/cmdline").read_bytes())
        retitle("threadline serve gateway --data-dir " + "x" * 10_000)
        shown = Path("/proc/self/cmdline").read_bytes()
        print(len(shown) == room, shown.endswith(b"\\0"), shown.startswith(b"threadline\\0serve\\0gateway\\0"))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]


def test_importing_what_the_starter_preloads_starts_no_thread_so_forking_it_is_safe():
    """A fork copies only the thread that forks: a lock another thread held at that moment stays held for ever in
    the child. So the starter's imports must leave it with one thread; a library that starts one at import fails
    this test instead of hanging a service now and then."""
    done = run_python("""
        import importlib, threading
        from services.cli.starter import PRELOADED
        for name in PRELOADED:
            importlib.import_module(name)
        print([thread.name for thread in threading.enumerate()])
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['MainThread']"
