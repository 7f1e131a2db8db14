"""What is wrong with a call, field by field: the Problem value and the one table of fixes for every fault.

Faults arrive from three checkers — the gateway's JSON Schema validation of tool arguments, pydantic's
validation of message contracts and HTTP bodies, and the ledger rules — and all of them are told in the
same words: each fault kind below has one fix, whichever checker found it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A refusal names every problem of a call, up to this many: enough to fix a call in one round trip, and
# a bound on the work a huge input can cause (collection stops once it is reached).
MAX_PROBLEMS = 20
EXCERPT_CHARS = 60
MESSAGE_CHARS = 200


@dataclass(frozen=True)
class Problem:
    """One fault of a call: the field at fault (a tool-argument path such as `sources[0].url`) and its fix."""

    field: str
    message: str
    hint: str

    def at(self, prefix: str) -> Problem:
        return Problem(f"{prefix}.{self.field}" if self.field else prefix, self.message, self.hint)

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message, "hint": self.hint}


def bounded(problems: Iterable[Problem], limit: int = MAX_PROBLEMS) -> list[Problem]:
    """The first `limit` problems, consuming no more of the iterable than that."""
    found: list[Problem] = []
    for problem in problems:
        found.append(problem)
        if len(found) >= limit:
            break
    return found


# --- the one table of fixes -------------------------------------------------------------------------


def _range(c: Mapping[str, Any]) -> str:
    low, high = c.get("min"), c.get("max")
    return f" (an integer from {low} to {high})" if low is not None and high is not None else ""


def _count(number: Any, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _between(c: Mapping[str, Any], noun: str) -> str:
    """` (1 to 96 characters)` when both bounds are known."""
    low, high = c.get("min"), c.get("max")
    return f" ({low} to {high} {noun}s)" if low is not None and high is not None else ""


_FIXES: dict[str, Any] = {
    "required": lambda c: "add the field: it is required",
    "unknown_field": lambda c: "remove the field: it is not one the contract lists",
    "too_long": lambda c: f"shorten the text to at most {_count(c['max'], 'character')}" + _between(c, "character"),
    "too_short": lambda c: f"send a text of at least {_count(c['min'], 'character')}" + _between(c, "character"),
    "pattern": lambda c: f"send a value matching the pattern {c['pattern']}",
    "enum": lambda c: f"use one of: {c['expected']}",
    "const": lambda c: f"this field must be exactly {c['expected']}",
    "too_many_items": lambda c: f"send at most {_count(c['max'], 'item')}" + _between(c, "item"),
    "too_few_items": lambda c: f"send at least {_count(c['min'], 'item')}" + _between(c, "item"),
    "unique": lambda c: "list each value once",
    "minimum": lambda c: f"send a number of at least {c['min']}" + _range(c),
    "exclusive_minimum": lambda c: f"send a number greater than {c['min']}",
    "maximum": lambda c: f"send a number of at most {c['max']}" + _range(c),
    "exclusive_maximum": lambda c: f"send a number less than {c['max']}",
    "integer": lambda c: "send a whole number (a JSON integer)",
    "number": lambda c: "send a JSON number",
    "boolean": lambda c: "send true or false",
    "string": lambda c: "send a JSON string",
    "array": lambda c: "send a JSON array",
    "object": lambda c: "send a JSON object",
    "null": lambda c: "send null",
    "format": lambda c: f"send a valid {c['format']}",
    "uuid": lambda c: "send a UUID such as 123e4567-e89b-42d3-a456-426614174000",
    "nul": lambda c: "remove the NUL character (U+0000): it cannot be stored",
    "any_of": lambda c: "the arguments match none of the accepted shapes; see the input schema",
    "json": lambda c: "send a well-formed JSON document",
}

# Fixes worth more than the generic ones, for fields of the reviewers' API whose right value is found
# elsewhere (an agent's expectedRevision comes from get_workspace instead).
API_FIELD_FIXES = {
    "companyId": "use the companyId of a saved company: a UUID, as GET /api/v1/companies lists them",
    "resolvedOn": "write the day it resolved as YYYY-MM-DD, a calendar day that has come",
    "expectedRevision": "send the case revision you reviewed (a whole number): caseRevision of "
                        "GET /api/v1/proposals/{proposalId}",
}

SLUG_PATTERN = r"^[a-z][a-z0-9-]*$"
_SLUG_FIX = ("use a slug matching the pattern ^[a-z][a-z0-9-]*$: lowercase letters, digits and hyphens, starting "
             "with a letter (at most 96 characters)")
GENERIC_FIX = "send the fields the contract lists, with the types it gives"


def fix(kind: str, ctx: Mapping[str, Any] | None = None, *, field_fix: str | None = None) -> str:
    """How to mend one fault of `kind` (with its context: bounds, pattern, allowed values)."""
    ctx = ctx or {}
    if ctx.get("hint"):
        return str(ctx["hint"])
    if field_fix:
        return field_fix
    if kind == "pattern" and ctx.get("pattern") == SLUG_PATTERN:
        return _SLUG_FIX
    maker = _FIXES.get(kind)
    try:
        return maker(ctx) if maker else GENERIC_FIX
    except KeyError:
        return GENERIC_FIX


# --- pydantic faults in the same words ----------------------------------------------------------------

_PYDANTIC_KINDS = {
    "missing": "required",
    "extra_forbidden": "unknown_field",
    "string_too_long": "too_long",
    "string_too_short": "too_short",
    "string_pattern_mismatch": "pattern",
    "literal_error": "enum",
    "enum": "enum",
    "too_long": "too_many_items",
    "too_short": "too_few_items",
    "greater_than_equal": "minimum",
    "greater_than": "exclusive_minimum",
    "less_than_equal": "maximum",
    "less_than": "exclusive_maximum",
    "int_type": "integer",
    "int_parsing": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "float_parsing": "number",
    "bool_type": "boolean",
    "bool_parsing": "boolean",
    "string_type": "string",
    "list_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "uuid_type": "uuid",
    "uuid_parsing": "uuid",
    "nul_character": "nul",
    "json_invalid": "json",
}

_PYDANTIC_CONTEXT = {"max_length": "max", "min_length": "min", "ge": "min", "gt": "min", "le": "max", "lt": "max"}

# Where a value arrived, in FastAPI's error locations, or the handler parameter FastStream validated:
# not part of the field's name.
_NOT_FIELDS = ("args", "body", "path", "query", "header", "cookie", "form")


def field_path(loc: Sequence[str | int]) -> str:
    """pydantic's ('args', 'sources', 0, 'url') → 'sources[0].url' (the tool-argument path)."""
    path = ""
    for part in loc:
        if isinstance(part, str) and part in _NOT_FIELDS and not path:
            continue
        if isinstance(part, str) and ("[" in part or part[:1].isupper()):
            continue  # a union or validator branch name, not a field
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            name = part if len(part) <= EXCERPT_CHARS else f"{part[:EXCERPT_CHARS]}…"  # an unknown key
            path += f".{name}" if path else name
    return path or "(root)"


def from_pydantic(
    errors: Sequence[Mapping[str, Any]], *, camel: Any = None, field_fixes: Mapping[str, str] | None = None
) -> list[Problem]:
    """Every fault pydantic found (bounded), each with its field and fix; the value is never echoed.

    `camel` turns snake_case locations into the camelCase names callers send (HTTP bodies, path
    parameters); message contracts already report their aliases. `field_fixes` name better fixes for
    particular fields.
    """
    problems = []
    for error in errors[:MAX_PROBLEMS]:
        loc = [camel(p) if camel and isinstance(p, str) else p for p in error.get("loc", ())]
        where = field_path(loc)
        kind = _PYDANTIC_KINDS.get(error.get("type", ""), error.get("type", ""))
        raw = error.get("ctx") or {}
        ctx = {_PYDANTIC_CONTEXT.get(k, k): v for k, v in raw.items()}
        message = str(error.get("msg", "is not valid"))
        message = message if len(message) <= MESSAGE_CHARS else f"{message[:MESSAGE_CHARS]}…"
        problems.append(Problem(where, message, fix(kind, ctx, field_fix=(field_fixes or {}).get(where))))
    return problems


def excerpt(value: Any) -> str:
    """The value as JSON, cut short: a message never echoes a whole argument back to the caller."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    if len(text) <= EXCERPT_CHARS:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters as JSON"
    return f"{text[:EXCERPT_CHARS]}… ({size})"
