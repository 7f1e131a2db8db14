"""The review service process: `threadline serve review` (it also runs an outbox relay replica)."""

from __future__ import annotations

from services.review.handlers import build_router
from services.review.relay import run_relay
from shared.service import run_service
from shared.settings import Settings
from shared.subjects import Service

SERVICE = Service.REVIEW
BACKGROUND = [run_relay]


async def main(settings: Settings) -> None:
    await run_service(SERVICE, settings, build_router, background=BACKGROUND)
