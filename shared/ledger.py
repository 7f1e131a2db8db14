"""Ledger rules: whether staged items fit the canonical ledger. Pure functions, no I/O.

Staging applies them when an agent stages a proposal; review applies them again, item by item, against
the ledger as it is when a reviewer accepts, because the ledger may have moved on in between.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.errors import WrongCase

ACTIVE = "active"

RECORD_NAMESPACE = {
    "sources": "sources",
    "claims": "claims",
    "relations": "relations",
    "merge": "groups",
    "verdict": "claims",
}


@dataclass(frozen=True)
class Problem:
    """Why an item cannot be staged or accepted: the field at fault and how to fix it."""

    field: str
    message: str
    hint: str

    def at(self, prefix: str) -> Problem:
        return Problem(f"{prefix}.{self.field}" if self.field else prefix, self.message, self.hint)

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message, "hint": self.hint}


@dataclass(frozen=True)
class ClaimFact:
    kind: str
    status: str


@dataclass(frozen=True)
class References:
    """The ids a check needs the ledger's facts about."""

    sources: frozenset[str] = frozenset()
    claims: frozenset[str] = frozenset()
    relations: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    def __or__(self, other: References) -> References:
        return References(
            self.sources | other.sources,
            self.claims | other.claims,
            self.relations | other.relations,
            self.groups | other.groups,
        )


@dataclass
class LedgerFacts:
    """What the ledger holds about the referenced ids: their status, or absence."""

    revision: int
    sources: dict[str, str] = field(default_factory=dict)
    claims: dict[str, ClaimFact] = field(default_factory=dict)
    relations: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)

    def source_usable(self, source_id: str) -> bool:
        return self.sources.get(source_id) == ACTIVE

    def claim_usable(self, claim_id: str) -> bool:
        fact = self.claims.get(claim_id)
        return fact is not None and fact.status == ACTIVE

    def install(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Record an accepted item so later items of the same decision see it."""
        if kind == "sources":
            self.sources[payload["id"]] = ACTIVE
        elif kind == "claims":
            self.claims[payload["id"]] = ClaimFact(payload["kind"], ACTIVE)
        elif kind == "relations":
            self.relations.add(payload["id"])
        elif kind == "merge":
            self.groups.add(payload["groupId"])
        elif kind == "verdict":
            for claim_id, fact in list(self.claims.items()):
                if fact.kind == "verdict" and fact.status == ACTIVE:
                    self.claims[claim_id] = ClaimFact("verdict", "superseded")
            self.claims[payload["claim"]["id"]] = ClaimFact("verdict", ACTIVE)
            self.relations.update(r["id"] for r in payload["relations"])


def check_discovered(expected_case_id: str, discovered_case_id: str | None) -> None:
    """Agents act only on the case they most recently discovered with get_workspace."""
    if discovered_case_id != expected_case_id:
        raise WrongCase(
            f"expectedCaseId {expected_case_id!r} is not the case you most recently discovered"
            + (f" ({discovered_case_id!r})" if discovered_case_id else ""),
            field="expectedCaseId",
            hint="call get_workspace first and use the caseId it returns",
        )


# --- items of a proposal ----------------------------------------------------------------------------

ITEM_LISTS = {"sources": "sources", "claims": "claims", "relations": "relations", "merge": "groups"}


def items_of(kind: str, args: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A proposal's items as (item id, payload): the staged record's own id names each item."""
    if kind == "verdict":
        return [(args["claim"]["id"], {"claim": args["claim"], "relations": args["relations"]})]
    return [(item_id(kind, item), dict(item)) for item in args[ITEM_LISTS[kind]]]


def item_id(kind: str, payload: Mapping[str, Any]) -> str:
    if kind == "verdict":
        return payload["claim"]["id"]
    return payload["groupId"] if kind == "merge" else payload["id"]


def references(kind: str, payloads: Iterable[Mapping[str, Any]]) -> References:
    sources: set[str] = set()
    claims: set[str] = set()
    relations: set[str] = set()
    groups: set[str] = set()
    for p in payloads:
        if kind == "sources":
            sources.add(p["id"])
        elif kind == "claims":
            claims.add(p["id"])
            sources.update(p["sourceIds"])
        elif kind == "relations":
            relations.add(p["id"])
            claims.update((p["sourceClaimId"], p["targetClaimId"]))
        elif kind == "merge":
            groups.add(p["groupId"])
            claims.update(p["memberClaimIds"])
        elif kind == "verdict":
            claims.add(p["claim"]["id"])
            sources.update(p["claim"]["sourceIds"])
            for r in p["relations"]:
                relations.add(r["id"])
                claims.update((r["sourceClaimId"], r["targetClaimId"]))
    return References(frozenset(sources), frozenset(claims), frozenset(relations), frozenset(groups))


# --- checks -----------------------------------------------------------------------------------------

_REFRESH = "call get_workspace to see the canonical ledger, then stage against it"


def duplicate_ids(kind: str, args: Mapping[str, Any]) -> list[Problem]:
    """New ids must be unique within one call."""
    problems: list[Problem] = []
    if kind == "verdict":
        relations = args["relations"]
        counts = Counter(r["id"] for r in relations)
        for i, r in enumerate(relations):
            if counts[r["id"]] > 1 and r["id"] in {x["id"] for x in relations[:i]}:
                problems.append(_duplicate(f"relations[{i}].id", r["id"]))
        return problems
    list_name = ITEM_LISTS[kind]
    key = "groupId" if kind == "merge" else "id"
    seen: set[str] = set()
    for i, item in enumerate(args[list_name]):
        if item[key] in seen:
            problems.append(_duplicate(f"{list_name}[{i}].{key}", item[key]))
        seen.add(item[key])
    return problems


def _duplicate(where: str, value: str) -> Problem:
    return Problem(where, f"the id {value!r} is used twice in this call", "give every new record its own id")


def check_item(kind: str, payload: Mapping[str, Any], facts: LedgerFacts) -> list[Problem]:
    """Problems with one item against the ledger; fields are relative to the item."""
    return _CHECKS[kind](payload, facts)


def _check_source(p: Mapping[str, Any], facts: LedgerFacts) -> list[Problem]:
    if p["id"] in facts.sources:
        return [_taken("id", p["id"], "source")]
    return []


def _check_claim(p: Mapping[str, Any], facts: LedgerFacts) -> list[Problem]:
    problems = []
    if p["id"] in facts.claims:
        problems.append(_taken("id", p["id"], "claim"))
    problems.extend(_sources_usable(p["sourceIds"], facts))
    return problems


def _check_relation(p: Mapping[str, Any], facts: LedgerFacts, *, patch_claim: str | None = None) -> list[Problem]:
    problems = []
    if p["id"] in facts.relations:
        problems.append(_taken("id", p["id"], "relation"))
    if p["sourceClaimId"] == p["targetClaimId"]:
        problems.append(
            Problem(
                "targetClaimId",
                f"the relation {p['id']!r} points from {p['sourceClaimId']!r} to itself",
                "a relation must connect two different claims",
            )
        )
        return problems
    for end in ("sourceClaimId", "targetClaimId"):
        claim_id = p[end]
        if claim_id == patch_claim:
            continue
        problems.extend(_claim_usable(end, claim_id, facts))
    return problems


def _check_group(p: Mapping[str, Any], facts: LedgerFacts) -> list[Problem]:
    problems = []
    if p["groupId"] in facts.groups:
        problems.append(_taken("groupId", p["groupId"], "merge group"))
    members = p["memberClaimIds"]
    for i, claim_id in enumerate(members):
        if claim_id in members[:i]:
            problems.append(
                Problem(f"memberClaimIds[{i}]", f"{claim_id!r} is listed twice", "list each member claim once")
            )
        else:
            problems.extend(_claim_usable(f"memberClaimIds[{i}]", claim_id, facts))
    return problems


def _check_verdict(p: Mapping[str, Any], facts: LedgerFacts) -> list[Problem]:
    claim = p["claim"]
    verdict_id = claim["id"]
    problems: list[Problem] = []
    if claim.get("kind") != "verdict" or claim.get("lane") != "verdict" or claim.get("order") != 1:
        problems.append(
            Problem("claim", "a verdict claim has kind 'verdict', lane 'verdict' and order 1",
                    "set kind and lane to 'verdict' and order to 1")
        )
    if verdict_id in facts.claims:
        problems.append(_taken("claim.id", verdict_id, "claim"))
    problems.extend(problem.at("claim") for problem in _sources_usable(claim["sourceIds"], facts))
    direct_bases = 0
    for i, relation in enumerate(p["relations"]):
        if relation["type"] == "amplifies":
            problems.append(
                Problem(f"relations[{i}].type", "a verdict patch cannot carry an 'amplifies' relation",
                        "stage amplification separately with stage_merge or stage_relations")
            )
        problems.extend(
            problem.at(f"relations[{i}]") for problem in _check_relation(relation, facts, patch_claim=verdict_id)
        )
        if relation["targetClaimId"] == verdict_id and facts.claim_usable(relation["sourceClaimId"]):
            direct_bases += 1
    if direct_bases == 0:
        problems.append(
            Problem(
                "relations",
                "no relation runs from a canonical claim directly to the verdict",
                f"add a relation whose sourceClaimId is a canonical claim and whose targetClaimId is {verdict_id!r}",
            )
        )
    return problems


_CHECKS = {
    "sources": _check_source,
    "claims": _check_claim,
    "relations": _check_relation,
    "merge": _check_group,
    "verdict": _check_verdict,
}


def _taken(where: str, value: str, record: str) -> Problem:
    return Problem(
        where,
        f"the id {value!r} already names a canonical {record} of this case",
        f"choose a new id; canonical ids are never reused ({_REFRESH})",
    )


def _sources_usable(source_ids: Iterable[str], facts: LedgerFacts) -> list[Problem]:
    problems = []
    for i, source_id in enumerate(source_ids):
        status = facts.sources.get(source_id)
        if status is None:
            problems.append(
                Problem(
                    f"sourceIds[{i}]",
                    f"{source_id!r} is not a canonical source of this case",
                    "cite only canonical sources; a source that is only staged must be accepted by a "
                    "reviewer first (stage_sources, then wait for review)",
                )
            )
        elif status != ACTIVE:
            problems.append(
                Problem(f"sourceIds[{i}]", f"the source {source_id!r} is {status}", "cite an active source")
            )
    return problems


def _claim_usable(where: str, claim_id: str, facts: LedgerFacts) -> list[Problem]:
    fact = facts.claims.get(claim_id)
    if fact is None:
        return [
            Problem(
                where,
                f"{claim_id!r} is not a canonical claim of this case",
                "reference only canonical claims; a claim that exists only in a pending proposal must be "
                "accepted by a reviewer first",
            )
        ]
    if fact.status != ACTIVE:
        return [Problem(where, f"the claim {claim_id!r} is {fact.status}", "reference an active claim")]
    return []


def verdict_bases(payload: Mapping[str, Any]) -> list[str]:
    """The relation ids that become the verdict's bases: direct edges into the verdict."""
    verdict_id = payload["claim"]["id"]
    return [r["id"] for r in payload["relations"] if r["targetClaimId"] == verdict_id]
