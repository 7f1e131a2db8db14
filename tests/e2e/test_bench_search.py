"""`threadline bench search` end to end, briefly, on the test stack's database: it fills its cases, reports every
figure, and removes every row it wrote. It checks that the benchmark works, never how fast anything is."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from tests.e2e.test_bench import bench


async def test_bench_search_reports_latency_recall_and_duplicates_and_cleans_up(stack):
    report = await asyncio.to_thread(bench, stack, "search", "--claims", "100", "--samples", "20", timeout=600)
    assert [row["claims"] for row in report["sizes"]] == [100, 3000]
    for row in report["sizes"]:
        assert all(row[kind]["p50"] is not None and row[kind]["p50"] <= row[kind]["p99"]
                   for kind in ("id", "words", "misspelled", "filtered", "all"))
        assert 0 <= row["recallMisspelled"] <= 1 and row["recallWords"] >= 0.9  # claims found by their words
    duplicates = report["duplicates"]
    assert duplicates["pairs"] == 20 and duplicates["restatementsFlagged"] >= 0.9
    assert [t["threshold"] for t in duplicates["sweep"]] == sorted(t["threshold"] for t in duplicates["sweep"])
    assert set(report["met"]) == set(report["targets"])
    async with stack.db.engine.connect() as connection:
        left = (await connection.execute(text(
            "SELECT (SELECT count(*) FROM cases WHERE case_id LIKE 'bench-search-%') + "
            "(SELECT count(*) FROM search_records WHERE case_id LIKE 'bench-search-%') + "
            "(SELECT count(*) FROM claims WHERE case_id LIKE 'bench-search-%')"))).scalar_one()
    assert left == 0
