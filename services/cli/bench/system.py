"""The running system as the benchmarks use it: bench cases and tokens, and reviewers on the HTTP API.

What the agents send over MCP is in calls.py."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2

from services.gateway.auth import TokenStore
from shared.db.session import Database
from shared.errors import Unavailable
from shared.settings import Settings

SOURCES_PER_CASE = 3
HTTP_TIMEOUT = 60.0


def bench_source(source_id: str) -> dict[str, Any]:
    return {
        "id": source_id,
        "publisher": "Threadline bench",
        "title": f"Bench record {source_id}",
        "url": f"https://example.org/bench/{source_id}",
        "publicationDate": "2026-01-01",
        "snapshotDate": "2026-01-02",
        "type": "primary",
        "authority": "A record the benchmark made up.",
        "evidenceText": f"Measured figures of {source_id}.",
        "provenanceNote": "Recorded by `threadline bench`; not a real publication.",
    }


def machine() -> dict[str, Any]:
    """How busy the machine was: the benches share it, so a reader can tell a quiet run from a noisy one."""
    one, five, _ = os.getloadavg()
    return {"cores": os.cpu_count(), "loadAverage1m": round(one, 2), "loadAverage5m": round(five, 2)}


def replicas(runtime: dict[str, Any]) -> dict[str, int] | None:
    """Processes per service, from runtime.json's `services` ("staging", "staging-2", …); None if it has none."""
    services = runtime.get("services")
    if not services:
        return None
    counts: dict[str, int] = {}
    for key in services:
        name, _, number = key.rpartition("-")
        service = name if name and number.isdigit() else key
        counts[service] = counts.get(service, 0) + 1
    return counts


@dataclass(frozen=True)
class BenchCase:
    case_id: str
    source_ids: list[str]
    revision: int


@dataclass
class System:
    """A running Threadline found like every CLI command finds it, and what the bench made in it."""

    settings: Settings
    http_url: str
    db: Database
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    issued: list[str] = field(default_factory=list)
    admin_token: str = ""
    cases_made: int = 0

    @property
    def mcp_url(self) -> str:
        return f"{self.http_url}/mcp"

    @classmethod
    @asynccontextmanager
    async def connect(cls, settings: Settings, attempts: int = 1) -> AsyncIterator[System]:
        """`attempts`: health checks to try (5 s each) before giving up: more for a system under CPU quotas."""
        http_url = (settings.url or settings.resolved_http_url()).rstrip("/")
        await _check_gateway(http_url, attempts)
        db = Database.from_url(settings.resolved_database_url(), pool_size=2, application_name="threadline-bench")
        system = cls(settings, http_url, db)
        try:
            system.admin_token = await system.token("admin", f"bench-admin-{system.run_id}")
            yield system
        finally:
            await system.revoke_tokens()
            await db.dispose()

    async def token(self, role: str, name: str, case_id: str | None = None) -> str:
        """A bearer token issued the way `threadline token create` does; revoked when the bench ends."""
        issued = await TokenStore(self.db).issue(role=role, name=name, created_by="threadline bench",
                                                 case_id=case_id)
        self.issued.append(issued["tokenId"])
        return issued["token"]

    async def revoke_tokens(self) -> None:
        store = TokenStore(self.db)
        for token_id in self.issued:
            await store.revoke(token_id)
        self.issued.clear()

    def api(self, token: str | None = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(base_url=f"{self.http_url}/api/v1", timeout=HTTP_TIMEOUT,
                                  headers={"Authorization": f"Bearer {token or self.admin_token}"})

    async def new_case(self, label: str, case_id: str | None = None) -> BenchCase:
        """A fresh case with canonical sources recorded through the API (so the claims have ground)."""
        self.cases_made += 1
        case_id = case_id or f"bench-{label}-{self.run_id}-{self.cases_made}"
        source_ids = [f"{case_id}-s{n}" for n in range(SOURCES_PER_CASE)]
        async with self.api() as api:
            _expect(await api.post("/cases", json={"caseId": case_id, "title": f"Bench ({label})",
                                                   "question": "How fast does Threadline take staged claims?"}))
            recorded = _expect(await api.post(f"/cases/{case_id}/sources",
                                              json={"sources": [bench_source(s) for s in source_ids]}))
        return BenchCase(case_id, source_ids, recorded["revision"])

    async def agent_tokens(self, case: BenchCase, count: int, label: str) -> list[str]:
        return [await self.token("agent", f"{case.case_id}-{label}-{n}", case_id=case.case_id) for n in range(count)]


class Reviewer:
    """A reviewer on the HTTP API: what is pending, the case's revision, decisions."""

    def __init__(self, api: httpx2.AsyncClient) -> None:
        self.api = api

    async def revision(self, case_id: str) -> int:
        return _expect(await self.api.get(f"/cases/{case_id}"))["revision"]

    async def pending(self, case_id: str, limit: int = 100) -> list[dict[str, Any]]:
        listed = await self.api.get(f"/cases/{case_id}/proposals", params={"status": "pending", "limit": limit})
        return _expect(listed)["proposals"]

    async def accept(self, proposal_id: str, item_ids: list[str], expected_revision: int
                     ) -> tuple[dict[str, Any] | None, str | None]:
        """The decision, or None and the refusal's code."""
        response = await self.api.post(f"/proposals/{proposal_id}/decisions", json={
            "accept": item_ids, "reject": [], "expectedRevision": expected_revision})
        body = response.json()
        if response.status_code >= 400:
            return None, (body.get("error") or {}).get("code", str(response.status_code))
        return body, None


def _expect(response: httpx2.Response) -> dict[str, Any]:
    if response.status_code >= 400:
        raise Unavailable(f"the bench's setup call {response.request.method} {response.request.url.path} "
                          f"answered {response.status_code}: {response.text[:300]}")
    return response.json()


async def _check_gateway(http_url: str, attempts: int = 1) -> None:
    for attempt in range(1, attempts + 1):
        try:
            async with httpx2.AsyncClient(timeout=5) as http:
                answer = await http.get(f"{http_url}/healthz")
            break
        except httpx2.HTTPError as error:
            if attempt == attempts:
                raise Unavailable(f"no Threadline gateway answers at {http_url} ({error.__class__.__name__}"
                                  f"{f', {attempts} tries' if attempts > 1 else ''})",
                                  hint="start `threadline up` (or point THREADLINE_URL / --data-dir at a running one)"
                                  ) from None
            await asyncio.sleep(1.0)
    if answer.status_code != 200:
        raise Unavailable(f"{http_url}/healthz answered {answer.status_code}", hint="is the system starting?")
