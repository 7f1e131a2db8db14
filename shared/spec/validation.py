"""Validating a tool call against its input schema: Draft-07, formats checked, patterns as ECMA-262 has them.

A refusal names every fault of the call (up to MAX_PROBLEMS), each with its field and fix. The work a
call can cause is bounded: sizes (`maxItems`, `maxLength`) are checked first, by length alone, so an
oversized array is refused without looking at its items, and collection stops at the bound.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from typing import Any, Protocol

import fastjsonschema
import orjson
import regress
from jsonschema import Draft7Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from shared import problems as p
from shared.problems import MAX_PROBLEMS, Problem, excerpt
from shared.spec.bounds import NOTE, threadline_bound
from shared.spec.shapes import EITHER, relevance, shape_faults

NUL_HINT = p.fix("nul")


class ArgumentError(ValueError):
    """A tool call's arguments do not match the tool's input schema: every problem found, the first foremost."""

    def __init__(self, problems: list[Problem]) -> None:
        first = problems[0]
        super().__init__(f"{first.field}: {first.message}")
        self.problems = problems
        self.field = first.field
        self.message = first.message
        self.hint = first.hint


# --- ECMA-262 patterns -------------------------------------------------------------------------------
# JSON Schema patterns are ECMA-262 regular expressions (where `$` is the very end and `\d` is 0-9);
# `regress` runs them with an ECMA-262 engine instead of Python's `re`.


@lru_cache(maxsize=512)
def ecma_regex(pattern: str) -> regress.Regex:
    """A JSON Schema pattern compiled with its ECMA-262 meaning (cached: the spec repeats a few patterns)."""
    return regress.Regex(pattern)


def ecma_search(pattern: str, value: str) -> bool:
    return ecma_regex(pattern).find(value) is not None


def _pattern(validator: Validator, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not ecma_search(pattern, instance):
        yield ValidationError(f"{excerpt(instance)} does not match {pattern!r}")


def _pattern_properties(
    validator: Validator, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if ecma_search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _unlisted(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    listed = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [key for key in instance if key not in listed and not any(ecma_search(x, key) for x in patterns)]


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


def _required(validator: Validator, required: list[str], instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for name in required:
        if name not in instance:
            yield ValidationError(f"{name!r} is a required property", path=[name])


def _dependencies(validator: Validator, dependencies: dict[str, Any], instance: Any,
                  schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for name, needed in dependencies.items():
        if name not in instance:
            continue
        if validator.is_type(needed, "array"):
            for each in needed:
                if each not in instance:
                    yield ValidationError(f"is required when {name} is sent", path=[each])
        else:
            yield from validator.descend(instance, needed, schema_path=name)


ToolValidator = validators.extend(
    Draft7Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "required": _required,
        "dependencies": _dependencies,
    },
)


def _one_dialect(schema: Any) -> Any:
    # jsonschema switches to its stock Draft7Validator, with Python regexes, below any "$schema" (the
    # Prism branches carry one); the dialect is Draft-07 throughout, so validate with the name dropped.
    if isinstance(schema, dict):
        return {k: _one_dialect(v) for k, v in schema.items() if not (k == "$schema" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_one_dialect(item) for item in schema]
    return schema


def validator_for(schema: dict[str, Any]) -> Validator:
    return ToolValidator(_one_dialect(schema), format_checker=FormatChecker())


def fast_check_for(schema: dict[str, Any]) -> Callable[[Any], bool]:
    """A compiled check that says whether a call is valid, never why (fastjsonschema, Draft-07).

    Patterns become named formats checked by the ECMA-262 engine, and the schema's formats are checked by
    jsonschema's own FormatChecker, so it accepts what ToolValidator accepts; where the two could part (a
    keyword it might read otherwise), a call it refuses is simply checked again by ToolValidator.
    """
    checker = FormatChecker()
    formats: dict[str, Callable[[str], bool]] = {}

    def rewrite(node: Any) -> Any:
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {k: rewrite(v) for k, v in node.items() if k != "pattern"}
        if "format" in node:
            name = node["format"]
            formats[name] = lambda value, name=name: checker.conforms(value, name)
        if "pattern" in node:
            pattern, name = node["pattern"], f"ecma-pattern-{len(formats)}"
            formats[name] = lambda value, pattern=pattern: ecma_search(pattern, value)
            out["allOf"] = [*out.get("allOf", []), {"format": name}]
        return out

    if _uses(schema, "patternProperties"):  # not in the spec; keep to the validator that knows ECMA keys
        return lambda arguments: False
    compiled = fastjsonschema.compile(rewrite(_one_dialect(schema)), formats=formats, use_default=False)

    def check(arguments: Any) -> bool:
        try:
            compiled(arguments)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    return check


def _uses(node: Any, keyword: str) -> bool:
    if isinstance(node, dict):
        return keyword in node or any(_uses(v, keyword) for v in node.values())
    if isinstance(node, list):
        return any(_uses(v, keyword) for v in node)
    return False


def _holds_nul(arguments: Any) -> bool:
    """Whether any string of the call (a value or a property name) holds U+0000: JSON writes it \\u0000."""
    return b"\\u0000" in orjson.dumps(arguments)


# --- validating a call ------------------------------------------------------------------------------


class CheckedTool(Protocol):
    """What validating a call needs of a tool (shared/spec/tools.py's ToolSpec, which builds its checks here)."""

    @property
    def validation_schema(self) -> dict[str, Any]: ...

    @property
    def fast_check(self) -> Callable[[Any], bool]: ...

    @property
    def validator(self) -> Validator: ...


def validate_arguments(tool: CheckedTool, arguments: dict[str, Any], *, fast: bool = True) -> None:
    """Raise ArgumentError naming every problem of the call (bounded), or return when the call is valid.

    A valid call is told apart by one compiled check (the schema as Python code, with the same ECMA-262
    patterns and format checks); only a call it refuses goes through the validator that names each fault,
    which has the last word. `fast=False` skips the compiled check (and compiling it): for calls that are
    most likely refused.
    """
    schema = tool.validation_schema
    if fast and not _too_wide(schema, arguments) and tool.fast_check(arguments) and not _holds_nul(arguments):
        return
    found = _unique(p.bounded(_oversized(schema, arguments, ())))
    if not found:  # within its sizes, the call is checked whole
        found = p.bounded(_nul_characters(arguments))
        errors = itertools.islice(tool.validator.iter_errors(arguments), MAX_PROBLEMS)
        faults = _plainest(sorted((f for e in errors for f in shape_faults(e, arguments)), key=relevance))
        found = _unique(found + [_problem(f, schema) for f in faults])[:MAX_PROBLEMS]
    if found:
        raise ArgumentError(found)


def _plainest(faults: list[ValidationError]) -> list[ValidationError]:
    """One fault per refused value: a uuid field refuses a value twice (its format, and the pattern that spells
    the format out), and the format says it plainer."""
    formats = {tuple(f.absolute_path) for f in faults if f.validator == "format"}
    return [f for f in faults if not (f.validator == "pattern" and tuple(f.absolute_path) in formats)]


# Fields that name one record two ways, and what to say when a value meant for the second came in the first.
OTHER_WAY_IN = {"companyId": ("ticker", "companyId is a uuid; to name a company by its ticker send ticker")}


def _other_way_in(error: ValidationError, schema: dict[str, Any]) -> str | None:
    """The fix for a value sent in the wrong one of two fields naming the same record (a ticker as companyId):
    the field it fits, when the tool takes that field too."""
    if error.validator not in ("format", "pattern") or len(error.absolute_path) != 1:
        return None
    other, fix = OTHER_WAY_IN.get(str(error.absolute_path[0]), (None, None))
    other_schema = schema.get("properties", {}).get(other)
    if other_schema is None or not validator_for(other_schema).is_valid(error.instance):
        return None
    return fix


def _unique(found: list[Problem]) -> list[Problem]:
    seen: set[tuple[str, str]] = set()
    return [x for x in found if (x.field, x.message) not in seen and not seen.add((x.field, x.message))]


def _too_wide(schema: dict[str, Any], arguments: Any) -> bool:
    """Whether the call has far more fields than any shape of the tool lists: refused by count alone."""
    shapes = [schema, *(b for b in schema.get("anyOf", []) if isinstance(b, dict))]
    return isinstance(arguments, dict) and len(arguments) > MAX_PROBLEMS + max(len(s.get("properties", {}))
                                                                             for s in shapes)


def _unaccepted(schema: dict[str, Any], value: dict[str, Any]) -> int:
    """How many properties of `value` a closed object schema does not list (0 for an open one)."""
    if schema.get("additionalProperties") is not False or schema.get("patternProperties"):
        return 0
    return len(value) - sum(1 for key in schema.get("properties", {}) if key in value)


def _oversized(schema: Any, value: Any, path: tuple[str | int, ...]) -> Iterator[Problem]:
    """Arrays and strings longer than the schema allows, and closed objects with more unaccepted properties
    than a refusal names, found by their size alone (nothing is read below them). Only the shapes a call
    must have are followed: properties, items, and the `anyOf` branch a `mode` names."""
    if not isinstance(schema, dict):
        return
    where = _format_path(path) or "(arguments)"
    if isinstance(value, str) and "maxLength" in schema and len(value) > schema["maxLength"]:
        yield Problem(where, f"is {len(value)} characters long; at most {schema['maxLength']} allowed"
                      + _whose(schema, "maxLength"),
                      p.fix("too_long", {"max": schema["maxLength"], "min": schema.get("minLength", 0)}))
    elif isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            yield Problem(where, f"has {len(value)} items; at most {schema['maxItems']} allowed"
                          + _whose(schema, "maxItems"),
                          p.fix("too_many_items", {"max": schema["maxItems"], "min": schema.get("minItems", 0)}))
            return
        for index, item in enumerate(value):
            yield from _oversized(schema.get("items"), item, (*path, index))
    elif isinstance(value, dict):
        properties = schema.get("properties", {})
        if (unaccepted := _unaccepted(schema, value)) > MAX_PROBLEMS:  # more than a refusal could name one by one
            yield Problem(where, f"has {unaccepted} properties the tool does not accept here",
                          f"send only the properties it lists: {', '.join(properties)}")
            return
        for key, item in value.items():
            if key in properties:
                yield from _oversized(properties[key], item, (*path, key))
        mode = value.get("mode")
        for branch in schema.get("anyOf", []):
            if isinstance(branch, dict) and branch.get("properties", {}).get("mode", {}).get("const", ...) == mode:
                yield from _oversized(branch, value, path)


def _whose(schema: dict[str, Any], keyword: str) -> str:
    """Says so when the bound broken is Threadline's own, not the published schema's."""
    return f" ({NOTE})" if threadline_bound(schema, keyword) else ""


def _nul_characters(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[Problem]:
    """Every string (a value or a property name) holding U+0000: PostgreSQL can store neither."""
    if isinstance(value, str):
        if "\x00" in value:
            yield Problem(_format_path(path) or "(arguments)", "contains a NUL character (U+0000)", NUL_HINT)
        return
    inner: Iterable[tuple[str | int, Any]] = ()
    if isinstance(value, dict):
        for key in value:
            if "\x00" in key:
                yield Problem(_format_path((*path, key)), "contains a NUL character (U+0000)", NUL_HINT)
        inner = value.items()
    elif isinstance(value, list):
        inner = enumerate(value)
    for part, item in inner:
        yield from _nul_characters(item, (*path, part))


def _format_path(parts: Iterable[str | int]) -> str:
    """('sources', 0, 'url') → 'sources[0].url'; a long or odd property name is cut short and escaped."""
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
            continue
        name = part.replace("\x00", "\\u0000")
        name = name if len(name) <= p.EXCERPT_CHARS else f"{name[:p.EXCERPT_CHARS]}…"
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
            return f"is {len(value)} characters long; at most {rule} allowed" + _whose(error.schema, "maxLength")
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
            return f"has {len(value)} items; at most {rule} allowed" + _whose(error.schema, "maxItems")
        case "uniqueItems":
            return "lists the same value more than once"
        case "anyOf":
            return "the arguments match none of the tool's accepted shapes"
        case "either" | "dependencies":  # one of several fields (shapes.py); a field another one needs
            return error.message
    return f"{excerpt(value)} breaks the schema rule {error.validator}"


# jsonschema's validator names in the fault vocabulary of shared/problems.py.
_KINDS = {
    "required": "required", "additionalProperties": "unknown_field", "enum": "enum", "const": "const",
    "maxLength": "too_long", "minLength": "too_short", "maxItems": "too_many_items",
    "minItems": "too_few_items", "uniqueItems": "unique", "minimum": "minimum", "maximum": "maximum",
    "pattern": "pattern", "format": "format", "anyOf": "any_of",
}
_TYPE_KINDS = {"integer": "integer", "number": "number", "boolean": "boolean", "string": "string",
               "array": "array", "object": "object", "null": "null"}


def _hint(error: ValidationError) -> str:
    schema = error.schema if isinstance(error.schema, dict) else {}
    validator = str(error.validator)
    if validator == EITHER:
        return str(error.validator_value)
    if validator == "dependencies":
        needing = error.message.removeprefix("is required when ").removesuffix(" is sent")
        return f"add {error.path[-1]}, or leave {needing} out"
    if validator == "type":
        wanted = schema.get("type")
        return p.fix(_TYPE_KINDS.get(wanted, "any_of") if isinstance(wanted, str) else "any_of")
    bounds = {"minLength": "maxLength", "maxLength": "maxLength", "minItems": "maxItems", "maxItems": "maxItems",
              "minimum": "maximum", "maximum": "maximum"}
    high = bounds.get(validator, "")
    low = high.replace("max", "min")
    ctx = {
        "expected": ", ".join(map(str, schema.get("enum", []))) if validator == "enum" else repr(schema.get("const")),
        "max": schema.get(high),
        "min": schema.get(low, 0 if high in ("maxLength", "maxItems") else None),
        "format": schema.get("format"),
        "pattern": error.validator_value if validator == "pattern" else None,
    }
    hint = p.fix(_KINDS.get(validator, ""), ctx)
    if validator == "pattern" and _python_would_match(error.validator_value, error.instance):
        hint += " (as in JavaScript: $ is the very end, no trailing newline; \\d is 0-9 only)"
    return hint


def _python_would_match(pattern: str, value: Any) -> bool:
    """Whether the value was refused only where Python's `re` and ECMA-262 differ (worth saying why)."""
    try:
        return isinstance(value, str) and re.search(pattern, value) is not None
    except re.error:
        return False


def _problem(error: ValidationError, schema: dict[str, Any]) -> Problem:
    hint = _other_way_in(error, schema) or _hint(error)
    return Problem(_format_path(error.absolute_path) or "(arguments)", _message(error), hint)
