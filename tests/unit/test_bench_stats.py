"""The benchmarks' arithmetic: percentiles, medians, ratios, round orders, fill rates and outcomes."""

from __future__ import annotations

from collections import Counter

import pytest

from services.cli.bench.stats import (
    Cycle,
    Run,
    agents_report,
    edge_rates,
    fill_rate,
    median,
    medians,
    outcome_of,
    parse_counts,
    percentile,
    ratio,
    round_order,
    scale_sizes,
    stage_report,
    with_scale_ratios,
)


def run(target: str, calls_per_second: float | None, p99: float | None, errors: int = 0) -> dict:
    return {"target": target, "callsPerSecond": calls_per_second, "p50Ms": None if p99 is None else p99 / 2,
            "p99Ms": p99, "errors": errors}


def test_percentile_is_the_nearest_rank_and_none_without_values():
    values = list(range(1, 101))
    assert percentile(values, 0.5) == 51  # round(0.5 * 99) = 50 → the 51st value
    assert percentile(values, 0.99) == 99
    assert percentile(values, 0.0) == 1 and percentile(values, 1.0) == 100
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([], 0.5) is None
    assert percentile([3, 1, 2], 0.5) == 2, "the values are sorted first"


def test_median_skips_unknown_values_and_ratio_refuses_a_zero_denominator():
    assert median([3, None, 1, 2]) == 2
    assert median([1, 2, 3, 4]) == 2.5
    assert median([None]) is None
    assert ratio(121, 400) == pytest.approx(0.3025)
    assert ratio(1, 0) is None and ratio(None, 3) is None and ratio(2, None) is None


def test_rounds_alternate_their_order_so_each_target_takes_each_end():
    assert round_order(0) == ["threadline", "direct", "echo"]
    assert round_order(1) == ["echo", "direct", "threadline"]
    assert round_order(2) == round_order(0)
    assert round_order(3, ["a", "b"]) == ["b", "a"]


def test_a_run_counts_calls_answered_without_error_and_the_errors_apart():
    measured = Run("threadline", agents=4, seconds=2.0)
    for latency in (10.0, 20.0, 30.0, 40.0):
        measured.record(latency)
    measured.record(5.0, "stale_revision")
    measured.record(6.0, "exception:ReadTimeout")
    measured.record(7.0, "stale_revision")
    summary = measured.summary()
    assert summary["calls"] == 4
    assert summary["callsPerSecond"] == 2.0
    assert summary["p50Ms"] == 30.0 and summary["p99Ms"] == 40.0
    assert summary["errors"] == 3
    assert summary["errorKinds"] == {"stale_revision": 2, "exception:ReadTimeout": 1}


def test_a_run_that_did_not_run_reports_no_rate():
    summary = Run("echo", agents=1).summary()
    assert summary["callsPerSecond"] is None and summary["p99Ms"] is None and summary["calls"] == 0


def test_medians_are_per_target_over_the_rounds_and_errors_add_up():
    rounds = [
        [run("threadline", 100, 600), run("direct", 400, 300, errors=1), run("echo", 700, 120)],
        [run("echo", 650, 130), run("direct", 360, 250), run("threadline", 120, 560)],
        [run("threadline", 130, 700, errors=2), run("direct", 440, 310), run("echo", 720, 115)],
    ]
    summary = medians(r for rs in rounds for r in rs)
    assert summary["threadline"] == {"runs": 3, "callsPerSecond": 120, "p50Ms": 300, "p99Ms": 600, "errors": 2}
    assert summary["direct"]["callsPerSecond"] == 400 and summary["direct"]["errors"] == 1
    assert summary["echo"]["p99Ms"] == 120


def test_the_report_gives_ratios_of_the_medians_and_each_rounds_own_ratio():
    rounds = [
        [run("threadline", 100, 600), run("direct", 400, 300), run("echo", 500, 100)],
        [run("echo", 700, 140), run("direct", 300, 200), run("threadline", 150, 500)],
    ]
    report = stage_report(rounds)
    assert report["medians"]["threadline"]["callsPerSecond"] == 125
    assert report["ratios"]["threadline/direct"] == {"callsPerSecond": round(125 / 350, 2), "p99Ms": round(550 / 250, 2)}
    assert report["ratios"]["threadline/echo"]["callsPerSecond"] == round(125 / 600, 2)
    assert report["roundRatios"] == [{"threadline/direct": 0.25, "threadline/echo": 0.2},
                                     {"threadline/direct": 0.5, "threadline/echo": 0.21}]


def test_a_ratio_is_left_out_when_a_target_was_not_measured():
    report = stage_report([[run("threadline", 100, 600), run("echo", 500, 100)]])
    assert set(report["ratios"]) == {"threadline/echo"}
    assert report["roundRatios"] == [{"threadline/echo": 0.2}]


def test_counts_parse_into_distinct_ascending_positive_numbers():
    assert parse_counts("64,1,16") == [1, 16, 64]
    assert parse_counts("4, 4,") == [4]
    for bad in ("", "0,4", "a,b", "-1"):
        with pytest.raises(ValueError):
            parse_counts(bad)


def test_scale_sizes_end_at_the_final_size_and_drop_steps_beyond_it():
    assert scale_sizes([100, 300, 1000], 3000) == [100, 300, 1000, 3000]
    assert scale_sizes([100, 300, 1000], 500) == [100, 300, 500]
    assert scale_sizes([300, 100], 300) == [100, 300]
    assert scale_sizes([], 40) == [40]


def cycles(rates: list[tuple[int, float]]) -> list[Cycle]:
    """(claims after the cycle, seconds it took) pairs, 4 claims a cycle."""
    return [Cycle(claims, seconds, seconds * 500) for claims, seconds in rates]


def test_fill_rate_is_cycles_per_second_of_fill_time():
    assert fill_rate(cycles([(4, 0.1), (8, 0.1), (12, 0.2)])) == pytest.approx(3 / 0.4)
    assert fill_rate([]) is None


def test_edge_rates_compare_the_last_window_of_claims_with_the_first():
    fast = [(4 * i, 0.1) for i in range(1, 26)]        # claims 4..100 at 10 cycles/s
    slow = [(100 + 4 * i, 0.25) for i in range(1, 26)]  # claims 104..200 at 4 cycles/s
    edges = edge_rates(cycles(fast + slow), window=100)
    assert edges == {"claims": 100, "first": 10.0, "last": 4.0, "lastOverFirst": 0.4}
    assert edge_rates([], 300)["lastOverFirst"] is None


def test_scale_ratios_are_to_the_reference_timed_beside_and_the_fill_rate_to_the_first_size():
    points = [{"claims": 100, "summaryMs": 10.0, "referenceSummaryMs": 8.0, "claimsScopeMs": 20.0,
               "referenceClaimsScopeMs": 20.0, "decisionMs": 15.0, "referenceDecisionMs": 15.0, "fillRate": 10.0},
              {"claims": 300, "summaryMs": 13.0, "referenceSummaryMs": 10.0, "claimsScopeMs": 50.0,
               "referenceClaimsScopeMs": 20.0, "decisionMs": None, "referenceDecisionMs": 12.0, "fillRate": 5.0}]
    first, second = with_scale_ratios(points)
    assert first["summaryMsRatio"] == 1.25 and first["fillRateRatio"] == 1.0
    assert second["summaryMsRatio"] == 1.3 and second["claimsScopeMsRatio"] == 2.5
    assert second["decisionMsRatio"] is None and second["fillRateRatio"] == 0.5
    assert with_scale_ratios([{"claims": 8, "summaryMs": 1.0, "claimsScopeMs": 1.0, "decisionMs": 1.0,
                               "fillRate": 1.0}])[0]["summaryMsRatio"] is None, "no reference, no ratio"
    assert with_scale_ratios([]) == []


def test_stage_outcomes_tell_stale_replayed_stored_and_other_apart():
    assert outcome_of({"error": {"code": "stale_revision"}}, "stale_revision") == "stale"
    assert outcome_of({"error": {"code": "invalid_argument"}}, "invalid_argument") == "other"
    assert outcome_of({"proposalId": "p", "replayed": True}, None) == "replayed"
    assert outcome_of({"proposalId": "p", "replayed": False}, None) == "stored"
    assert outcome_of({"proposalId": "p"}, None) == "stored"


def test_the_agents_report_gives_the_stale_share_of_every_stage_call():
    report = agents_report(Counter(stored=45, stale=3, replayed=1, other=1), Counter(invalid_argument=1))
    assert report == {"stageCalls": 50, "stored": 45, "stale": 3, "replayed": 1, "other": 1,
                      "otherKinds": {"invalid_argument": 1}, "staleShare": 0.06}
    assert agents_report(Counter(), Counter())["staleShare"] is None
