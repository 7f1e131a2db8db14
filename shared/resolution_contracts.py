"""Requests of predictions' resolutions and agents' track records (DESIGN.md, "Predictions resolve")."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from shared.contract_base import Actor, Contract, Slug
from shared.contracts import Revision, bounded_text

Day = Annotated[str, StringConstraints(min_length=10, max_length=10, pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]
AgentName = Annotated[str, StringConstraints(min_length=1, max_length=100)]


class ResolvePrediction(Contract):
    """A reviewer resolves a canonical prediction claim, citing a canonical source and the day it resolved;
    a later resolution of the same claim supersedes it, and says why in its note."""

    actor: Actor
    case_id: Slug
    claim_id: Slug
    outcome: Literal["true", "false", "void"]
    source_id: Slug
    resolved_on: Day
    note: bounded_text(2000) | None = None
    expected_revision: Revision | None = Field(default=None)


class AgentRecordRef(Contract):
    """An agent's track record, computed from the ledger."""

    actor: Actor
    agent: AgentName
