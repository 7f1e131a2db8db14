"""How the ledger read back reads to reviewers: a diff between two revisions, one claim's timeline. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

DIFF_CAP = 500  # entries per list of a diff; `counts` has every list's total, `omitted` what was cut
TIMELINE_CAP = 200  # entries per list of a claim's timeline; `omitted` how many each list cut had left out, as a diff's


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _total(rows: list[dict[str, Any]]) -> int:
    return rows[0]["total"] if rows else 0


def diff_view(case_id: str, start: int, end: int, found: dict[str, list[dict[str, Any]]],
              cap: int = DIFF_CAP) -> dict[str, Any]:
    """What revisions start+1..end changed: records added, retired and superseded, relations and groups
    added and ended, claims re-rated (evidence health, `health` and `lost`, and grounding, `grounding: {before,
    after}`, each claim's label and origins just before the revision and at it; a claim whose grounding alone
    changed has no `health`), predictions resolved (`supersedes`: the id of the resolution a later one
    replaces), and the decisions (reviewer, revision) that did it."""
    lists: dict[str, list[dict[str, Any]]] = {"added": [], "retired": [], "superseded": []}
    totals = dict.fromkeys(lists, 0)
    parts: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in found["records"]:
        parts.setdefault((r["change"], r["record"]), []).append(r)
    for (change, _), rows in parts.items():
        totals[change] += _total(rows)
        lists[change] += rows

    def entry(r: dict[str, Any]) -> dict[str, Any]:
        shown = {"record": r["record"], "id": r["id"], "revision": r["revision"], "by": r["by"]}
        return (shown | ({"supersededBy": r["superseded_by"]} if r["superseded_by"] else {})
                | ({"note": r["note"]} if r.get("note") else {}))  # a retirement's note: why

    view: dict[str, Any] = {"caseId": case_id, "from": start, "to": end}
    for name in ("added", "retired", "superseded"):
        view[name] = [entry(r) for r in sorted(lists[name], key=lambda r: (r["revision"], r["record"], r["id"]))][:cap]
    for record, name in (("relation", "relations"), ("group", "groups")):
        view[name] = {"added": [e["id"] for e in view["added"] if e["record"] == record],
                      "ended": [e["id"] for e in view["retired"] + view["superseded"] if e["record"] == record]}
    rerated = {(r["claim_id"], r["revision"]): {
        "claimId": r["claim_id"], "health": r["health"], "lost": r["lost"], "revision": r["revision"],
        "by": r["actor"], **({"grounding": r["grounding"]} if r.get("grounding") else {})} for r in found["rerated"][:cap]}
    for g in found.get("regrounded", [])[:cap]:  # grounding alone changed: no evidence health re-rating then
        rerated[(g["claim_id"], g["revision"])] = {"claimId": g["claim_id"], "revision": g["revision"], "by": g["actor"],
                                                   "grounding": g["grounding"]}
    view["rerated"] = sorted(rerated.values(), key=lambda r: (r["revision"], r["claimId"]))[:cap]
    view["resolved"] = [{"claimId": r["claim_id"], "outcome": r["outcome"], "resolvedOn": r["resolved_on"],
                         "sourceId": r["source_id"], "supersedes": r["supersedes"], "revision": r["revision"],
                         "by": r["resolved_by"], "resolutionId": r["resolution_id"], "note": r["note"]}
                        for r in found["resolved"][:cap]]
    view["decisions"] = [{"decisionId": r["decision_id"], "reviewer": r["actor"], "revision": r["revision"],
                          "at": iso(r["at"]), "summary": r["summary"], "proposalId": r["proposal_id"],
                          "stagedBy": r["staged_by"]}
                         for r in found["log"][:cap]]
    counts = {**totals, "rerated": _total(found["rerated"]) + _total(found.get("regrounded", [])),
              "resolved": _total(found["resolved"]), "decisions": _total(found["log"])}
    shown = {name: len(view[name]) for name in counts}
    view["counts"] = counts
    view["omitted"] = {name: counts[name] - shown[name] for name in counts if counts[name] > shown[name]}
    return view


def _event(event: str, revision: int | None, by: str | None, at: datetime | None, **more: Any) -> dict[str, Any]:
    return {"event": event, "revision": revision, "by": by, "at": iso(at),
            **{k: v for k, v in more.items() if v is not None}}


NO_LINKS: dict[str, list[dict[str, Any]]] = {"relations": [], "groups": [], "ratings": [], "resolutions": [],
                                             "groundings": []}
CUT = ("relations", "groups", "resolutions", "groundings")  # a claim's links the repository caps (not its ratings)
ORDER = {"staged": 0, "accepted": 1, "rejected": 1}  # at one revision and moment: staged before decided


def _staging_events(stagings: list[dict[str, Any]], accepted_in: str | None) -> list[dict[str, Any]]:
    """Each staging of the claim that did not install it: staged, then rejected (or still pending: nothing more)."""
    events = []
    for s in stagings:
        if s["proposal_id"] == accepted_in:
            continue  # the claim's own row tells this one
        staged_at = s["staged_revision"] if s["staged_revision"] is not None else s["pinned_revision"]
        events.append(_event("staged", staged_at, s["agent_name"], s["created_at"], proposalId=s["proposal_id"]))
        if s["outcome"] == "rejected":
            events.append(_event("rejected", s["decided_revision"], s["reviewer"], s["decided_at"],
                                 proposalId=s["proposal_id"], decisionId=s["decision_id"], note=s["note"]))
    return events


def _staged_claim(staging: dict[str, Any]) -> dict[str, Any]:
    """What a staging said of the claim (a verdict's proposal holds it beside its relations)."""
    said = staging["payload"]["claim"] if staging["kind"] == "verdict" else staging["payload"]
    status = "rejected" if staging["outcome"] == "rejected" else "pending"
    return {"text": said["text"], "kind": said["kind"], "confidence": said["confidence"], "status": status}


def _canonical_events(claim: dict[str, Any], links: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """A canonical claim's life from its row and links: staged, accepted, related, grouped, re-rated, resolved
    (a prediction), ended."""
    claim_id = claim["claim_id"]
    events = []
    if claim["proposal_id"]:
        staged_at = claim["staged_revision"] if claim["staged_revision"] is not None else claim["pinned_revision"]
        events.append(_event("staged", staged_at, claim["staged_by"], claim["staged_at"] or claim["proposed_at"],
                             proposalId=claim["proposal_id"]))
    events.append(_event("accepted", claim["revision"], claim["decided_by"], claim["decided_at"],
                         decisionId=claim["decision_id"], supersedes=claim["supersedes"]))
    for r in links["relations"]:
        outgoing = r["source_claim_id"] == claim_id
        other = r["target_claim_id"] if outgoing else r["source_claim_id"]
        shown = {"relationId": r["relation_id"], "type": r["type"], "direction": "out" if outgoing else "in",
                 "otherClaimId": other}
        events.append(_event("related", r["revision"], r["decided_by"], r["decided_at"], **shown))
        if r["ended_revision"] is not None:
            events.append(_event("relation_ended", r["ended_revision"], r["ended_by"], r["ended_at"],
                                 note=r.get("ended_note"), **shown))
    for g in links["groups"]:
        events.append(_event("grouped", g["revision"], g["decided_by"], g["decided_at"], groupId=g["group_id"]))
        if g["ended_revision"] is not None:
            events.append(_event("group_ended", g["ended_revision"], g["ended_by"], g["ended_at"],
                                 groupId=g["group_id"]))
    grounded = {g["revision"]: g for g in links.get("groundings", [])}
    for rating in links["ratings"]:
        regrounded = grounded.pop(rating["revision"], None)
        events.append(_event("rerated", rating["revision"], rating["actor"], rating["at"], health=rating["health"],
                             lost=rating["lost"], grounding=regrounded["grounding"] if regrounded else None))
    for g in grounded.values():  # its grounding alone changed: a source it cites ended, its evidence health did not
        events.append(_event("rerated", g["revision"], g["actor"], g["at"], grounding=g["grounding"]))
    for r in links["resolutions"]:
        events.append(_event("resolved", r["revision"], r["resolved_by"], r["at"], outcome=r["outcome"],
                             resolvedOn=r["resolved_on"], sourceId=r["source_id"], note=r["note"],
                             resolutionId=r["resolution_id"], supersedesResolution=r["supersedes"]))
    if claim["ended_revision"] is not None:
        events.append(_event(claim["status"], claim["ended_revision"], claim["ended_by"], claim["ended_at"],
                             supersededBy=claim["superseded_by"], note=claim.get("ended_note")))
    return events


def timeline_view(case_id: str, claim_id: str, claim: dict[str, Any] | None, links: dict[str, list[dict[str, Any]]],
                  stagings: list[dict[str, Any]], cap: int = TIMELINE_CAP) -> dict[str, Any]:
    """One claim's life in revision order: each staging (by which agent, at which pin) and its rejection, then,
    once accepted, related, grouped, re-rated, resolved, and superseded or retired — each event with who and at which
    revision. A claim no decision accepted (rejected, or pending) is told from its proposals alone. Each list (the
    repository's first `cap` + 1, each row with the list's `total`) is cut to `cap`; `omitted` says how many each cut
    list left out (the re-ratings are never cut)."""
    lists = {"stagings": stagings, **{name: rows for name, rows in links.items() if name in CUT}}
    omitted = {name: _total(rows) - cap for name, rows in lists.items() if len(rows) > cap}
    stagings = stagings[:cap]
    links = {name: rows[:cap] if name in CUT else rows for name, rows in links.items()}
    events = _staging_events(stagings, claim["proposal_id"] if claim is not None else None)
    if claim is not None:
        events += _canonical_events(claim, links)
        shown = {name: claim[name] for name in ("text", "kind", "confidence", "status")}
    else:
        shown = _staged_claim(stagings[-1])
    events.sort(key=lambda e: (e["revision"] if e["revision"] is not None else -1, e["at"] or "",
                               ORDER.get(e["event"], 2)))
    return {"caseId": case_id, "claimId": claim_id, **shown, "events": events, "omitted": omitted}


def exported_json(rows: list[dict[str, Any]]) -> str:
    """Rows as one JSON text (times in ISO 8601): the reply's encoder walks a text at once, where it would walk
    every value of every row of a page one by one (a tenth of a second a page of claims)."""
    return orjson.dumps(rows, option=orjson.OPT_NON_STR_KEYS).decode()  # column names are str subclasses
