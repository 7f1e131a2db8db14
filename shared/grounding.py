"""A claim's grounding, from its active sources (CONTRACT): `primary` (at least one primary, official, standards or
benchmark source), `secondary` (else at least one reporting or analysis source), `social-only` (only social
sources), `none` (no active source); and `independentOrigins`, the number of distinct publishers among them,
counted as evidence health counts them (shared/health.py: a blank publisher names no origin).

`grounding_for` is the one place every read asks: get_workspace's scopes, the map, the proposal page, the
`ledger.changed` events of a retirement, and `inspect_claims`/`search_workspace`; `grounding_around` is the history's (a
diff's and a claim timeline's changes of grounding), by the same `label`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shared.db.raw import fetch
from shared.health import independent_origins

PRIMARY_TYPES = frozenset({"primary", "official", "standards", "benchmark"})
SECONDARY_TYPES = frozenset({"reporting", "analysis"})
SOCIAL_TYPES = frozenset({"social"})
LABELS = ("primary", "secondary", "social-only", "none")


def label(sources: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The grounding of a claim whose active sources are these (type, publisher) pairs."""
    listed = list(sources)
    types = {source_type for source_type, _ in listed}
    if types & PRIMARY_TYPES:
        name = "primary"
    elif types & SECONDARY_TYPES:
        name = "secondary"
    elif types and types <= SOCIAL_TYPES:
        name = "social-only"
    else:
        name = "none"
    return {"grounding": name, "independentOrigins": independent_origins(publisher for _, publisher in listed)}


def _active_at(revision: str) -> str:
    """SQL: source `s` was active at the revision `revision` names — it came at or before it and had not ended by
    it. The one statement of the rule for every read of a past revision below."""
    return f"(s.revision <= {revision} AND (s.ended_revision IS NULL OR s.ended_revision > {revision}))"


# Without a revision ($3), the sources active now.
GROUNDING = f"""
SELECT cs.claim_id, s.type, s.publisher
FROM claim_sources cs JOIN sources s ON s.case_id = cs.case_id AND s.source_id = cs.source_id
WHERE cs.case_id = $1 AND cs.claim_id = ANY($2::text[])
  AND CASE WHEN $3::bigint IS NULL THEN s.status = 'active' ELSE {_active_at("$3")} END
"""


_ACTIVE_SOURCES = """
SELECT source_id, type, publisher FROM sources WHERE case_id = $1 AND source_id = ANY($2::text[]) AND status = 'active'
"""


async def grounding_of_citations(connection: Any, case_id: str,
                                 cited: Mapping[Any, Sequence[str]]) -> dict[Any, dict[str, Any]]:
    """{key: {grounding, independentOrigins}} for claims not in the ledger (pending items), keyed as `cited` is,
    from the active sources each cites by id (a source still pending grounds nothing yet)."""
    wanted = sorted({source_id for ids in cited.values() for source_id in ids})
    rows = await fetch(connection, _ACTIVE_SOURCES, case_id, wanted) if wanted else []
    active = {r["source_id"]: (r["type"], r["publisher"]) for r in rows}
    return {key: label(active[s] for s in dict.fromkeys(ids) if s in active) for key, ids in cited.items()}


async def grounding_for(connection: Any, case_id: str, claim_ids: Sequence[str],
                        as_of: int | None = None) -> dict[str, dict[str, Any]]:
    """{claimId: {grounding, independentOrigins}} for each named claim (one indexed read), from its sources
    active now, or at revision `as_of`. `connection` is an asyncpg connection or a SQLAlchemy AsyncConnection."""
    wanted = list(dict.fromkeys(claim_ids))
    if not wanted:
        return {}
    found: dict[str, list[tuple[str, str]]] = {claim_id: [] for claim_id in wanted}
    for row in await fetch(connection, GROUNDING, case_id, wanted, as_of):
        found[row["claim_id"]].append((row["type"], row["publisher"]))
    return {claim_id: label(sources) for claim_id, sources in found.items()}


# Each (claim, revision) pair's sources active just before the revision (R - 1) or at it (R), flagged which.
GROUNDING_AROUND = f"""
SELECT claim_id, revision, type, publisher, before, after FROM (
  SELECT k.claim_id, k.revision, s.type, s.publisher,
         {_active_at("k.revision - 1")} AS before, {_active_at("k.revision")} AS after
  FROM unnest($2::text[], $3::bigint[]) AS k(claim_id, revision)
  JOIN claim_sources cs ON cs.case_id = $1 AND cs.claim_id = k.claim_id
  JOIN sources s ON s.case_id = cs.case_id AND s.source_id = cs.source_id
) AS around WHERE before OR after
"""


async def grounding_around(connection: Any, case_id: str,
                           keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], dict[str, Any]]:
    """{(claimId, revision): {before, after}}: each claim's grounding just before the revision and at it, for every
    pair in one read whatever their revisions."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return {}
    found: dict[tuple[str, int], tuple[list, list]] = {key: ([], []) for key in wanted}
    for row in await fetch(connection, GROUNDING_AROUND, case_id, [c for c, _ in wanted], [r for _, r in wanted]):
        before, after = found[(row["claim_id"], row["revision"])]
        if row["before"]:
            before.append((row["type"], row["publisher"]))
        if row["after"]:
            after.append((row["type"], row["publisher"]))
    return {key: {"before": label(before), "after": label(after)} for key, (before, after) in found.items()}
