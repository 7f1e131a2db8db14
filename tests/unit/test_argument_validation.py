"""How arguments are judged: ECMA-262 patterns, NUL refusal, short messages, and contract-fault hints."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from shared.contracts import Actor, StageSourcesArgs, ToolRequest
from shared.messaging import invalid_message
from shared.problems import field_path
from shared.spec import (
    NUL_HINT,
    ArgumentError,
    ToolValidator,
    all_tools,
    ecma_regex,
    ecma_search,
    validate_arguments,
)


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("^[a-z][a-z0-9-]*$", "abc", True),
        ("^[a-z][a-z0-9-]*$", "abc\n", False),
        ("^\\d{4}-\\d{2}-\\d{2}$", "2024-01-01", True),
        ("^\\d{4}-\\d{2}-\\d{2}$", "٢٠٢٤-٠١-٠١", False),  # Arabic-Indic digits
        ("^\\d+$", "１２", False),  # fullwidth digits
        ("^\\w+$", "café", False),
        ("^\\s$", "\u00a0", True),  # ECMA whitespace is Unicode
        ("^\\S$", "\u00a0", False),
        ("^[^]$", "\n", True),
        ("[]", "", False),
        ("^https?://", "https://example.org/\n", True),  # no end anchor: trailing text is fine
    ],
)
def test_ecma_regex_matches_as_javascript_would(pattern, value, matches):
    assert ecma_search(pattern, value) is matches


def test_ecma_regexes_are_compiled_once():
    assert ecma_regex("^[a-z]+$") is ecma_regex("^[a-z]+$")


def test_pattern_properties_and_additional_properties_use_ecma_patterns():
    schema = {
        "type": "object",
        "patternProperties": {"^x-\\d$": {"type": "integer"}},
        "additionalProperties": False,
    }
    validator = ToolValidator(schema)
    assert validator.is_valid({"x-1": 1})
    assert not validator.is_valid({"x-1": "one"})
    assert not validator.is_valid({"x-1\n": 1})
    assert not validator.is_valid({"x-٣": 1})


def _tool(name):
    return next(t for t in all_tools() if t.name == name)


def _refusal(name: str, arguments: dict[str, Any]) -> ArgumentError:
    with pytest.raises(ArgumentError) as refused:
        validate_arguments(_tool(name), arguments)
    return refused.value


SOURCE = {
    "id": "source-a", "publisher": "Agency", "title": "A report", "url": "https://agency.example/report",
    "publicationDate": "living", "snapshotDate": "2024-02-01", "type": "official", "authority": "publisher",
    "evidenceText": "the figure was 4%", "provenanceNote": "supplied by the agent",
}


def _stage(**changes: Any) -> dict[str, Any]:
    return {"expectedCaseId": "case-a", "expectedRevision": 0, "sources": [SOURCE, {**SOURCE, **changes}]}


def test_a_nested_prism_shape_is_checked_with_ecma_patterns_too():
    # The spec's Prism shapes carry their own "$schema"; jsonschema would check those with Python regexes.
    commit = {"mode": "commit", "operationId": "00000000-0000-0000-0000-000000000000", "commitToken": "t"}
    validate_arguments(_tool("propose_claim_delta_from_source"), commit)
    for inner in _tool("propose_claim_delta_from_source").validator.iter_errors({"mode": "commit"}):
        assert {tuple(e.absolute_path) for e in inner.context} >= {("operationId",), ("commitToken",)}


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        (_stage(evidenceText="a\x00b"), "sources[1].evidenceText"),
        (_stage(**{"bad\x00key": "x"}), "sources[1].bad\\u0000key"),
        ({"expectedCaseId": "case-a", "sourceIds": ["a", "\x00"]}, "sourceIds[1]"),
    ],
)
def test_nul_characters_are_refused_naming_the_field(arguments, field):
    name = "inspect_sources" if "sourceIds" in arguments else "stage_sources"
    refused = _refusal(name, arguments)
    assert (refused.field, refused.hint) == (field, NUL_HINT)
    assert "U+0000" in refused.message


@pytest.mark.parametrize(
    ("name", "arguments", "field", "message"),
    [
        ("inspect_sources", {"expectedCaseId": "c", "sourceIds": ["x" * 100_000]}, "sourceIds[0]",
         "is 100000 characters long; at most 96 allowed"),
        ("stage_sources", _stage(snapshotDate="٢٠٢٤-٠١-٠١"), "sources[1].snapshotDate",
         '"٢٠٢٤-٠١-٠١" does not match the required pattern'),
        ("set_focus", {"expectedCaseId": "c", "focus": "A" * 100_000}, "focus",
         '"' + "A" * 59 + "… (100000 characters) is not one of the allowed values"),
        ("get_workspace", {"cursor": [1] * 50_000}, "cursor",
         "characters as JSON) is an array; the schema requires"),
        ("get_workspace", {"cursor": 97}, "cursor", "97 is greater than the maximum 96"),
        ("inspect_sources", {"expectedCaseId": "c", "sourceIds": ["a"] * 10}, "sourceIds",
         "has 10 items; at most 9 allowed"),
        ("set_focus", {"expectedCaseId": "c"}, "focus", "is required but missing"),
    ],
)
def test_refusals_state_the_rule_with_at_most_an_excerpt_of_the_value(name, arguments, field, message):
    refused = _refusal(name, arguments)
    assert refused.field == field
    assert message in refused.message
    assert len(refused.message) < 200


def test_a_value_refused_only_by_ecma_semantics_gets_a_hint_saying_why():
    assert "no trailing newline" in _refusal("set_focus", {"expectedCaseId": "abc\n", "focus": "all"}).hint
    assert "no trailing newline" not in _refusal("set_focus", {"expectedCaseId": "ABC", "focus": "all"}).hint


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("get_company_context", {"sourceFileId": "6f1c2a4e-5b3d-4c2e-9f1a-2b3c4d5e6f70"}, "companyId or ticker"),
        ("get_company_context", {"cursor": 2}, "companyId or ticker"),
        ("get_company_context", {"ticker": "ACME", "companyId": "6f1c2a4e-5b3d-4c2e-9f1a-2b3c4d5e6f70"},
         "companyId or ticker"),
        ("get_company_context", {"ticker": "ACME", "cursor": 2}, "sourceFileId"),
        ("get_company_context", {"ticker": "no spaces"}, "ticker"),
        ("get_company_context", {"ticker": ""}, "ticker"),
        ("get_company_context", {"companyId": "not-a-uuid"}, "companyId"),
        ("propose_claim_delta_from_source", {"mode": "commit", "commitToken": "t"}, "operationId"),
        ("propose_claim_delta_from_source", {"mode": "publish"}, "mode"),
    ],
)
def test_an_alternative_shape_is_reported_in_the_shape_the_caller_came_closest_to(name, arguments, field):
    assert _refusal(name, arguments).field == field


def test_a_ticker_sent_as_company_id_is_one_problem_pointing_to_ticker():
    refused = _refusal("get_company_context", {"companyId": "DEMO"})
    assert [problem.field for problem in refused.problems] == ["companyId"]
    assert refused.hint == "companyId is a uuid; to name a company by its ticker send ticker"


def test_a_value_no_ticker_can_be_is_not_pointed_to_ticker():
    refused = _refusal("get_company_context", {"companyId": "not a ticker either"})
    assert [problem.field for problem in refused.problems] == ["companyId"]
    assert "ticker" not in refused.hint


# --- the services' contracts -------------------------------------------------------------------------


class Handler(pydantic.BaseModel):
    """What FastStream validates: the handler's parameter, named as in the handler."""

    request: ToolRequest[StageSourcesArgs]


def _contract_refusal(args: dict[str, Any]):
    actor = Actor(name="agent", role="agent").dump()
    with pytest.raises(pydantic.ValidationError) as refused:
        Handler.model_validate({"request": {"actor": actor, "args": args}})
    return invalid_message(refused.value)


@pytest.mark.parametrize(
    ("args", "field", "hint"),
    [
        ({"expectedCaseId": "c", "sources": [SOURCE]}, "expectedRevision", "add the field"),
        ({**_stage(), "extra": 1}, "extra", "remove the field"),
        (_stage(evidenceText="x" * 100_000), "sources[1].evidenceText", "at most 4000 characters"),
        (_stage(evidenceText=""), "sources[1].evidenceText", "at least 1 character"),
        (_stage(snapshotDate="2024-01-ab"), "sources[1].snapshotDate", "matching the pattern"),
        (_stage(type="blog"), "sources[1].type", "use one of: 'primary'"),
        ({**_stage(), "sources": [SOURCE] * 5}, "sources", "at most 4 items"),
        ({**_stage(), "sources": []}, "sources", "at least 1 item"),
        ({**_stage(), "expectedRevision": -1}, "expectedRevision", "at least 0"),
        ({**_stage(), "expectedRevision": "three"}, "expectedRevision", "whole number"),
        ({**_stage(), "expectedCaseId": 7}, "expectedCaseId", "JSON string"),
        ({**_stage(), "sources": "all"}, "sources", "JSON array"),
        ({**_stage(), "sources": ["a"]}, "sources[0]", "JSON object"),
    ],
)
def test_a_contract_fault_gets_a_hint_for_its_kind_and_never_echoes_the_value(args, field, hint):
    refused = _contract_refusal(args)
    assert refused.field == field
    assert hint in refused.hint
    assert len(refused.message) < 300
    assert "xxxxxxxxxx" not in refused.message


def test_an_unknown_field_of_any_length_is_named_briefly():
    refused = _contract_refusal({**_stage(), "k" * 100_000: 1})
    assert refused.field == "k" * 60 + "…"
    assert len(refused.message) < 300
    assert field_path(["args", "sources", 0, "url"]) == "sources[0].url"


def test_the_service_contracts_take_only_ascii_digits_in_dates_and_refuse_nul():
    """The services' own check (a reviewer's recorded source skips the gateway's schema check)."""
    import pydantic
    import pytest

    from shared.contracts import RecordedSource

    source = {"id": "s", "publisher": "P", "title": "T", "url": "https://example.org/r", "publicationDate": "living",
              "snapshotDate": "2024-01-01", "type": "primary", "authority": "A", "evidenceText": "E",
              "provenanceNote": "N"}
    RecordedSource.model_validate(source)
    for field, value in (("snapshotDate", "٢٠٢٤-٠١-٠١"), ("publicationDate", "٢٠٢٤-٠١-٠١"),
                         ("evidenceText", "a\x00b")):
        with pytest.raises(pydantic.ValidationError):
            RecordedSource.model_validate({**source, field: value})


def _inspect_refusal(arguments: dict[str, Any]) -> ArgumentError:
    tool = next(t for t in all_tools() if t.name == "inspect_sources")
    with pytest.raises(ArgumentError) as refused:
        validate_arguments(tool, arguments)
    return refused.value


def test_a_few_unknown_fields_are_each_named_and_a_flood_of_them_is_refused_by_its_count():
    few = _inspect_refusal({"expectedCaseId": "c", "sourceIds": ["a"], "x1": 1, "x2": 2})
    assert sorted(p.field for p in few.problems) == ["x1", "x2"]
    flood = _inspect_refusal({"expectedCaseId": "c", "sourceIds": ["a"], **{f"x{i}": i for i in range(5000)}})
    assert len(flood.problems) == 1 and flood.field == "(arguments)"
    assert "5000 properties" in flood.message and "expectedCaseId, sourceIds" in flood.hint


def test_a_list_sent_to_the_api_is_refused_by_its_length_before_any_item_is_read():
    from shared.contracts import bounded_list

    adapter = pydantic.TypeAdapter(bounded_list(int, 3))
    assert adapter.validate_python([1, 2, 3]) == [1, 2, 3]
    with pytest.raises(pydantic.ValidationError) as refused:
        adapter.validate_python(["not a number"] * 10)  # the items are never looked at
    assert [e["type"] for e in refused.value.errors()] == ["too_long"]
