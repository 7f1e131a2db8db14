"""The case read back as of a revision equals the case as it was read live at that revision, for every revision.

Random histories of stages, decisions (some items rejected), retirements (some re-rating claims and the
verdict), supersessions (a new verdict supersedes the old) and merges run through the real use cases against
real PostgreSQL; after each revision the reviewers' ledger and the argument map are read live, and at the end
both are read again as of every revision from the append-only ledger and compared. A handful of histories in
`make test`, more under THREADLINE_FULL=1.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.projection import use_cases as projection
from services.review import use_cases as review
from shared.as_of import check_as_of, check_range
from shared.contracts import Actor, CreateCase, SetFocusArgs, ToolRequest
from shared.db.session import Database
from shared.errors import InvalidArgument
from shared.graph_contracts import CaseGraphRef
from shared.history_contracts import CaseAsOf
from tests.integration.test_incremental_views import (  # noqa: F401 - `ledger`: a deployment of this module's own
    AGENT,
    PUBLISHERS,
    REVIEWER,
    History,
    ledger,
    operation,
)

EXAMPLES = 40 if os.environ.get("THREADLINE_FULL") else 4
NOT_LEDGER = ("pendingProposals", "guidance")  # about now, not a revision: as-of answers leave them out
READER = Actor(name="auditor", role="reviewer")


class Recorded(History):
    """A history that reads the ledger and the map live after every revision."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.live: dict[int, tuple[str, dict[str, Any], dict[str, Any]]] = {}
        self.focus = "all"

    async def _focus(self, focus: str) -> None:
        await super()._focus(focus)
        self.focus = focus

    async def read(self, as_of: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        ledger_ref = CaseAsOf(actor=READER, case_id=self.case_id, as_of=as_of)
        graph_ref = CaseGraphRef(actor=READER, case_id=self.case_id, as_of=as_of)
        return await projection.case_ledger(ledger_ref, self.projection()), await review.case_graph(graph_ref, self.review())

    async def record(self) -> None:
        revision = await self.revision()
        if revision not in self.live:
            self.live[revision] = (self.focus, *await self.read())

    async def set_focus(self, focus: str) -> None:
        if focus != self.focus:
            await Recorded._focus(self, focus)


async def recorded_history(deployment: tuple[Database, Any], steps: list[tuple]) -> Recorded:
    history = Recorded(*deployment)
    await review.create_case(CreateCase(actor=REVIEWER, case_id=history.case_id, title="As of",
                                        question="Does the past read back?"), history.review())
    await history.record()
    for step in [("sources", [("primary", PUBLISHERS[0]), ("social", PUBLISHERS[2])]), *steps]:
        await history.run(step)
        await history.project()
        await history.record()
    return history


async def assert_reads_back(history: Recorded) -> None:
    for revision, (focus, live_ledger, live_graph) in sorted(history.live.items()):
        await history.set_focus(focus)  # the focus orders the claims; it is presentation, not a revision
        past_ledger, past_graph = await history.read(revision)
        assert past_ledger.pop("asOf") == revision
        assert past_ledger == {k: v for k, v in live_ledger.items() if k not in NOT_LEDGER}, f"ledger at {revision}"
        assert past_graph == live_graph, f"graph at {revision}"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(steps=st.lists(operation, min_size=12, max_size=24))
async def test_the_ledger_and_the_map_as_of_every_revision_equal_what_was_read_live_then(ledger, steps):  # noqa: F811
    history = await recorded_history(ledger, steps)
    await assert_reads_back(history)


async def test_a_verdict_superseded_and_claims_retired_read_back_as_they_stood(ledger):  # noqa: F811
    steps = [
        ("sources", [("official", PUBLISHERS[1]), ("analysis", PUBLISHERS[3])]),  # s2, s3
        ("claims", [("supported", [1], True), ("supported", [2], True), ("disputed", [2, 3], True)]),  # c4–c6
        ("merge", [0, 1], True),  # g7: c4 and c5 restate one proposition
        ("verdict", 0, [(0, "supports"), (1, "supports")], True),  # v8 on c4, c5
        ("retire_lonely", 0),  # s1, c4's only source: c4 unsupported, the verdict weakened
        ("verdict", 1, [(2, "contradicts")], True),  # v11 supersedes v8
        ("retire", "claim", 1),  # c5 retired: g7 ends with it
        ("focus", "unresolved"),
    ]
    history = await recorded_history(ledger, steps)
    assert len(history.live) >= 8
    await assert_reads_back(history)
    first_verdict = next(r for r, (_, led, _) in sorted(history.live.items()) if led["verdict"].get("claimId") == "v8")
    past, graph = await history.read(first_verdict)
    assert past["verdict"]["claimId"] == "v8" and {g["groupId"] for g in past["groups"]} == {"g7"}
    assert {n["id"] for n in graph["nodes"] if n["kind"] == "verdict"} == {"v8"}


def test_a_revision_the_case_does_not_have_is_refused_naming_the_parameter():
    for as_of in (-1, 8):
        with pytest.raises(InvalidArgument) as refused:
            check_as_of(as_of, 7)
        assert refused.value.field == "asOf" and "0 to 7" in refused.value.message
    with pytest.raises(InvalidArgument) as refused:
        check_range(5, 3, 7)
    assert refused.value.field == "from" and "after to 3" in refused.value.message
    with pytest.raises(InvalidArgument) as refused:
        check_range(1, 9, 7)
    assert refused.value.field == "to"


async def test_focus_is_read_as_it_is_now(ledger):  # noqa: F811 - the focus is presentation: read as it is now
    history = Recorded(*ledger)
    await review.create_case(CreateCase(actor=REVIEWER, case_id=history.case_id, title="Focus", question="?"),
                             history.review())
    await projection.set_focus(ToolRequest(actor=AGENT, args=SetFocusArgs(expected_case_id=history.case_id,
                                                                          focus="primary_evidence"),
                                           discovered_case_id=history.case_id), history.projection())
    past, _ = await history.read(0)
    assert past["focus"] == "primary_evidence" and past["revision"] == 0
