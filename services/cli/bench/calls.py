"""What a benchmark's agents send and how they read the answers: the official MCP client over Streamable
HTTP, `stage_claims` arguments of made-up claims, and a tool result's outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from services.cli.bench.system import HTTP_TIMEOUT


def bench_claim(claim_id: str, source_ids: list[str]) -> dict[str, Any]:
    return {
        "id": claim_id,
        "text": f"Bench claim {claim_id} holds.",
        "kind": "observation",
        "confidence": "supported",
        "sourceIds": source_ids,
        "transformationNote": "Restated the measured figure.",
        "proposalRationale": "One independently reviewable proposition.",
    }


def stage_claims_args(case_id: str, revision: int, claim_ids: list[str], source_ids: list[str]) -> dict[str, Any]:
    return {"expectedCaseId": case_id, "expectedRevision": revision,
            "claims": [bench_claim(c, source_ids[:1]) for c in claim_ids]}


@asynccontextmanager
async def mcp_agent(url: str, token: str) -> AsyncIterator[Client]:
    """The official MCP client over Streamable HTTP, as an agent host uses it."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=HTTP_TIMEOUT)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def tool_outcome(result: Any) -> tuple[dict[str, Any] | None, str | None]:
    """A tool result's JSON and, when it is an error, the error's code."""
    content = result.structured_content or {}
    if result.is_error:
        return content, (content.get("error") or {}).get("code", "tool_error")
    return content, None
