"""NATS subscribers of the review service: each command, and the use case that answers it."""

from __future__ import annotations

from faststream.nats import NatsRouter

from services.review import history, resolutions, track_records, use_cases
from services.review.repository import SqlReviewUnitOfWork
from shared.service import ServiceContext, command_router
from shared.subjects import Command

ROUTES = {
    Command.CREATE_CASE: use_cases.create_case,
    Command.LIST_CASES: use_cases.list_cases,
    Command.GET_CASE: use_cases.get_case,
    Command.CASE_HISTORY: use_cases.case_history,
    Command.CASE_GRAPH: use_cases.case_graph,
    Command.ADD_GUIDANCE: use_cases.add_guidance,
    Command.RECORD_SOURCES: use_cases.record_sources,
    Command.RETIRE_RECORDS: use_cases.retire_records,
    Command.LIST_PROPOSALS: use_cases.list_proposals,
    Command.GET_PROPOSAL: use_cases.get_proposal,
    Command.DECIDE: use_cases.decide,
    Command.CASE_DIFF: history.case_diff,
    Command.CLAIM_TIMELINE: history.claim_timeline,
    Command.EXPORT_PAGE: history.export_page,
    Command.RESOLVE_PREDICTION: resolutions.resolve_prediction,
    Command.AGENT_RECORD: track_records.agent_record,
}


def build_router(ctx: ServiceContext) -> NatsRouter:
    return command_router(ctx, ROUTES, SqlReviewUnitOfWork.of)
