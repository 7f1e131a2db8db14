"""The MCP tool contract: the spec files, loaded verbatim, one ToolSpec per tool."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from shared.spec.bounds import bounded
from shared.spec.validation import fast_check_for, validator_for

SPEC_DIR = Path(__file__).parent
SPEC_FILES = ("threadline-tools.json", "prism-tools.json")  # the contract, verbatim from ../shared/spec
EXTENSION_FILES = ("company-context-tool.json", "search-tools.json")  # tools Threadline adds, in the spec's style

# The title `tools/list` shows a host for a spec tool that carries none of its own (names, descriptions
# and input schemas are served verbatim; MCP 2025-11-25 gives every tool a human-readable title).
TITLES = {
    "get_workspace": "Get workspace",
    "inspect_sources": "Inspect sources",
    "stage_sources": "Stage sources",
    "stage_claims": "Stage claims",
    "stage_relations": "Stage relations",
    "stage_merge": "Stage merge groups",
    "stage_verdict": "Stage verdict",
    "set_focus": "Set focus",
}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    family: str
    kind: str
    description: str
    input_schema: dict[str, Any]
    title: str | None = None
    notes: dict[str, str] | None = None

    @property
    def read_only(self) -> bool:
        return self.kind == "answer"

    @property
    def idempotent(self) -> bool:
        return self.read_only or self.name == "set_focus"

    @cached_property
    def validation_schema(self) -> dict[str, Any]:
        """The schema calls are checked against: the served one plus Threadline's bounds (bounds.py)."""
        return bounded(self.name, self.input_schema)

    @cached_property
    def validator(self) -> Any:
        return validator_for(self.validation_schema)

    @cached_property
    def fast_check(self) -> Any:
        return fast_check_for(self.validation_schema)


def _served_schema(schema: dict[str, Any]) -> dict[str, Any]:
    # The one liberty DESIGN.md allows: a root "type": "object" where a schema lacks one.
    return schema if "type" in schema else {"type": "object", **schema}


def load_family(file_name: str) -> list[ToolSpec]:
    document = json.loads((SPEC_DIR / file_name).read_text())
    notes_keys = ("whenToUse", "typicalWorkflow", "whatItReturns", "avoidWhen")
    return [
        ToolSpec(
            name=tool["name"],
            family=document["product"],
            kind=tool["kind"],
            description=tool["description"],
            input_schema=_served_schema(tool["inputSchema"]),
            title=tool.get("title") or TITLES.get(tool["name"]),
            notes={key: tool[key] for key in notes_keys if key in tool} or None,
        )
        for tool in document["tools"]
    ]


@lru_cache(maxsize=1)
def spec_tools() -> tuple[ToolSpec, ...]:
    """The tools of the spec files, in file order."""
    return tuple(tool for name in SPEC_FILES for tool in load_family(name))


@lru_cache(maxsize=1)
def all_tools() -> tuple[ToolSpec, ...]:
    """Every tool the gateway serves: the spec's, then Threadline's additions."""
    return spec_tools() + tuple(tool for name in EXTENSION_FILES for tool in load_family(name))
