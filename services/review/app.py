"""The review service process: `threadline serve review`."""

from __future__ import annotations

from services.review.handlers import build_router
from shared.service import run_service
from shared.settings import Settings
from shared.subjects import Service

SERVICE = Service.REVIEW
BACKGROUND: list = []


async def main(settings: Settings) -> None:
    await run_service(SERVICE, settings, build_router, background=BACKGROUND)
