"""The gaps a canonical claim can have: the types of the unresolved section's items about one claim, named once for
the producers (services/projection/domain.py and health.py) and for search's `gap` filter (shared/search_contracts)."""

from __future__ import annotations

CLAIM_UNSUPPORTED = "claim_unsupported"  # every source it cites is retired
VERDICT_WEAKENED = "verdict_weakened"  # a basis of the verdict lost its support
CONTRADICTED_BY_RELATION = "contradicted_by_relation"
NO_PRIMARY_SOURCE = "no_primary_source"
# A claim whose confidence leaves it open: its confidence and the gap it names.
CONFIDENCE_GAPS = {"disputed": "claim_disputed", "unknown": "claim_unknown", "contradicted": "claim_contradicted"}

GAP_TYPES = (CLAIM_UNSUPPORTED, VERDICT_WEAKENED, *CONFIDENCE_GAPS.values(), CONTRADICTED_BY_RELATION,
             NO_PRIMARY_SOURCE)
ANY = "any"  # search's `gap` for a gap of any type
