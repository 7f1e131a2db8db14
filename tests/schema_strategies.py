"""Hypothesis strategies that draw instances valid under the spec's JSON Schemas.

hypothesis-jsonschema does not run with current Hypothesis, so this covers exactly the keywords the
spec uses and refuses any other, so a schema change can never make it draw less than it claims to.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

KNOWN = {
    "type", "description", "properties", "required", "additionalProperties", "enum", "const", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "items", "minItems", "maxItems", "uniqueItems",
    "anyOf", "$schema",
}

URIS = st.builds(
    lambda scheme, host, path: f"{scheme}://{host}.example{path}",
    st.sampled_from(["http", "https"]),
    st.from_regex(r"[a-z][a-z0-9]{0,12}", fullmatch=True),
    st.from_regex(r"(/[a-zA-Z0-9._~-]{1,10}){0,3}", fullmatch=True),
)


def valid(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    unknown = set(schema) - KNOWN
    if unknown:
        raise ValueError(f"no strategy for schema keywords {sorted(unknown)}")
    if "anyOf" in schema:
        return st.one_of([valid(branch) for branch in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        return _object(schema)
    if kind == "array":
        return st.lists(
            valid(schema.get("items", {"type": "string"})),
            min_size=schema.get("minItems", 0),
            max_size=min(schema.get("maxItems", 6), 6),
            unique_by=(lambda v: json.dumps(v, sort_keys=True)) if schema.get("uniqueItems") else None,
        )
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2**53)), schema.get("maximum", 2**53))
    if kind == "string":
        return _string(schema)
    raise ValueError(f"no strategy for schema {schema}")


def _object(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    return st.fixed_dictionaries(
        {name: valid(properties[name]) for name in properties if name in required},
        optional={name: valid(properties[name]) for name in properties if name not in required},
    )


def _string(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    low, high = schema.get("minLength", 0), schema.get("maxLength", 60)
    if schema.get("format") == "uuid":
        return st.uuids(version=4).map(str)
    if schema.get("format") == "uri":
        return URIS.filter(lambda s: low <= len(s) <= high)
    if "pattern" in schema:
        pattern = schema["pattern"]
        fullmatch = pattern.endswith("$")
        drawn = st.from_regex(pattern, fullmatch=fullmatch) if fullmatch else st.builds(
            lambda head, tail: head + tail, st.from_regex(pattern.lstrip("^"), fullmatch=True), st.text(max_size=30)
        )
        return drawn.filter(lambda s: low <= len(s) <= high)
    return st.text(min_size=low, max_size=min(high, max(low, 60)))


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every location inside a JSON value (the root excluded)."""
    found = []
    if isinstance(value, dict):
        for key, inner in value.items():
            found.append((*prefix, key))
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found.append((*prefix, index))
            found += paths(inner, (*prefix, index))
    return found
