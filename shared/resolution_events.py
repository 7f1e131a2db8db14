"""Event data of grounding and predictions' resolutions (shared/events.py registers them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.event_base import EventData


class ClaimGrounding(EventData):
    """A claim's grounding from its active sources (primary, secondary, social-only, none) and origins."""

    claim_id: str
    grounding: Literal["primary", "secondary", "social-only", "none"]
    independent_origins: int = Field(description="Distinct publishers among its active sources.")


class ResolvedPrediction(EventData):
    """A canonical prediction claim resolved by a reviewer (the latest resolution of a claim counts)."""

    claim_id: str
    resolution_id: str
    outcome: Literal["true", "false", "void"]
    source_id: str = Field(description="The canonical source the resolution cites.")
    resolved_on: str = Field(description="The day it resolved (YYYY-MM-DD).")
    supersedes: str | None = Field(default=None, description="The earlier resolution this one replaces.")


class PredictionResolved(ResolvedPrediction):
    """A reviewer resolved a prediction: the case's revision moved by one (its `ledger.changed` says so too)."""

    case_id: str
    revision: int
    resolved_by: str
    note: str | None = None
