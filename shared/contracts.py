"""Message contracts between the gateway and the services: what each NATS command carries.

Tool arguments mirror the spec schemas in `shared/spec/` (the gateway validates against those first);
these models give the services typed, frozen values and refuse anything the schema would not allow.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any, Generic, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

# The base every contract builds on lives in contract_base.py (webhook_contracts.py uses it too); its
# names stay importable from here, where most contracts are.
from shared.contract_base import SLUG_PATTERN, Actor, Contract, Role, Slug, Storable, web_url  # noqa: F401


def _whole_number(value: Any) -> Any:
    """504.0 is the integer 504, as JSON Schema reads it (shared/spec/integers.py does the same for tool calls);
    504.5 and `true` stay what they are, and a strict body refuses them."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Revision = Annotated[int, BeforeValidator(_whole_number), Field(ge=0, le=9007199254740991)]
SourceType = Literal["primary", "official", "standards", "benchmark", "reporting", "analysis", "social"]
ClaimKind = Literal["observation", "interpretation", "prediction"]
Confidence = Literal["established", "supported", "disputed", "unknown", "contradicted"]
RelationType = Literal["supports", "contradicts", "qualifies", "amplifies"]
Focus = Literal["unresolved", "primary_evidence", "all"]
Scope = Literal["summary", "claims", "sources", "proposals", "unresolved", "guidance", "all"]


def bounded_text(max_length: int, min_length: int = 1) -> Any:
    """Free text of bounded length that can be stored as it is."""
    return Annotated[str, StringConstraints(min_length=min_length, max_length=max_length), Storable]


def _counted(max_length: int) -> BeforeValidator:
    def check(value: Any) -> Any:
        if isinstance(value, list) and len(value) > max_length:
            raise PydanticCustomError("too_long", "List should have at most {max_length} items, not {actual_length}",
                                      {"field_type": "List", "max_length": max_length, "actual_length": len(value)})
        return value

    return BeforeValidator(check)


def bounded_list(item: Any, max_length: int, min_length: int = 0) -> Any:
    """A list of at most `max_length` items whose length is checked before any item is: a list sent from
    outside with a million items is refused at the cost of one len()."""
    return Annotated[list[item], _counted(max_length), Field(min_length=min_length, max_length=max_length)]


def _named_host(url: str) -> str:
    # The host must be one DNS can carry (IDNA), and the URL free of spaces and control characters.
    try:
        host = urlsplit(url).hostname or ""
        host.encode("idna")
    except (UnicodeError, ValueError):
        host = ""
    if not host or any(ch.isspace() or unicodedata.category(ch) == "Cc" for ch in url):
        raise PydanticCustomError("url_host", "is not a web URL with a valid host name",
                                  {"hint": "send an http(s) URL such as https://example.org/page"})
    return url


def reachable_url(max_length: int) -> Any:
    """A URL the system will connect to (a webhook's): its host must be one a resolver can be asked about."""
    return Annotated[web_url(max_length), AfterValidator(_named_host)]


class RequestBody(Contract):
    """A body sent from outside (the HTTP API): types are strict, so `true` is no revision and "3" no number."""

    model_config = ConfigDict(strict=True)


# --- Threadline tool arguments (mirror shared/spec/threadline-tools.json) --------------------------


class SourceItem(Contract):
    id: Slug
    publisher: bounded_text(100)
    title: bounded_text(180)
    url: web_url(2048)
    publication_date: Annotated[
        str, StringConstraints(min_length=6, max_length=10, pattern=r"^(living|unknown|[0-9]{4}-[0-9]{2}-[0-9]{2})$")
    ]
    snapshot_date: Annotated[str, StringConstraints(min_length=10, max_length=10, pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]
    type: SourceType
    authority: bounded_text(240)
    evidence_text: bounded_text(4000)
    provenance_note: bounded_text(500)


class Transcription(Contract):
    label: bounded_text(120)
    text: bounded_text(8000)


class RecordedSource(SourceItem):
    """A source a reviewer records directly, optionally with labeled screenshot transcriptions."""

    transcriptions: bounded_list(Transcription, 20) = []


class ClaimItem(Contract):
    id: Slug
    text: bounded_text(240)
    kind: ClaimKind
    confidence: Confidence
    source_ids: Annotated[list[Slug], Field(min_length=1, max_length=9)]
    transformation_note: bounded_text(320)
    proposal_rationale: bounded_text(320)


class RelationItem(Contract):
    id: Slug
    source_claim_id: Slug
    target_claim_id: Slug
    type: RelationType
    rationale: bounded_text(320)


class MergeGroupItem(Contract):
    group_id: Slug
    label: bounded_text(80)
    member_claim_ids: Annotated[list[Slug], Field(min_length=2, max_length=5)]
    confidence: Literal["high", "low"]
    rationale: bounded_text(320)


class VerdictClaim(Contract):
    id: Slug
    text: bounded_text(240)
    kind: Literal["verdict"]
    confidence: Confidence
    source_ids: Annotated[list[Slug], Field(min_length=1, max_length=9)]
    transformation_note: bounded_text(320)
    lane: Literal["verdict"]
    order: Literal[1]


class VerdictRelation(RelationItem):
    type: Literal["supports", "contradicts", "qualifies"]


class VerdictPatch(Contract):
    """A stage_verdict call's one item: the verdict claim and every relation of the patch, decided whole."""

    claim: VerdictClaim
    relations: Annotated[list[VerdictRelation], Field(min_length=1, max_length=6)]


class Pinned(Contract):
    expected_case_id: Slug
    expected_revision: Revision


class StageSourcesArgs(Pinned):
    sources: Annotated[list[SourceItem], Field(min_length=1, max_length=4)]


class StageClaimsArgs(Pinned):
    claims: Annotated[list[ClaimItem], Field(min_length=1, max_length=4)]


class StageRelationsArgs(Pinned):
    relations: Annotated[list[RelationItem], Field(min_length=1, max_length=6)]


class StageMergeArgs(Pinned):
    groups: Annotated[list[MergeGroupItem], Field(min_length=1, max_length=2)]


class StageVerdictArgs(Pinned):
    claim: VerdictClaim
    relations: Annotated[list[VerdictRelation], Field(min_length=1, max_length=6)]


class GetWorkspaceArgs(Contract):
    scope: Scope | None = None
    cursor: Annotated[int, Field(ge=1, le=96)] | None = None


class InspectSourcesArgs(Contract):
    expected_case_id: Slug
    source_ids: Annotated[list[Slug], Field(min_length=1, max_length=9)]


class SetFocusArgs(Contract):
    expected_case_id: Slug
    focus: Focus


class GetCompanyContextArgs(Contract):
    company_id: str | None = None
    ticker: str | None = None
    source_file_id: str | None = None
    cursor: Annotated[int, Field(ge=1, le=200_000)] | None = None


A = TypeVar("A", bound=BaseModel)


class ToolRequest(Contract, Generic[A]):
    """An agent's tool call, after the gateway validated it against the spec schema.

    `discovered_case_id` is the case the agent most recently discovered with get_workspace, as the
    gateway (which keeps that per agent) knows it: calls that name a case act only on that one.
    """

    actor: Actor
    args: A
    discovered_case_id: Slug | None = None


class ProposeClaimDeltaRequest(Contract):
    """The Prism tool's arguments travel as the validated JSON object (two schema branches)."""

    actor: Actor
    args: dict[str, Any]


# --- reviewer and operator commands -----------------------------------------------------------------


class CreateCase(Contract):
    actor: Actor
    case_id: Slug
    title: bounded_text(200)
    question: bounded_text(1000)


class ListCases(Contract):
    actor: Actor


class CaseRef(Contract):
    actor: Actor
    case_id: Slug


class CaseHistory(Contract):
    """A page of a case's change log, newest first: the revisions below `before` (all when unset)."""

    actor: Actor
    case_id: Slug
    before: Revision | None = None
    limit: Annotated[int, Field(ge=1, le=500)] = 100


class AddGuidance(Contract):
    actor: Actor
    case_id: Slug
    text: bounded_text(2000)


class RecordSources(Contract):
    actor: Actor
    case_id: Slug
    sources: Annotated[list[RecordedSource], Field(min_length=1, max_length=50)]
    expected_revision: Revision | None = None


class RecordRef(Contract):
    record: Literal["source", "claim"]
    id: Slug


class RetireRecords(Contract):
    """A reviewer retires canonical records: they stay in history, no longer count as evidence."""

    actor: Actor
    case_id: Slug
    records: Annotated[list[RecordRef], Field(min_length=1, max_length=50)]
    note: bounded_text(2000)
    expected_revision: Revision | None = None


ProposalKind = Literal["sources", "claims", "relations", "merge", "verdict"]


class ListProposals(Contract):
    actor: Actor
    case_id: Slug
    status: Literal["pending", "accepted", "rejected", "decided", "all"] = "pending"
    limit: Annotated[int, Field(ge=1, le=500)] = 100
    # The reviewers' queue at scale (services/review/queue.py): filters, an order by age, a keyset cursor.
    kind: ProposalKind | None = None
    agent: bounded_text(100) | None = None
    q: bounded_text(200) | None = None
    duplicates: bool = False
    sort: Literal["oldest", "newest"] | None = None
    cursor: bounded_text(200) | None = None


class ProposalRef(Contract):
    actor: Actor
    proposal_id: str


class DuplicateOf(Contract):
    """An item rejected as a duplicate of the record `of`: a canonical or pending claim or source of the case."""

    item_id: bounded_text(200)
    of: bounded_text(200)


class Decide(Contract):
    actor: Actor
    proposal_id: str
    accept: Annotated[list[str], Field(max_length=50)] = []
    reject: Annotated[list[str], Field(max_length=50)] = []
    duplicates: Annotated[list[DuplicateOf], Field(max_length=50)] = []
    note: bounded_text(2000, min_length=0) | None = None
    # Every decision names the revision its reviewer saw: a decision on a stale view is refused.
    expected_revision: Revision


class CreateCompany(Contract):
    actor: Actor
    ticker: Annotated[str, StringConstraints(min_length=1, max_length=16, pattern=r"^[A-Z0-9.\-]+$")]
    name: bounded_text(200)


TICKER_SEARCH = r"^[A-Za-z0-9.\-]+$"


class ListCompanies(Contract):
    actor: Actor
    ticker: Annotated[str, StringConstraints(min_length=1, max_length=16, pattern=TICKER_SEARCH)] | None = None


class CompanyRef(Contract):
    actor: Actor
    company_id: str


class AddSourceFile(Contract):
    actor: Actor
    company_id: str
    title: bounded_text(300)
    url: web_url(2000)
    text: bounded_text(200_000)


class AddThesisClaim(Contract):
    actor: Actor
    company_id: str
    text: bounded_text(5000)
    label: Literal["CONFIRMED", "INFERRED", "UNVERIFIED"]
    section: bounded_text(120)
    source_url: bounded_text(2000, min_length=0) | None = None


class ListDeltas(Contract):
    actor: Actor
    company_id: str
    status: Literal["previewed", "committed", "accepted", "rejected", "all"] = "committed"


class DeltaRef(Contract):
    actor: Actor
    operation_id: str


class DeltaDecision(Contract):
    """A reviewer's decision on a committed delta; a rejection records its reason."""

    decision: Literal["accept", "reject"]
    note: bounded_text(2000, min_length=0) | None = Field(default=None, validate_default=True)

    @field_validator("note")
    @classmethod
    def _rejection_says_why(cls, note: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("decision") == "reject" and not (note or "").strip():
            raise PydanticCustomError(
                "note_required", "a rejection must say why", {"hint": "write the reason in note; the agent sees it"}
            )
        return note


class DecideDelta(DeltaDecision):
    actor: Actor
    operation_id: str
