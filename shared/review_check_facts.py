"""What the review checks read, in one statement on whichever connection the caller holds (staging's one
extra round trip; review's when a reviewer opens a proposal): the active sources the items cite, the active
claims they name with each one's active sources, the case's active supports edges, and the active sources
whose stored `url_key` is one of the items' URLs normalised (`search_text.normalise_url`, as `url_key` was
written) — and the retired ones with such a key, each with the revision that retired it —, with the active ones
that have no key yet (written by a previous release during a rollout or after a rollback,
until `threadline migrate` keys them: migration 0024), compared by their URL normalised here; and the day (UTC)
they run on."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from shared.db.raw import fetch
from shared.review_checks import CheckFacts, ClaimFact, SourceFact, wanted
from shared.search_text import normalise_url

CHECK_FACTS = """
SELECT 'source' AS part, s.source_id AS a, s.type AS b, s.publisher AS c, s.publication_date AS d, NULL AS e
  FROM sources s WHERE s.case_id = $1 AND s.status = 'active' AND s.source_id = ANY($2::text[])
UNION ALL
SELECT 'claim', c.claim_id, c.kind, c.confidence, NULL, NULL
  FROM claims c WHERE c.case_id = $1 AND c.status = 'active' AND c.claim_id = ANY($3::text[])
UNION ALL
SELECT 'cites', cs.claim_id, s.type, s.publisher, s.publication_date, s.source_id
  FROM claim_sources cs JOIN sources s ON s.case_id = cs.case_id AND s.source_id = cs.source_id
  WHERE cs.case_id = $1 AND cs.claim_id = ANY($3::text[]) AND s.status = 'active'
UNION ALL
SELECT 'supports', r.source_claim_id, r.target_claim_id, NULL, NULL, NULL
  FROM relations r WHERE r.case_id = $1 AND r.status = 'active' AND r.type = 'supports' AND $5
UNION ALL
SELECT 'url', s.source_id, s.url_key, NULL, NULL, NULL
  FROM sources s WHERE s.case_id = $1 AND s.url_key = ANY($4::text[]) AND s.status = 'active'
UNION ALL
SELECT 'retired', s.source_id, s.url_key, s.ended_revision::text, NULL, NULL
  FROM sources s WHERE s.case_id = $1 AND s.url_key = ANY($4::text[]) AND s.status = 'retired'
UNION ALL
SELECT 'unkeyed', s.source_id, s.url, NULL, NULL, NULL
  FROM sources s WHERE s.case_id = $1 AND s.url_key IS NULL AND s.status = 'active' AND cardinality($4::text[]) > 0
"""


async def load(connection: Any, case_id: str, items: Sequence[Any], relations: bool) -> CheckFacts:
    """The facts `review_checks.evaluate` needs for these items (one round trip; none when they need none)."""
    source_ids, claim_ids, urls = wanted(items)
    facts = CheckFacts(today=datetime.now(UTC).date())
    if not (source_ids or claim_ids or urls or relations):
        return facts
    cites: dict[str, list[SourceFact]] = {}
    claims: dict[str, tuple[str, str]] = {}
    for row in await fetch(connection, CHECK_FACTS, case_id, sorted(source_ids), sorted(claim_ids), sorted(urls),
                           relations):
        part, a, b, c, d, e = row["part"], row["a"], row["b"], row["c"], row["d"], row["e"]
        if part == "source":
            facts.sources[a] = SourceFact(a, b, c, d)
        elif part == "claim":
            claims[a] = (b, c)
        elif part == "cites":
            cites.setdefault(a, []).append(SourceFact(e, b, c, d))
        elif part == "supports":
            facts.supports.append((a, b))
        elif part == "url":
            facts.urls.setdefault(b, []).append(a)
        elif part == "retired":
            facts.retired_urls.setdefault(b, []).append((a, int(c)))
        elif (key := normalise_url(b)) in urls:  # a source without a key yet ("unkeyed")
            facts.urls.setdefault(key, []).append(a)
    facts.claims = {claim_id: ClaimFact(claim_id, kind, confidence, tuple(cites.get(claim_id, [])))
                    for claim_id, (kind, confidence) in claims.items()}
    return facts
