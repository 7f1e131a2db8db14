"""NATS subject names: every subject any service uses is spelled here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Service(StrEnum):
    GATEWAY = "gateway"
    STAGING = "staging"
    REVIEW = "review"
    THESIS_DELTA = "thesis-delta"
    PROJECTION = "projection"
    RELAY = "relay"
    WEBHOOKS = "webhooks"


# Every process but the gateway; the relay answers no commands, only its health subject.
BACKEND_SERVICES = (Service.STAGING, Service.REVIEW, Service.THESIS_DELTA, Service.PROJECTION, Service.RELAY,
                    Service.WEBHOOKS)


class Command(StrEnum):
    """Request/reply commands, each owned by exactly one service."""

    # staging
    STAGE_SOURCES = "stage_sources"
    STAGE_CLAIMS = "stage_claims"
    STAGE_RELATIONS = "stage_relations"
    STAGE_MERGE = "stage_merge"
    STAGE_VERDICT = "stage_verdict"
    # projection
    GET_WORKSPACE = "get_workspace"
    INSPECT_SOURCES = "inspect_sources"
    SET_FOCUS = "set_focus"
    GET_COMPANY_CONTEXT = "get_company_context"
    CASE_LEDGER = "case_ledger"
    # review
    CREATE_CASE = "create_case"
    LIST_CASES = "list_cases"
    GET_CASE = "get_case"
    CASE_HISTORY = "case_history"
    CASE_GRAPH = "case_graph"
    ADD_GUIDANCE = "add_guidance"
    RECORD_SOURCES = "record_sources"
    RETIRE_RECORDS = "retire_records"
    LIST_PROPOSALS = "list_proposals"
    GET_PROPOSAL = "get_proposal"
    DECIDE = "decide"
    CASE_DIFF = "case_diff"
    CLAIM_TIMELINE = "claim_timeline"
    EXPORT_PAGE = "export_page"
    # thesis-delta
    PROPOSE_CLAIM_DELTA = "propose_claim_delta"
    CREATE_COMPANY = "create_company"
    LIST_COMPANIES = "list_companies"
    GET_COMPANY = "get_company"
    ADD_SOURCE_FILE = "add_source_file"
    ADD_THESIS_CLAIM = "add_thesis_claim"
    LIST_DELTAS = "list_deltas"
    GET_DELTA = "get_delta"
    DECIDE_DELTA = "decide_delta"
    # webhooks
    REGISTER_WEBHOOK = "register_webhook"
    LIST_WEBHOOKS = "list_webhooks"
    GET_WEBHOOK = "get_webhook"
    DELETE_WEBHOOK = "delete_webhook"
    LIST_DELIVERIES = "list_deliveries"
    REDELIVER = "redeliver"
    # projection: search (agents' tools, reviewers' case search)
    SEARCH_WORKSPACE = "search_workspace"
    INSPECT_CLAIMS = "inspect_claims"
    CASE_SEARCH = "case_search"
    # review: predictions' resolutions and agents' track records
    RESOLVE_PREDICTION = "resolve_prediction"
    AGENT_RECORD = "agent_record"


OWNER: dict[Command, Service] = {
    **{c: Service.STAGING for c in (Command.STAGE_SOURCES, Command.STAGE_CLAIMS, Command.STAGE_RELATIONS,
                                    Command.STAGE_MERGE, Command.STAGE_VERDICT)},
    **{c: Service.PROJECTION for c in (Command.GET_WORKSPACE, Command.INSPECT_SOURCES, Command.SET_FOCUS,
                                       Command.GET_COMPANY_CONTEXT, Command.CASE_LEDGER)},
    **{c: Service.REVIEW for c in (Command.CREATE_CASE, Command.LIST_CASES, Command.GET_CASE,
                                   Command.CASE_HISTORY, Command.CASE_GRAPH, Command.ADD_GUIDANCE,
                                   Command.RECORD_SOURCES, Command.RETIRE_RECORDS, Command.LIST_PROPOSALS, Command.GET_PROPOSAL,
                                   Command.DECIDE, Command.CASE_DIFF, Command.CLAIM_TIMELINE, Command.EXPORT_PAGE)},
    **{c: Service.THESIS_DELTA for c in (Command.PROPOSE_CLAIM_DELTA, Command.CREATE_COMPANY,
                                         Command.LIST_COMPANIES, Command.GET_COMPANY, Command.ADD_SOURCE_FILE,
                                         Command.ADD_THESIS_CLAIM, Command.LIST_DELTAS, Command.GET_DELTA,
                                         Command.DECIDE_DELTA)},
    **{c: Service.WEBHOOKS for c in (Command.REGISTER_WEBHOOK, Command.LIST_WEBHOOKS, Command.GET_WEBHOOK,
                                     Command.DELETE_WEBHOOK, Command.LIST_DELIVERIES, Command.REDELIVER)},
    **{c: Service.PROJECTION for c in (Command.SEARCH_WORKSPACE, Command.INSPECT_CLAIMS, Command.CASE_SEARCH)},
    **{c: Service.REVIEW for c in (Command.RESOLVE_PREDICTION, Command.AGENT_RECORD)},
}


@dataclass(frozen=True)
class Subjects:
    prefix: str = "threadline"

    def command(self, command: Command) -> str:
        return f"{self.prefix}.cmd.{OWNER[command].value}.{command.value}"

    def queue(self, service: Service) -> str:
        return f"{self.prefix}-{service.value}"

    def health(self, service: Service) -> str:
        return f"{self.prefix}.health.{service.value}"

    @staticmethod
    def is_command(subject: str) -> bool:
        return ".cmd." in subject

    @property
    def events_wildcard(self) -> str:
        return f"{self.prefix}.events.>"

    @property
    def outbox_committed(self) -> str:
        """A bare signal a service sends after committing outbox rows: it wakes the relay's leader."""
        return f"{self.prefix}.outbox.committed"

    def case_event(self, case_id: str, event_type: str) -> str:
        return f"{self.prefix}.events.case.{case_id}.{event_suffix(event_type)}"

    def company_event(self, company_id: str, event_type: str) -> str:
        return f"{self.prefix}.events.company.{company_id}.{event_suffix(event_type)}"

    def case_events(self, case_id: str | None = None) -> str:
        return f"{self.prefix}.events.case.{case_id}.>" if case_id else f"{self.prefix}.events.case.>"

    def company_events(self, company_id: str) -> str:
        return f"{self.prefix}.events.company.{company_id}.>"

    def projection_event(self, partition: int | str, case_id: str = "*", event_type: str = "") -> str:
        """Where the projection's own stream keeps a case's event (every event of the partition's cases when no
        type is given): shared/streams.py. Never published to: the stream sources the event stream."""
        tail = event_suffix(event_type) if event_type else ">"
        return f"{self.prefix}.projection.{partition}.case.{case_id}.{tail}"

    def webhook_event(self, webhook_id: str, event_type: str) -> str:
        return f"{self.prefix}.events.webhook.{webhook_id}.{event_suffix(event_type)}"


def event_suffix(event_type: str) -> str:
    """`threadline.ledger.changed` → `ledger.changed` (the subject tail after the aggregate id)."""
    return event_type.removeprefix("threadline.")


def owner_name(command: Command) -> str:
    """The service that answers a command, as people call it (`thesis-delta`)."""
    return OWNER[command].value
