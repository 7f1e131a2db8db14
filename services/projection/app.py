"""The projection service process: `threadline serve projection`."""

from __future__ import annotations

from services.projection.consumer import METRICS, consume
from services.projection.handlers import build_router
from shared.observability import show
from shared.service import run_service
from shared.settings import Settings
from shared.subjects import Service

SERVICE = Service.PROJECTION
BACKGROUND = [consume]


async def main(settings: Settings) -> None:
    show(*METRICS)
    await run_service(SERVICE, settings, build_router, background=BACKGROUND)
