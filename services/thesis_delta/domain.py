"""Thesis rules: checking a proposed claim delta against a saved thesis, diffs, commit tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.errors import (
    Conflict,
    Expired,
    IdempotencyConflict,
    InvalidArgument,
    InvalidCommitToken,
    NotFound,
)

ACTIVE = "active"


@dataclass(frozen=True)
class ThesisClaim:
    claim_id: str
    text: str
    label: str
    section: str
    source_url: str | None
    status: str

    def public(self) -> dict[str, Any]:
        return {
            "claimId": self.claim_id,
            "text": self.text,
            "label": self.label,
            "section": self.section,
            "sourceUrl": self.source_url,
        }


@dataclass(frozen=True)
class SourceFile:
    source_file_id: str
    company_id: str
    title: str
    url: str


def payload_digest(payload: Mapping[str, Any]) -> str:
    """A stable digest of the preview request: equal payloads, equal digests (key order ignored)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def commit_token(secret: bytes, operation_id: str) -> str:
    """256 bits bound to the operation: HMAC-SHA256 of its id under the deployment secret."""
    mac = hmac.new(secret, f"threadline-commit:{operation_id}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def verify_commit_token(secret: bytes, operation_id: str, token: str) -> None:
    if not hmac.compare_digest(commit_token(secret, operation_id).encode(), token.encode()):
        raise InvalidCommitToken(
            "the commitToken does not belong to this operation",
            field="commitToken",
            hint="send the commitToken the preview of this operationId returned, unchanged",
        )


def check_same_payload(key: str, stored_digest: str, digest: str) -> None:
    if stored_digest != digest:
        raise IdempotencyConflict(
            f"idempotencyKey {key!r} was already used with a different payload",
            field="idempotencyKey",
            hint="repeat the exact payload of the first preview to get its operation back, or preview the new "
            "payload with a new idempotencyKey",
        )


def check_not_expired(expires_at: datetime, now: datetime) -> None:
    if now >= expires_at:
        raise Expired(
            f"the operation expired at {expires_at.isoformat()}",
            field="operationId",
            hint="preview the delta again with a new idempotencyKey, get it approved, and commit the new operation",
        )


def check_base_revision(base_revision: int, current: int) -> None:
    if base_revision != current:
        raise Conflict(
            f"the thesis changed since this delta was previewed (revision {base_revision} → {current}); "
            "the delta may no longer apply",
            field="operationId",
            hint="preview again with a new idempotencyKey against the current thesis, then commit that operation",
            details={"baseRevision": base_revision, "currentRevision": current},
        )


def check_source_file(payload: Mapping[str, Any], source: SourceFile | None, company_id: str) -> None:
    if source is None:
        raise NotFound(
            f"there is no source file {payload['sourceFileId']}",
            field="sourceFileId",
            hint="use a sourceFileId from the company's saved source files (get_company_context)",
        )
    if source.company_id != company_id:
        raise InvalidArgument(
            f"source file {source.source_file_id} belongs to another company",
            field="sourceFileId",
            hint="use one of this company's source files (get_company_context lists them)",
        )
    if payload.get("sourceUrl") is not None and payload["sourceUrl"] != source.url:
        raise InvalidArgument(
            f"sourceUrl does not match the source file's URL ({source.url})",
            field="sourceUrl",
            hint="omit sourceUrl or give the saved source file's exact URL: a delta comes from one exact source",
        )
    if payload.get("sourceTitle") is not None and payload["sourceTitle"].strip() != source.title.strip():
        raise InvalidArgument(
            f"sourceTitle does not match the source file's title ({source.title!r})",
            field="sourceTitle",
            hint="omit sourceTitle or give the saved source file's exact title",
        )


def _claim_ref(claims: Mapping[str, ThesisClaim], claim_id: str, where: str) -> ThesisClaim:
    claim = claims.get(claim_id.lower())
    if claim is None:
        raise InvalidArgument(
            f"claim {claim_id} is not a claim of this company's thesis",
            field=where,
            hint="use claim ids from the company's thesis (get_company_context)",
        )
    if claim.status != ACTIVE:
        raise InvalidArgument(
            f"claim {claim_id} is retired",
            field=where,
            hint="reference an active claim; a retired claim cannot be affected, updated or retired again",
        )
    return claim


def build_delta(
    payload: Mapping[str, Any],
    claims: Mapping[str, ThesisClaim],
    source: SourceFile,
    base_revision: int,
) -> dict[str, Any]:
    """Check the proposal against the thesis and express it as a diff of the thesis."""
    affected = [
        _claim_ref(claims, claim_id, f"affectedClaimIds[{i}]").public()
        for i, claim_id in enumerate(payload.get("affectedClaimIds", []))
    ]
    added: list[dict[str, Any]] = []
    updated: list[dict[str, Any]] = []
    retired: list[dict[str, Any]] = []
    targeted: dict[str, int] = {}
    for i, proposed in enumerate(payload.get("proposedClaims", [])):
        where = f"proposedClaims[{i}]"
        action = proposed["action"]
        target = proposed.get("targetClaimId")
        if action == "add":
            if target is not None:
                raise InvalidArgument(
                    "an 'add' creates a new claim and takes no targetClaimId",
                    field=f"{where}.targetClaimId",
                    hint="remove targetClaimId, or use action 'update' to change that claim",
                )
            added.append(
                {
                    "text": proposed["text"],
                    "label": proposed["label"],
                    "section": proposed["section"],
                    "sourceUrl": proposed.get("sourceUrl", source.url),
                }
            )
            continue
        if target is None:
            raise InvalidArgument(
                f"an '{action}' needs the targetClaimId of the claim it changes",
                field=f"{where}.targetClaimId",
                hint="add targetClaimId with the id of an active thesis claim (get_company_context)",
            )
        claim = _claim_ref(claims, target, f"{where}.targetClaimId")
        if claim.claim_id in targeted:
            raise InvalidArgument(
                f"claim {target} is already changed by proposedClaims[{targeted[claim.claim_id]}]",
                field=f"{where}.targetClaimId",
                hint="change each claim at most once per delta",
            )
        targeted[claim.claim_id] = i
        if action == "update":
            after = {
                "claimId": claim.claim_id,
                "text": proposed["text"],
                "label": proposed["label"],
                "section": proposed["section"],
                "sourceUrl": proposed.get("sourceUrl", claim.source_url),
            }
            updated.append({"claimId": claim.claim_id, "before": claim.public(), "after": after})
        else:
            retired.append({"claimId": claim.claim_id, "before": claim.public(), "reason": proposed["text"]})
    return {
        "baseRevision": base_revision,
        "category": payload["category"],
        "summary": payload["summary"],
        "source": {"sourceFileId": source.source_file_id, "title": source.title, "url": source.url},
        "claims": {"added": added, "updated": updated, "retired": retired},
        "affectedClaims": affected,
        "confirms": list(payload.get("confirms", [])),
        "contradicts": list(payload.get("contradicts", [])),
        "newRisks": list(payload.get("newRisks", [])),
        "followUps": list(payload.get("followUps", [])),
    }


def delta_changes(delta: Mapping[str, Any]) -> Sequence[str]:
    claims = delta["claims"]
    return [
        f"{len(claims['added'])} added",
        f"{len(claims['updated'])} updated",
        f"{len(claims['retired'])} retired",
    ]
