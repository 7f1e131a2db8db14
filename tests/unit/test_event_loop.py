"""Every Threadline process runs on uvloop when it is installed (it is a dependency off Windows)."""

from __future__ import annotations

import asyncio
import sys

from shared import event_loop


async def _loop_module() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def test_processes_run_on_uvloop_where_it_has_a_build():
    expected = "asyncio" if sys.platform == "win32" else "uvloop"  # uvloop has no Windows build
    assert event_loop.run(_loop_module()).startswith(expected)


def test_without_uvloop_the_loop_is_asyncios_own(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what `import uvloop` meets where it is not installed
    assert event_loop.loop_factory() is None
    assert event_loop.run(_loop_module()).startswith("asyncio")
