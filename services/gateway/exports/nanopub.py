"""The ledger as nanopublications (TriG): one per claim accepted by the exported revision, each with its head,
assertion (the claim, its kind, confidence, the relations it makes that still hold then, and each relation it
made as a tl:Relation with its status then), provenance (its sources, the agent
that staged it, the transformation note, the reviewer who accepted it) and publication info (created,
creator, the case and revision). A prediction resolved by the exported revision has its outcome then in its
assertion and the resolution (who, citing which source, on which day) in its provenance.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from services.gateway.exports import rdf
from services.gateway.exports.prov import claim_class, resolution_node
from services.gateway.exports.rdf import Node, day, node, ref, when
from services.gateway.exports.records import ByClaim, Iris, LedgerPages


def nanopublication(iris: Iris, case_id: str, as_of: int, claim: dict[str, Any],
                    relations: list[dict[str, Any]], resolution: dict[str, Any] | None = None) -> str:
    """One claim's nanopublication: four named graphs. A prediction resolved by `as_of` has the outcome that
    stands then (`resolution`, its latest) in its assertion, and the resolution in its provenance."""
    claim_iri = iris.record(case_id, "claims", claim["claim_id"])
    this = iris.nanopub(case_id, claim["claim_id"], as_of)
    head, assertion, provenance, pubinfo = (f"{this}#{part}" for part in ("Head", "assertion", "provenance",
                                                                           "pubinfo"))
    reviewer = iris.person("reviewers", claim["decided_by"])
    agent = iris.person("agents", claim["staged_by"]) if claim["staged_by"] else None
    made = [node(claim_iri, [claim_class(claim["kind"])], tl__text=claim["text"],
                 tl__kind=claim["kind"], tl__confidence=claim["confidence"], tl__status=claim["status"],
                 tl__health=claim["health"])]
    made += [node(claim_iri, [], **{f"tl__{r['type']}": ref(iris.record(case_id, "claims", r["target_claim_id"]))})
             for r in relations if r["status"] == "active"]  # a relation ended by then is asserted no more
    made += [node(iris.record(case_id, "relations", r["relation_id"]), ["tl:Relation"], tl__relationType=r["type"],
                  tl__from=ref(claim_iri), tl__to=ref(iris.record(case_id, "claims", r["target_claim_id"])),
                  tl__status=r["status"])
             for r in relations]
    resolved: list[Node] = []
    if resolution is not None:
        made.append(node(claim_iri, [], tl__outcome=resolution["outcome"], tl__resolvedOn=day(resolution["resolved_on"])))
        resolver = iris.person("reviewers", resolution["resolved_by"])
        resolved = [node(assertion, [], tl__resolution=ref(iris.record(case_id, "resolutions",
                                                                        resolution["resolution_id"]))),
                    resolution_node(iris, case_id, resolution, resolver),
                    node(resolver, ["prov:Person"], rdfs__label=resolution["resolved_by"])]
    staged = [node(agent, ["prov:SoftwareAgent"], rdfs__label=claim["staged_by"])] if agent else []
    return (rdf.graph(head, [node(this, ["np:Nanopublication"], np__hasAssertion=ref(assertion),
                                  np__hasProvenance=ref(provenance), np__hasPublicationInfo=ref(pubinfo))])
            + rdf.graph(assertion, made)
            + rdf.graph(provenance, [
                node(assertion, [], prov__wasDerivedFrom=[ref(iris.record(case_id, "sources", s))
                                                          for s in claim["source_ids"] or []],
                     prov__wasAttributedTo=ref(agent) if agent else None,
                     prov__wasGeneratedBy=ref(iris.record(case_id, "stagings", claim["proposal_id"]))
                     if claim["proposal_id"] else None,
                     tl__transformationNote=claim["transformation_note"],
                     tl__acceptedBy=ref(reviewer), prov__generatedAtTime=when(claim["decided_at"])),
                *staged,
                node(reviewer, ["prov:Person"], rdfs__label=claim["decided_by"]),
                *resolved,
            ])
            + rdf.graph(pubinfo, [node(this, [], dct__created=when(claim["decided_at"]), dct__creator=ref(reviewer),
                                       tl__case=ref(iris.case(case_id)), tl__revision=claim["revision"],
                                       tl__asOf=as_of)])
            + "\n")


async def trig(pages: LedgerPages, iris: Iris) -> AsyncIterator[str]:
    """The nanopublications and nothing else: readers of a multi-nanopublication file take its graphs four at a
    time, so a default graph (the vocabulary, say: the PROV export defines it) would break them."""
    yield rdf.prefixes()
    relations = ByClaim(pages, "outgoing", "source_claim_id")
    resolutions = ByClaim(pages, "resolutions", "claim_id")
    async for claim in pages.each("claims"):
        mine = await relations.of(claim["claim_id"])
        resolved = await resolutions.of(claim["claim_id"])
        yield nanopublication(iris, pages.case_id, pages.as_of or 0, claim, mine, resolved[-1] if resolved else None)
