"""Threadline's own bounds where a spec schema sets none: the schemas are served verbatim, calls are checked
with these added, and a refusal by one of them says it is Threadline's.

Each bound lies beyond anything a real call needs, so only a call built to hold the gateway meets one:
`propose_claim_delta_from_source` names at most 200 affected claims (the thesis service's own limit), its
lists of findings hold at most 100 texts of at most 5,000 characters (a summary's length; the delta they
make is held to 256 KiB besides), `sourceTitle` is at most 300 characters (a saved source file's title is)
and `sourceUrl` at most 2,000 (as the seed bounds a proposed claim's).
"""

from __future__ import annotations

import copy
from typing import Any

# Lists the keywords of a subschema that Threadline added (never a keyword of the spec's own).
MARK = "x-threadline-bounds"
NOTE = "Threadline's bound: the published schema sets none"

_FINDINGS = {"maxItems": 100, "items": {"maxLength": 5000}}

# tool → property → keywords added to that property wherever the tool's schema lists it (its anyOf shapes too)
BOUNDS: dict[str, dict[str, dict[str, Any]]] = {
    "propose_claim_delta_from_source": {
        "sourceTitle": {"maxLength": 300},
        "sourceUrl": {"maxLength": 2000},
        "affectedClaimIds": {"maxItems": 200},
        "confirms": _FINDINGS,
        "contradicts": _FINDINGS,
        "newRisks": _FINDINGS,
        "followUps": _FINDINGS,
    },
}


def bounded(tool: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The tool's input schema with Threadline's bounds added and marked (the schema itself is not changed)."""
    bounds = BOUNDS.get(tool)
    if not bounds:
        return schema
    out = copy.deepcopy(schema)
    for shape in (out, *(b for b in out.get("anyOf", []) if isinstance(b, dict))):
        for name, added in bounds.items():
            if isinstance(shape.get("properties", {}).get(name), dict):
                _add(shape["properties"][name], added)
    return out


def _add(schema: dict[str, Any], added: dict[str, Any]) -> None:
    for keyword, value in added.items():
        if isinstance(value, dict):
            if isinstance(schema.get(keyword), dict):
                _add(schema[keyword], value)
        elif keyword not in schema:  # never loosen or override a bound the spec sets
            schema[keyword] = value
            schema[MARK] = [*schema.get(MARK, []), keyword]


def threadline_bound(schema: Any, keyword: str) -> bool:
    """Whether `keyword` of this subschema is one of Threadline's bounds rather than the spec's."""
    return isinstance(schema, dict) and keyword in schema.get(MARK, ())
