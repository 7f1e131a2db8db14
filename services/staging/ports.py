"""What staging's use cases ask of storage: the case pin, the ledger's facts, and the proposals it stores."""

from __future__ import annotations

from typing import Protocol

from services.staging.domain import Proposal
from shared.ledger import LedgerFacts, References
from shared.uow import UnitOfWork


class CasePins(Protocol):
    async def pin(self, case_id: str) -> int | None:
        """The case's revision, held so that no decision moves it until the unit of work ends."""


class LedgerReader(Protocol):
    async def facts(self, case_id: str, revision: int, refs: References) -> LedgerFacts: ...


class Proposals(Protocol):
    async def add(self, proposal: Proposal) -> None: ...


class StagingUnitOfWork(UnitOfWork):
    cases: CasePins
    ledger: LedgerReader
    proposals: Proposals
