"""NATS subscribers of the thesis-delta service: each command it owns, answered by the use case of its name."""

from __future__ import annotations

from faststream.nats import NatsRouter

from services.thesis_delta import use_cases
from services.thesis_delta.repository import SqlThesisUnitOfWork
from shared.service import ServiceContext, command_router
from shared.subjects import OWNER, Service

ROUTES = {command: getattr(use_cases, command.value) for command, owner in OWNER.items()
          if owner is Service.THESIS_DELTA}


def build_router(ctx: ServiceContext) -> NatsRouter:
    return command_router(ctx, ROUTES, SqlThesisUnitOfWork.of)
