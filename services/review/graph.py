"""The argument map of a case as data: claims, sources and the verdict as nodes, relations and citations as
edges, merge groups as groups; bounded, nearest the verdict first, with the cut said. Pure."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from shared import health
from shared.ledger import VERDICT

NODES_CAP = 120
EDGES_CAP = 360
LABEL_CAP = 240


def _label(text: str) -> str:
    return text if len(text) <= LABEL_CAP else text[: LABEL_CAP - 1] + "…"


def _claim_order(claims: Sequence[Mapping[str, Any]], relations: Sequence[Mapping[str, Any]]) -> list[str]:
    """Claims nearest the verdict first (breadth first along relations, either way), then the rest in order."""
    ids = [c["claim_id"] for c in claims]
    neighbours: dict[str, list[str]] = {i: [] for i in ids}
    for r in relations:
        if r["source_claim_id"] in neighbours and r["target_claim_id"] in neighbours:
            neighbours[r["target_claim_id"]].append(r["source_claim_id"])
            neighbours[r["source_claim_id"]].append(r["target_claim_id"])
    start = [c["claim_id"] for c in claims if c["kind"] == VERDICT]
    seen = dict.fromkeys(start)
    queue = deque(start)
    while queue:
        for other in neighbours[queue.popleft()]:
            if other not in seen:
                seen[other] = None
                queue.append(other)
    return list(seen) + [i for i in ids if i not in seen]


def graph_view(case_id: str, revision: int, records: Mapping[str, Sequence[Mapping[str, Any]]],
               nodes_cap: int = NODES_CAP, edges_cap: int = EDGES_CAP) -> dict[str, Any]:
    claims = {c["claim_id"]: c for c in records["claims"]}
    sources = {s["source_id"]: s for s in records["sources"]}
    relations, citations = records["relations"], records["citations"]
    claim_ids = _claim_order(list(claims.values()), relations)
    cites: dict[str, list[str]] = {}
    for c in citations:
        cites.setdefault(c["claim_id"], []).append(c["source_id"])
    cited_first = list(dict.fromkeys(s for cid in claim_ids for s in cites.get(cid, [])))
    source_ids = [s for s in cited_first if s in sources] + [s for s in sources if s not in cited_first]
    kept = (claim_ids + source_ids)[:nodes_cap]
    shown = set(kept)
    nodes = []
    for node_id in kept:
        if node_id in claims:
            c = claims[node_id]
            nodes.append({"id": node_id, "kind": "verdict" if c["kind"] == VERDICT else "claim",
                          "label": _label(c["text"]), "status": c["status"], "confidence": c["confidence"],
                          "health": c["health"] or health.SUPPORTED, "lost": c["lost"] or []})
        else:
            s = sources[node_id]
            nodes.append({"id": node_id, "kind": "source", "label": _label(s["title"]), "status": s["status"],
                          "confidence": None, "health": None, "publisher": s["publisher"], "sourceType": s["type"]})
    edges = [{"id": r["relation_id"], "source": r["source_claim_id"], "target": r["target_claim_id"],
              "type": r["type"], "verdictBasis": r["verdict_basis"]}
             for r in relations if r["source_claim_id"] in shown and r["target_claim_id"] in shown]
    edges += [{"id": f"{c['claim_id']}~cites~{c['source_id']}", "source": c["claim_id"], "target": c["source_id"],
               "type": "cites", "verdictBasis": False}
              for c in citations if c["claim_id"] in shown and c["source_id"] in shown]
    all_edges = len(relations) + len(citations)
    members: dict[str, dict[str, Any]] = {}
    for m in records["members"]:
        group = members.setdefault(m["group_id"], {"groupId": m["group_id"], "label": m["label"], "members": [],
                                                   "membersOmitted": 0})
        if m["claim_id"] in shown:
            group["members"].append(m["claim_id"])
        else:
            group["membersOmitted"] += 1
    node_total = len(claims) + len(sources)
    cut = None
    if len(kept) < node_total or len(edges) > edges_cap or len(edges) < all_edges:
        cut = {"nodesTotal": node_total, "nodesOmitted": node_total - len(kept), "edgesTotal": all_edges,
               "edgesOmitted": all_edges - min(len(edges), edges_cap),
               "note": f"the map shows the {len(kept)} records nearest the verdict; every claim and source is "
                       f"listed on the case page and in GET /api/v1/cases/{case_id}/ledger"}
    rated = [n for n in nodes if n["health"] not in (None, health.SUPPORTED)]
    return {
        "caseId": case_id,
        "revision": revision,
        "nodes": nodes,
        "edges": edges[:edges_cap],
        "groups": [g for g in members.values() if g["members"]],
        "health": {
            "unsupported": [n["id"] for n in rated if n["health"] == health.UNSUPPORTED],
            "weakened": [n["id"] for n in rated if n["health"] == health.WEAKENED],
        },
        "cut": cut,
    }
