"""Requests of predictions' resolutions and agents' track records (DESIGN.md, "Predictions resolve")."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints

from shared.contract_base import Actor, Contract, Slug
from shared.contracts import Revision, bounded_text


def _calendar_day(value: str) -> str:
    try:
        date.fromisoformat(value)
    except ValueError:  # 2026-02-30 has the shape of a day, but is none
        raise ValueError("is not a calendar day") from None
    return value


# A calendar day as YYYY-MM-DD: checked with the rest of a request, so one refusal names every field at fault.
Day = Annotated[str, StringConstraints(min_length=10, max_length=10, pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
                AfterValidator(_calendar_day)]
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
