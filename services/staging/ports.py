"""What staging's use cases ask of storage: one read of everything a call depends on, and one write."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from services.staging.domain import Proposal, StageFacts
from shared.ledger import References
from shared.review_checks import CheckFacts
from shared.uow import UnitOfWork

STORED, REPLAYED = "stored", "replayed"


class LedgerMoved(Exception):
    """A decision moved the case between a call's check and its write: check again, then write."""


class StageReads(Protocol):
    async def stage_facts(self, case_id: str, pin: int, refs: References, agent: str,
                          digest: str, compared: tuple[list[str], list[str]] = ([], [])) -> StageFacts | None:
        """The case's revision and the facts a call needs (None when there is no such case)."""

    async def review_facts(self, case_id: str, items: Sequence[Any], relations: bool) -> CheckFacts:
        """What the review checks of these items read (shared/review_check_facts.py), in one round trip."""


class Proposals(Protocol):
    def add(self, proposal: Proposal) -> None:
        """Queue the proposal; the unit of work's commit writes it with its event."""


class StagingUnitOfWork(UnitOfWork):
    """Commit writes the queued proposal and its events in one statement, on one condition: the case is
    still at the revision the call was checked against (else LedgerMoved). It returns STORED, or
    (REPLAYED, proposal id) when an identical call of the same agent stored first."""

    ledger: StageReads
    proposals: Proposals
