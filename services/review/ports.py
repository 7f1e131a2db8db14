"""What review's use cases ask of storage: cases, proposals and decisions, the canonical ledger."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from services.review.domain import Decision, StoredProposal
from shared.events import LedgerChanged
from shared.health import Basis, Rating
from shared.ledger import LedgerFacts, LedgerWriter, Provenance, References
from shared.uow import UnitOfWork


class Cases(Protocol):
    async def lock(self, case_id: str) -> int | None:
        """The case's revision, locked: decisions on one case apply one at a time, and no stage call runs."""

    async def bump(self, case_id: str) -> int: ...

    async def add(self, case_id: str, title: str, question: str, created_by: str) -> bool: ...

    async def get(self, case_id: str) -> dict[str, Any] | None: ...

    async def all(self) -> list[dict[str, Any]]: ...

    async def focus(self, case_id: str) -> str | None: ...

    async def add_guidance(self, note_id: str, case_id: str, author: str, text: str) -> None: ...


class Proposals(Protocol):
    async def case_of(self, proposal_id: str) -> str | None: ...
    async def possible_duplicates(self, case_id: str, proposal_ids: Sequence[str]) -> dict[tuple[str, str], list[dict[str, Any]]]: ...

    async def staged_checks(self, proposal_ids: Sequence[str]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """(proposal id, item id) -> the review checks staging flagged the item with, warnings first."""

    async def ids_between(self, low: str, high: str, limit: int) -> list[str]:
        """Up to `limit` proposal ids from `low` to `high`, in order (the ids a prefix covers)."""

    async def get(self, proposal_id: str) -> StoredProposal | None: ...

    async def with_items(self, rows: Sequence[Any]) -> list[StoredProposal]: ...

    async def listed(self, case_id: str, status: str, limit: int) -> list[StoredProposal]: ...

    async def recently_decided(self, case_id: str, status: str, limit: int) -> list[StoredProposal]: ...

    async def record(self, decision: Decision) -> None: ...

    async def decision_by_digest(self, proposal_id: str, reviewer: str, digest: str) -> dict[str, Any] | None:
        """The recorded decision an identical request made (as decisions_of lists them), if any."""

    async def decisions_of(self, proposal_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]: ...

    async def proposals_of_decisions(self, decision_ids: Sequence[str]) -> dict[str, str]: ...


class Ledger(LedgerWriter, Protocol):
    async def facts(self, case_id: str, revision: int, refs: References) -> LedgerFacts: ...

    async def statuses(self, case_id: str, source_ids: list[str],
                       claim_ids: list[str]) -> dict[tuple[str, str], str]: ...

    async def retire(self, case_id: str, record: str, record_id: str,
                     provenance: Provenance) -> list[tuple[str, str]]:
        """Retire an active source or claim (a claim takes its links along); what else ended."""

    async def note_retirement(self, case_id: str, revision: int, reviewer: str, note: str,
                              named: Sequence[tuple[str, str]], ended: Sequence[tuple[str, str]], at: datetime) -> None:
        """Keep the retirement's note with the records it named and the links that ended with them."""

    async def citations_of(self, case_id: str, source_ids: list[str]) -> dict[str, dict[str, str]]:
        """Per active claim citing any of the sources: the status of every source it cites."""

    async def verdict_bases(self, case_id: str) -> tuple[str | None, list[Basis]]:
        """The active verdict and every basis it was accepted with (ended ones too)."""

    async def ratings(self, case_id: str) -> dict[str, list[tuple[str, str]]]: ...

    async def rate(self, case_id: str, ratings: Sequence[Rating], revision: int) -> None: ...

    async def graph(self, case_id: str, as_of: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """The records the argument map draws: active claims, relations, groups; the sources claims cite
        (`as_of`: those active at that revision, rated as they were then)."""

    async def evidence(self, case_id: str, refs: References) -> dict[str, dict[str, dict[str, Any]]]:
        """The sources (their evidence) and claims (their text) the refs name, as they are in the ledger."""

    async def resolutions_of(self, case_id: str, claim_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The latest resolution of each named canonical prediction, with the claim's text."""

    async def log(self, step: LedgerChanged, at: datetime, correlation_id: str | None) -> None: ...

    async def history(self, case_id: str, limit: int, before: int | None) -> list[dict[str, Any]]: ...

    async def ended(self, case_id: str, oldest: int, newest: int) -> list[dict[str, Any]]: ...


class History(Protocol):
    """The ledger read back (services/review/history_repository.py): diffs, a claim's life, export pages."""

    async def diff(self, case_id: str, start: int, end: int, cap: int) -> dict[str, list[dict[str, Any]]]: ...

    async def claim(self, case_id: str, claim_id: str) -> dict[str, Any] | None: ...

    async def links_of(self, case_id: str, claim_id: str, cap: int) -> dict[str, list[dict[str, Any]]]: ...

    async def stagings_of(self, case_id: str, claim_id: str, cap: int) -> list[dict[str, Any]]: ...

    async def case_row(self, case_id: str) -> dict[str, Any] | None: ...

    async def revisions_page(self, case_id: str, as_of: int, after: int, limit: int) -> list[dict[str, Any]]: ...


class Queue(Protocol):
    """The reviewers' queue at scale (services/review/queue_repository.py)."""

    async def page(self, wanted: Any) -> list[Any]: ...

    async def count(self, wanted: Any) -> int: ...

    async def records_named(self, case_id: str, record: str, ids: Sequence[str]) -> dict[str, str]: ...


class Resolutions(Protocol):
    """Predictions' resolutions (services/review/resolutions.py), append-only."""

    async def claim(self, case_id: str, claim_id: str) -> Any: ...

    async def source_status(self, case_id: str, source_id: str) -> str | None: ...

    async def latest(self, case_id: str, claim_id: str) -> dict[str, Any] | None: ...

    async def latest_in_case(self, case_id: str, as_of: int | None = None) -> dict[str, dict[str, Any]]: ...

    async def add(self, row: dict[str, Any]) -> None: ...


class ReviewUnitOfWork(UnitOfWork):
    cases: Cases
    proposals: Proposals
    ledger: Ledger
    history: History
    queue: Queue
    resolutions: Resolutions
