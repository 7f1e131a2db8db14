"""Change events: their types, their `data` schemas, and the CloudEvents 1.0 envelope around them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.contracts import ClaimItem, MergeGroupItem, RecordedSource, RelationItem, VerdictClaim
from shared.event_base import EventData
from shared.resolution_events import ClaimGrounding, PredictionResolved, ResolvedPrediction
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
    WEBHOOK_FAILING = "threadline.webhook.failing"
    PREDICTION_RESOLVED = "threadline.prediction.resolved"


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
    staged_revision: int | None = Field(
        default=None, description="The revision it was checked against and stored at: its pin, or the newer "
        "revision it was rebased onto when the ledger moved on in nothing it depends on.")


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


class RecordProvenance(EventData):
    """Where a canonical record came from: the proposal and agent (absent when a reviewer recorded it
    directly), the decision and reviewer, and the revision that installed it."""

    proposal_id: str | None = Field(description="The proposal the record was staged in.")
    staged_by: str | None = Field(description="The agent that staged it.")
    staged_at: str | None = Field(description="When it was staged (ISO 8601).")
    decision_id: str | None = Field(description="The review decision that accepted it.")
    decided_by: str = Field(description="The reviewer who accepted or recorded it.")
    decided_at: str = Field(description="When (ISO 8601).")
    revision: int = Field(description="The case revision that installed it.")


class AddedSource(RecordedSource):
    """A source installed in the ledger: the fields of a `stage_sources` item, with its provenance."""

    provenance: RecordProvenance


class AddedClaim(ClaimItem):
    """A claim installed in the ledger: the fields of a `stage_claims` item, with its provenance."""

    provenance: RecordProvenance


class AddedVerdict(VerdictClaim):
    """The case's new verdict: the `stage_verdict` claim, the relation ids that are its bases, provenance."""

    bases: list[str] = Field(description="Ids of the relations that run from a canonical claim to the verdict.")
    provenance: RecordProvenance


class AddedRelation(RelationItem):
    """A relation installed in the ledger (also a verdict patch's relations), with its provenance."""

    provenance: RecordProvenance


class AddedGroup(MergeGroupItem):
    """A restatement (merge) group installed in the ledger, with its provenance."""

    provenance: RecordProvenance


class SupersededRecord(EventData):
    """A record replaced by a newer one (the previous verdict); it stays in history."""

    record: Literal["claim"]
    id: str
    superseded_by: str


class EndedRecord(EventData):
    """A record that left the ledger (retired, or a link of a claim that was retired or superseded)."""

    record: Literal["source", "claim", "relation", "group"]
    id: str
    note: str = Field(description="Why: the reviewer's note, or which claim took the link with it.")


class LostRecord(EventData):
    """A record whose retirement took support from a re-rated claim or verdict."""

    record: Literal["source", "claim", "relation"]
    id: str


class ReratedRecord(EventData):
    """A claim or verdict re-rated by a retirement (evidence health): what it lost, and what it is now."""

    claim_id: str = Field(description="The claim (or the case's verdict) re-rated.")
    health: Literal["unsupported", "weakened"] = Field(
        description="`unsupported`: none of the sources it cites is active; `weakened`: the verdict's basis "
        "lost support.")
    lost: list[LostRecord] = Field(description="The records whose retirement took its support (bounded).")


class LedgerChange(EventData):
    """Canonical records added, superseded or retired by one revision."""

    sources_added: list[AddedSource] = []
    claims_added: list[AddedClaim | AddedVerdict] = []
    relations_added: list[AddedRelation] = []
    groups_added: list[AddedGroup] = []
    superseded: list[SupersededRecord] = []
    retired: list[EndedRecord] = []
    rerated: list[ReratedRecord] = []
    grounding: list[ClaimGrounding] = []  # of every claim added, and of every claim citing a source retired
    resolved: list[ResolvedPrediction] = []  # a prediction's resolution


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


ClaimLabel = Literal["CONFIRMED", "INFERRED", "UNVERIFIED"]
DeltaCategory = Literal[
    "confirmed",
    "strengthened",
    "weakened",
    "contradicted",
    "superseded",
    "newly_introduced",
    "still_unresolved",
    "changed_timing_only",
    "changed_magnitude_only",
    "no_material_thesis_impact",
]


class ThesisClaimState(EventData):
    """A thesis claim as it reads at one revision."""

    claim_id: str = Field(description="The claim's id (UUID).")
    text: str = Field(description="The claim as written in the thesis.")
    label: ClaimLabel = Field(description="How well the claim is established.")
    section: str = Field(description="The thesis section the claim belongs to.")
    source_url: str | None = Field(description="The URL the claim rests on; null when it cites none.")


class ProposedThesisClaim(EventData):
    """A claim a delta adds to the thesis; it has no id until a reviewer accepts the delta."""

    text: str = Field(description="The new claim.")
    label: ClaimLabel = Field(description="How well the claim is established.")
    section: str = Field(description="The thesis section it goes into.")
    source_url: str = Field(description="The URL it rests on: the proposal's, else the delta's source file's.")


class AddedThesisClaim(EventData):
    """A claim added to the thesis, with the id it was given."""

    text: str = Field(description="The new claim.")
    label: ClaimLabel = Field(description="How well the claim is established.")
    section: str = Field(description="The thesis section it went into.")
    source_url: str | None = Field(description="The URL it rests on; null when it cites none.")
    claim_id: str = Field(description="The id the claim was given (UUID).")


class ThesisClaimUpdate(EventData):
    """A claim rewritten in place: the same id, before and after."""

    claim_id: str = Field(description="The claim changed (UUID).")
    before: ThesisClaimState = Field(description="The claim at the delta's base revision.")
    after: ThesisClaimState = Field(description="The claim once the delta is applied.")


class ThesisClaimRetirement(EventData):
    """A claim taken out of the active thesis (its history keeps it)."""

    claim_id: str = Field(description="The claim retired (UUID).")
    before: ThesisClaimState = Field(description="The claim at the delta's base revision.")
    reason: str = Field(description="Why the claim no longer holds, as the proposal put it.")


class ThesisDeltaClaims(EventData):
    """The claim changes a delta proposes, by action."""

    added: list[ProposedThesisClaim] = Field(description="New claims.")
    updated: list[ThesisClaimUpdate] = Field(description="Existing claims rewritten.")
    retired: list[ThesisClaimRetirement] = Field(description="Existing claims retired.")


class DeltaSource(EventData):
    """The one saved source file a delta comes from."""

    source_file_id: str = Field(description="The source file's id (UUID).")
    title: str = Field(description="The source file's saved title.")
    url: str = Field(description="The source file's saved URL.")


class ThesisDelta(EventData):
    """A proposed change of a thesis, checked against it at `baseRevision` (a diff, not yet applied)."""

    base_revision: int = Field(description="The thesis revision the delta was previewed against.")
    category: DeltaCategory = Field(description="How the source bears on the thesis.")
    summary: str = Field(description="The agent's summary of what the source changes.")
    source: DeltaSource = Field(description="The source file the delta comes from.")
    claims: ThesisDeltaClaims = Field(description="The claim changes, by action.")
    affected_claims: list[ThesisClaimState] = Field(
        description="Claims the source bears on without changing them, as they read at the base revision."
    )
    confirms: list[str] = Field(description="What the source confirms.")
    contradicts: list[str] = Field(description="What the source contradicts.")
    new_risks: list[str] = Field(description="Risks the source introduces.")
    follow_ups: list[str] = Field(description="Questions to follow up.")


class ThesisChanges(EventData):
    """The claim changes of one thesis revision, by action."""

    added: list[AddedThesisClaim] = Field(description="Claims added, with their new ids.")
    updated: list[ThesisClaimUpdate] = Field(description="Claims rewritten in place.")
    retired: list[ThesisClaimRetirement] = Field(description="Claims retired.")


class ThesisDeltaCommitted(EventData):
    """An agent committed a previewed claim delta; it now waits for human review."""

    company_id: str = Field(description="The company whose thesis the delta changes.")
    operation_id: str = Field(description="The delta operation (review it at /api/v1/deltas/{operationId}).")
    caller: str = Field(description="The agent that previewed and committed it.")
    category: DeltaCategory = Field(description="The delta's category (as in `delta.category`).")
    summary: str = Field(description="The delta's summary (as in `delta.summary`).")
    base_revision: int = Field(description="The thesis revision the delta applies to.")
    delta: ThesisDelta = Field(description="The delta exactly as previewed and stored.")


class ThesisDeltaDecided(EventData):
    """A reviewer accepted or rejected a committed delta."""

    company_id: str = Field(description="The company whose thesis the delta concerns.")
    operation_id: str = Field(description="The delta operation decided.")
    decision: Literal["accept", "reject"] = Field(description="The reviewer's decision.")
    reviewer: str = Field(description="Who decided.")
    note: str | None = Field(default=None, description="The reviewer's note; a rejection always carries one.")


class ThesisChanged(EventData):
    """The company's thesis moved from `previousRevision` to `revision`.

    An accepted delta moves it, or an operator writing a claim directly (then `operationId` is null).
    """

    company_id: str = Field(description="The company whose thesis changed.")
    revision: int = Field(description="The thesis revision after the change.")
    previous_revision: int = Field(description="The revision before it (always `revision` - 1).")
    operation_id: str | None = Field(
        default=None, description="The accepted delta; null when an operator wrote the claim directly."
    )
    reviewer: str = Field(description="Who applied the change.")
    changes: ThesisChanges = Field(description="What changed.")


class WebhookFailing(EventData):
    """A webhook's receiver kept failing one event for the whole retry period; its deliveries are paused
    (none is dropped) until an admin redelivers."""

    webhook_id: str = Field(description="The webhook (see GET /api/v1/webhooks/{webhookId}/deliveries).")
    host: str = Field(description="The receiver's host (never its whole URL, which may carry a secret).")
    event_id: str = Field(description="The event that could not be delivered.")
    event_type: str = Field(description="Its type.")
    attempts: int = Field(description="How many times it was sent.")
    first_attempt_at: str = Field(description="When the first attempt was made (ISO 8601).")
    last_error: str | None = Field(description="What the last attempt met: a status code or a network error.")


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
    EventType.WEBHOOK_FAILING: WebhookFailing,
    EventType.PREDICTION_RESOLVED: PredictionResolved,
}


class Event(BaseModel):
    """One change event, ready for the outbox: its subject, ordering key and CloudEvents envelope."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    event_type: EventType
    aggregate: str
    subject: str
    envelope: dict[str, Any]


TYPE_OF: dict[type[EventData], EventType] = {schema: event_type for event_type, schema in DATA_SCHEMAS.items()}


@dataclass(frozen=True)
class Aggregate:
    """What an event is about — a case or a company — and so its subject and ordering key."""

    kind: Literal["case", "company", "webhook"]
    id: str

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.id}"

    def subject(self, subjects: Subjects, event_type: EventType) -> str:
        if self.kind == "case":
            return subjects.case_event(self.id, event_type)
        if self.kind == "webhook":
            return subjects.webhook_event(self.id, event_type)
        return subjects.company_event(self.id, event_type)


def case(case_id: str) -> Aggregate:
    return Aggregate("case", case_id)


def company(company_id: str) -> Aggregate:
    return Aggregate("company", company_id)


def webhook(webhook_id: str) -> Aggregate:
    return Aggregate("webhook", webhook_id)


@dataclass(frozen=True)
class Origin:
    """Where an event comes from: the service that emits it and the request behind it."""

    subjects: Subjects
    service: str
    correlation_id: str | None = None
    traceparent: str | None = None


def new_event(origin: Origin, aggregate: Aggregate, data: EventData, *, revision: int | None = None) -> Event:
    """The CloudEvents envelope of one change, its type given by its data."""
    event_type = TYPE_OF[type(data)]
    event_id = str(uuid.uuid4())
    envelope: dict[str, Any] = {
        "specversion": SPEC_VERSION,
        "id": event_id,
        "source": f"/threadline/{origin.service}",
        "type": event_type.value,
        "subject": f"{aggregate.kind}/{aggregate.id}",
        "time": datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "data": data.model_dump(mode="json", by_alias=True),
    }
    if revision is not None:
        envelope["revision"] = revision
    if origin.correlation_id:
        envelope["correlationid"] = origin.correlation_id
    if origin.traceparent:
        envelope["traceparent"] = origin.traceparent
    return Event(event_id=event_id, event_type=event_type, aggregate=aggregate.key,
                 subject=aggregate.subject(origin.subjects, event_type), envelope=envelope)
