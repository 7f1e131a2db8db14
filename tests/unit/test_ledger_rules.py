"""Ledger rules: staged items must fit the canonical ledger (each kind of item checks its own)."""

from __future__ import annotations

import pydantic
import pytest

from shared import kinds
from shared.contracts import ClaimItem, RelationItem, SourceItem, StageSourcesArgs, VerdictPatch
from shared.ledger import ClaimFact, LedgerFacts
from shared.messaging import invalid_message


def facts(**kwargs):
    return LedgerFacts(revision=3, **kwargs)


def source(id_="s1"):
    return SourceItem.model_validate(
        {"id": id_, "publisher": "p", "title": "t", "url": "https://x.org", "publicationDate": "living",
         "snapshotDate": "2024-01-01", "type": "primary", "authority": "a", "evidenceText": "e",
         "provenanceNote": "n"})


def relation(**fields):
    return RelationItem.model_validate({"id": "r1", "type": "supports", "rationale": "x", **fields})


def test_a_new_source_id_must_not_be_canonical_already():
    problems = kinds.SOURCES.check(source("s1"), facts(sources={"s1": "active"}))
    assert [p.field for p in problems] == ["id"]
    assert not kinds.SOURCES.check(source("s2"), facts(sources={"s1": "active"}))


def test_claims_cite_only_canonical_active_sources():
    claim = ClaimItem.model_validate({"id": "c1", "text": "t", "kind": "observation", "confidence": "supported",
                                      "sourceIds": ["s1", "s2", "s3"], "transformationNote": "n",
                                      "proposalRationale": "r"})
    problems = kinds.CLAIMS.check(claim, facts(sources={"s1": "active", "s3": "retired"}))
    assert [p.field for p in problems] == ["sourceIds[1]", "sourceIds[2]"]


def test_relations_need_two_different_canonical_claims():
    known = {"a": ClaimFact("observation", "active"), "b": ClaimFact("observation", "superseded")}
    assert kinds.RELATIONS.check(relation(sourceClaimId="a", targetClaimId="a"), facts(claims=known))
    problems = kinds.RELATIONS.check(relation(sourceClaimId="a", targetClaimId="b"), facts(claims=known))
    assert [p.field for p in problems] == ["targetClaimId"]
    problems = kinds.RELATIONS.check(relation(sourceClaimId="pending-only", targetClaimId="a"), facts(claims=known))
    assert "pending proposal" in problems[0].hint


def test_duplicate_new_ids_within_one_call_are_refused():
    call = StageSourcesArgs(expected_case_id="c", expected_revision=3, sources=[source("s1"), source("s2"),
                                                                                source("s1")])
    problems = kinds.SOURCES.problems(call, facts())
    assert [p.field for p in problems] == ["sources[2].id"]


def verdict_patch(relations):
    return VerdictPatch.model_validate({
        "claim": {"id": "v1", "text": "answer", "kind": "verdict", "confidence": "supported", "sourceIds": ["s1"],
                  "transformationNote": "n", "lane": "verdict", "order": 1},
        "relations": relations,
    })


def test_a_verdict_needs_a_direct_edge_from_a_canonical_claim():
    known = facts(sources={"s1": "active"}, claims={"a": ClaimFact("observation", "active"),
                                                    "b": ClaimFact("observation", "active")})
    indirect = [{"id": "r1", "sourceClaimId": "a", "targetClaimId": "b", "type": "supports", "rationale": "x"}]
    assert [p.field for p in kinds.VERDICT.check(verdict_patch(indirect), known)] == ["relations"]
    direct = [{"id": "r1", "sourceClaimId": "a", "targetClaimId": "v1", "type": "supports", "rationale": "x"}]
    assert kinds.VERDICT.check(verdict_patch(direct), known) == []
    assert kinds.verdict_bases(verdict_patch(direct)) == ["r1"]


def test_a_verdict_patch_refuses_amplification():
    # The patch's contract has no place for it: amplification is staged with stage_relations.
    relations = [{"id": "r1", "sourceClaimId": "a", "targetClaimId": "v1", "type": "amplifies", "rationale": "x"}]

    class Handler(pydantic.BaseModel):
        patch: VerdictPatch

    with pytest.raises(pydantic.ValidationError) as refused:
        Handler.model_validate({"patch": verdict_patch([{**relations[0], "type": "supports"}]).model_dump()
                                | {"relations": relations}})
    assert "relations[0].type" in [p["field"] for p in invalid_message(refused.value).problems]


def test_accepting_a_verdict_supersedes_the_active_one_in_the_facts():
    known = facts(claims={"old": ClaimFact("verdict", "active"), "a": ClaimFact("observation", "active")})
    relations = [{"id": "r1", "sourceClaimId": "a", "targetClaimId": "v1", "type": "supports", "rationale": "x"}]
    kinds.VERDICT.learn(verdict_patch(relations), known)
    assert known.claims["old"].status == "superseded"
    assert known.claims["v1"].status == "active"
