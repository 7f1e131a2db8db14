"""The served tool contract is the spec, verbatim, and calls are validated against it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from services.gateway.tools import COMMAND_OF_TOOL, mcp_tools
from shared.command_contracts import command_requests
from shared.spec import SPEC_DIR, SPEC_FILES, ArgumentError, spec_tools, validate_arguments

# The steering repo's shared/ beside the checkout (CI, /work/main) or beside the worktrees' folder.
UPSTREAM = next((p / "shared" / "spec" for p in Path(__file__).resolve().parents[3:5] if (p / "shared" / "spec").is_dir()),
                Path(__file__).resolve().parents[3] / "shared" / "spec")


# The SHA-256 of each upstream spec file as it was copied: the copy is checked against it on every clone, and
# against the upstream file itself where that folder is beside the checkout (so a changed upstream is noticed).
UPSTREAM_SHA256 = {
    "threadline-tools.json": "d1eb0015369519cf904732c5e827f5540b01122276606641a69c3c70e52f04e9",
    "prism-tools.json": "4dcaae59405d65af767053e609f0e46f53e954a44a137325c5242fb27856880f",
}


@pytest.mark.parametrize("name", SPEC_FILES)
def test_project_copy_of_spec_is_byte_identical_to_upstream(name):
    assert hashlib.sha256((SPEC_DIR / name).read_bytes()).hexdigest() == UPSTREAM_SHA256[name]
    if UPSTREAM.is_dir():  # beside the development checkout only: a clean clone has the recorded digest
        assert (SPEC_DIR / name).read_bytes() == (UPSTREAM / name).read_bytes()


def test_served_tools_carry_spec_names_descriptions_and_schemas_exactly():
    documents = [json.loads((SPEC_DIR / name).read_text()) for name in SPEC_FILES]
    expected = [tool for document in documents for tool in document["tools"]]
    served = {tool.name: tool for tool in mcp_tools()}
    assert [t["name"] for t in expected] == [t.name for t in mcp_tools()][: len(expected)]
    for tool in expected:
        assert served[tool["name"]].description == tool["description"]
        assert served[tool["name"]].input_schema == tool["inputSchema"]


def test_every_served_tool_is_answered_by_a_command_with_a_contract():
    served = [tool.name for tool in mcp_tools()]
    assert sorted(COMMAND_OF_TOOL) == sorted(served)
    assert all(COMMAND_OF_TOOL[name] in command_requests() for name in served)


def test_tool_annotations_follow_kind():
    served = {tool.name: tool for tool in mcp_tools()}
    assert served["get_workspace"].annotations.read_only_hint is True
    assert served["stage_claims"].annotations.read_only_hint is False
    assert served["stage_claims"].annotations.destructive_hint is False
    assert served["set_focus"].annotations.idempotent_hint is True
    prism = served["propose_claim_delta_from_source"]
    assert prism.annotations.read_only_hint is False and prism.annotations.destructive_hint is False
    assert prism.title == "Propose claim delta"


def _tool(name):
    return next(t for t in spec_tools() if t.name == name)


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("get_workspace", {"scope": "everything"}, "scope"),
        ("get_workspace", {"cursor": 0}, "cursor"),
        ("get_workspace", {"cursor": 97}, "cursor"),
        ("get_workspace", {"page": 1}, "page"),
        ("inspect_sources", {"expectedCaseId": "c", "sourceIds": []}, "sourceIds"),
        ("inspect_sources", {"expectedCaseId": "c", "sourceIds": ["a", "a"]}, "sourceIds"),
        ("stage_sources", {"expectedCaseId": "c", "expectedRevision": -1, "sources": []}, "expectedRevision"),
        ("set_focus", {"expectedCaseId": "Bad Case", "focus": "all"}, "expectedCaseId"),
        ("set_focus", {"expectedCaseId": "c"}, "focus"),
        ("set_focus", {"expectedCaseId": "case-a\n", "focus": "all"}, "expectedCaseId"),  # ECMA `$`
        ("inspect_sources", {"expectedCaseId": "c", "sourceIds": ["a", "b\x00"]}, "sourceIds[1]"),
        ("propose_claim_delta_from_source",
         {"mode": "commit", "operationId": "00000000-0000-0000-0000-000000000000", "commitToken": "t",
          "summary": "replaced"}, "summary"),
        ("propose_claim_delta_from_source",
         {"mode": "preview", "companyId": "00000000-0000-0000-0000-000000000000",
          "sourceFileId": "00000000-0000-0000-0000-000000000000", "category": "confirmed", "summary": "s",
          "idempotencyKey": "k", "sourceUrl": "not a uri"}, "sourceUrl"),
    ],
)
def test_invalid_arguments_are_refused_naming_the_field(tool, arguments, field):
    with pytest.raises(ArgumentError) as refused:
        validate_arguments(_tool(tool), arguments)
    assert refused.value.field == field
    assert refused.value.hint


def test_valid_arguments_pass():
    validate_arguments(_tool("get_workspace"), {})
    validate_arguments(_tool("get_workspace"), {"scope": "guidance", "cursor": 12})
    validate_arguments(
        _tool("propose_claim_delta_from_source"),
        {"mode": "commit", "operationId": "00000000-0000-0000-0000-000000000000", "commitToken": "t"},
    )
