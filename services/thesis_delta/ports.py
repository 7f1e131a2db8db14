"""What thesis-delta's use cases ask of storage and of the projection: companies, claims, files, operations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol

from services.thesis_delta.domain import Company, Operation, SourceFile, ThesisClaim, ThesisStep
from shared.contracts import Actor
from shared.replies import CompanyContext
from shared.uow import UnitOfWork


class Companies(Protocol):
    async def get(self, company_id: str, *, lock: bool = False) -> Company | None:
        """The company; `lock` holds it, and so its thesis revision, until the unit of work ends."""

    async def by_ticker(self, ticker: str) -> Company | None: ...

    async def ids_between(self, low: str, high: str, limit: int) -> list[str]:
        """Up to `limit` company ids from `low` to `high`, in order (the ids a prefix covers)."""

    async def add(self, company: Company, created_by: str) -> bool:
        """Store a new company unless its id or its ticker is taken; True when stored."""

    async def bump(self, company_id: str) -> int:
        """Add 1 to the thesis revision; the new revision."""

    async def listed(self, ticker: str | None) -> list[tuple[Company, int]]:
        """Companies in ticker order (only `ticker`'s when given), each with its count of committed deltas."""


class Claims(Protocol):
    """A thesis's claims; every write also appends the claim's version to its history."""

    async def of(self, company_id: str) -> dict[str, ThesisClaim]:
        """Every claim of the thesis, active and retired, oldest first."""

    async def by_ids(self, company_id: str, claim_ids: Sequence[str]) -> list[ThesisClaim]:
        """The company's claims with these ids as they read now, in the order of `claim_ids`."""

    async def add(self, step: ThesisStep, claim_id: str, claim: Mapping[str, Any]) -> None: ...

    async def update(self, step: ThesisStep, claim_id: str, before: Mapping[str, Any],
                     after: Mapping[str, Any]) -> None: ...

    async def retire(self, step: ThesisStep, claim_id: str, before: Mapping[str, Any]) -> None: ...


class SourceFiles(Protocol):
    async def get(self, source_file_id: str) -> SourceFile | None: ...

    async def add(self, source: SourceFile, text: str, created_by: str) -> None: ...

    async def of(self, company_id: str) -> list[SourceFile]:
        """The company's source files, oldest first, with the length of each text."""


class Operations(Protocol):
    async def get(self, operation_id: str, *, lock: bool = False) -> Operation | None: ...

    async def ids_between(self, low: str, high: str, limit: int) -> list[str]:
        """Up to `limit` operation ids from `low` to `high`, in order (the ids a prefix covers)."""

    async def by_key(self, company_id: str, caller: str, key: str) -> Operation | None: ...

    async def add(self, operation: Operation) -> bool:
        """Store a new operation unless its (company, caller, idempotency key) is taken; True when stored."""

    async def save(self, operation: Operation) -> None:
        """Store how far the operation got: its status, commit and decision."""

    async def of(self, company_id: str, status: str | None, limit: int = 100) -> list[Operation]:
        """The company's operations (of one status, when given), newest first."""


class CompanyContexts(Protocol):
    async def of(self, company_id: str, actor: Actor) -> CompanyContext:
        """get_company_context's answer, from the projection that owns it; Unavailable when it cannot be had."""


class ThesisUnitOfWork(UnitOfWork):
    companies: Companies
    claims: Claims
    source_files: SourceFiles
    operations: Operations
    contexts: CompanyContexts
    secret: bytes  # signs commit tokens
    operation_ttl: timedelta  # how long a preview may be committed
