"""The ledger as of a revision, read page by page from review for an export: never the whole case at once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson

from shared.history_contracts import ExportPage, ExportPart

PAGE = 250  # records a page: a page of claims at their longest stays well inside one NATS message

Fetch = Callable[[ExportPage], Awaitable[dict[str, Any]]]


@dataclass
class LedgerPages:
    """One case's records as of one revision, each part an async iterator over pages fetched on demand."""

    fetch: Fetch
    actor: Any
    case_id: str
    as_of: int | None
    case: dict[str, Any] | None = None

    async def open(self) -> LedgerPages:
        """Read the case (this refuses a revision the case does not have, before anything is streamed)."""
        page = await self.fetch(ExportPage(actor=self.actor, case_id=self.case_id, as_of=self.as_of, part="case"))
        self.case = orjson.loads(page["records"])[0]
        self.as_of = page["asOf"]
        return self

    async def each(self, part: ExportPart) -> AsyncIterator[dict[str, Any]]:
        after = None
        while True:
            page = await self.fetch(ExportPage(actor=self.actor, case_id=self.case_id, as_of=self.as_of, part=part,
                                               after=after, limit=PAGE))
            for record in orjson.loads(page["records"]):
                yield record
            if page["next"] is None:
                return
            after = page["next"]


async def _grouped(pages: LedgerPages, part: ExportPart, key: str) -> AsyncIterator[list[dict[str, Any]]]:
    """A part's rows grouped by the claim named by `key`, in claim id order (as the claims come)."""
    batch: list[dict[str, Any]] = []
    async for row in pages.each(part):
        if batch and batch[0][key] != row[key]:
            yield batch
            batch = []
        batch.append(row)
    if batch:
        yield batch


class ByClaim:
    """A part grouped by claim, read alongside the claims (both in the database's claim id order): `of(claim)` is the
    claim's rows, each page fetched once, never the whole part at once. Ids are matched on equality, never compared
    with Python's `<`: the database orders them by its collation (en-US puts c-2 before c1, Python after), and every
    claim a part names is one of the claims, installed by the same revision or earlier."""

    def __init__(self, pages: LedgerPages, part: ExportPart, key: str) -> None:
        self.groups = _grouped(pages, part, key)
        self.key = key
        self.pending: list[dict[str, Any]] | None = None
        self.started = False

    async def of(self, claim_id: str) -> list[dict[str, Any]]:
        if not self.started:
            self.pending, self.started = await anext(self.groups, None), True
        if self.pending is None or self.pending[0][self.key] != claim_id:
            return []
        rows, self.pending = self.pending, await anext(self.groups, None)
        return rows


@dataclass(frozen=True)
class Iris:
    """The IRIs an export names its records by, under the deployment's public address (THREADLINE_PUBLIC_URL), so
    that one record has one IRI however the export was asked for. They are names, not addresses: of them the
    gateway serves only the case's (GET /api/v1/cases/{caseId}); a claim's page is /ui/cases/{caseId}/claims/{id}."""

    base: str  # e.g. http://127.0.0.1:8700

    def case(self, case_id: str) -> str:
        return f"{self.base}/api/v1/cases/{quote(case_id, safe='')}"

    def record(self, case_id: str, kind: str, record_id: str | int) -> str:
        return f"{self.case(case_id)}/{kind}/{quote(str(record_id), safe='')}"

    def nanopub(self, case_id: str, claim_id: str, as_of: int) -> str:
        """A nanopublication is immutable: exported as of another revision it says something else (its asOf, the
        claim's status and relations then), so it is another nanopublication with an IRI of its own."""
        return f"{self.record(case_id, 'revisions', as_of)}/nanopubs/{quote(claim_id, safe='')}"

    def person(self, kind: str, name: str) -> str:
        return f"{self.base}/api/v1/{kind}/{quote(name, safe='')}"
