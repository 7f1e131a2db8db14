"""Builders of valid tool arguments and cases for tests."""

from __future__ import annotations

import secrets
from typing import Any


def unique(prefix: str = "case") -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


async def new_case(stack: Any, case_id: str | None = None, question: str = "Is the sky blue?") -> str:
    case_id = case_id or unique()
    async with stack.api("admin") as api:
        created = await api.post("/api/v1/cases", json={"caseId": case_id, "title": "Test case", "question": question})
        assert created.status_code == 201, created.text
    return case_id


def source_item(source_id: str, **overrides: Any) -> dict[str, Any]:
    return {
        "id": source_id,
        "publisher": "Example Agency",
        "title": f"Record {source_id}",
        "url": f"https://example.org/{source_id}",
        "publicationDate": "2024-05-01",
        "snapshotDate": "2026-11-01",
        "type": "primary",
        "authority": "The agency's own measurements.",
        "evidenceText": f"Evidence text of {source_id}.",
        "provenanceNote": "Staged by a test agent; not independently verified.",
        **overrides,
    }


def claim_item(claim_id: str, source_ids: list[str], **overrides: Any) -> dict[str, Any]:
    return {
        "id": claim_id,
        "text": f"Claim {claim_id} holds.",
        "kind": "observation",
        "confidence": "supported",
        "sourceIds": source_ids,
        "transformationNote": "Quoted the key figure.",
        "proposalRationale": "Independently reviewable.",
        **overrides,
    }


def relation_item(relation_id: str, source: str, target: str, type_: str = "supports", **overrides: Any) -> dict:
    return {
        "id": relation_id,
        "sourceClaimId": source,
        "targetClaimId": target,
        "type": type_,
        "rationale": "The first bears on the second.",
        **overrides,
    }
