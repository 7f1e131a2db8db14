"""The relay process: `threadline serve relay`. Run one or more; one leads at a time (advisory lock)."""

from __future__ import annotations

from faststream.nats import NatsRouter

from services.relay.relay import METRICS, run_relay
from shared.observability import show
from shared.service import ServiceContext, run_service
from shared.settings import Settings
from shared.subjects import Service

SERVICE = Service.RELAY
BACKGROUND = [run_relay]


def build_router(ctx: ServiceContext) -> NatsRouter:
    """The relay answers no commands: only its health subject (added by run_service)."""
    return NatsRouter()


async def main(settings: Settings) -> None:
    show(*METRICS)
    await run_service(SERVICE, settings, build_router, background=BACKGROUND)
