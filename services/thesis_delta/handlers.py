"""NATS subscribers of the thesis-delta service: each command, and the use case that answers it."""

from __future__ import annotations

from faststream.nats import NatsRouter

from services.thesis_delta import use_cases
from services.thesis_delta.repository import SqlThesisUnitOfWork
from shared.service import ServiceContext, command_router
from shared.subjects import Command

ROUTES = {
    Command.PROPOSE_CLAIM_DELTA: use_cases.propose,
    Command.CREATE_COMPANY: use_cases.create_company,
    Command.LIST_COMPANIES: use_cases.list_companies,
    Command.GET_COMPANY: use_cases.get_company,
    Command.ADD_SOURCE_FILE: use_cases.add_source_file,
    Command.ADD_THESIS_CLAIM: use_cases.add_thesis_claim,
    Command.LIST_DELTAS: use_cases.list_deltas,
    Command.GET_DELTA: use_cases.get_delta,
    Command.DECIDE_DELTA: use_cases.decide_delta,
}


def build_router(ctx: ServiceContext) -> NatsRouter:
    return command_router(ctx, ROUTES, SqlThesisUnitOfWork.of)
