"""The argument map of a case as data: claims, sources and the verdict as nodes, relations and citations as
edges, merge groups as groups; bounded, with the cut said. Pure.

A case small enough to draw is drawn whole, nearest the verdict first. A focus view, and a case too large to
draw whole, show one neighbourhood instead: the claims within two relations (either way) of the claim asked
for, else of the verdict, else of the case's most connected claims, and the sources those claims cite.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from shared import health
from shared.errors import NotFound
from shared.grounding import label
from shared.ledger import VERDICT

NODES_CAP = 120
EDGES_CAP = 360
LABEL_CAP = 240
HOPS = 2  # a neighbourhood: the claims this many relations away from its centre, either way
CENTRES = 3  # a large case without a verdict opens on this many of its most connected claims


def _label(text: str) -> str:
    return text if len(text) <= LABEL_CAP else text[: LABEL_CAP - 1] + "…"


def _neighbours(ids: Sequence[str], relations: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    neighbours: dict[str, list[str]] = {i: [] for i in ids}
    for r in relations:
        if r["source_claim_id"] in neighbours and r["target_claim_id"] in neighbours:
            neighbours[r["target_claim_id"]].append(r["source_claim_id"])
            neighbours[r["source_claim_id"]].append(r["target_claim_id"])
    return neighbours


def _reached(start: Sequence[str], neighbours: Mapping[str, list[str]], hops: int | None = None) -> list[str]:
    """The claims reached from `start` along relations either way (at most `hops` away), nearest first."""
    distance = dict.fromkeys(start, 0)
    queue = deque(start)
    while queue:
        here = queue.popleft()
        if hops is not None and distance[here] >= hops:
            continue
        for other in neighbours[here]:
            if other not in distance:
                distance[other] = distance[here] + 1
                queue.append(other)
    return list(distance)


def _centre(claims: Mapping[str, Mapping[str, Any]], neighbours: Mapping[str, list[str]],
            focus: str | None) -> dict[str, Any]:
    """What a neighbourhood is drawn around: the claim asked for, the verdict, or the most connected claims."""
    if focus is not None:
        return {"claimIds": [focus], "hops": HOPS, "reason": "requested"}
    verdicts = [i for i, c in claims.items() if c["kind"] == VERDICT]
    if verdicts:
        return {"claimIds": verdicts, "hops": HOPS, "reason": "verdict"}
    ranked = sorted(claims, key=lambda i: -len(set(neighbours[i])))  # stable: ties keep the ledger's order
    return {"claimIds": ranked[:CENTRES], "hops": HOPS, "reason": "most_connected"}


def _cut_note(case_id: str, centre: dict[str, Any] | None, claims: int, sources: int) -> str:
    if centre is None:
        return (f"the map shows the {claims + sources} records nearest the verdict; every claim and source is "
                f"listed on the case page and in GET /api/v1/cases/{case_id}/ledger")
    ids = ", ".join(centre["claimIds"])
    what = {"requested": f"claim {ids}", "verdict": f"the verdict {ids}",
            "most_connected": f"the most connected claims ({ids})"}[centre["reason"]]
    return (f"the map shows {what} and the claims within {centre['hops']} relations of it ({claims} claims, "
            f"{sources} sources); every other record is listed on the case page and found by the case's search, "
            f"and each claim opens its own focus view (?focus=<claimId>)")


def graph_view(case_id: str, revision: int, records: Mapping[str, Sequence[Mapping[str, Any]]],
               nodes_cap: int = NODES_CAP, edges_cap: int = EDGES_CAP, focus: str | None = None) -> dict[str, Any]:
    claims = {c["claim_id"]: c for c in records["claims"]}
    sources = {s["source_id"]: s for s in records["sources"]}
    relations, citations = records["relations"], records["citations"]
    if focus is not None and focus not in claims:
        raise NotFound(f"case {case_id!r} has no active claim {focus!r} to focus the map on", field="focus",
                       hint="focus on a claim the case page lists, or search the case for one")
    neighbours = _neighbours(list(claims), relations)
    node_total = len(claims) + len(sources)
    centre = None if focus is None and node_total <= nodes_cap else _centre(claims, neighbours, focus)
    cites: dict[str, list[str]] = {}
    for c in citations:
        cites.setdefault(c["claim_id"], []).append(c["source_id"])
    if centre is None:
        reached = _reached([i for i, c in claims.items() if c["kind"] == VERDICT], neighbours)
        claim_ids = reached + [i for i in claims if i not in set(reached)]
    else:
        claim_ids = _reached(centre["claimIds"], neighbours, centre["hops"])
    cited_first = list(dict.fromkeys(s for cid in claim_ids for s in cites.get(cid, [])))
    source_ids = [s for s in cited_first if s in sources]
    if centre is None:
        source_ids += [s for s in sources if s not in set(cited_first)]
    kept = (claim_ids + source_ids)[:nodes_cap]
    shown = set(kept)
    nodes = []
    for node_id in kept:
        if node_id in claims:
            c = claims[node_id]
            hidden = sum(other not in shown for other in neighbours[node_id])
            nodes.append({"id": node_id, "kind": "verdict" if c["kind"] == VERDICT else "claim",
                          "label": _label(c["text"]), "status": c["status"], "confidence": c["confidence"],
                          "health": c["health"] or health.SUPPORTED, "lost": c["lost"] or [],
                          "relationsOmitted": hidden,
                          "grounding": label((sources[s]["type"], sources[s]["publisher"])
                                             for s in cites.get(node_id, [])
                                             if s in sources and sources[s]["status"] == "active")})
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
    cut = None
    if len(kept) < node_total or len(edges) > edges_cap or len(edges) < all_edges:
        drawn_claims = sum(n["kind"] != "source" for n in nodes)
        cut = {"nodesTotal": node_total, "nodesOmitted": node_total - len(kept), "edgesTotal": all_edges,
               "edgesOmitted": all_edges - min(len(edges), edges_cap),
               "note": _cut_note(case_id, centre, drawn_claims, len(nodes) - drawn_claims)}
    rated = [n for n in nodes if n["health"] not in (None, health.SUPPORTED)]
    return {
        "caseId": case_id,
        "revision": revision,
        "focus": centre,
        "nodes": nodes,
        "edges": edges[:edges_cap],
        "groups": [g for g in members.values() if g["members"]],
        "health": {
            "unsupported": [n["id"] for n in rated if n["health"] == health.UNSUPPORTED],
            "weakened": [n["id"] for n in rated if n["health"] == health.WEAKENED],
        },
        "cut": cut,
    }
