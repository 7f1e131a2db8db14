"""Hypothesis strategies that draw instances valid under the spec's JSON Schemas.

hypothesis-jsonschema does not run with current Hypothesis, so this covers exactly the keywords the
spec uses and refuses any other, so a schema change can never make it draw less than it claims to.
Patterns are drawn with their ECMA-262 meaning, as the gateway checks them; no string holds U+0000,
which the gateway refuses whatever the schema says (PostgreSQL cannot store it).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from hypothesis import strategies as st

from shared.spec import ecma_search
from shared.spec.bounds import MARK

KNOWN = {
    "type", "description", "properties", "required", "additionalProperties", "enum", "const", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "items", "minItems", "maxItems", "uniqueItems",
    "anyOf", "$schema", "dependencies", MARK,
}
SHORT = 60  # most strings stay this short; some are drawn up to the schema's maxLength
UNBOUNDED_CHARS = 1000  # the longest string drawn where the schema sets no maxLength
FEW_ITEMS = 4  # most arrays hold at most this many items more than minItems; some hold maxItems
UNBOUNDED_ITEMS = 12  # the most items drawn where the schema sets no maxItems

CHARACTERS = st.characters(codec="utf-8", exclude_characters="\x00")  # JSON text: no lone surrogates
HOSTS = st.from_regex(r"[a-z][a-z0-9]{0,12}", fullmatch=True)
URIS = st.builds(
    lambda scheme, host, path: f"{scheme}://{host}.example{path}",
    st.sampled_from(["http", "https"]),
    HOSTS,
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
        return _array(schema)
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2**53)), schema.get("maximum", 2**53))
    if kind == "string":
        return _string(schema)
    raise ValueError(f"no strategy for schema {schema}")


def _object(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    needs = schema.get("dependencies", {})  # a field that needs others (their array form, as the spec has it)
    return st.fixed_dictionaries(
        {name: valid(properties[name]) for name in properties if name in required},
        optional={name: valid(properties[name]) for name in properties if name not in required},
    ).filter(lambda drawn: all(set(needs[name]) <= set(drawn) for name in drawn if name in needs))


def _array(schema: dict[str, Any]) -> st.SearchStrategy[list[Any]]:
    low = schema.get("minItems", 0)
    high = schema.get("maxItems", low + UNBOUNDED_ITEMS)
    items = valid(schema.get("items", {"type": "string"}))
    unique = (lambda v: json.dumps(v, sort_keys=True)) if schema.get("uniqueItems") else None
    few = st.lists(items, min_size=low, max_size=min(high, low + FEW_ITEMS), unique_by=unique)
    if unique or high <= UNBOUNDED_ITEMS:
        full = st.lists(items, min_size=high, max_size=high, unique_by=unique)
    else:  # hundreds of distinct objects overrun Hypothesis's budget: repeat a few up to maxItems
        full = st.lists(items, min_size=1, max_size=FEW_ITEMS).map(
            lambda drawn: [copy.deepcopy(drawn[index % len(drawn)]) for index in range(high)]
        )
    return st.one_of(few, full)


def _string(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    low, high = schema.get("minLength", 0), schema.get("maxLength", UNBOUNDED_CHARS)
    if schema.get("format") == "uuid":
        return st.uuids(version=4).map(str)
    if schema.get("format") == "uri":
        sizes = st.integers(0, max(0, high - 40))
        long = st.builds(lambda host, size: f"https://{host}.example/" + "p" * size, HOSTS, sizes)
        return st.one_of(URIS, long).filter(lambda s: low <= len(s) <= high)
    if "pattern" in schema:
        return _matching(schema["pattern"], low, high)
    short = st.text(CHARACTERS, min_size=low, max_size=min(high, max(low, SHORT)))
    return st.one_of(short, _long(st.text(CHARACTERS, min_size=1, max_size=8), low, high))


def _matching(pattern: str, low: int, high: int) -> st.SearchStrategy[str]:
    """Strings the ECMA pattern matches; some lengthened toward maxLength by repeating the last character."""
    # Hypothesis draws from Python regexes: ASCII classes and a full match stand in for ECMA's `\\d` and `$`,
    # and every string drawn is checked by the ECMA engine the gateway uses.
    drawn = st.from_regex(re.compile(pattern, re.ASCII), alphabet=CHARACTERS, fullmatch=pattern.endswith("$"))
    drawn = drawn.filter(lambda s: ecma_search(pattern, s))
    lengthened = _long(drawn.filter(bool), low, high).filter(lambda s: ecma_search(pattern, s))
    return st.one_of(drawn, lengthened).filter(lambda s: low <= len(s) <= high)


def _long(start: st.SearchStrategy[str], low: int, high: int) -> st.SearchStrategy[str]:
    """Strings longer than SHORT, up to `high`: the drawn start, then its last character repeated."""
    if high <= SHORT:
        return st.nothing()
    sizes = st.one_of(st.just(high), st.integers(max(low, SHORT + 1), high))
    return st.builds(lambda head, size: (head + head[-1] * size)[: max(size, len(head))], start, sizes)


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
