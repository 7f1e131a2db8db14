"""Change events: their types, their `data` schemas, and the CloudEvents 1.0 envelope around them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from shared.subjects import Subjects

SPEC_VERSION = "1.0"


class EventType(StrEnum):
    CASE_CREATED = "threadline.case.created"
    PROPOSAL_STAGED = "threadline.proposal.staged"
    PROPOSAL_DECIDED = "threadline.proposal.decided"
    LEDGER_CHANGED = "threadline.ledger.changed"
    FOCUS_CHANGED = "threadline.focus.changed"
    GUIDANCE_ADDED = "threadline.guidance.added"
    THESIS_DELTA_COMMITTED = "threadline.thesis.delta.committed"
    THESIS_DELTA_DECIDED = "threadline.thesis.delta.decided"
    THESIS_CHANGED = "threadline.thesis.changed"


class EventData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


class CaseCreated(EventData):
    """A case was opened; its ledger starts at revision 0."""

    case_id: str
    title: str
    question: str
    created_by: str


class ProposalStaged(EventData):
    """An agent staged a proposal; nothing canonical changed."""

    case_id: str
    proposal_id: str
    kind: str
    item_ids: list[str]
    agent: str
    pinned_revision: int


class ProposalDecided(EventData):
    """A reviewer decided items of a proposal (accepted items changed the ledger in the same revision)."""

    case_id: str
    proposal_id: str
    decision_id: str
    reviewer: str
    accepted: list[str]
    rejected: list[str]
    refused: list[dict[str, str]]
    note: str | None = None
    revision: int


class LedgerChange(EventData):
    """Canonical records added, superseded or retired by one revision."""

    sources_added: list[dict[str, Any]] = []
    claims_added: list[dict[str, Any]] = []
    relations_added: list[dict[str, Any]] = []
    groups_added: list[dict[str, Any]] = []
    superseded: list[dict[str, Any]] = []
    retired: list[dict[str, Any]] = []


class LedgerChanged(EventData):
    """The case's canonical ledger moved from `previousRevision` to `revision` (exactly one step)."""

    case_id: str
    revision: int
    previous_revision: int
    actor: str
    summary: str
    decision_id: str | None = None
    proposal_id: str | None = None
    changes: LedgerChange


class FocusChanged(EventData):
    """The case's presentation focus changed (the ledger and its revision did not)."""

    case_id: str
    previous: str
    focus: str
    agent: str


class GuidanceAdded(EventData):
    """A reviewer wrote guidance for the case's agents (it appears in get_workspace guidance)."""

    case_id: str
    note_id: str
    author: str
    text: str


class ThesisDeltaCommitted(EventData):
    """An agent committed a previewed claim delta; it now waits for human review."""

    company_id: str
    operation_id: str
    caller: str
    category: str
    summary: str
    base_revision: int
    delta: dict[str, Any]


class ThesisDeltaDecided(EventData):
    """A reviewer accepted or rejected a committed delta."""

    company_id: str
    operation_id: str
    decision: str
    reviewer: str
    note: str | None = None


class ThesisChanged(EventData):
    """The company's thesis moved from `previousRevision` to `revision` by an accepted delta."""

    company_id: str
    revision: int
    previous_revision: int
    operation_id: str | None = None
    reviewer: str
    changes: dict[str, Any]


DATA_SCHEMAS: dict[EventType, type[EventData]] = {
    EventType.CASE_CREATED: CaseCreated,
    EventType.PROPOSAL_STAGED: ProposalStaged,
    EventType.PROPOSAL_DECIDED: ProposalDecided,
    EventType.LEDGER_CHANGED: LedgerChanged,
    EventType.FOCUS_CHANGED: FocusChanged,
    EventType.GUIDANCE_ADDED: GuidanceAdded,
    EventType.THESIS_DELTA_COMMITTED: ThesisDeltaCommitted,
    EventType.THESIS_DELTA_DECIDED: ThesisDeltaDecided,
    EventType.THESIS_CHANGED: ThesisChanged,
}


class Event(BaseModel):
    """One change event, ready for the outbox: its subject, ordering key and CloudEvents envelope."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    event_type: EventType
    aggregate: str
    subject: str
    envelope: dict[str, Any]


def case_event(
    subjects: Subjects,
    event_type: EventType,
    data: EventData,
    *,
    case_id: str,
    service: str,
    revision: int | None = None,
    correlation_id: str | None = None,
    traceparent: str | None = None,
) -> Event:
    return _event(
        subjects.case_event(case_id, event_type),
        f"case:{case_id}",
        f"case/{case_id}",
        event_type,
        data,
        service=service,
        revision=revision,
        correlation_id=correlation_id,
        traceparent=traceparent,
    )


def company_event(
    subjects: Subjects,
    event_type: EventType,
    data: EventData,
    *,
    company_id: str,
    service: str,
    revision: int | None = None,
    correlation_id: str | None = None,
    traceparent: str | None = None,
) -> Event:
    return _event(
        subjects.company_event(company_id, event_type),
        f"company:{company_id}",
        f"company/{company_id}",
        event_type,
        data,
        service=service,
        revision=revision,
        correlation_id=correlation_id,
        traceparent=traceparent,
    )


def _event(
    subject: str,
    aggregate: str,
    ce_subject: str,
    event_type: EventType,
    data: EventData,
    *,
    service: str,
    revision: int | None,
    correlation_id: str | None,
    traceparent: str | None,
) -> Event:
    if not isinstance(data, DATA_SCHEMAS[event_type]):
        raise TypeError(f"{event_type} carries {DATA_SCHEMAS[event_type].__name__}, not {type(data).__name__}")
    event_id = str(uuid.uuid4())
    envelope: dict[str, Any] = {
        "specversion": SPEC_VERSION,
        "id": event_id,
        "source": f"/threadline/{service}",
        "type": event_type.value,
        "subject": ce_subject,
        "time": datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "data": data.model_dump(mode="json", by_alias=True),
    }
    if revision is not None:
        envelope["revision"] = revision
    if correlation_id:
        envelope["correlationid"] = correlation_id
    if traceparent:
        envelope["traceparent"] = traceparent
    return Event(event_id=event_id, event_type=event_type, aggregate=aggregate, subject=subject, envelope=envelope)
