"""Thesis events: typed data schemas that match what the service emits, and a size that NATS accepts."""

from __future__ import annotations

import json
import typing

import pytest

from services.thesis_delta import domain
from shared.asyncapi import document
from shared.errors import InvalidArgument
from shared.events import (
    ClaimLabel,
    DeltaCategory,
    Origin,
    ThesisChanged,
    ThesisChanges,
    ThesisDelta,
    ThesisDeltaCommitted,
    company,
    new_event,
)
from shared.settings import Settings
from shared.spec import SPEC_DIR
from shared.subjects import Subjects

NATS_DEFAULT_MAX_PAYLOAD = 1024 * 1024
# "Well under" 1 MiB: half of it, leaving room for headers and for NATS servers configured lower.
EVENT_BOUND = NATS_DEFAULT_MAX_PAYLOAD // 2
WIDE = "\U0001f600"  # one character, 12 bytes of JSON once escaped (\ud83d\ude00)

SCHEMA = json.loads((SPEC_DIR / "prism-tools.json").read_text())["tools"][0]["inputSchema"]["properties"]
PROPOSED = SCHEMA["proposedClaims"]["items"]["properties"]

CLAIMS = {
    f"{i:08x}-1111-4111-8111-111111111111": domain.ThesisClaim(
        f"{i:08x}-1111-4111-8111-111111111111", WIDE * 5000, "INFERRED", WIDE * 120, "https://x.org/" + "a" * 1986,
        "active")
    for i in range(domain.MAX_AFFECTED_CLAIMS)
}
SOURCE = domain.SourceFile("f1", "co", "T" * 300, "https://x.org/" + "q" * 1986)


def payload(**extra):
    return {"companyId": "co", "sourceFileId": "f1", "category": "weakened", "summary": "s",
            "idempotencyKey": "k", "mode": "preview", **extra}


def widest_claim(action: str, target: str | None = None) -> dict:
    """A proposed claim with every field at the schema's maximum length, in the costliest characters."""
    return {"text": WIDE * PROPOSED["text"]["maxLength"], "label": "UNVERIFIED",
            "section": WIDE * PROPOSED["section"]["maxLength"],
            "sourceUrl": "https://x.org/" + "u" * (PROPOSED["sourceUrl"]["maxLength"] - 14), "action": action,
            **({"targetClaimId": target} if target else {})}


def committed_event(delta: dict, summary: str) -> dict:
    data = ThesisDeltaCommitted(company_id="c" * 36, operation_id="o" * 36, caller=WIDE * 200,
                                category=delta["category"], summary=summary, base_revision=2**53,
                                delta=delta)
    origin = Origin(Subjects("threadline"), "thesis-delta", correlation_id="x" * 32,
                    traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01")
    event = new_event(origin, company("c" * 36), data, revision=2**53)
    return event.envelope


def test_the_schemas_worst_case_delta_is_refused_naming_its_largest_part():
    targets = list(CLAIMS)
    worst = payload(summary=WIDE * SCHEMA["summary"]["maxLength"],
                    proposedClaims=[widest_claim("update", t) for t in targets[: SCHEMA["proposedClaims"]["maxItems"]]],
                    affectedClaimIds=targets)
    with pytest.raises(InvalidArgument) as refused:
        domain.build_delta(worst, CLAIMS, SOURCE, 0)
    assert refused.value.field == "proposedClaims" and "split" in refused.value.hint
    assert refused.value.details["limit"] == domain.MAX_DELTA_BYTES


def largest_delta(summary: str) -> dict:
    """The largest delta the checks accept: the widest updates the schema allows, one at a time until the
    size limit refuses one, then free text (confirms, unbounded in the schema) up to the limit's last byte."""
    targets = list(CLAIMS)
    accepted = None
    for count in range(1, SCHEMA["proposedClaims"]["maxItems"] + 1):
        try:
            accepted = payload(summary=summary, proposedClaims=[widest_claim("update", t) for t in targets[:count]],
                               affectedClaimIds=targets[:count], confirms=[""])
            domain.build_delta(accepted, CLAIMS, SOURCE, 2**53)
        except InvalidArgument:
            accepted["proposedClaims"].pop()
            accepted["affectedClaimIds"].pop()
            break
    room = domain.MAX_DELTA_BYTES - domain.encoded_size(domain.build_delta(accepted, CLAIMS, SOURCE, 2**53))
    delta = domain.build_delta({**accepted, "confirms": ["c" * room]}, CLAIMS, SOURCE, 2**53)
    assert domain.encoded_size(delta) == domain.MAX_DELTA_BYTES
    with pytest.raises(InvalidArgument):  # one byte more is refused
        domain.build_delta({**accepted, "confirms": ["c" * (room + 1)]}, CLAIMS, SOURCE, 2**53)
    return delta


def test_the_largest_delta_accepted_makes_an_event_well_under_the_nats_max_payload():
    summary = WIDE * SCHEMA["summary"]["maxLength"]  # repeated beside the delta
    delta = largest_delta(summary)
    assert delta["claims"]["updated"] and delta["affectedClaims"]
    envelope = committed_event(delta, summary)
    assert len(json.dumps(envelope, separators=(",", ":")).encode()) < EVENT_BOUND
    # The preview reply carries the same delta (FastStream encodes with the default separators).
    assert len(json.dumps({"result": {"delta": delta, "summary": summary}}).encode()) < EVENT_BOUND


def test_the_accepted_change_event_of_the_largest_delta_is_bounded_alike():
    delta = largest_delta("s")
    added = [{**c, "claimId": "c" * 36} for c in delta["claims"]["added"]]
    changes = {"added": added, "updated": delta["claims"]["updated"], "retired": delta["claims"]["retired"]}
    data = ThesisChanged(company_id="c" * 36, revision=1, previous_revision=0, operation_id="o" * 36,
                         reviewer=WIDE * 200, changes=changes)
    event = new_event(Origin(Subjects("threadline"), "thesis-delta"), company("c" * 36), data, revision=1)
    assert len(json.dumps(event.envelope, separators=(",", ":")).encode()) < EVENT_BOUND


def test_the_typed_delta_is_exactly_the_json_the_service_builds():
    a, b, c = list(CLAIMS)[:3]
    delta = domain.build_delta(payload(
        proposedClaims=[{"text": "t", "label": "CONFIRMED", "section": "s", "action": "add"},
                        {"text": "u", "label": "INFERRED", "section": "s", "action": "update", "targetClaimId": a},
                        {"text": "gone", "label": "INFERRED", "section": "s", "action": "retire", "targetClaimId": b}],
        affectedClaimIds=[c], confirms=["x"], contradicts=["y"], newRisks=["z"], followUps=["w"]),
        CLAIMS, SOURCE, 4)
    assert ThesisDelta.model_validate(delta).model_dump(mode="json", by_alias=True) == delta
    added = [{**delta["claims"]["added"][0], "claimId": "new-id"}]
    applied = {"added": added, "updated": delta["claims"]["updated"], "retired": delta["claims"]["retired"]}
    operator = {"added": [{"text": "t", "label": "CONFIRMED", "section": "s", "sourceUrl": None, "claimId": "i"}],
                "updated": [], "retired": []}
    for changes in (applied, operator):
        assert ThesisChanges.model_validate(changes).model_dump(mode="json", by_alias=True) == changes


def test_the_typed_enums_are_the_specs():
    assert list(typing.get_args(DeltaCategory)) == SCHEMA["category"]["enum"]
    assert list(typing.get_args(ClaimLabel)) == PROPOSED["label"]["enum"]


def test_the_asyncapi_document_describes_the_delta_and_the_changes_field_by_field():
    schemas = document(Settings())["components"]["schemas"]

    def resolved(schema: dict) -> dict:
        return schemas[schema["$ref"].rsplit("/", 1)[1]] if "$ref" in schema else schema

    committed = resolved(schemas["ThesisDeltaCommitted"]["properties"]["delta"])
    assert committed["additionalProperties"] is False
    assert set(committed["properties"]) == {"baseRevision", "category", "summary", "source", "claims",
                                            "affectedClaims", "confirms", "contradicts", "newRisks", "followUps"}
    claims = resolved(committed["properties"]["claims"])
    update = resolved(claims["properties"]["updated"]["items"])
    assert set(update["properties"]) == {"claimId", "before", "after"}
    changes = resolved(schemas["ThesisChanged"]["properties"]["changes"])
    assert set(changes["properties"]) == {"added", "updated", "retired"}
    added = resolved(changes["properties"]["added"]["items"])
    assert set(added["properties"]) == {"claimId", "text", "label", "section", "sourceUrl"}
    for schema in (committed, claims, update, changes, added, resolved(update["properties"]["before"])):
        assert all(p.get("description") for p in schema["properties"].values()), schema["title"]
