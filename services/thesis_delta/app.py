"""The thesis-delta service process: `threadline serve thesis-delta`."""

from __future__ import annotations

from services.thesis_delta.handlers import build_router
from shared.service import run_service
from shared.settings import Settings
from shared.subjects import Service

SERVICE = Service.THESIS_DELTA
BACKGROUND: list = []


async def main(settings: Settings) -> None:
    await run_service(SERVICE, settings, build_router, background=BACKGROUND)
