"""The MCP tool contract: the spec files verbatim, and validation of calls against their schemas."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

SPEC_DIR = Path(__file__).parent
SPEC_FILES = ("threadline-tools.json", "prism-tools.json")  # the contract, verbatim from ../shared/spec
EXTENSION_FILES = ("company-context-tool.json",)  # tools Threadline adds, in the spec's style


# --- ECMA-262 patterns -------------------------------------------------------------------------------
# JSON Schema patterns are ECMA-262 regular expressions; jsonschema runs them with Python's `re`, where
# `$` also matches before a trailing newline and `\d` matches any Unicode digit.

_ECMA_SPACE = r"\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def python_pattern(pattern: str) -> str:
    """An ECMA-262 pattern rewritten for Python's `re`, compiled with re.ASCII (so `\\d`, `\\w` are ASCII).

    `$` becomes `\\Z` (end of input only), `\\s` keeps ECMA's Unicode whitespace, and the classes `[]`
    (nothing) and `[^]` (anything) keep their ECMA meaning. Inside a class `\\S` stays ASCII-only.
    """
    out: list[str] = []
    in_class = False
    at = 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            escape = pattern[at : at + 2]
            if escape == r"\s":
                escape = _ECMA_SPACE if in_class else f"[{_ECMA_SPACE}]"
            elif escape == r"\S" and not in_class:
                escape = f"[^{_ECMA_SPACE}]"
            out.append(escape)
            at += 2
            continue
        if in_class:
            in_class = char != "]"
        elif pattern.startswith("[]", at):
            char, at = "(?!)", at + 1
        elif pattern.startswith("[^]", at):
            char, at = "(?s:.)", at + 2
        elif char == "[":
            in_class = True
        elif char == "$":
            char = r"\Z"
        out.append(char)
        at += 1
    return "".join(out)


@lru_cache(maxsize=512)
def ecma_regex(pattern: str) -> re.Pattern[str]:
    """A JSON Schema pattern compiled with its ECMA-262 meaning (cached: the spec repeats a few patterns)."""
    return re.compile(python_pattern(pattern), re.ASCII)


def _pattern(
    validator: Validator, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not ecma_regex(pattern).search(instance):
        yield ValidationError(f"{excerpt(instance)} does not match {pattern!r}")


def _pattern_properties(
    validator: Validator, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if ecma_regex(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _unlisted(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    patterns = [ecma_regex(pattern) for pattern in schema.get("patternProperties", {})]
    listed = schema.get("properties", {})
    return [key for key in instance if key not in listed and not any(p.search(key) for p in patterns)]


# `required` and `additionalProperties` put the field they are about on the error's path, so the field
# an agent is told about never has to be read back out of a message.
def _additional_properties(
    validator: Validator, allowed: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for key in _unlisted(instance, schema):
        if validator.is_type(allowed, "object"):
            yield from validator.descend(instance[key], allowed, path=key)
        elif allowed is False:
            yield ValidationError(f"{excerpt(key)} is not an accepted property", path=[key])


def _required(
    validator: Validator, required: list[str], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for name in required:
        if name not in instance:
            yield ValidationError(f"{name!r} is a required property", path=[name])


ToolValidator = validators.extend(
    Draft7Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "required": _required,
    },
)


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
    def validator(self) -> Validator:
        return ToolValidator(_one_dialect(self.input_schema), format_checker=FormatChecker())


class ArgumentError(ValueError):
    """A tool call's arguments do not match the tool's input schema."""

    def __init__(self, field: str, message: str, hint: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.hint = hint


def _one_dialect(schema: Any) -> Any:
    # jsonschema switches to its stock Draft7Validator, with Python regexes, below any "$schema" (the
    # Prism branches carry one); the dialect is Draft-07 throughout, so validate with the name dropped.
    if isinstance(schema, dict):
        return {k: _one_dialect(v) for k, v in schema.items() if not (k == "$schema" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_one_dialect(item) for item in schema]
    return schema


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


# --- validating a call ------------------------------------------------------------------------------

EXCERPT_CHARS = 60
NUL_HINT = "remove the NUL character (U+0000): it cannot be stored"


def validate_arguments(tool: ToolSpec, arguments: dict[str, Any]) -> None:
    """Raise ArgumentError naming the first offending field, or return when the call is valid."""
    nul = _first_nul(arguments)
    if nul is not None:
        raise ArgumentError(_format_path(nul) or "(arguments)", "contains a NUL character (U+0000)", NUL_HINT)
    errors = [_within_chosen_branch(e, arguments) for e in tool.validator.iter_errors(arguments)]
    if not errors:
        return
    error = min(errors, key=_relevance)
    raise ArgumentError(_format_path(error.absolute_path) or "(arguments)", _message(error), _hint(error))


def excerpt(value: Any) -> str:
    """The value as JSON, cut short: a message never echoes a whole argument back to the agent."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    if len(text) <= EXCERPT_CHARS:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters as JSON"
    return f"{text[:EXCERPT_CHARS]}… ({size})"


def _first_nul(value: Any, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """Where the first string (a value or a property name) holding U+0000 is; PostgreSQL can store neither."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    inner: Iterable[tuple[str | int, Any]] = ()
    if isinstance(value, dict):
        for key in value:
            if "\x00" in key:
                return (*path, key)
        inner = value.items()
    elif isinstance(value, list):
        inner = enumerate(value)
    for part, item in inner:
        found = _first_nul(item, (*path, part))
        if found is not None:
            return found
    return None


def _format_path(parts: Iterable[str | int]) -> str:
    """('sources', 0, 'url') → 'sources[0].url'; a long or odd property name is cut short and escaped."""
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
            continue
        name = part.replace("\x00", "\\u0000")
        name = name if len(name) <= EXCERPT_CHARS else f"{name[:EXCERPT_CHARS]}…"
        path += f".{name}" if path else name
    return path


_JSON_TYPES = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
               (list, "an array"), (dict, "an object"))


def _json_type(value: Any) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "null")


def _message(error: ValidationError) -> str:
    """The rule the value breaks, with at most a short excerpt of the value."""
    value, rule = error.instance, error.validator_value
    match error.validator:
        case "required":
            return "is required but missing"
        case "additionalProperties":
            return "is not a property the tool accepts here"
        case "type":
            return f"{excerpt(value)} is {_json_type(value)}; the schema requires type {rule}"
        case "enum":
            return f"{excerpt(value)} is not one of the allowed values"
        case "const":
            return f"{excerpt(value)} is not the one allowed value"
        case "minLength":
            return f"is {len(value)} characters long; at least {rule} required"
        case "maxLength":
            return f"is {len(value)} characters long; at most {rule} allowed"
        case "pattern":
            return f"{excerpt(value)} does not match the required pattern"
        case "format":
            return f"{excerpt(value)} is not a valid {rule}"
        case "minimum":
            return f"{excerpt(value)} is less than the minimum {rule}"
        case "maximum":
            return f"{excerpt(value)} is greater than the maximum {rule}"
        case "minItems":
            return f"has {len(value)} items; at least {rule} required"
        case "maxItems":
            return f"has {len(value)} items; at most {rule} allowed"
        case "uniqueItems":
            return "lists the same value more than once"
        case "anyOf":
            return "the arguments match none of the tool's accepted shapes"
    return f"{excerpt(value)} breaks the schema rule {error.validator}"


def _hint(error: ValidationError) -> str:
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
        hint = f"the value must match the pattern {error.validator_value}"
        if re.search(error.validator_value, error.instance):  # refused only where Python's re and ECMA differ
            hint += " (as in JavaScript: $ is the very end, no trailing newline; \\d is 0-9 only)"
        return hint
    if validator in ("minimum", "maximum"):
        return f"use an integer from {schema.get('minimum', '-∞')} to {schema.get('maximum', '∞')}"
    if validator == "type":
        return f"send a value of JSON type {schema.get('type')}"
    if validator == "format":
        return f"send a valid {schema.get('format')}"
    if validator == "anyOf":
        return "the arguments match none of the tool's accepted shapes; see the input schema"
    return "correct the value to satisfy the tool's input schema"


def _relevance(error: ValidationError) -> tuple[int, int, str]:
    # Structural faults first (a missing or unexpected field), then the deepest path, then stable order;
    # "matches no shape" only when nothing more precise is known.
    rank = {"required": 0, "additionalProperties": 0, "anyOf": 2}.get(str(error.validator), 1)
    return (rank, -len(error.absolute_path), _format_path(error.absolute_path))


def _distance(faults: list[ValidationError]) -> tuple[int, int]:
    """How far a call is from one shape: its missing or unexpected fields, then all its faults."""
    return sum(_relevance(fault)[0] == 0 for fault in faults), len(faults)


def _within_chosen_branch(error: ValidationError, arguments: dict[str, Any]) -> ValidationError:
    """For an `anyOf` of shapes, report what is wrong inside the shape the caller meant.

    That is the shape its `mode` names where the shapes are told apart by `mode` (none when `mode` is
    itself wrong: that fault is reported instead), else the shape it comes closest to: the fewest missing
    or unexpected fields, then the fewest faults.
    """
    if error.validator != "anyOf" or not error.context:
        return error
    faults: dict[int, list[ValidationError]] = {}
    for inner in error.context:
        faults.setdefault(inner.schema_path[0], []).append(inner)
    modes = {
        index: branch["properties"]["mode"]["const"]
        for index, branch in enumerate(error.validator_value)
        if "const" in branch.get("properties", {}).get("mode", {})
    }
    if modes:
        mode = arguments.get("mode") if isinstance(arguments, dict) else None
        chosen = next((faults.get(index, []) for index, const in modes.items() if const == mode), [])
    else:
        chosen = min(faults.values(), key=_distance)
    if not chosen:
        return error
    return min((_within_chosen_branch(inner, arguments) for inner in chosen), key=_relevance)
