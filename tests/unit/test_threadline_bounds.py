"""Threadline's own bounds: every list and text a call can carry is bounded, the served schemas stay verbatim,
and a refusal by one of Threadline's bounds says whose bound it is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.spec import SPEC_DIR, ArgumentError, all_tools, validate_arguments
from shared.spec.bounds import BOUNDS, MARK

UUID = "6f1c2a4e-5b3d-4c2e-9f1a-2b3c4d5e6f70"
PRISM = "propose_claim_delta_from_source"


def _tool(name: str) -> Any:
    return next(t for t in all_tools() if t.name == name)


def _preview(**changes: Any) -> dict[str, Any]:
    return {"mode": "preview", "companyId": UUID, "sourceFileId": UUID, "category": "confirmed",
            "summary": "a summary", "idempotencyKey": "key-1", **changes}


def _unbounded(schema: Any, path: str = "") -> list[str]:
    """Every array without maxItems and every free string without maxLength (enums, consts and uuids are bounded)."""
    if isinstance(schema, list):
        return [p for i, s in enumerate(schema) for p in _unbounded(s, f"{path}/{i}")]
    if not isinstance(schema, dict):
        return []
    found = []
    if schema.get("type") == "array" and "maxItems" not in schema:
        found.append(path)
    if (schema.get("type") == "string" and "maxLength" not in schema
            and not {"enum", "const"} & set(schema) and schema.get("format") != "uuid"):
        found.append(path)
    return found + [p for key, value in schema.items() for p in _unbounded(value, f"{path}/{key}")]


def test_the_seed_leaves_lists_and_texts_unbounded_and_every_one_is_bounded_when_calls_are_checked():
    assert _unbounded(_tool(PRISM).input_schema)  # why the bounds exist
    for tool in all_tools():
        assert _unbounded(tool.validation_schema) == [], tool.name


def test_the_served_schemas_stay_the_spec_files_verbatim():
    published = json.loads((SPEC_DIR / "prism-tools.json").read_text())["tools"][0]["inputSchema"]
    assert _tool(PRISM).input_schema == published
    assert MARK not in json.dumps(published)


@pytest.mark.parametrize("field", sorted(BOUNDS[PRISM]))
def test_each_of_threadlines_bounds_refuses_one_past_it_naming_the_field_and_whose_bound_it_is(field):
    schema = _tool(PRISM).validation_schema["properties"][field]
    if "maxItems" in schema:
        item = UUID if field == "affectedClaimIds" else "a finding"
        at_bound, past = [item] * schema["maxItems"], [item] * (schema["maxItems"] + 1)
        said = f"has {len(past)} items; at most {schema['maxItems']} allowed"
    else:
        at_bound, past = "x" * schema["maxLength"], "x" * (schema["maxLength"] + 1)
        said = f"is {len(past)} characters long; at most {schema['maxLength']} allowed"
    if field == "sourceUrl":
        at_bound, past = "https://e.org/" + at_bound[14:], "https://e.org/" + past[14:]
    validate_arguments(_tool(PRISM), _preview(**{field: at_bound}))
    with pytest.raises(ArgumentError) as refused:
        validate_arguments(_tool(PRISM), _preview(**{field: past}))
    assert [(p.field, p.message) for p in refused.value.problems] == [
        (field, f"{said} (Threadline's bound: the published schema sets none)")]


def test_a_finding_longer_than_threadlines_bound_is_refused_where_it_stands():
    with pytest.raises(ArgumentError) as refused:
        validate_arguments(_tool(PRISM), _preview(newRisks=["short", "r" * 5001]))
    assert refused.value.field == "newRisks[1]" and "Threadline's bound" in refused.value.message


def test_a_bound_the_spec_sets_itself_is_never_called_threadlines():
    with pytest.raises(ArgumentError) as refused:
        validate_arguments(_tool(PRISM), _preview(summary="s" * 5001))
    assert refused.value.field == "summary" and "Threadline" not in refused.value.message


def test_1_900_000_ids_are_refused_by_their_count_once():
    with pytest.raises(ArgumentError) as refused:
        validate_arguments(_tool(PRISM), _preview(affectedClaimIds=[0] * 1_900_000))
    assert [p.field for p in refused.value.problems] == ["affectedClaimIds"]
    assert refused.value.message.startswith("has 1900000 items; at most 200 allowed")
