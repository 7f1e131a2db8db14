"""The argument map in the Argument Interchange Format, as AIFdb and OVA lay out its JSON: claims as I-nodes,
supports / qualifies / amplifies as RA-nodes and contradicts as CA-nodes, each linked by two edges.

Node ids: an I-node's is its claim's id; an S-node's is `RA:` or `CA:` and its relation's id (claim ids are
lowercase slugs, so they cannot collide). Every record canonical by the exported revision is there; `status`
says what it was then.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from services.gateway.exports.records import ByClaim, LedgerPages

SCHEMES = {"supports": ("RA", "Default Inference"), "qualifies": ("RA", "Default Inference"),
           "amplifies": ("RA", "Default Inference"), "contradicts": ("CA", "Default Conflict")}


def _timestamp(value: str | None) -> str:
    return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S") if value else ""


def s_node_id(relation: dict[str, Any]) -> str:
    return f"{SCHEMES[relation['type']][0]}:{relation['relation_id']}"


def i_node(claim: dict[str, Any], resolution: dict[str, Any] | None = None) -> dict[str, Any]:
    """A claim's I-node; `status`, `kind`, `confidence` and a prediction's `resolution` (the one standing at the
    exported revision) are Threadline's own keys, which AIF has no place for and its readers pass over."""
    found = {"nodeID": claim["claim_id"], "text": claim["text"], "type": "I",
             "timestamp": _timestamp(claim["decided_at"]), "status": claim["status"], "kind": claim["kind"],
             "confidence": claim["confidence"]}
    if resolution is not None:
        found["resolution"] = {"outcome": resolution["outcome"], "resolvedOn": resolution["resolved_on"],
                               "sourceId": resolution["source_id"], "resolvedBy": resolution["resolved_by"],
                               "revision": resolution["revision"]}
    return found


def s_node(relation: dict[str, Any]) -> dict[str, Any]:
    kind, text = SCHEMES[relation["type"]]
    return {"nodeID": s_node_id(relation), "text": text, "type": kind, "scheme": relation["type"],
            "timestamp": _timestamp(relation["decided_at"]), "status": relation["status"]}


def edges(relation: dict[str, Any]) -> list[dict[str, Any]]:
    """Premise (or conflicting claim) → S-node → conclusion (or the claim it conflicts with)."""
    middle = s_node_id(relation)
    return [{"edgeID": f"{middle}:from", "fromID": relation["source_claim_id"], "toID": middle, "formEdgeID": None},
            {"edgeID": f"{middle}:to", "fromID": middle, "toID": relation["target_claim_id"], "formEdgeID": None}]


async def aif_json(pages: LedgerPages) -> AsyncIterator[str]:
    first = True

    def item(value: dict[str, Any]) -> str:
        nonlocal first
        text = ("\n  " if first else ",\n  ") + json.dumps(value, ensure_ascii=False)
        first = False
        return text

    yield '{"nodes": ['
    resolutions = ByClaim(pages, "resolutions", "claim_id")
    async for claim in pages.each("claims"):
        resolved = await resolutions.of(claim["claim_id"])
        yield item(i_node(claim, resolved[-1] if resolved else None))
    async for relation in pages.each("relations"):
        yield item(s_node(relation))
    yield '\n ],\n "edges": ['
    first = True
    async for relation in pages.each("relations"):
        for edge in edges(relation):
            yield item(edge)
    yield '\n ],\n "locutions": [],\n "participants": []\n}\n'
