"""The event loop Threadline's processes run on: uvloop where it is installed, else asyncio's own.

uvloop is asyncio's API over libuv. Under `threadline bench stage` it took about a sixth off the CPU that
each agent call costs the gateway, staging and the relay (docs/performance.md). The benchmark's anchor
servers run on the same loop, so that the comparison stays one of architectures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed (it is a dependency except on Windows); None: asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` on the loop above."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coroutine)
