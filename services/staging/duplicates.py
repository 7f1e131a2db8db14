"""Possible duplicates at staging: each staged claim against the case's canonical and pending claims (trigram
similarity of normalised text, shared/search_text.py), each staged source against its canonical sources (the
same normalised URL). Found in the stage call's one read, stored with the proposal in its one write, and
told to the agent — never a refusal: merging or rejecting is the reviewer's decision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared import search_text

# The least trigram similarity of two normalised claim texts flagged (tuned by `threadline bench search`:
# restatements — word order, case, punctuation, a word or a number's form changed — score above it,
# claims about other things below).
THRESHOLD = 0.7
PER_ITEM = 3  # the most similar records flagged for each staged item
MOST = 24  # flagged in one answer at most

# The columns STAGE_FACTS adds (services/staging/repository.py): $10 the claims' normalised texts, $11 the
# threshold, $12 the sources' normalised URLs.
# The index is a read model a moment behind the ledger: a pending claim it holds may have been decided since, so
# its item's decision is read beside it (accepted: canonical now; rejected: no longer anything to flag).
SIMILAR_COLUMNS = f"""
  CASE WHEN cardinality($10::text[]) > 0 THEN (
    SELECT coalesce(jsonb_agg(jsonb_build_array(d.i, d.record_id,
             CASE WHEN decided.outcome = 'accepted' THEN 'canonical' ELSE d.status END,
             CASE WHEN decided.outcome = 'accepted' THEN NULL ELSE d.proposal_id END, d.similarity)
           ORDER BY d.i, d.similarity DESC, d.record_id), '[]')
    FROM threadline_similar_claims($1, $10::text[], $11::real, {PER_ITEM}) d
    LEFT JOIN item_decisions decided
      ON decided.proposal_id = CASE WHEN d.status = 'pending' AND d.proposal_id <> '' THEN d.proposal_id::uuid END
     AND decided.item_id = d.record_id
    WHERE decided.outcome IS DISTINCT FROM 'rejected') ELSE '[]' END AS similar_claims,
  CASE WHEN cardinality($12::text[]) > 0 THEN (
    SELECT coalesce(jsonb_agg(jsonb_build_array(u.i, r.record_id)), '[]')
    FROM unnest($12::text[]) WITH ORDINALITY AS u(key, i)
    JOIN search_records r ON r.case_id = $1 AND r.kind = 'source' AND r.status = 'canonical' AND r.dup_key = u.key
  ) ELSE '[]' END AS same_urls"""


def keys(items: Sequence[tuple[str, str, dict[str, Any]]]) -> tuple[list[str], list[str], list[str], list[str]]:
    """(claim item ids, their normalised texts, source item ids, their normalised URLs) of (record kind, item
    id, payload) triples."""
    claims = [(i, search_text.duplicate_key("claim", p) or "") for kind, i, p in items if kind == "claim"]
    sources = [(i, search_text.duplicate_key("source", p) or "") for kind, i, p in items if kind == "source"]
    return [i for i, _ in claims], [k for _, k in claims], [i for i, _ in sources], [k for _, k in sources]


def flagged(claim_ids: list[str], similar: list[list[Any]], source_ids: list[str], same_urls: list[list[Any]],
            *, own_proposal: str | None = None) -> list[dict[str, Any]]:
    """possibleDuplicates: [{itemId, of: {kind, id, status, proposalId?}, similarity}], most similar first per
    item, bounded; `own_proposal`'s pending items left out (a replayed call must not flag itself). A record
    is named once per item: a claim id pending in several proposals (an agent that staged it again) is flagged
    with the first of them."""
    found: list[dict[str, Any]] = []
    named: set[tuple[str, str]] = set()
    for i, record_id, status, proposal_id, similarity in similar:
        if (own_proposal and proposal_id == own_proposal) or (claim_ids[i - 1], record_id) in named:
            continue
        named.add((claim_ids[i - 1], record_id))
        of = {"kind": "claim", "id": record_id, "status": status, **({"proposalId": proposal_id} if proposal_id else {})}
        found.append({"itemId": claim_ids[i - 1], "of": of, "similarity": round(float(similarity), 3)})
    for i, record_id in same_urls:
        found.append({"itemId": source_ids[i - 1], "of": {"kind": "source", "id": record_id, "status": "canonical"},
                      "similarity": 1.0})
    return found[:MOST]


def rows(flags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The possible_duplicates rows of a proposal (its id added by the write)."""
    rank: dict[str, int] = {}
    out = []
    for flag in flags:
        n = rank[flag["itemId"]] = rank.get(flag["itemId"], -1) + 1
        of = flag["of"]
        out.append({"item_id": flag["itemId"], "rank": n, "of_kind": of["kind"], "of_id": of["id"],
                    "of_status": of["status"], "of_proposal_id": of.get("proposalId"),
                    "similarity": flag["similarity"]})
    return out
