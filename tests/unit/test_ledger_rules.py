"""Ledger rules: staged items must fit the canonical ledger."""

from __future__ import annotations

from shared import ledger
from shared.ledger import ClaimFact, LedgerFacts


def facts(**kwargs):
    return LedgerFacts(revision=3, **kwargs)


def source(id_="s1"):
    return {"id": id_, "publisher": "p", "title": "t", "url": "https://x.org", "publicationDate": "living",
            "snapshotDate": "2024-01-01", "type": "primary", "authority": "a", "evidenceText": "e",
            "provenanceNote": "n"}


def test_a_new_source_id_must_not_be_canonical_already():
    problems = ledger.check_item("sources", source("s1"), facts(sources={"s1": "active"}))
    assert [p.field for p in problems] == ["id"]
    assert not ledger.check_item("sources", source("s2"), facts(sources={"s1": "active"}))


def test_claims_cite_only_canonical_active_sources():
    claim = {"id": "c1", "text": "t", "kind": "observation", "confidence": "supported",
             "sourceIds": ["s1", "s2", "s3"], "transformationNote": "n", "proposalRationale": "r"}
    problems = ledger.check_item("claims", claim, facts(sources={"s1": "active", "s3": "retired"}))
    assert [p.field for p in problems] == ["sourceIds[1]", "sourceIds[2]"]


def test_relations_need_two_different_canonical_claims():
    base = {"id": "r1", "type": "supports", "rationale": "x"}
    known = {"a": ClaimFact("observation", "active"), "b": ClaimFact("observation", "superseded")}
    assert ledger.check_item("relations", {**base, "sourceClaimId": "a", "targetClaimId": "a"}, facts(claims=known))
    problems = ledger.check_item("relations", {**base, "sourceClaimId": "a", "targetClaimId": "b"},
                                 facts(claims=known))
    assert [p.field for p in problems] == ["targetClaimId"]
    problems = ledger.check_item("relations", {**base, "sourceClaimId": "pending-only", "targetClaimId": "a"},
                                 facts(claims=known))
    assert "pending proposal" in problems[0].hint


def test_duplicate_new_ids_within_one_call_are_refused():
    problems = ledger.duplicate_ids("sources", {"sources": [source("s1"), source("s2"), source("s1")]})
    assert [p.field for p in problems] == ["sources[2].id"]


def verdict_patch(relations):
    return {
        "claim": {"id": "v1", "text": "answer", "kind": "verdict", "confidence": "supported", "sourceIds": ["s1"],
                  "transformationNote": "n", "lane": "verdict", "order": 1},
        "relations": relations,
    }


def test_a_verdict_needs_a_direct_edge_from_a_canonical_claim():
    known = facts(sources={"s1": "active"}, claims={"a": ClaimFact("observation", "active"),
                                                    "b": ClaimFact("observation", "active")})
    indirect = [{"id": "r1", "sourceClaimId": "a", "targetClaimId": "b", "type": "supports", "rationale": "x"}]
    assert [p.field for p in ledger.check_item("verdict", verdict_patch(indirect), known)] == ["relations"]
    direct = [{"id": "r1", "sourceClaimId": "a", "targetClaimId": "v1", "type": "supports", "rationale": "x"}]
    assert ledger.check_item("verdict", verdict_patch(direct), known) == []
    assert ledger.verdict_bases(verdict_patch(direct)) == ["r1"]


def test_a_verdict_patch_refuses_amplification():
    known = facts(sources={"s1": "active"}, claims={"a": ClaimFact("observation", "active")})
    relations = [{"id": "r1", "sourceClaimId": "a", "targetClaimId": "v1", "type": "amplifies", "rationale": "x"}]
    assert "relations[0].type" in [p.field for p in ledger.check_item("verdict", verdict_patch(relations), known)]


def test_accepting_a_verdict_supersedes_the_active_one_in_the_facts():
    known = facts(claims={"old": ClaimFact("verdict", "active"), "a": ClaimFact("observation", "active")})
    relations = [{"id": "r1", "sourceClaimId": "a", "targetClaimId": "v1", "type": "supports", "rationale": "x"}]
    known.install("verdict", verdict_patch(relations))
    assert known.claims["old"].status == "superseded"
    assert known.claims["v1"].status == "active"
