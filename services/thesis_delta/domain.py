"""Thesis rules: checking a proposed claim delta against a saved thesis, diffs, commit tokens, review."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from shared.errors import (
    Conflict,
    Expired,
    IdempotencyConflict,
    InvalidArgument,
    InvalidCommitToken,
    NotFound,
)
from shared.events import ThesisDelta
from shared.problems import MAX_PROBLEMS, Problem
from shared.replies import CompanyContext

ACTIVE = "active"

# The schema bounds proposedClaims (200) but not affectedClaimIds; each id expands to a whole claim.
MAX_AFFECTED_CLAIMS = 200
# A stored delta travels whole in the preview reply and in its thesis.delta.committed event, as JSON
# with non-ASCII escaped (how the services and the relay encode it). NATS refuses a message above its
# max_payload (1 MiB by default), and an event the relay cannot publish would hold back the company's
# later events: the limit keeps the event, with its fixed fields and the summary, far below that.
MAX_DELTA_BYTES = 256 * 1024
# Where each part of a delta comes from in the request, to name the field that makes one too large.
_DELTA_PART_FIELD = {
    "claims": "proposedClaims",
    "affectedClaims": "affectedClaimIds",
    "confirms": "confirms",
    "contradicts": "contradicts",
    "newRisks": "newRisks",
    "followUps": "followUps",
    "summary": "summary",
}

# The context a preview or commit result carries (get_company_context has the whole thesis).
TOUCHED_CLAIMS_CAP = 25
CONTEXT_REVIEWS_CAP = 5
EXCERPT_CHARACTERS = 200


@dataclass(frozen=True)
class Company:
    company_id: str
    ticker: str
    name: str
    thesis_revision: int


@dataclass(frozen=True)
class ThesisClaim:
    claim_id: str
    text: str
    label: str
    section: str
    source_url: str | None
    status: str
    revision: int = 0  # the thesis revision that last changed it

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
    characters: int | None = None  # the length of its text, where a listing reads it


@dataclass(frozen=True)
class ThesisStep:
    """One revision of a thesis: who made it, when, and through which delta (none for an operator's claim)."""

    company_id: str
    revision: int
    actor: str
    operation_id: str | None
    at: datetime


@dataclass(frozen=True)
class Operation:
    """A previewed delta: what a commit commits, the digest of the request behind it, and how far it got."""

    operation_id: str
    company_id: str
    caller: str
    idempotency_key: str
    payload_digest: str
    payload: dict[str, Any]
    delta: dict[str, Any]
    base_revision: int
    created_at: datetime
    expires_at: datetime
    correlation_id: str | None = None
    status: str = "previewed"
    committed_at: datetime | None = None
    decided_at: datetime | None = None
    decided_by: str | None = None
    note: str | None = None
    revision_after: int | None = None

    def status_at(self, now: datetime) -> str:
        return "expired" if self.status == "previewed" and now >= self.expires_at else self.status

    def committed(self, at: datetime) -> Operation:
        return replace(self, status="committed", committed_at=at)

    def decided(self, decision: str, reviewer: str, note: str | None, at: datetime, revision: int) -> Operation:
        accepted = decision == "accept"
        return replace(self, status="accepted" if accepted else "rejected", decided_at=at, decided_by=reviewer,
                       note=note, revision_after=revision if accepted else None)


def new_operation(payload: Mapping[str, Any], caller: str, company: Company, source: SourceFile,
                  claims: Mapping[str, ThesisClaim], now: datetime, ttl: timedelta,
                  correlation_id: str | None) -> Operation:
    """The operation a preview stores: the request, checked against the thesis, as a typed diff of it."""
    delta = build_delta(payload, claims, source, company.thesis_revision)
    return Operation(
        operation_id=str(uuid.uuid4()), company_id=company.company_id, caller=caller,
        idempotency_key=payload["idempotencyKey"], payload_digest=payload_digest(payload), payload=dict(payload),
        delta=ThesisDelta.model_validate(delta).model_dump(mode="json", by_alias=True),
        base_revision=company.thesis_revision, created_at=now, expires_at=now + ttl, correlation_id=correlation_id,
    )


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
    """The source file exists and is the company's: what the rest of a preview is checked against."""
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


def _cited_source_problems(payload: Mapping[str, Any], source: SourceFile) -> list[Problem]:
    problems = []
    if payload.get("sourceUrl") is not None and payload["sourceUrl"] != source.url:
        problems.append(Problem(
            "sourceUrl", f"does not match the source file's URL ({source.url})",
            "omit sourceUrl or give the saved source file's exact URL: a delta comes from one exact source"))
    if payload.get("sourceTitle") is not None and payload["sourceTitle"].strip() != source.title.strip():
        problems.append(Problem("sourceTitle", f"does not match the source file's title ({source.title!r})",
                                "omit sourceTitle or give the saved source file's exact title"))
    return problems


def _claim_problem(claims: Mapping[str, ThesisClaim], claim_id: str, where: str) -> Problem | None:
    claim = claims.get(claim_id.lower())
    if claim is None:
        return Problem(where, f"claim {claim_id} is not a claim of this company's thesis",
                       "use claim ids from the company's thesis (get_company_context)")
    if claim.status != ACTIVE:
        return Problem(where, f"claim {claim_id} is retired",
                       "reference an active claim; a retired claim cannot be affected, updated or retired again")
    return None


def build_delta(
    payload: Mapping[str, Any],
    claims: Mapping[str, ThesisClaim],
    source: SourceFile,
    base_revision: int,
) -> dict[str, Any]:
    """Check the proposal against the thesis — every fault of it in one refusal — and express it as a diff of
    the thesis."""
    problems = _cited_source_problems(payload, source)
    affected_ids, affected_problems = _affected_claim_ids(payload, claims)
    changes, change_problems = _claim_changes(payload, claims, source)
    problems += affected_problems + change_problems
    if problems:
        raise InvalidArgument.of(problems[:MAX_PROBLEMS])
    delta = {
        "baseRevision": base_revision,
        "category": payload["category"],
        "summary": payload["summary"],
        "source": {"sourceFileId": source.source_file_id, "title": source.title, "url": source.url},
        "claims": changes,
        "affectedClaims": [claims[claim_id].public() for claim_id in affected_ids],
        "confirms": list(payload.get("confirms", [])),
        "contradicts": list(payload.get("contradicts", [])),
        "newRisks": list(payload.get("newRisks", [])),
        "followUps": list(payload.get("followUps", [])),
    }
    check_delta_size(delta)
    return delta


def _claim_changes(payload: Mapping[str, Any], claims: Mapping[str, ThesisClaim],
                   source: SourceFile) -> tuple[dict[str, list[dict[str, Any]]], list[Problem]]:
    """The proposed claims as added, updated and retired claims, and the problems of those that do not fit."""
    changes: dict[str, list[dict[str, Any]]] = {"added": [], "updated": [], "retired": []}
    problems: list[Problem] = []
    targeted: dict[str, int] = {}
    for i, proposed in enumerate(payload.get("proposedClaims", [])):
        where = f"proposedClaims[{i}].targetClaimId"
        action = proposed["action"]
        target = proposed.get("targetClaimId")
        if action == "add":
            if target is not None:
                problems.append(Problem(where, "an 'add' creates a new claim and takes no targetClaimId",
                                        "remove targetClaimId, or use action 'update' to change that claim"))
                continue
            changes["added"].append({"text": proposed["text"], "label": proposed["label"],
                                     "section": proposed["section"],
                                     "sourceUrl": proposed.get("sourceUrl", source.url)})
            continue
        if target is None:
            problems.append(Problem(where, f"an '{action}' needs the targetClaimId of the claim it changes",
                                    "add targetClaimId with the id of an active thesis claim (get_company_context)"))
            continue
        if (problem := _claim_problem(claims, target, where)) is not None:
            problems.append(problem)
            continue
        claim = claims[target.lower()]
        if claim.claim_id in targeted:
            problems.append(Problem(where, f"claim {target} is already changed by "
                                    f"proposedClaims[{targeted[claim.claim_id]}]",
                                    "change each claim at most once per delta"))
            continue
        targeted[claim.claim_id] = i
        if action == "update":
            after = {"claimId": claim.claim_id, "text": proposed["text"], "label": proposed["label"],
                     "section": proposed["section"], "sourceUrl": proposed.get("sourceUrl", claim.source_url)}
            changes["updated"].append({"claimId": claim.claim_id, "before": claim.public(), "after": after})
        else:
            changes["retired"].append({"claimId": claim.claim_id, "before": claim.public(), "reason": proposed["text"]})
    return changes, problems


def _affected_claim_ids(payload: Mapping[str, Any],
                        claims: Mapping[str, ThesisClaim]) -> tuple[list[str], list[Problem]]:
    requested = payload.get("affectedClaimIds", [])
    if len(requested) > MAX_AFFECTED_CLAIMS:
        return [], [Problem(
            "affectedClaimIds",
            f"lists {len(requested)} claims; a delta may name at most {MAX_AFFECTED_CLAIMS}",
            "name only the claims this source bears on directly, or split the work into several deltas",
        )]
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, claim_id in enumerate(requested):
        where = f"affectedClaimIds[{i}]"
        if (problem := _claim_problem(claims, claim_id, where)) is not None:
            problems.append(problem)
            continue
        claim = claims[claim_id.lower()]
        if claim.claim_id in seen:
            problems.append(Problem(where, f"claim {claim_id} is already listed at affectedClaimIds[{seen[claim.claim_id]}]",
                                    "list each affected claim once"))
            continue
        seen[claim.claim_id] = i
    return list(seen), problems


def encoded_size(value: Any) -> int:
    """Bytes of `value` as the services and the relay send it: JSON with non-ASCII escaped."""
    return len(json.dumps(value, separators=(",", ":")))


def check_delta_size(delta: Mapping[str, Any]) -> None:
    size = encoded_size(delta)
    if size <= MAX_DELTA_BYTES:
        return
    part_sizes = {part: encoded_size(delta[part]) for part in _DELTA_PART_FIELD}
    largest = max(part_sizes, key=part_sizes.__getitem__)
    field = _DELTA_PART_FIELD[largest]
    raise InvalidArgument(
        f"the delta would take {size} bytes as JSON, over the limit of {MAX_DELTA_BYTES}; {field} alone "
        f"takes {part_sizes[largest]}",
        field=field,
        hint="split the change into several deltas from the same source (for example one per thesis section), "
        "or shorten the texts",
        details={"bytes": size, "limit": MAX_DELTA_BYTES},
    )


def delta_changes(delta: Mapping[str, Any]) -> Sequence[str]:
    claims = delta["claims"]
    return [
        f"{len(claims['added'])} added",
        f"{len(claims['updated'])} updated",
        f"{len(claims['retired'])} retired",
    ]


def check_decision(decision: str, note: str | None) -> None:
    """A rejection records its reason: the agent reads it to correct its next delta."""
    if decision == "reject" and not (note or "").strip():
        raise InvalidArgument(
            "a rejection needs a note saying why the delta is rejected",
            field="note",
            hint="give a non-empty note the agent can act on, e.g. which change the source does not support; "
            "the agent sees it in get_company_context",
        )


# --- the context a preview or commit result carries --------------------------------------------------


def touched_claim_ids(delta: Mapping[str, Any]) -> list[str]:
    """The existing claims a delta names, each once: affected, then updated, then retired."""
    ids = [c["claimId"] for c in delta["affectedClaims"]]
    ids += [c["claimId"] for c in delta["claims"]["updated"]]
    ids += [c["claimId"] for c in delta["claims"]["retired"]]
    return list(dict.fromkeys(ids))


def excerpt(text: str, limit: int = EXCERPT_CHARACTERS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def touched_claim(claim: ThesisClaim, base_revision: int) -> dict[str, Any]:
    """A claim the delta names, as it reads now (its full text at the base revision is in the delta)."""
    return {
        "claimId": claim.claim_id,
        "status": claim.status,
        "label": claim.label,
        "section": claim.section,
        "excerpt": excerpt(claim.text),
        "hasSourceUrl": bool(claim.source_url),
        "revision": claim.revision,
        "changedSincePreview": claim.revision > base_revision,
    }


def context_block(
    company: CompanyContext, touched: Sequence[ThesisClaim], touched_total: int, base_revision: int
) -> dict[str, Any]:
    """The bounded thesis context of a delta: `company` is get_company_context's answer, `touched` the
    current state of the first claims the delta names (at most TOUCHED_CLAIMS_CAP of `touched_total`)."""
    listed = list(touched)[:TOUCHED_CLAIMS_CAP]
    reviews = company.recent_reviews
    listed_reviews = reviews.items[:CONTEXT_REVIEWS_CAP]
    return {
        "companyId": company.company_id,
        "ticker": company.ticker,
        "name": company.name,
        "thesisRevision": company.thesis_revision,
        "counts": {
            "activeClaims": company.claims.total,
            "retiredClaims": company.retired_claims.total,
            "sourceFiles": company.source_files.total,
            "pendingDeltas": company.pending_deltas.total,
            "reviews": reviews.total,
        },
        "evidenceHealth": company.evidence_health.dump(),
        "touchedClaims": {
            "total": touched_total,
            "omitted": touched_total - len(listed),
            "items": [touched_claim(c, base_revision) for c in listed],
        },
        "recentReviews": {
            "total": reviews.total,
            "omitted": reviews.total - len(listed_reviews),
            "items": [r.dump() for r in listed_reviews],
        },
    }
