"""NATS subscribers of the projection service: each command, and the use case that answers it."""

from __future__ import annotations

from faststream.nats import NatsRouter

from services.projection import company_context, inspect_claims, search, use_cases
from services.projection.repository import SqlProjectionUnitOfWork
from shared.service import ServiceContext, command_router
from shared.subjects import Command

ROUTES = {
    Command.GET_WORKSPACE: use_cases.get_workspace,
    Command.INSPECT_SOURCES: use_cases.inspect_sources,
    Command.SET_FOCUS: use_cases.set_focus,
    Command.GET_COMPANY_CONTEXT: company_context.get_company_context,
    Command.CASE_LEDGER: use_cases.case_ledger,
    Command.SEARCH_WORKSPACE: search.search_workspace,
    Command.INSPECT_CLAIMS: inspect_claims.inspect_claims,
    Command.CASE_SEARCH: search.case_search,
}


def build_router(ctx: ServiceContext) -> NatsRouter:
    return command_router(ctx, ROUTES, SqlProjectionUnitOfWork.of)
