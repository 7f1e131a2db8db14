"""Read a Threadline export back with independent tools and print what it holds, as JSON.

PROV-O (Turtle, JSON-LD) and nanopublications (TriG) are parsed by rdflib and read with SPARQL; AIF JSON is
read as plain JSON. Each prints the number of claims, sources and relations, and each claim's sources and
the reviewer who accepted it.

    pip install rdflib
    threadline export demo-heat-pumps --format prov-turtle --as-of 5 -o case.ttl
    python docs/examples/read_export.py case.ttl prov-turtle
"""

from __future__ import annotations

import json
import sys

PREFIXES = """PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX np: <http://www.nanopub.org/nschema#>
PREFIX tl: <urn:threadline:vocab#>
"""
# Claims, sources and relations are prov:Entity records typed in the vocabulary the export defines.
PROV_COUNTS = """SELECT ?kind (COUNT(DISTINCT ?x) AS ?n) WHERE {
  ?x a prov:Entity ; a ?type . VALUES (?type ?kind) { (tl:Claim "claims") (tl:Verdict "claims")
  (tl:Source "sources") (tl:Relation "relations") } } GROUP BY ?kind"""
# A claim was derived from its sources; the review decision that generated it was a reviewer's.
PROV_CLAIMS = """SELECT ?claim ?source ?reviewer WHERE {
  ?claim prov:wasGeneratedBy ?decision . { ?claim a tl:Claim } UNION { ?claim a tl:Verdict }
  ?decision prov:wasAssociatedWith ?person . ?person a prov:Person ; rdfs:label ?reviewer .
  OPTIONAL { ?claim prov:wasDerivedFrom ?source } }"""
# One nanopublication per claim: its provenance graph names the sources and the reviewer.
NANOPUBS = """SELECT ?claim ?source ?reviewer WHERE {
  GRAPH ?head { ?np a np:Nanopublication ; np:hasAssertion ?assertion ; np:hasProvenance ?provenance }
  GRAPH ?assertion { ?claim tl:kind ?kind }
  GRAPH ?provenance { ?assertion tl:acceptedBy ?person . ?person rdfs:label ?reviewer .
                      OPTIONAL { ?assertion prov:wasDerivedFrom ?source } } }"""
NANOPUB_RELATIONS = "SELECT (COUNT(DISTINCT ?r) AS ?n) WHERE { GRAPH ?g { ?r a tl:Relation } }"


def last(iri: object) -> str:
    return str(iri).rsplit("/", 1)[-1]


def claims_of(rows: list) -> dict[str, dict]:
    claims: dict[str, dict] = {}
    for claim, source, reviewer in rows:
        found = claims.setdefault(last(claim), {"sources": [], "reviewer": str(reviewer)})
        if source is not None:
            found["sources"] = sorted({*found["sources"], last(source)})
    return claims


def read_rdf(text: str, fmt: str) -> dict:
    import rdflib

    if fmt == "nanopub-trig":
        dataset = rdflib.Dataset()
        dataset.parse(data=text, format="trig")
        claims = claims_of(list(dataset.query(PREFIXES + NANOPUBS)))
        relations = int(next(iter(dataset.query(PREFIXES + NANOPUB_RELATIONS)))[0])
        # A nanopublication names the sources its claim cites, not the sources themselves as records.
        return {"claims": len(claims), "relations": relations, "claimsRead": claims}
    graph = rdflib.Graph().parse(data=text, format="turtle" if fmt == "prov-turtle" else "json-ld")
    counts = {str(kind): int(n) for kind, n in graph.query(PREFIXES + PROV_COUNTS)}
    return {**counts, "claimsRead": claims_of(list(graph.query(PREFIXES + PROV_CLAIMS)))}


def read_aif(text: str) -> dict:
    aif = json.loads(text)
    claims = [n for n in aif["nodes"] if n["type"] == "I"]
    schemes = [n for n in aif["nodes"] if n["type"] in ("RA", "CA")]
    return {"claims": len(claims), "relations": len(schemes), "edges": len(aif["edges"]),
            "conflicts": sorted(n["nodeID"] for n in schemes if n["type"] == "CA")}


def main() -> None:
    path, fmt = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as file:
        text = file.read()
    print(json.dumps(read_aif(text) if fmt == "aif-json" else read_rdf(text, fmt), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
