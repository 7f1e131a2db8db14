"""The ledger as W3C PROV-O: records as prov:Entity, staging and review as prov:Activity, agents and reviewers as
prov:SoftwareAgent and prov:Person; relations and groups in a small Threadline vocabulary defined in the export.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from services.gateway.exports.rdf import Node, day, node, ref, when
from services.gateway.exports.records import Iris, LedgerPages
from shared.ledger import VERDICT

RELATION_TYPES = {
    "supports": "The subject claim gives reason to accept the object claim.",
    "contradicts": "The subject claim gives reason to reject the object claim.",
    "qualifies": "The subject claim limits the scope or strength of the object claim.",
    "amplifies": "The subject claim extends the reach or consequence of the object claim.",
}
# Each relation read from the claim it bears on: `target tl:supportedBy source`. PROV's `A prov:wasInfluencedBy B`
# says A was influenced by B, so these (not the relation terms, which run the other way) are its sub-properties.
INVERSES = {"supports": "supportedBy", "contradicts": "contradictedBy", "qualifies": "qualifiedBy",
            "amplifies": "amplifiedBy"}
CLASSES = {
    "Case": "A research question and the ledger of what reviewers accepted for it.",
    "Source": "An evidence record an agent staged and a reviewer accepted (or recorded).",
    "Claim": "An atomic claim grounded in sources, staged by an agent and accepted by a reviewer.",
    "Verdict": "The case's answer: a claim whose bases are relations from other claims; a newer one supersedes it.",
    "Relation": "A typed link from one claim to another (tl:relationType), as a record with its own provenance.",
    "MergeGroup": "Claims that restate one proposition, so that evidence counts treat them as one.",
    "Proposal": "What an agent staged in one call: the items a reviewer decided on.",
    "Staging": "An agent staging a proposal: nothing canonical changes.",
    "ReviewDecision": "A reviewer accepting staged items: the case's revision goes up by one.",
    "ReviewerAction": "A reviewer's own change of the ledger (recording sources, retiring records): one revision.",
    "Resolution": "A reviewer resolving a prediction claim true, false or void, citing a source and the day it "
                  "resolved (prov:used: the claim and the source); never undone, only superseded by a later one.",
}
PROPERTIES = {
    "text": "The claim's text, as staged and accepted.",
    "kind": "observation, interpretation, prediction or verdict.",
    "confidence": "established, supported, disputed, unknown or contradicted.",
    "status": "The record's status at the exported revision: active, retired or superseded.",
    "health": "How retirements left the claim at the exported revision: unsupported or weakened (absent: supported).",
    "revision": "The case revision that installed the record (on an activity: the revision it made).",
    "asOf": "The case revision the export shows.",
    "transformationNote": "How the staging agent turned its sources into the claim.",
    "relationType": "supports, contradicts, qualifies or amplifies.",
    "from": "The claim a relation runs from.",
    "to": "The claim a relation runs to.",
    "verdictBasis": "Whether the relation is one of the verdict's bases.",
    "member": "A claim of a merge group.",
    "rationale": "Why the agent staged the relation or group.",
    "publisher": "Who published the source.",
    "url": "Where the source is.",
    "sourceType": "primary, official, standards, benchmark, reporting, analysis or social.",
    "case": "The case a record or nanopublication belongs to.",
    "question": "The case's question.",
    "acceptedBy": "The reviewer who accepted the claim (in a nanopublication's provenance).",
    "outcome": "How a prediction resolved: true, false or void (void: it can no longer be judged).",
    "resolvedOn": "The day a prediction resolved (xsd:date), as the cited source shows it.",
    "resolutionNote": "Why a resolution supersedes the earlier one.",
    "retirementNote": "Why a reviewer retired the record (once the exported revision has retired it).",
    "supersedes": "The earlier resolution of the same prediction that this one replaces.",
    "resolution": "A prediction's resolution standing at the exported revision (in a nanopublication's provenance).",
}


def claim_class(kind: str) -> str:
    """A claim's class: the case's verdict is one of its own."""
    return "tl:Verdict" if kind == VERDICT else "tl:Claim"


def vocabulary() -> list[Node]:
    """Every Threadline term the export uses, defined in the export itself."""
    nodes = [node(f"tl:{name}", ["rdfs:Class"], rdfs__label=name, rdfs__comment=comment)
             for name, comment in CLASSES.items()]
    nodes += [node(f"tl:{name}", ["rdf:Property"], rdfs__label=name, rdfs__comment=comment)
              for name, comment in RELATION_TYPES.items()]
    nodes += [node(f"tl:{inverse}", ["rdf:Property"], rdfs__label=inverse,
                   rdfs__comment=f"The inverse of tl:{name}: the subject claim was influenced by the object claim.",
                   owl__inverseOf=ref(f"tl:{name}"), rdfs__subPropertyOf=ref("prov:wasInfluencedBy"))
              for name, inverse in INVERSES.items()]
    nodes += [node(f"tl:{name}", ["rdf:Property"], rdfs__label=name, rdfs__comment=comment)
              for name, comment in PROPERTIES.items()]
    return nodes


def resolution_node(iris: Iris, case_id: str, row: dict[str, Any], reviewer: str) -> Node:
    """A resolution as a prov:Activity (its IRI `…/resolutions/{resolutionId}`), shared by PROV and nanopubs."""
    def iri(kind: str, record_id: str) -> str:
        return iris.record(case_id, kind, record_id)

    return node(iri("resolutions", row["resolution_id"]), ["prov:Activity", "tl:Resolution"],
                rdfs__label=f"{row['resolved_by']} resolved prediction {row['claim_id']} {row['outcome']}",
                prov__used=[ref(iri("claims", row["claim_id"])), ref(iri("sources", row["source_id"]))],
                prov__wasAssociatedWith=ref(reviewer), tl__outcome=row["outcome"],
                tl__resolvedOn=day(row["resolved_on"]), tl__revision=row["revision"],
                tl__case=ref(iris.case(case_id)), tl__resolutionNote=row["note"],
                tl__supersedes=ref(iri("resolutions", row["supersedes"])) if row["supersedes"] else None,
                prov__startedAtTime=when(row["at"]), prov__endedAtTime=when(row["at"]))


class Provenance:
    """PROV nodes of one case as of one revision, record by record, each agent and proposal named once."""

    def __init__(self, pages: LedgerPages, iris: Iris) -> None:
        self.pages = pages
        self.iris = iris
        self.case_id = pages.case_id
        self.seen: set[str] = set()

    def iri(self, kind: str, record_id: str | int) -> str:
        return self.iris.record(self.case_id, kind, record_id)

    def _once(self, iri: str, made: Node) -> list[Node]:
        if iri in self.seen:
            return []
        self.seen.add(iri)
        return [made]

    def reviewer(self, name: str) -> tuple[str, list[Node]]:
        iri = self.iris.person("reviewers", name)
        return iri, self._once(iri, node(iri, ["prov:Person", "prov:Agent"], rdfs__label=name))

    def agent(self, name: str) -> tuple[str, list[Node]]:
        iri = self.iris.person("agents", name)
        return iri, self._once(iri, node(iri, ["prov:SoftwareAgent", "prov:Agent"], rdfs__label=name))

    def staging(self, row: dict[str, Any], used: list[str]) -> list[Node]:
        """The proposal a record was staged in and its staging activity (once each), and what staging used."""
        if not row.get("proposal_id"):
            return []
        agent, found = self.agent(row["staged_by"])
        proposal, activity = self.iri("proposals", row["proposal_id"]), self.iri("stagings", row["proposal_id"])
        found += self._once(activity, node(activity, ["prov:Activity", "tl:Staging"], prov__wasAssociatedWith=ref(agent),
                                           prov__startedAtTime=when(row["staged_at"]),
                                           prov__endedAtTime=when(row["staged_at"])))
        found += self._once(proposal, node(proposal, ["prov:Entity", "tl:Proposal"], prov__wasGeneratedBy=ref(activity),
                                           prov__wasAttributedTo=ref(agent), tl__case=ref(self.iris.case(self.case_id))))
        if used:
            found.append(node(activity, [], prov__used=[ref(u) for u in used]))
        return found

    def record(self, kind: str, row: dict[str, Any], record_id: str, types: list[str], **properties: Any) -> Node:
        """A canonical record: an entity generated by the revision that installed it, invalidated by the one
        that retired or superseded it (when that was by the exported revision)."""
        attributed = [ref(self.iris.person("reviewers", row["decided_by"]))]
        if row.get("staged_by"):
            attributed.insert(0, ref(self.iris.person("agents", row["staged_by"])))
        return node(self.iri(kind, record_id), ["prov:Entity", *types], **properties, tl__status=row["status"],
                    tl__revision=row["revision"], tl__case=ref(self.iris.case(self.case_id)),
                    prov__wasGeneratedBy=ref(self.iri("revisions", row["revision"])),
                    prov__generatedAtTime=when(row["decided_at"]), prov__wasAttributedTo=attributed,
                    prov__wasInvalidatedBy=ref(self.iri("revisions", row["ended_revision"]))
                    if row["ended_revision"] is not None else None,
                    prov__invalidatedAtTime=when(row["ended_at"]), tl__retirementNote=row.get("ended_note"))

    def resolution(self, row: dict[str, Any]) -> list[Node]:
        """A prediction's resolution: an activity of its reviewer that used the claim and the cited source."""
        reviewer, found = self.reviewer(row["resolved_by"])
        return [*found, resolution_node(self.iris, self.case_id, row, reviewer)]

    async def nodes(self) -> AsyncIterator[Node]:
        case = self.pages.case or {}
        for item in vocabulary():
            yield item
        yield node(self.iris.case(self.case_id), ["prov:Entity", "tl:Case"], rdfs__label=case["title"],
                   tl__question=case["question"], tl__asOf=self.pages.as_of)
        async for row in self.pages.each("revisions"):
            reviewer, found = self.reviewer(row["actor"])
            for item in found:
                yield item
            proposal = row.get("proposal_id")
            yield node(self.iri("revisions", row["revision"]),
                       ["prov:Activity", "tl:ReviewDecision" if row["decision_id"] else "tl:ReviewerAction"],
                       rdfs__label=row["summary"], tl__revision=row["revision"], prov__wasAssociatedWith=ref(reviewer),
                       prov__startedAtTime=when(row["at"]), prov__endedAtTime=when(row["at"]),
                       prov__used=ref(self.iri("proposals", proposal)) if proposal else None,
                       prov__wasInformedBy=ref(self.iri("stagings", proposal)) if proposal else None)
        async for row in self.pages.each("sources"):
            for item in self.staging(row, []):
                yield item
            yield self.record("sources", row, row["source_id"], ["tl:Source"], rdfs__label=row["title"],
                              tl__publisher=row["publisher"], tl__url=row["url"], tl__sourceType=row["type"])
        async for row in self.pages.each("claims"):
            sources = [self.iri("sources", s) for s in row["source_ids"] or []]
            for item in self.staging(row, sources):
                yield item
            yield self.record("claims", row, row["claim_id"], [claim_class(row["kind"])],
                              rdfs__label=row["text"], tl__text=row["text"], tl__kind=row["kind"],
                              tl__confidence=row["confidence"], tl__health=row["health"],
                              tl__transformationNote=row["transformation_note"],
                              prov__wasDerivedFrom=[ref(s) for s in sources])
            if row["superseded_by"]:
                yield node(self.iri("claims", row["superseded_by"]), [],
                           prov__wasRevisionOf=ref(self.iri("claims", row["claim_id"])))
        async for row in self.pages.each("relations"):
            source, target = self.iri("claims", row["source_claim_id"]), self.iri("claims", row["target_claim_id"])
            for item in self.staging(row, []):
                yield item
            yield self.record("relations", row, row["relation_id"], ["tl:Relation"], tl__relationType=row["type"],
                              tl__from=ref(source), tl__to=ref(target), tl__rationale=row["rationale"],
                              tl__verdictBasis=row["verdict_basis"])
            if row["status"] == "active":
                yield node(source, [], **{f"tl__{row['type']}": ref(target)})
                yield node(target, [], **{f"tl__{INVERSES[row['type']]}": ref(source)})
        async for row in self.pages.each("groups"):
            for item in self.staging(row, []):
                yield item
            yield self.record("groups", row, row["group_id"], ["tl:MergeGroup"], rdfs__label=row["label"],
                              tl__confidence=row["confidence"], tl__rationale=row["rationale"],
                              tl__member=[ref(self.iri("claims", m)) for m in row["members"] or []])
        async for row in self.pages.each("resolutions"):
            for item in self.resolution(row):
                yield item
