"""The webhooks service process: `threadline serve webhooks`. Run any number; they share the work."""

from __future__ import annotations

import asyncio

from services.webhooks.consumer import consume
from services.webhooks.delivery import METRICS, deliver
from services.webhooks.handlers import build_router
from shared.observability import show
from shared.service import ServiceContext, run_service
from shared.settings import Settings
from shared.subjects import Service

SERVICE = Service.WEBHOOKS


async def webhooks(ctx: ServiceContext) -> None:
    """Background job: the event consumer and the senders, which it wakes when it recorded deliveries."""
    wake = asyncio.Event()
    async with asyncio.TaskGroup() as jobs:
        jobs.create_task(consume(ctx, wake), name="webhooks-consumer")
        jobs.create_task(deliver(ctx, wake), name="webhooks-senders")


BACKGROUND = [webhooks]


async def main(settings: Settings) -> None:
    show(*METRICS)
    await run_service(SERVICE, settings, build_router, background=BACKGROUND)
