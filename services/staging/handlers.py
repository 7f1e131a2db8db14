"""NATS subscribers of the staging service: one per stage_* command, each the `stage` use case of its kind."""

from __future__ import annotations

from functools import partial

from faststream.nats import NatsRouter

from services.staging import use_cases
from services.staging.repository import PgStagingUnitOfWork
from shared.kinds import KINDS
from shared.service import ServiceContext, command_router

ROUTES = {kind.command: partial(use_cases.stage, kind) for kind in KINDS.values()}


def build_router(ctx: ServiceContext) -> NatsRouter:
    return command_router(ctx, ROUTES, PgStagingUnitOfWork.of)
