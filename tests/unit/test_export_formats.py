"""The export writers over pages of records in memory: whatever an agent wrote (quotes, line breaks, markup,
controls, any script) reads back from each format exactly as written, by rdflib or a JSON parser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import rdflib
from hypothesis import given, settings
from hypothesis import strategies as st

from services.gateway.exports import FORMATS, chunks, rdf
from services.gateway.exports.records import ByClaim, Iris, LedgerPages
from shared.contracts import Actor
from shared.settings import Settings

WHEN = "2026-12-01T10:00:00+00:00"
PROVENANCE = {"proposal_id": "0b9c1f7e-0000-4000-8000-000000000001", "staged_by": "agent 7 \"scout\"",
              "staged_at": WHEN, "decision_id": "0b9c1f7e-0000-4000-8000-000000000002", "decided_by": "rita <r>",
              "decided_at": WHEN, "revision": 2, "status": "active", "ended_by": None, "ended_at": None,
              "ended_revision": None, "superseded_by": None}


def ledger(text: str) -> dict[str, list[dict[str, Any]]]:
    return {
        "case": [{"case_id": "c1", "title": text, "question": "Why?", "revision": 3, "created_by": "admin",
                  "created_at": WHEN}],
        "revisions": [{"revision": r, "decision_id": None, "actor": "rita <r>", "at": WHEN, "summary": text,
                       "proposal_id": None} for r in (1, 2, 3)],
        "sources": [{"source_id": "s1", "publisher": text, "title": text, "url": "https://example.org/a b",
                     "publication_date": "2024", "snapshot_date": "2026", "type": "primary", "authority": text,
                     **PROVENANCE, "revision": 1}],
        "claims": [{"claim_id": "a", "text": text, "kind": "observation", "confidence": "supported",
                    "transformation_note": text, "source_ids": ["s1"], "health": None, **PROVENANCE},
                   {"claim_id": "b", "text": "Other.", "kind": "verdict", "confidence": "supported",
                    "transformation_note": "n", "source_ids": ["s1"], "health": "weakened", **PROVENANCE,
                    "status": "retired", "ended_by": "rita <r>", "ended_at": WHEN, "ended_revision": 3}],
        "relations": [{"relation_id": "a-b", "source_claim_id": "a", "target_claim_id": "b", "type": "contradicts",
                       "rationale": text, "verdict_basis": True, **PROVENANCE},
                      {"relation_id": "b-a", "source_claim_id": "b", "target_claim_id": "a", "type": "supports",
                       "rationale": "r", "verdict_basis": False, **PROVENANCE, "status": "retired",
                       "ended_by": "rita <r>", "ended_at": WHEN, "ended_revision": 3}],
        "groups": [{"group_id": "g", "label": text, "confidence": "high", "rationale": text, "members": ["a", "b"],
                    **PROVENANCE}],
        "resolutions": [{"resolution_id": "0b9c1f7e-0000-4000-8000-000000000003", "claim_id": "a", "outcome": "void",
                         "source_id": "s1", "resolved_on": "2026-11-30", "note": text, "resolved_by": "rita <r>",
                         "revision": 3, "supersedes": None, "at": WHEN}],
    }


async def exported(fmt: str, text: str) -> str:
    parts = ledger(text)
    parts["outgoing"] = parts["relations"]

    async def fetch(page: Any) -> dict[str, Any]:
        return {"asOf": 3, "records": orjson.dumps(parts[page.part]).decode(), "next": None}

    pages = await LedgerPages(fetch, Actor(name="t", role="reviewer"), "c1", None).open()
    return b"".join([data async for data in chunks(FORMATS[fmt].write(pages, Iris("http://127.0.0.1:8700")))]).decode()


HOSTILE = ['She said "no" \\ then\nleft.\r\t', "<script>alert(1)</script> {x} | ^ ` >", "\x01\x1f", "ünï 中文 🙂",
           "\"\"\"'''", "@prefix x: <y> ."]


@pytest.mark.parametrize("fmt,parse_as", [("prov-turtle", "turtle"), ("prov-jsonld", "json-ld")])
@pytest.mark.parametrize("text", HOSTILE)
async def test_prov_reads_back_every_text_as_written(fmt, parse_as, text):
    graph = rdflib.Graph().parse(data=await exported(fmt, text), format=parse_as)
    claim = rdflib.URIRef("http://127.0.0.1:8700/api/v1/cases/c1/claims/a")
    assert str(graph.value(claim, rdflib.URIRef("urn:threadline:vocab#text"))) == text
    agents = set(graph.subjects(rdflib.RDF.type, rdflib.URIRef("http://www.w3.org/ns/prov#SoftwareAgent")))
    assert [str(graph.value(a, rdflib.RDFS.label)) for a in agents] == ['agent 7 "scout"']
    resolution = rdflib.URIRef("http://127.0.0.1:8700/api/v1/cases/c1/resolutions/0b9c1f7e-0000-4000-8000-000000000003")
    assert str(graph.value(resolution, rdflib.URIRef("urn:threadline:vocab#resolutionNote"))) == text


@pytest.mark.parametrize("text", HOSTILE)
async def test_nanopublications_and_aif_read_back_every_text_as_written(text):
    dataset = rdflib.Dataset()
    dataset.parse(data=await exported("nanopub-trig", text), format="trig")
    texts = {str(o) for _, _, o, _ in dataset.quads((None, rdflib.URIRef("urn:threadline:vocab#text"), None, None))}
    assert texts == {text, "Other."}
    aif = json.loads(await exported("aif-json", text))
    assert {n["nodeID"]: n["text"] for n in aif["nodes"] if n["type"] == "I"} == {"a": text, "b": "Other."}
    assert {(e["fromID"], e["toID"]) for e in aif["edges"]} == {("a", "CA:a-b"), ("CA:a-b", "b"), ("b", "RA:b-a"),
                                                                ("RA:b-a", "a")}


@settings(max_examples=30, deadline=None)
@given(text=st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=60))
async def test_any_text_survives_turtle(text):
    graph = rdflib.Graph().parse(data=await exported("prov-turtle", text), format="turtle")
    assert str(graph.value(rdflib.URIRef("http://127.0.0.1:8700/api/v1/cases/c1/claims/a"),
                           rdflib.URIRef("urn:threadline:vocab#text"))) == text


def test_the_readmes_turtle_excerpt_is_turtle_in_the_exports_vocabulary():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    excerpt = readme.split("```turtle\n", 1)[1].split("```", 1)[0]
    graph = rdflib.Graph().parse(data=rdf.prefixes() + excerpt, format="turtle")
    claim = rdflib.URIRef("http://127.0.0.1:8700/api/v1/cases/c1/claims/a")
    assert (claim, rdflib.RDF.type, rdflib.URIRef("http://www.w3.org/ns/prov#Entity")) in graph
    assert {str(p).rsplit("#", 1)[-1] for p in graph.predicates(claim)} <= {
        "type", "text", "kind", "confidence", "wasDerivedFrom", "status", "wasGeneratedBy", "wasAttributedTo"}


PROV = rdflib.Namespace("http://www.w3.org/ns/prov#")
NP = rdflib.Namespace("http://www.nanopub.org/nschema#")
TL = "urn:threadline:vocab#"
CLAIMS = "http://127.0.0.1:8700/api/v1/cases/c1/claims/"


@pytest.mark.parametrize("fmt,parse_as", [("prov-turtle", "turtle"), ("prov-jsonld", "json-ld")])
async def test_rdfs_inference_over_prov_has_the_claim_borne_on_influenced_by_the_claim_that_bears_on_it(fmt, parse_as):
    graph = rdflib.Graph().parse(data=await exported(fmt, "t"), format=parse_as)
    inferred = graph.query("""PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
        CONSTRUCT { ?s ?super ?o } WHERE { ?p rdfs:subPropertyOf ?super . ?s ?p ?o }""")
    influenced = {(str(s), str(o)) for s, p, o in inferred if p == PROV.wasInfluencedBy}
    assert influenced == {(CLAIMS + "b", CLAIMS + "a")}  # a contradicts b: b was influenced by a (b-a is retired)


async def test_nanopublications_trig_is_each_nanopublications_four_graphs_and_nothing_else():
    dataset = rdflib.Dataset()
    dataset.parse(data=await exported("nanopub-trig", "t"), format="trig")
    quads = list(dataset.quads((None, None, None, None)))
    assert quads and all(g is not None and g != rdflib.graph.DATASET_DEFAULT_GRAPH_ID for *_, g in quads)
    owner = {head: nanopub for nanopub, _, _, head in dataset.quads((None, rdflib.RDF.type, NP.Nanopublication, None))}
    for head, nanopub in list(owner.items()):
        for part in ("hasAssertion", "hasProvenance", "hasPublicationInfo"):
            (graph,) = [g for *_, g, _ in dataset.quads((nanopub, NP[part], None, head))]
            assert graph not in owner
            owner[graph] = nanopub
    assert {g for *_, g in quads} == set(owner) and len(set(owner.values())) == 2


async def test_a_nanopublication_asserts_only_the_relations_still_active_then():
    dataset = rdflib.Dataset()
    dataset.parse(data=await exported("nanopub-trig", "t"), format="trig")
    asserted = {(str(s), p.rsplit("#", 1)[-1], str(o)) for s, p, o, _ in dataset.quads((None, None, None, None))
                if p.startswith(TL) and p.rsplit("#", 1)[-1] in ("supports", "contradicts", "qualifies", "amplifies")}
    assert asserted == {(CLAIMS + "a", "contradicts", CLAIMS + "b")}
    relation = rdflib.URIRef("http://127.0.0.1:8700/api/v1/cases/c1/relations/b-a")
    assert {str(o) for *_, o, _ in dataset.quads((relation, rdflib.URIRef(TL + "status"), None, None))} == {"retired"}


def test_export_iris_are_under_the_public_url_else_the_gateways_own_address(monkeypatch):
    monkeypatch.delenv("THREADLINE_PUBLIC_URL", raising=False)
    assert Settings(http_host="10.0.0.7", http_port=8123).public_base == "http://10.0.0.7:8123"
    assert Settings(public_url="https://threadline.example.org/", http_port=8123).public_base == (
        "https://threadline.example.org")


async def test_a_claims_relations_and_resolutions_are_found_in_a_database_order_that_is_not_pythons():
    # The order PostgreSQL gives with an en-US collation (checked against a database created with ICU en-US):
    # c-2 before c1, C3 last; Python's `<` puts C3 first and c-2 after c1.
    order = ["c-2", "c1", "c10", "c2", "C3"]
    assert sorted(order) != order
    parts = {"case": ledger("t")["case"],
             "claims": [{"claim_id": c} for c in order],
             "outgoing": [{"source_claim_id": c, "relation_id": f"{c}-r{n}"} for c in order for n in (1, 2)],
             "resolutions": [{"claim_id": c, "revision": 3} for c in order if c != "c10"]}

    async def fetch(page: Any) -> dict[str, Any]:
        return {"asOf": 3, "records": orjson.dumps(parts[page.part]).decode(), "next": None}

    pages = await LedgerPages(fetch, Actor(name="t", role="reviewer"), "c1", None).open()
    relations, resolutions = ByClaim(pages, "outgoing", "source_claim_id"), ByClaim(pages, "resolutions", "claim_id")
    found = {c["claim_id"]: ([r["relation_id"] for r in await relations.of(c["claim_id"])],
                             [r["claim_id"] for r in await resolutions.of(c["claim_id"])])
             async for c in pages.each("claims")}
    assert found == {c: ([f"{c}-r1", f"{c}-r2"], [] if c == "c10" else [c]) for c in order}
