"""The ledger read back over the HTTP API: a diff, a claim's timeline, the case as of a revision, and the exports
(PROV-O as JSON-LD and Turtle, nanopublications as TriG, AIF JSON) read by independent parsers — rdflib and
its SPARQL engine for RDF, plain JSON for AIF — and compared with the ledger's own tables at that revision.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import httpx2
import pytest
import rdflib
import rdflib.compare
from sqlalchemy import select

from shared.db.tables import claim_sources, claims, relations, sources
from tests.factories import (
    agent_session,
    claim_item,
    decide,
    merge_item,
    relation_item,
    source_item,
    ui_sign_in,
    verdict_claim,
)
from tests.processes import THREADLINE

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "read_export.py"
PREFIXES = """PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX np: <http://www.nanopub.org/nschema#>
PREFIX tl: <urn:threadline:vocab#>
"""


async def retire(stack, case_id: str, record: str, record_id: str) -> dict[str, Any]:
    async with stack.api() as api:
        answer = await api.post(f"/api/v1/cases/{case_id}/retirements",
                                json={"records": [{"record": record, "id": record_id}], "note": "withdrawn"})
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture(scope="module")
async def history(stack):
    """A case whose ledger moved through every kind of change; the revisions worth reading back."""
    async with agent_session(stack) as agent:
        marks: dict[str, int] = {}
        await agent.accepted("stage_sources", sources=[source_item(s) for s in ("s0", "s1", "s2")])
        await agent.accepted("stage_claims", claims=[claim_item("a", ["s0"]), claim_item("b", ["s0", "s2"]),
                                                     claim_item("c", ["s2"]), claim_item("d", ["s1"])])
        await agent.accepted("stage_relations", relations=[
            relation_item("a-b", "a", "b"), relation_item("c-b", "c", "b", "contradicts"),
            relation_item("d-a", "d", "a", "qualifies"), relation_item("b-c", "b", "c", "amplifies")])
        await agent.accepted("stage_merge", groups=[merge_item("g-ac", ["a", "c"])])
        marks["first_verdict"] = (await agent.accepted("stage_verdict", claim=verdict_claim("v1", ["s0"]), relations=[
            relation_item("a-v1", "a", "v1"), relation_item("d-v1", "d", "v1")]))["revision"]
        marks["source_retired"] = (await retire(stack, agent.case_id, "source", "s1"))["revision"]
        marks["second_verdict"] = (await agent.accepted("stage_verdict", claim=verdict_claim(
            "v2", ["s2"], text="On balance, no."), relations=[relation_item("b-v2", "b", "v2", "contradicts")]))["revision"]
        marks["claim_retired"] = (await retire(stack, agent.case_id, "claim", "c"))["revision"]
        staged = await agent.stage("stage_claims", claims=[claim_item("e", ["s0"])])
        await decide(stack, staged["proposalId"], reject=["e"], note="not needed")
        await agent.stage("stage_claims", claims=[claim_item("f", ["s0"])])  # left pending
    # The MCP session closes in the task that opened it; the tests need only the case and the agent's name.
    return SimpleNamespace(case_id=agent.case_id, name=agent.name), marks


async def ledger_at(stack, case_id: str, revision: int) -> dict[str, Any]:
    """What the ledger's own tables hold at a revision: every record installed by then, claims' sources."""
    async with stack.db.engine.connect() as connection:
        def ids(table: Any, key: str) -> Any:
            return select(table.c[key], table.c.decided_by).where(table.c.case_id == case_id,
                                                                  table.c.revision <= revision)
        found = {name: dict((await connection.execute(ids(table, key))).all()) for name, table, key in (
            ("claims", claims, "claim_id"), ("sources", sources, "source_id"), ("relations", relations, "relation_id"))}
        cited = await connection.execute(select(claim_sources.c.claim_id, claim_sources.c.source_id).where(
            claim_sources.c.case_id == case_id, claim_sources.c.claim_id.in_(list(found["claims"]))))
        found["cited"] = {tuple(r) for r in cited}
        kinds = await connection.execute(select(relations.c.relation_id, relations.c.type, relations.c.source_claim_id,
                                                relations.c.target_claim_id, relations.c.ended_revision).where(
            relations.c.case_id == case_id, relations.c.revision <= revision))
        found["relation_rows"] = {r.relation_id: r for r in kinds}
    return found


async def export(stack, case_id: str, fmt: str, as_of: int | None = None, host: str | None = None) -> Any:
    async with stack.api() as api:
        params = {"format": fmt, **({"asOf": as_of} if as_of is not None else {})}
        return await api.get(f"/api/v1/cases/{case_id}/export", params=params,
                             headers={"Host": host} if host else None)


def local(iri: Any) -> str:
    return str(iri).rsplit("/", 1)[-1]


def sparql_reading(graph: Any) -> dict[str, Any]:
    """What SPARQL finds in an export: counts, each claim's sources, each record's reviewer, statuses."""
    def rows(query: str) -> list[Any]:
        return list(graph.query(PREFIXES + query))

    count = {name: int(rows(f"SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE {{ {pattern} }}")[0][0]) for name, pattern in (
        ("claims", "?x a prov:Entity . { ?x a tl:Claim } UNION { ?x a tl:Verdict }"),
        ("sources", "?x a prov:Entity, tl:Source"), ("relations", "?x a prov:Entity, tl:Relation"))}
    cited = {(local(c), local(s)) for c, s in rows("SELECT ?c ?s WHERE { ?c prov:wasDerivedFrom ?s . ?s a tl:Source }")}
    reviewers = {local(c): str(name) for c, name in rows(
        "SELECT ?c ?name WHERE { ?c a prov:Entity ; prov:wasGeneratedBy ?act . "
        "?act a prov:Activity ; prov:wasAssociatedWith ?p . ?p a prov:Person ; rdfs:label ?name }")}
    status = {local(x): str(s) for x, s in rows("SELECT ?x ?s WHERE { ?x a prov:Entity ; tl:status ?s }")}
    return {"count": count, "cited": cited, "reviewers": reviewers, "status": status}


@pytest.mark.parametrize("fmt,parse_as", [("prov-turtle", "turtle"), ("prov-jsonld", "json-ld")])
async def test_prov_exports_read_back_by_rdflib_equal_the_ledger_at_each_revision(stack, history, fmt, parse_as):
    agent, marks = history
    for revision in (marks["first_verdict"], marks["claim_retired"]):
        answer = await export(stack, agent.case_id, fmt, revision)
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-threadline-revision"] == str(revision)
        graph = rdflib.Graph().parse(data=answer.text, format=parse_as)
        read = sparql_reading(graph)
        expected = await ledger_at(stack, agent.case_id, revision)
        assert read["count"] == {name: len(expected[name]) for name in ("claims", "sources", "relations")}
        assert read["cited"] == expected["cited"]
        assert {k: v for k, v in read["reviewers"].items() if k in expected["claims"]} == expected["claims"]
        for relation_id, row in expected["relation_rows"].items():  # the vocabulary's direct link, while active
            linked = (rdflib.URIRef(f"{stack.http_url}/api/v1/cases/{agent.case_id}/claims/{row.source_claim_id}"),
                      rdflib.URIRef(f"urn:threadline:vocab#{row.type}"),
                      rdflib.URIRef(f"{stack.http_url}/api/v1/cases/{agent.case_id}/claims/{row.target_claim_id}"))
            assert (linked in graph) == (read["status"][relation_id] == "active")
    assert read["status"]["c"] == "retired" and read["status"]["s1"] == "retired"
    assert read["status"]["v1"] == "superseded" and read["status"]["v2"] == "active"
    revised = list(graph.query(PREFIXES + "SELECT ?new ?old WHERE { ?new prov:wasRevisionOf ?old }"))
    assert [(local(n), local(o)) for n, o in revised] == [("v2", "v1")]
    invalidated = {local(x) for (x,) in graph.query(PREFIXES + "SELECT ?x WHERE { ?x prov:wasInvalidatedBy ?a }")}
    assert {"s1", "c", "v1", "c-b", "b-c", "g-ac"} <= invalidated
    agents = {str(n) for (n,) in graph.query(PREFIXES + "SELECT ?n WHERE { ?x a prov:SoftwareAgent ; rdfs:label ?n }")}
    assert agents == {agent.name}
    defined = {local(t) for (t,) in graph.query(PREFIXES + "SELECT ?t WHERE { ?t rdfs:comment ?c }")}
    assert {"supports", "contradicts", "qualifies", "amplifies", "Claim", "Relation", "status"} <= {
        t.rsplit("#", 1)[-1] for t in defined}


async def test_every_generation_and_invalidation_falls_within_its_activity(stack, history):
    """PROV-Constraints: an entity is generated (invalidated) within the span of the activity that generated
    (invalidated) it — the revision's time and its records' times are one clock reading."""
    agent, _ = history
    graph = rdflib.Graph().parse(data=(await export(stack, agent.case_id, "prov-turtle")).text, format="turtle")
    for link, time in (("prov:wasGeneratedBy", "prov:generatedAtTime"),
                       ("prov:wasInvalidatedBy", "prov:invalidatedAtTime")):
        spans = PREFIXES + f"""SELECT ?e ?t ?s ?end WHERE {{ ?e {link} ?a ; {time} ?t .
            ?a prov:startedAtTime ?s ; prov:endedAtTime ?end }}"""
        assert len(list(graph.query(spans))) >= 5  # the check below has something to check
        outside = spans.replace("?end }", "?end FILTER(?t < ?s || ?t > ?end) }")
        assert list(graph.query(outside)) == [], link


async def test_prov_says_why_each_record_was_retired_once_the_exported_revision_has_it(stack, history):
    agent, marks = history
    notes = PREFIXES + "SELECT ?id ?note WHERE { ?e tl:retirementNote ?note . BIND(STRAFTER(STR(?e), '/') AS ?id) }"
    for fmt, parse_as in (("prov-turtle", "turtle"), ("prov-jsonld", "json-ld")):
        now = rdflib.Graph().parse(data=(await export(stack, agent.case_id, fmt)).text, format=parse_as)
        said = {str(e).rsplit("/", 2)[-2:][1]: str(n) for e, n in now.query(PREFIXES + """
            SELECT ?e ?note WHERE { ?e tl:retirementNote ?note }""")}
        assert said.get("c") == said.get("s1") == "withdrawn", said
        assert said.get("c-b") == "its claim c was retired" and "v1" not in said, said  # v1 was superseded
        before = rdflib.Graph().parse(data=(await export(stack, agent.case_id, fmt, marks["source_retired"] - 1)).text,
                                      format=parse_as)
        assert list(before.query(notes)) == []


async def test_nanopublications_one_per_claim_with_their_four_graphs(stack, history):
    agent, marks = history
    for revision in (marks["first_verdict"], marks["claim_retired"]):
        answer = await export(stack, agent.case_id, "nanopub-trig", revision)
        assert answer.status_code == 200, answer.text
        dataset = rdflib.Dataset()
        dataset.parse(data=answer.text, format="trig")
        expected = await ledger_at(stack, agent.case_id, revision)
        found = list(dataset.query(PREFIXES + """
            SELECT ?np ?claim ?src ?reviewer ?created WHERE {
              GRAPH ?head { ?np a np:Nanopublication ; np:hasAssertion ?a ; np:hasProvenance ?p ;
                            np:hasPublicationInfo ?i }
              GRAPH ?a { ?claim tl:kind ?kind }
              GRAPH ?p { ?a prov:wasDerivedFrom ?src ; tl:acceptedBy ?r . ?r rdfs:label ?reviewer }
              GRAPH ?i { ?np <http://purl.org/dc/terms/created> ?created ; tl:revision ?rev }
            }"""))
        assert {local(np) for np, *_ in found} == set(expected["claims"])
        assert {(local(c), local(s)) for _, c, s, _, _ in found} == expected["cited"]
        assert {local(c): str(r) for _, c, _, r, _ in found} == expected["claims"]
        linked = {(local(s), local(t)) for s, t in dataset.query(PREFIXES + """
            SELECT ?s ?t WHERE { GRAPH ?a { ?s tl:supports|tl:contradicts|tl:qualifies|tl:amplifies ?t }
                                 GRAPH ?h { ?np np:hasAssertion ?a } }""")}
        assert linked == {(r.source_claim_id, r.target_claim_id) for r in expected["relation_rows"].values()
                          if r.ended_revision is None or r.ended_revision > revision}  # the relations active then


async def test_an_export_names_its_records_alike_whatever_host_it_was_asked_through(stack, history):
    agent, marks = history
    port = stack.http_url.rsplit(":", 1)[1]
    turtle = [rdflib.Graph().parse(data=(await export(stack, agent.case_id, "prov-turtle", host=host)).text,
                                   format="turtle") for host in (None, f"localhost:{port}", "proxy.example.org")]
    assert all(rdflib.compare.isomorphic(turtle[0], other) for other in turtle[1:])
    trig = []
    for host in (None, f"localhost:{port}"):
        dataset = rdflib.Dataset()
        dataset.parse(data=(await export(stack, agent.case_id, "nanopub-trig", host=host)).text, format="trig")
        trig.append(set(dataset.quads((None, None, None, None))))
    assert trig[0] == trig[1]
    assert all(str(s).startswith(stack.http_url) for s, *_ in trig[0])


async def test_a_nanopublication_exported_as_of_another_revision_has_another_iri(stack, history):
    agent, marks = history
    named = []
    for revision in (marks["first_verdict"], marks["claim_retired"]):
        dataset = rdflib.Dataset()
        dataset.parse(data=(await export(stack, agent.case_id, "nanopub-trig", revision)).text, format="trig")
        named.append({local(claim): nanopub for nanopub, claim in dataset.query(PREFIXES + """
            SELECT ?np ?claim WHERE { GRAPH ?h { ?np np:hasAssertion ?a } GRAPH ?a { ?claim tl:kind ?kind } }""")})
    then, now = named
    assert "c" in then and then["c"] != now["c"]  # c was retired between the two: its nanopublication says so
    assert not set(then.values()) & set(now.values())


async def test_aif_nodes_and_edges_map_one_to_one_onto_claims_and_relations(stack, history):
    agent, marks = history
    for revision in (marks["first_verdict"], marks["claim_retired"]):
        answer = await export(stack, agent.case_id, "aif-json", revision)
        assert answer.status_code == 200, answer.text
        aif = json.loads(answer.text)
        expected = await ledger_at(stack, agent.case_id, revision)
        assert set(aif) == {"nodes", "edges", "locutions", "participants"}
        i_nodes = [n for n in aif["nodes"] if n["type"] == "I"]
        s_nodes = {n["nodeID"]: n for n in aif["nodes"] if n["type"] in ("RA", "CA")}
        assert sorted(n["nodeID"] for n in i_nodes) == sorted(expected["claims"])
        assert len(aif["nodes"]) == len(i_nodes) + len(s_nodes)
        rows = expected["relation_rows"]
        assert len(s_nodes) == len(rows)
        into = {e["toID"]: e["fromID"] for e in aif["edges"] if e["toID"] in s_nodes}
        out_of = {e["fromID"]: e["toID"] for e in aif["edges"] if e["fromID"] in s_nodes}
        assert len(aif["edges"]) == 2 * len(rows) == len(into) + len(out_of)
        mapped = {}
        for node_id, node in s_nodes.items():
            mapped[node_id.split(":", 1)[1]] = (node["type"], into[node_id], out_of[node_id])
        assert mapped == {r: ("CA" if row.type == "contradicts" else "RA", row.source_claim_id, row.target_claim_id)
                          for r, row in rows.items()}
    assert next(n for n in aif["nodes"] if n["nodeID"] == "c")["status"] == "retired"


async def test_the_diff_names_what_changed_and_the_decisions_that_did_it(stack, history):
    agent, marks = history
    async with stack.api() as api:
        diff = (await api.get(f"/api/v1/cases/{agent.case_id}/diff",
                              params={"from": marks["first_verdict"], "to": marks["claim_retired"]})).json()
    assert (diff["from"], diff["to"]) == (marks["first_verdict"], marks["claim_retired"])
    assert {(a["record"], a["id"]) for a in diff["added"]} == {("claim", "v2"), ("relation", "b-v2")}
    assert {(r["record"], r["id"], r["revision"]) for r in diff["retired"]} >= {
        ("source", "s1", marks["source_retired"]), ("claim", "c", marks["claim_retired"]),
        ("group", "g-ac", marks["claim_retired"]), ("relation", "c-b", marks["claim_retired"])}
    assert [(s["id"], s["supersededBy"]) for s in diff["superseded"]] == [("v1", "v2")]
    assert {(r["claimId"], r["health"], r["by"]) for r in diff["rerated"]} >= {
        ("d", "unsupported", "reviewer"), ("v1", "weakened", "reviewer")}
    assert [d["revision"] for d in diff["decisions"]] == list(range(marks["first_verdict"] + 1,
                                                                    marks["claim_retired"] + 1))
    assert {d["reviewer"] for d in diff["decisions"]} == {"reviewer"}
    assert diff["decisions"][1]["decisionId"] and diff["decisions"][1]["proposalId"]  # the second verdict's
    assert "g-ac" in diff["groups"]["ended"] and "b-v2" in diff["relations"]["added"]
    assert diff["counts"]["decisions"] == 3 and diff["omitted"] == {}


async def test_the_diff_and_the_changes_since_give_each_retirements_note(stack, history):
    agent, marks = history
    window = {"from": marks["first_verdict"], "to": marks["claim_retired"]}
    async with stack.api() as api:
        diff = (await api.get(f"/api/v1/cases/{agent.case_id}/diff", params=window)).json()
    notes = {(r["record"], r["id"]): r.get("note") for r in diff["retired"]}
    assert notes[("source", "s1")] == notes[("claim", "c")] == "withdrawn", notes
    assert notes[("relation", "c-b")] == "its claim c was retired", notes
    assert all("note" not in a for a in diff["added"] + diff["superseded"])
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
        page = await http.get(f"/ui/cases/{agent.case_id}", params={"since": window["from"], "asOf": window["to"]})
    retired = page.text[page.text.index('class="plain changes-retired"'):]
    assert "withdrawn" in retired[:retired.index("</ul>")]


async def test_a_claims_timeline_tells_its_life_with_who_and_when(stack, history):
    agent, marks = history
    async with stack.api() as api:
        c = (await api.get(f"/api/v1/cases/{agent.case_id}/claims/c/timeline")).json()
        d = (await api.get(f"/api/v1/cases/{agent.case_id}/claims/d/timeline")).json()
        missing = await api.get(f"/api/v1/cases/{agent.case_id}/claims/nowhere/timeline")
    events = [(e["event"], e.get("relationId") or e.get("groupId")) for e in c["events"]]
    assert events[:2] == [("staged", None), ("accepted", None)]
    assert {("related", "c-b"), ("related", "b-c"), ("grouped", "g-ac"), ("retired", None),
            ("relation_ended", "c-b"), ("group_ended", "g-ac")} <= set(events)
    assert c["events"][0]["by"] == agent.name and c["events"][1]["by"] == "reviewer"
    assert c["events"][-1]["revision"] == marks["claim_retired"] and c["status"] == "retired"
    rerated = [e for e in d["events"] if e["event"] == "rerated"]
    assert [(e["health"], e["revision"], e["by"]) for e in rerated] == [("unsupported", marks["source_retired"],
                                                                         "reviewer")]
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "claimId"


async def test_a_retired_claims_timeline_gives_the_reviewers_note_and_why_its_relations_ended(stack, history):
    agent, _ = history
    async with stack.api() as api:
        c = (await api.get(f"/api/v1/cases/{agent.case_id}/claims/c/timeline")).json()
        b = (await api.get(f"/api/v1/cases/{agent.case_id}/claims/b/timeline")).json()
    retired = next(e for e in c["events"] if e["event"] == "retired")
    assert retired["note"] == "withdrawn"
    ended = next(e for e in b["events"] if e["event"] == "relation_ended" and e["relationId"] == "c-b")
    assert ended["note"] == "its claim c was retired"
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
        page = await http.get(f"/ui/cases/{agent.case_id}/claims/c")
    assert page.status_code == 200 and "note: withdrawn" in page.text


async def test_a_claim_no_one_accepted_has_its_timeline_from_its_proposals(stack, history):
    agent, marks = history
    async with stack.api() as api:
        e = (await api.get(f"/api/v1/cases/{agent.case_id}/claims/e/timeline")).json()
        f = (await api.get(f"/api/v1/cases/{agent.case_id}/claims/f/timeline")).json()
    assert [(x["event"], x["by"]) for x in e["events"]] == [("staged", agent.name), ("rejected", "reviewer")]
    assert e["status"] == "rejected" and e["events"][1]["note"] == "not needed" and e["events"][1]["decisionId"]
    assert e["events"][0]["proposalId"] == e["events"][1]["proposalId"]
    assert e["events"][1]["revision"] == marks["claim_retired"]  # nothing changed: the revision it was decided on
    assert [(x["event"], x["by"]) for x in f["events"]] == [("staged", agent.name)] and f["status"] == "pending"
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
        page = await http.get(f"/ui/cases/{agent.case_id}/claims/e")
    assert page.status_code == 200
    assert 'class="event-rejected"' in page.text and "note: not needed" in page.text


async def test_a_predictions_resolutions_are_on_its_timeline_and_its_page(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("outcomes")])
        await agent.accepted("stage_claims", claims=[claim_item(
            "p", ["outcomes"], kind="prediction", confidence="supported", text="Copper prices double within 2025.")])
        revisions = []
        async with stack.api() as api:
            for outcome, note in (("true", None), ("void", "the index it was measured by was withdrawn")):
                body = {"claimId": "p", "outcome": outcome, "sourceId": "outcomes", "resolvedOn": "2026-01-15",
                        **({"note": note} if note else {})}
                answer = await api.post(f"/api/v1/cases/{agent.case_id}/resolutions", json=body)
                assert answer.status_code == 200, answer.text
                revisions.append(await agent.revision())
            timeline = (await api.get(f"/api/v1/cases/{agent.case_id}/claims/p/timeline")).json()
        async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
            assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
            page = (await http.get(f"/ui/cases/{agent.case_id}/claims/p")).text
    assert [e["event"] for e in timeline["events"]] == ["staged", "accepted", "resolved", "resolved"]
    first, second = timeline["events"][2:]
    assert [(e["outcome"], e["revision"], e["by"]) for e in (first, second)] == [
        ("true", revisions[0], "reviewer"), ("void", revisions[1], "reviewer")]
    assert second["supersedesResolution"] == first["resolutionId"] and "supersedesResolution" not in first
    assert second["note"] == "the index it was measured by was withdrawn" and first["sourceId"] == "outcomes"
    assert page.count('class="event-resolved"') == 2 and "resolved <strong>void</strong> on 2026-01-15" in page
    assert "supersedes the earlier resolution · note: the index it was measured by was withdrawn" in page


async def test_the_case_reads_back_as_of_a_revision_over_the_api(stack, history):
    agent, marks = history
    async with stack.api() as api:
        then = (await api.get(f"/api/v1/cases/{agent.case_id}/ledger", params={"asOf": marks["first_verdict"]})).json()
        graph = (await api.get(f"/api/v1/cases/{agent.case_id}/graph", params={"asOf": marks["first_verdict"]})).json()
    assert then["asOf"] == then["revision"] == marks["first_verdict"] and then["verdict"]["claimId"] == "v1"
    assert "pendingProposals" not in then and {g["groupId"] for g in then["groups"]} == {"g-ac"}
    assert graph["revision"] == marks["first_verdict"]
    assert {n["id"]: n["status"] for n in graph["nodes"] if n["kind"] == "source"}["s1"] == "active"


@pytest.mark.parametrize("path,params,field", [
    ("ledger", {"asOf": 999}, "asOf"), ("graph", {"asOf": -1}, "asOf"), ("ledger", {"asOf": "x"}, "asOf"),
    ("diff", {"from": 5, "to": 2}, "from"), ("diff", {"from": 0, "to": 999}, "to"), ("diff", {}, "from"),
    ("export", {"format": "rdf-xml"}, "format"), ("export", {"format": "aif-json", "asOf": 999}, "asOf"),
    ("export", {}, "format"),
])
async def test_bad_revisions_and_formats_are_refused_naming_the_parameter(stack, history, path, params, field):
    agent, _ = history
    async with stack.api() as api:
        answer = await api.get(f"/api/v1/cases/{agent.case_id}/{path}", params=params)
    assert 400 <= answer.status_code < 500, answer.text
    error = answer.json()["error"]
    assert error["field"] == field or any(p["field"] == field for p in error.get("problems", [])), error
    assert error.get("hint")


async def test_threadline_export_writes_what_the_api_serves(stack, history, tmp_path):
    agent, marks = history
    written = tmp_path / "case.ttl"
    done = await asyncio.to_thread(subprocess.run, [
        str(THREADLINE), "export", agent.case_id, "--format", "prov-turtle",
        "--as-of", str(marks["source_retired"]), "-o", str(written), "--url", stack.http_url,
        "--token", stack.tokens["reviewer"]], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr + done.stdout
    served = await export(stack, agent.case_id, "prov-turtle", marks["source_retired"])
    assert rdflib.Graph().parse(str(written), format="turtle").isomorphic(
        rdflib.Graph().parse(data=served.text, format="turtle"))
    refused = await asyncio.to_thread(subprocess.run, [
        str(THREADLINE), "export", agent.case_id, "--format", "aif-json",
        "--as-of", "999", "--url", stack.http_url, "--token", stack.tokens["reviewer"]],
        capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and refused.stdout == "", refused.stdout
    # The refusal names the command's option, as the user typed it, not the API's query parameter.
    assert "--as-of 999 is not a revision" in refused.stderr and "asOf" not in refused.stderr, refused.stderr
    before = written.read_bytes()
    refused = await asyncio.to_thread(subprocess.run, [
        str(THREADLINE), "export", agent.case_id, "--format", "aif-json",
        "--as-of", "999", "-o", str(written), "--url", stack.http_url, "--token", stack.tokens["reviewer"]],
        capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and written.read_bytes() == before  # the refused export replaced nothing


@pytest.mark.parametrize("fmt", ["prov-turtle", "prov-jsonld", "nanopub-trig", "aif-json"])
async def test_the_documented_reader_reads_each_export_as_the_ledger_has_it(stack, history, fmt, tmp_path):
    agent, marks = history
    revision = marks["second_verdict"]
    written = tmp_path / f"case.{fmt}"
    written.write_bytes((await export(stack, agent.case_id, fmt, revision)).content)
    done = await asyncio.to_thread(subprocess.run, [sys.executable, str(EXAMPLE), str(written), fmt],
                                   capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)
    expected = await ledger_at(stack, agent.case_id, revision)
    assert read["claims"] == len(expected["claims"]) and read["relations"] == len(expected["relations"])
    if fmt == "aif-json":
        assert read["edges"] == 2 * len(expected["relations"])
        assert read["conflicts"] == sorted(f"CA:{r}" for r, row in expected["relation_rows"].items()
                                           if row.type == "contradicts")
        return
    assert {c: (v["reviewer"], set(v["sources"])) for c, v in read["claimsRead"].items()} == {
        c: (reviewer, {s for claim, s in expected["cited"] if claim == c}) for c, reviewer in expected["claims"].items()}
    if fmt != "nanopub-trig":
        assert read["sources"] == len(expected["sources"])


@pytest.fixture(scope="module")
async def predictions(stack):
    """A case whose prediction p was resolved true, then re-resolved false citing another source, with a note."""
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("outcomes"), source_item("revised")])
        await agent.accepted("stage_claims", claims=[claim_item(
            "p", ["outcomes"], kind="prediction", confidence="supported", text="Copper prices double within 2025."),
            claim_item("q", ["outcomes"])])
        staged_only = await agent.revision()
        resolved = []
        async with stack.api() as api:
            for body in ({"outcome": "true", "sourceId": "outcomes", "resolvedOn": "2026-01-15"},
                         {"outcome": "false", "sourceId": "revised", "resolvedOn": "2026-02-01",
                          "note": "the index was revised"}):
                answer = await api.post(f"/api/v1/cases/{agent.case_id}/resolutions", json={"claimId": "p", **body})
                assert answer.status_code == 200, answer.text
                resolved.append(answer.json())
    return SimpleNamespace(case_id=agent.case_id, staged_only=staged_only, resolved=resolved)


async def test_resolutions_are_in_every_export_as_of_the_revision_asked_for(stack, predictions):
    agent, staged_only, resolved = predictions, predictions.staged_only, predictions.resolved
    first, second = (r["revision"] for r in resolved)
    case_iri = f"{stack.http_url}/api/v1/cases/{agent.case_id}"
    query = PREFIXES + """PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
        SELECT ?r ?outcome ?on ?source ?reviewer ?supersedes WHERE {
          ?r a prov:Activity, tl:Resolution ; prov:used ?claim, ?source ; tl:outcome ?outcome ; tl:resolvedOn ?on ;
             prov:wasAssociatedWith ?p . ?p a prov:Person ; rdfs:label ?reviewer .
          ?claim a tl:Claim . ?source a tl:Source . OPTIONAL { ?r tl:supersedes ?supersedes }
          FILTER(?claim = <CLAIM>) } ORDER BY ?on""".replace("CLAIM", f"{case_iri}/claims/p")
    for fmt, parse_as in (("prov-turtle", "turtle"), ("prov-jsonld", "json-ld")):
        graph = rdflib.Graph().parse(data=(await export(stack, agent.case_id, fmt, second)).text, format=parse_as)
        found = list(graph.query(query))
        assert [(str(o), on.datatype, str(on), local(s), str(by)) for _, o, on, s, by, _ in found] == [
            ("true", rdflib.XSD.date, "2026-01-15", "outcomes", "reviewer"),
            ("false", rdflib.XSD.date, "2026-02-01", "revised", "reviewer")], fmt
        assert found[0][5] is None and found[1][5] == found[0][0]  # the second supersedes the first
        defined = {local(t).rsplit("#", 1)[-1] for (t,) in graph.query(PREFIXES + "SELECT ?t WHERE { ?t rdfs:comment ?c }")}
        assert {"Resolution", "outcome", "resolvedOn", "supersedes"} <= defined
        earlier = rdflib.Graph().parse(data=(await export(stack, agent.case_id, fmt, first)).text, format=parse_as)
        assert [str(o) for _, o, *_ in earlier.query(query)] == ["true"]  # as of the first resolution: only it

    def outcome_of(revision_text: str) -> list[tuple[str, str, str, str]]:
        dataset = rdflib.Dataset()
        dataset.parse(data=revision_text, format="trig")
        return [(local(c), str(o), str(on), str(by)) for c, o, on, by in dataset.query(PREFIXES + """
            SELECT ?c ?o ?on ?by WHERE {
              GRAPH ?h { ?np np:hasAssertion ?a ; np:hasProvenance ?p }
              GRAPH ?a { ?c tl:outcome ?o ; tl:resolvedOn ?on }
              GRAPH ?p { ?a tl:resolution ?r . ?r prov:used ?c ; prov:wasAssociatedWith ?who . ?who rdfs:label ?by }
            }""")]
    assert outcome_of((await export(stack, agent.case_id, "nanopub-trig", second)).text) == [
        ("p", "false", "2026-02-01", "reviewer")]
    assert outcome_of((await export(stack, agent.case_id, "nanopub-trig", first)).text) == [
        ("p", "true", "2026-01-15", "reviewer")]
    assert outcome_of((await export(stack, agent.case_id, "nanopub-trig", staged_only)).text) == []

    nodes = {n["nodeID"]: n for n in json.loads((await export(stack, agent.case_id, "aif-json", second)).text)["nodes"]}
    assert nodes["p"]["resolution"] == {"outcome": "false", "resolvedOn": "2026-02-01", "sourceId": "revised",
                                        "resolvedBy": "reviewer", "revision": second}
    assert "resolution" not in nodes["q"]


async def test_the_diff_and_the_changes_since_name_the_predictions_resolved(stack, predictions):
    first, second = predictions.resolved
    async with stack.api() as api:
        resolving = (await api.get(f"/api/v1/cases/{predictions.case_id}/diff",
                                   params={"from": predictions.staged_only, "to": second["revision"]})).json()
        again = (await api.get(f"/api/v1/cases/{predictions.case_id}/diff",
                               params={"from": first["revision"], "to": second["revision"]})).json()
        before = (await api.get(f"/api/v1/cases/{predictions.case_id}/diff",
                                params={"from": 0, "to": predictions.staged_only})).json()
    shown = [{k: r[k] for k in ("claimId", "outcome", "resolvedOn", "sourceId", "supersedes", "revision", "by")}
             for r in resolving["resolved"]]
    assert shown == [
        {"claimId": "p", "outcome": "true", "resolvedOn": "2026-01-15", "sourceId": "outcomes", "supersedes": None,
         "revision": first["revision"], "by": "reviewer"},
        {"claimId": "p", "outcome": "false", "resolvedOn": "2026-02-01", "sourceId": "revised",
         "supersedes": first["resolved"]["resolutionId"], "revision": second["revision"], "by": "reviewer"}]
    assert resolving["counts"]["resolved"] == 2 and again["counts"]["resolved"] == 1
    assert [r["outcome"] for r in again["resolved"]] == ["false"] and again["resolved"][0]["note"] == "the index was revised"
    assert before["resolved"] == [] and before["counts"]["resolved"] == 0
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
        page = (await http.get(f"/ui/cases/{predictions.case_id}", params={"since": first["revision"]})).text
    assert 'class="plain changes-resolved"' in page
    assert "resolved <strong>false</strong> on 2026-02-01" in page and "superseding the earlier resolution" in page


async def test_a_retirement_that_changes_claims_grounding_shows_in_the_diff_and_their_timelines(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[
            source_item("g-prim", publisher="Agency A"), source_item("g-prim2", publisher="Agency C"),
            source_item("g-sec", type="reporting", publisher="Paper B")])
        await agent.accepted("stage_claims", claims=[
            claim_item("g1", ["g-prim"]), claim_item("g2", ["g-prim", "g-sec"]),
            claim_item("g3", ["g-prim", "g-prim2"]), claim_item("g4", ["g-sec"])])
        retired = (await retire(stack, agent.case_id, "source", "g-prim"))["revision"]
    async with stack.api() as api:
        diff = (await api.get(f"/api/v1/cases/{agent.case_id}/diff",
                              params={"from": retired - 1, "to": retired})).json()
        timeline = (await api.get(f"/api/v1/cases/{agent.case_id}/claims/g2/timeline")).json()

    def g(label: str, origins: int) -> dict[str, Any]:
        return {"grounding": label, "independentOrigins": origins}

    rerated = {r["claimId"]: r for r in diff["rerated"]}
    assert {c: (r.get("health"), r["grounding"]["before"], r["grounding"]["after"], r["revision"], r["by"])
            for c, r in rerated.items()} == {
        "g1": ("unsupported", g("primary", 1), g("none", 0), retired, "reviewer"),
        "g2": (None, g("primary", 2), g("secondary", 1), retired, "reviewer"),  # grounding alone changed
        "g3": (None, g("primary", 2), g("primary", 1), retired, "reviewer")}  # its origins alone
    assert diff["counts"]["rerated"] == 3
    regrounded = [e for e in timeline["events"] if e["event"] == "rerated"]
    assert [(e["revision"], e["by"], e.get("health"), e["grounding"]) for e in regrounded] == [
        (retired, "reviewer", None, {"before": g("primary", 2), "after": g("secondary", 1)})]
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
        page = (await http.get(f"/ui/cases/{agent.case_id}", params={"since": retired - 1})).text
        claim_page = (await http.get(f"/ui/cases/{agent.case_id}/claims/g2")).text
    changed = "grounding primary · 2 origins → secondary · 1 origin"
    assert changed in page and changed in claim_page


async def test_the_history_and_changes_since_link_the_staging_agent_to_its_track_record(stack, history):
    agent, marks = history
    link = f'staged by <a class="agent-link" href="/ui/agents/{quote(agent.name, safe="")}"'
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
        history_page = (await http.get(f"/ui/cases/{agent.case_id}/history")).text
        since = (await http.get(f"/ui/cases/{agent.case_id}", params={"since": 0})).text
    assert f"staged by {agent.name}" not in history_page and link in history_page
    assert f"staged by {agent.name}" not in since and link in since


@pytest.mark.parametrize("params,said", [
    ({"since": 5, "asOf": 3}, "since: 5 is after asOf 3"),
    ({"since": 99}, "since: 99 is not a revision of this case"),
])
async def test_the_case_page_refuses_since_and_as_of_by_their_own_names(stack, history, params, said):
    agent, _ = history
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
        page = await http.get(f"/ui/cases/{agent.case_id}", params=params)
    assert page.status_code == 422
    assert said in page.text and "from:" not in page.text and "give from" not in page.text
