"""`threadline bench stage|scale|agents|events` run end to end, very briefly, against the running stack.

These check that each benchmark works and cleans up after itself, never how fast anything is.
"""

from __future__ import annotations

import asyncio
import json

from sqlalchemy import func, select, text

from shared.db.tables import api_tokens, proposals
from tests.processes import threadline


def bench(stack, *args: str, timeout: float = 180) -> dict:
    environment = {**stack.environment(), "THREADLINE_URL": stack.http_url, "THREADLINE_LOG_LEVEL": "WARNING"}
    done = threadline("bench", *args, "--json", env=environment, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


async def open_bench_tokens(stack) -> int:
    async with stack.db.engine.connect() as connection:
        return (await connection.execute(select(func.count()).select_from(api_tokens).where(
            api_tokens.c.created_by == "threadline bench", api_tokens.c.revoked_at.is_(None)))).scalar_one()


async def test_bench_stage_measures_the_three_targets_stores_each_acknowledged_call_and_cleans_up(stack, tmp_path):
    plot = tmp_path / "stage.png"
    report = await asyncio.to_thread(bench, stack, "stage", "--agents", "2", "--seconds", "1", "--rounds", "1",
                                     "--settle", "0", "--plot", str(plot), "--sweep", "1,2")
    [runs] = report["rounds"]
    assert [r["target"] for r in runs] == ["threadline", "direct", "echo"]
    for run in runs:
        assert run["calls"] > 0 and run["errors"] == 0, run
        assert 0 < run["p50Ms"] <= run["p99Ms"]
    assert set(report["ratios"]) == {"threadline/direct", "threadline/echo"}
    assert [p["agents"] for p in report["sweep"]] == [1, 2]
    assert plot.read_bytes()[:4] == b"\x89PNG"

    threadline_calls = sum(r["calls"] for r in runs if r["target"] == "threadline")
    async with stack.db.engine.connect() as connection:
        staged = (await connection.execute(
            select(proposals.c.case_id, func.count()).where(proposals.c.case_id.like("bench-stage-%"))
            .group_by(proposals.c.case_id).order_by(func.min(proposals.c.created_at)))).all()
        scratch = (await connection.execute(text(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'threadline_bench_%'"))).scalar_one()
    assert len(staged) == 2, "a case for the round and one for the sweep's single agent"
    assert staged[0][1] == threadline_calls, "each acknowledged stage call is one stored proposal"
    assert scratch == 0, "the direct anchor's scratch table is dropped"
    assert await open_bench_tokens(stack) == 0, "the bench revokes the tokens it issued"


async def test_bench_scale_fills_one_case_and_times_each_size_beside_a_small_reference(stack):
    report = await asyncio.to_thread(bench, stack, "scale", "--claims", "24", "--step", "8", "--probes", "2")
    assert [s["claims"] for s in report["sizes"]] == [8, 24]
    for point in report["sizes"]:
        assert point["referenceClaims"] == 8, "each reference case is filled to the first size"
        for measure in ("summaryMs", "claimsScopeMs", "decisionMs"):
            reference = point[f"reference{measure[0].upper()}{measure[1:]}"]
            assert point[measure] > 0 and reference > 0
            assert point[f"{measure}Ratio"] == round(point[measure] / reference, 2)
        assert point["fillRate"] > 0
    assert report["sizes"][0]["fillRateRatio"] == 1.0
    last = report["sizes"][-1]
    assert last["cycles"] == 2, "8 + 2 decision probes' 8 claims, then 8 more to 24"
    async with stack.api("reviewer") as api:
        case = (await api.get(f"/api/v1/cases/{report['caseId']}")).json()
    assert case["revision"] == 1 + 2 + 2 + 2 + 2, "sources once, then one accepted decision per cycle"
    assert await open_bench_tokens(stack) == 0


async def test_bench_agents_counts_every_stage_call_by_outcome_beside_a_reviewer(stack):
    report = await asyncio.to_thread(bench, stack, "agents", "--agents", "2", "--think", "0.2", "--seconds", "2",
                                     "--reviewers", "1", "--repeat", "1")
    outcomes = [report[o] for o in ("stored", "stale", "replayed", "other")]
    assert sum(outcomes) == report["stageCalls"] > 0
    assert report["other"] == 0, report["otherKinds"]
    assert report["stored"] >= 1 and report["reviewing"]["decisions"] >= 1
    assert sum(report["repeats"].values()) >= 1, "a stored call was sent again identically"
    assert 0 <= report["staleShare"] <= 1
    assert await open_bench_tokens(stack) == 0


async def test_bench_events_times_every_decisions_event_at_rest_and_under_load(stack):
    report = await asyncio.to_thread(bench, stack, "events", "--decisions", "6", "--reviewers", "3")
    at_rest, loaded = report["phases"]
    assert at_rest["decisions"] == 6 and loaded["decisions"] == 6  # 3 reviewers deciding 2 each
    for phase in (at_rest, loaded):
        assert 0 <= phase["p50Ms"] <= phase["p90Ms"] <= phase["p99Ms"] <= phase["maxMs"]
        assert phase["decisionsPerSecond"] > 0
    assert report["machineBefore"]["cores"] >= 1
