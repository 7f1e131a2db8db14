"""Integers as JSON Schema reads them: a number with a zero fractional part is one (504.0 is the integer 504).

A call may send 504.0 where its schema asks for an integer, and is valid; the services receive 504, so that
what they store, compare and digest is the integer the call meant, whichever way it was written.
"""

from __future__ import annotations

from typing import Any


def as_integers(schema: dict[str, Any], arguments: Any) -> Any:
    """The (valid) arguments with every integral number the schema calls an integer made an int."""
    return _walk([schema], arguments)


def _walk(schemas: list[Any], value: Any) -> Any:
    schemas = _branches(schemas)
    if isinstance(value, float) and value.is_integer() and any(_integer(s) for s in schemas):
        return int(value)
    if isinstance(value, dict):
        return {key: _walk([s["properties"][key] for s in schemas if key in s.get("properties", {})], item)
                for key, item in value.items()}
    if isinstance(value, list):
        items = [s["items"] for s in schemas if isinstance(s.get("items"), dict)]
        return [_walk(items, item) for item in value]
    return value


def _branches(schemas: list[Any]) -> list[dict[str, Any]]:
    """The schemas with every shape an anyOf, oneOf or allOf of theirs offers."""
    found = []
    for schema in schemas:
        if isinstance(schema, dict):
            found.append(schema)
            found += _branches([b for key in ("anyOf", "oneOf", "allOf") for b in schema.get(key, [])])
    return found


def _integer(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "integer" or (isinstance(kind, list) and "integer" in kind)
