"""The gap types are named once (shared/gaps.py): search_workspace's schema, its contract and the producers agree."""

from __future__ import annotations

import json
from typing import get_args

from services.projection import domain, health
from services.projection.snapshot import ClaimView
from shared import gaps
from shared import health as shared_health
from shared.search_contracts import Gap
from shared.spec import SPEC_DIR


def _spec_gap_enum() -> list[str]:
    tools = json.loads((SPEC_DIR / "search-tools.json").read_text())["tools"]
    (search,) = [t for t in tools if t["name"] == "search_workspace"]
    return search["inputSchema"]["properties"]["gap"]["enum"]


def test_the_spec_gap_enum_is_any_and_the_gap_types_in_order():
    assert _spec_gap_enum() == [gaps.ANY, *gaps.GAP_TYPES]
    assert list(get_args(Gap)) == _spec_gap_enum()


def test_every_open_item_about_a_claim_is_typed_by_a_gap_type():
    produced = set()
    for confidence in domain.UNRESOLVED_CONFIDENCE:
        claim = ClaimView(claim_id="c-1", text="t", kind="fact", confidence=confidence, lane=None, order=None,
                          source_ids=(), revision=1)
        produced |= {i["type"] for i in domain.claim_open_items(claim, ["c-2"], strong=False)}
    produced |= {i["type"] for i in health.open_items("c-v", True, (shared_health.WEAKENED, [{"record": "claim", "id": "c-1"}]))}
    produced |= {i["type"] for i in health.open_items("c-1", False, (shared_health.UNSUPPORTED, [{"record": "source", "id": "s"}]))}
    assert produced == set(gaps.GAP_TYPES)
