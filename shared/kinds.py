"""The kinds of staged item — sources, claims, relations, merge groups, a verdict — one description each.

A kind owns its names (tool, list in the tool arguments, id key, ledger record), the references an item
makes, the checks it must pass against the ledger, how an accepted item is installed, and how its
would-change preview reads. Staging, review, the projection and the UI look a kind up here; none of them
compares kind names. A new kind is one new description (and its tool in the spec).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from shared import ledger
from shared.contracts import (
    ClaimItem,
    MergeGroupItem,
    Pinned,
    RelationItem,
    SourceItem,
    StageClaimsArgs,
    StageMergeArgs,
    StageRelationsArgs,
    StageSourcesArgs,
    StageVerdictArgs,
    VerdictPatch,
)
from shared.events import AddedClaim, AddedGroup, AddedRelation, AddedSource, AddedVerdict, LedgerChange
from shared.ledger import LedgerFacts, LedgerWriter, Problem, Provenance, References
from shared.subjects import Command

Item = TypeVar("Item", bound=BaseModel)
NewId = tuple[str, str, str]  # (namespace, field relative to the item, id)


@dataclass(frozen=True)
class ItemKind(Generic[Item]):
    name: str  # what proposals and events call the kind: "merge"
    tool: str  # "stage_merge"
    command: Command
    arguments: type[Pinned]
    item: type[Item]  # MergeGroupItem
    items: str | None  # the list in the tool arguments, "groups"; None: the whole call is one item
    id_key: str  # "groupId" ("claim.id" for a verdict patch)
    record: str  # what the ledger calls one: "group"
    id_of: Callable[[Item], str]
    new_ids: Callable[[Item], list[NewId]]
    references: Callable[[Item], References]
    check: Callable[[Item, LedgerFacts], list[Problem]]  # fields relative to the item
    learn: Callable[[Item, LedgerFacts], None]  # record an accepted item for the rest of its decision
    preview: Callable[[Item, LedgerFacts], dict[str, Any]]  # what accepting it adds (and supersedes)
    install: Callable[[LedgerWriter, str, Sequence[Item], Provenance], Awaitable[LedgerChange]]

    def items_of(self, arguments: Pinned) -> list[Item]:
        if self.items is None:
            return [self.item.model_validate(arguments.model_dump(include={"claim", "relations"}))]
        return list(getattr(arguments, self.items))

    def record_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The record a stored item states (a verdict patch: its claim), found by where its id is."""
        for key in self.id_key.split(".")[:-1]:
            payload = payload[key]
        return payload

    def where(self, index: int) -> str:
        return f"{self.items}[{index}]" if self.items else ""

    def parse(self, payload: dict[str, Any]) -> Item:
        """A stored item (the JSON its call carried) as its typed contract."""
        return self.item.model_validate(payload)

    def problems(self, arguments: Pinned, facts: LedgerFacts) -> list[Problem]:
        """Every way a call of this kind does not fit the ledger, with fields named as in its arguments."""
        items = self.items_of(arguments)
        return self.duplicates(items) + self.misfits(items, facts)

    def duplicates(self, items: Sequence[Item]) -> list[Problem]:
        """New ids used twice within one call."""
        found: list[Problem] = []
        seen: set[tuple[str, str]] = set()
        for index, item in enumerate(items):
            for namespace, field, new_id in self.new_ids(item):
                if (namespace, new_id) in seen:
                    found.append(ledger.duplicate(_join(self.where(index), field), new_id))
                seen.add((namespace, new_id))
        return found

    def misfits(self, items: Sequence[Item], facts: LedgerFacts) -> list[Problem]:
        """Items that do not fit the ledger's facts (taken ids, references that are not canonical)."""
        return [p.at(self.where(index)) if self.items else p
                for index, item in enumerate(items) for p in self.check(item, facts)]

    def would_change(self, item: Item, facts: LedgerFacts) -> dict[str, Any]:
        """What accepting one item would change in the ledger as it is now, or why it no longer can."""
        problems = self.check(item, facts)
        return {"acceptable": not problems, "change": self.preview(item, facts),
                "problems": [p.to_dict() for p in problems]}


def _join(prefix: str, field: str) -> str:
    return f"{prefix}.{field}" if prefix and field else prefix or field


def _stamped(item: BaseModel, provenance: Provenance, **extra: Any) -> dict[str, Any]:
    return {**item.model_dump(mode="json", by_alias=True), **extra, "provenance": provenance.to_json()}


def _adding(write: str, added: type[BaseModel], change: str) -> Callable[..., Awaitable[LedgerChange]]:
    """The install step of a kind whose accepted items are simply added: the writer's `write`, and the
    records added as `change` of the ledger change."""

    async def install(writer: LedgerWriter, case_id: str, items: Sequence[Any], provenance: Provenance) -> LedgerChange:
        await getattr(writer, write)(case_id, items, provenance)
        return LedgerChange(**{change: [added.model_validate(_stamped(i, provenance)) for i in items]})

    return install


# --- sources ----------------------------------------------------------------------------------------


def unwritten(item: BaseModel) -> list[Problem]:
    """The texts of an item that hold only whitespace: the schema's minLength 1 lets a space through, and a reviewer
    could read nothing in it."""
    return [Problem(key, "is blank: only whitespace", "write the text a reviewer should read, or leave the item out")
            for key, value in item.model_dump(by_alias=True).items() if isinstance(value, str) and not value.strip()]


def _check_source(item: SourceItem, facts: LedgerFacts) -> list[Problem]:
    problems = [ledger.taken("id", item.id, "source")] if item.id in facts.sources else []
    return problems + unwritten(item) + undated(item)


def undated(item: SourceItem) -> list[Problem]:
    """The dates of a source the calendar does not have (2024-13-01, 2026-02-30): the schema's pattern lets
    any digits through."""
    problems = []
    for field, value, words in (("publicationDate", item.publication_date, ", or living or unknown"),
                                ("snapshotDate", item.snapshot_date, "")):
        if value in ("living", "unknown"):
            continue
        try:
            date.fromisoformat(value)
        except ValueError:
            problems.append(Problem(field, f"{value!r} is not a date of the calendar",
                                    f"send a real date as YYYY-MM-DD (a month 01-12, a day the month has){words}"))
    return problems


SOURCES = ItemKind(
    name="sources", tool="stage_sources", command=Command.STAGE_SOURCES, arguments=StageSourcesArgs,
    item=SourceItem, items="sources", id_key="id", record="source",
    id_of=lambda i: i.id,
    new_ids=lambda i: [("sources", "id", i.id)],
    references=lambda i: References(sources=frozenset([i.id])),
    check=_check_source,
    learn=lambda i, facts: facts.add_source(i.id),
    preview=lambda i, facts: {"adds": [{"record": "source", "id": i.id}]},
    install=_adding("add_sources", AddedSource, "sources_added"),
)


# --- claims -----------------------------------------------------------------------------------------


def _check_claim(item: ClaimItem, facts: LedgerFacts) -> list[Problem]:
    problems = [ledger.taken("id", item.id, "claim")] if item.id in facts.claims else []
    return problems + unwritten(item) + ledger.sources_usable(item.source_ids, facts)


CLAIMS = ItemKind(
    name="claims", tool="stage_claims", command=Command.STAGE_CLAIMS, arguments=StageClaimsArgs,
    item=ClaimItem, items="claims", id_key="id", record="claim",
    id_of=lambda i: i.id,
    new_ids=lambda i: [("claims", "id", i.id)],
    references=lambda i: References(sources=frozenset(i.source_ids), claims=frozenset([i.id])),
    check=_check_claim,
    learn=lambda i, facts: facts.add_claim(i.id, i.kind),
    preview=lambda i, facts: {"adds": [{"record": "claim", "id": i.id}], "cites": list(i.source_ids)},
    install=_adding("add_claims", AddedClaim, "claims_added"),
)


# --- relations --------------------------------------------------------------------------------------


def _check_relation(item: RelationItem, facts: LedgerFacts, *, patch_claim: str | None = None) -> list[Problem]:
    problems = [ledger.taken("id", item.id, "relation")] if item.id in facts.relations else []
    problems += unwritten(item)
    if item.source_claim_id == item.target_claim_id:
        return problems + [Problem(
            "targetClaimId",
            f"the relation {item.id!r} points from {item.source_claim_id!r} to itself",
            "a relation must connect two different claims",
        )]
    for end, claim_id in (("sourceClaimId", item.source_claim_id), ("targetClaimId", item.target_claim_id)):
        if claim_id != patch_claim:
            problems += ledger.claim_usable(end, claim_id, facts)
    return problems


def _relation_refs(item: RelationItem) -> References:
    return References(claims=frozenset([item.source_claim_id, item.target_claim_id]), relations=frozenset([item.id]))


def _relation_added(item: RelationItem) -> dict[str, Any]:
    return {"record": "relation", "id": item.id, "from": item.source_claim_id, "to": item.target_claim_id,
            "type": item.type}


RELATIONS = ItemKind(
    name="relations", tool="stage_relations", command=Command.STAGE_RELATIONS, arguments=StageRelationsArgs,
    item=RelationItem, items="relations", id_key="id", record="relation",
    id_of=lambda i: i.id,
    new_ids=lambda i: [("relations", "id", i.id)],
    references=_relation_refs,
    check=_check_relation,
    learn=lambda i, facts: facts.add_relation(i.id),
    preview=lambda i, facts: {"adds": [_relation_added(i)]},
    install=_adding("add_relations", AddedRelation, "relations_added"),
)


# --- merge groups -----------------------------------------------------------------------------------


def _check_group(item: MergeGroupItem, facts: LedgerFacts) -> list[Problem]:
    problems = [ledger.taken("groupId", item.group_id, "merge group")] if item.group_id in facts.groups else []
    problems += unwritten(item)
    members = item.member_claim_ids
    for i, claim_id in enumerate(members):
        if claim_id in members[:i]:
            problems.append(Problem(f"memberClaimIds[{i}]", f"{claim_id!r} is listed twice",
                                    "list each member claim once"))
        else:
            problems += ledger.claim_usable(f"memberClaimIds[{i}]", claim_id, facts)
    return problems


MERGE_GROUPS = ItemKind(
    name="merge", tool="stage_merge", command=Command.STAGE_MERGE, arguments=StageMergeArgs,
    item=MergeGroupItem, items="groups", id_key="groupId", record="group",
    id_of=lambda i: i.group_id,
    new_ids=lambda i: [("groups", "groupId", i.group_id)],
    references=lambda i: References(claims=frozenset(i.member_claim_ids), groups=frozenset([i.group_id])),
    check=_check_group,
    learn=lambda i, facts: facts.add_group(i.group_id),
    preview=lambda i, facts: {"adds": [{"record": "group", "id": i.group_id}], "joins": list(i.member_claim_ids)},
    install=_adding("add_groups", AddedGroup, "groups_added"),
)


# --- the verdict ------------------------------------------------------------------------------------


def verdict_bases(patch: VerdictPatch) -> list[str]:
    """The relation ids that become the verdict's bases: direct edges into the verdict."""
    return [r.id for r in patch.relations if r.target_claim_id == patch.claim.id]


def _check_verdict(patch: VerdictPatch, facts: LedgerFacts) -> list[Problem]:
    verdict_id = patch.claim.id
    problems = [ledger.taken("claim.id", verdict_id, "claim")] if verdict_id in facts.claims else []
    problems += [p.at("claim") for p in unwritten(patch.claim)]
    problems += [p.at("claim") for p in ledger.sources_usable(patch.claim.source_ids, facts)]
    direct_bases = 0
    for i, relation in enumerate(patch.relations):
        problems += [p.at(f"relations[{i}]") for p in _check_relation(relation, facts, patch_claim=verdict_id)]
        if relation.target_claim_id == verdict_id and facts.claim_usable(relation.source_claim_id):
            direct_bases += 1
    if direct_bases == 0:
        problems.append(Problem(
            "relations",
            "no relation runs from a canonical claim directly to the verdict",
            f"add a relation whose sourceClaimId is a canonical claim and whose targetClaimId is {verdict_id!r}",
        ))
    return problems


def _verdict_refs(patch: VerdictPatch) -> References:
    own = References(sources=frozenset(patch.claim.source_ids), claims=frozenset([patch.claim.id]))
    return References.union([own, *map(_relation_refs, patch.relations)])


def _learn_verdict(patch: VerdictPatch, facts: LedgerFacts) -> None:
    facts.add_claim(patch.claim.id, ledger.VERDICT)
    for relation in patch.relations:
        facts.add_relation(relation.id)


def _preview_verdict(patch: VerdictPatch, facts: LedgerFacts) -> dict[str, Any]:
    return {
        "adds": [{"record": "claim", "id": patch.claim.id, "kind": ledger.VERDICT}]
        + [_relation_added(r) for r in patch.relations],
        "bases": verdict_bases(patch),
        "supersedes": facts.active_verdict(),
    }


async def _install_verdict(writer: LedgerWriter, case_id: str, patches: Sequence[VerdictPatch],
                           provenance: Provenance) -> LedgerChange:
    (patch,) = patches  # a verdict proposal is one patch, accepted whole
    verdict = patch.claim
    previous = await writer.supersede_verdict(case_id, verdict.id, provenance)
    links_ended = await writer.end_links(case_id, previous, provenance) if previous else []
    await writer.add_claims(case_id, [verdict], provenance)
    await writer.add_relations(case_id, patch.relations, provenance, verdict_id=verdict.id)
    return LedgerChange(
        claims_added=[AddedVerdict.model_validate(_stamped(verdict, provenance, bases=verdict_bases(patch)))],
        relations_added=[AddedRelation.model_validate(_stamped(r, provenance)) for r in patch.relations],
        superseded=[{"record": "claim", "id": previous, "supersededBy": verdict.id}] if previous else [],
        retired=[{"record": record, "id": linked, "note": f"its claim {previous} was superseded by {verdict.id}"}
                 for record, linked in links_ended],
    )


VERDICT = ItemKind(
    name="verdict", tool="stage_verdict", command=Command.STAGE_VERDICT, arguments=StageVerdictArgs,
    item=VerdictPatch, items=None, id_key="claim.id", record="claim",
    id_of=lambda patch: patch.claim.id,
    new_ids=lambda patch: [("claims", "claim.id", patch.claim.id)]
    + [("relations", f"relations[{i}].id", r.id) for i, r in enumerate(patch.relations)],
    references=_verdict_refs,
    check=_check_verdict,
    learn=_learn_verdict,
    preview=_preview_verdict,
    install=_install_verdict,
)


KINDS: dict[str, ItemKind[Any]] = {k.name: k for k in (SOURCES, CLAIMS, RELATIONS, MERGE_GROUPS, VERDICT)}
BY_TOOL: dict[str, ItemKind[Any]] = {k.tool: k for k in KINDS.values()}
BY_COMMAND: dict[Command, ItemKind[Any]] = {k.command: k for k in KINDS.values()}


def kind(name: str) -> ItemKind[Any]:
    """The kind a proposal or event names."""
    return KINDS[name]
