"""The MCP tool contract: the spec files verbatim, and validation of calls against their schemas."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator, FormatChecker
from jsonschema.exceptions import ValidationError

SPEC_DIR = Path(__file__).parent
SPEC_FILES = ("threadline-tools.json", "prism-tools.json")  # the contract, verbatim from ../shared/spec
EXTENSION_FILES = ("company-context-tool.json",)  # tools Threadline adds, in the spec's style


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
    def validator(self) -> Draft7Validator:
        return Draft7Validator(self.input_schema, format_checker=FormatChecker())


class ArgumentError(ValueError):
    """A tool call's arguments do not match the tool's input schema."""

    def __init__(self, field: str, message: str, hint: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.hint = hint


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
            title=tool.get("title"),
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


def _path(error: ValidationError) -> str:
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _field_of(error: ValidationError) -> str:
    path = _path(error)
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        return f"{path}.{missing}" if path else missing
    if error.validator == "additionalProperties":
        extra = error.message.split("'")[1] if "'" in error.message else ""
        return f"{path}.{extra}" if path else extra
    return path or "(arguments)"


def _hint(error: ValidationError, schema_root: dict[str, Any]) -> str:
    validator = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    if validator == "required":
        return "add the missing field; the tool's input schema lists every required field"
    if validator == "additionalProperties":
        return "remove the field: the tool accepts only the properties its input schema lists"
    if validator == "enum":
        return f"use one of: {', '.join(map(str, schema.get('enum', [])))}"
    if validator == "const":
        return f"this field must be exactly {json.dumps(schema.get('const'))}"
    if validator in ("minLength", "maxLength"):
        return f"give a string of {schema.get('minLength', 0)} to {schema.get('maxLength', 'any')} characters"
    if validator in ("minItems", "maxItems"):
        return f"give {schema.get('minItems', 0)} to {schema.get('maxItems', 'any')} items"
    if validator == "uniqueItems":
        return "list each value once"
    if validator == "pattern":
        return f"the value must match the pattern {schema.get('pattern')}"
    if validator in ("minimum", "maximum"):
        return f"use an integer from {schema.get('minimum', '-∞')} to {schema.get('maximum', '∞')}"
    if validator == "type":
        return f"send a value of JSON type {schema.get('type')}"
    if validator == "format":
        return f"send a valid {schema.get('format')}"
    if validator == "anyOf":
        return "the arguments match none of the tool's accepted shapes; see the input schema"
    return "correct the value to satisfy the tool's input schema"


def validate_arguments(tool: ToolSpec, arguments: dict[str, Any]) -> None:
    """Raise ArgumentError naming the first offending field, or return when the call is valid."""
    errors = [_within_chosen_branch(e, arguments) for e in tool.validator.iter_errors(arguments)]
    if not errors:
        return
    error = min(errors, key=_relevance)
    raise ArgumentError(_field_of(error), error.message, _hint(error, tool.input_schema))


def _relevance(error: ValidationError) -> tuple[int, int, str]:
    # Structural faults first (a missing or unexpected field), then the deepest path, then stable order;
    # "matches no shape" only when nothing more precise is known.
    rank = {"required": 0, "additionalProperties": 0, "anyOf": 2}.get(str(error.validator), 1)
    return (rank, -len(error.absolute_path), _path(error))


def _within_chosen_branch(error: ValidationError, arguments: dict[str, Any]) -> ValidationError:
    """For an `anyOf` of shapes told apart by `mode`, report what is wrong inside the caller's shape."""
    if error.validator != "anyOf" or not error.context:
        return error
    mode = arguments.get("mode") if isinstance(arguments, dict) else None
    branches = error.validator_value
    chosen = [
        e
        for e in error.context
        if e.schema_path
        and isinstance(e.schema_path[0], int)
        and branches[e.schema_path[0]].get("properties", {}).get("mode", {}).get("const") == mode
    ]
    if not chosen:
        return error
    return min((_within_chosen_branch(e, arguments) for e in chosen), key=_relevance)
