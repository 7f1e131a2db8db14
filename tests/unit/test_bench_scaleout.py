"""`bench scaleout`'s plan (quotas that fit, refusals), its drain rate, each doubling's efficiency and its tables."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from services.cli.bench.scaleout import failed, median_window, sweeps
from services.cli.bench.scaleout_drain import drain_figures, projection_figures
from services.cli.bench.scaleout_plan import (
    MIN_QUOTA,
    PlanError,
    doublings,
    is_replica_of,
    make_plan,
    parse_hold,
)
from services.cli.bench.scaleout_report import quota_table, summary_lines, sweep_table


def test_the_default_quota_fits_every_process_and_the_load_generator_under_the_cores():
    plan = make_plan(quota=None, service=None, cores=2)
    assert [p.service for p in plan.points] == ["staging"] * 3 + ["gateway"] * 3 + ["relay"] * 3 + ["projection"] * 3
    assert plan.quota >= MIN_QUOTA and plan.largest < 2
    assert plan.quotas["postgres"] > plan.quota and plan.quotas["nats-server"] > plan.quota
    staging_4 = plan.points[2]
    assert staging_4.replicas["staging"] == 4 and staging_4.replicas["gateway"] == 4
    assert staging_4.replicas["webhooks"] == 1 and staging_4.replicas["thesis-delta"] == 1
    assert "staging=4" in staging_4.replicas_argument() and "webhooks" not in staging_4.replicas_argument()
    relay_2 = next(p for p in plan.points if p.service == "relay" and p.count == 2)
    assert relay_2.partitions == 2, "two relays lead two partitions"
    assert doublings(8) == [1, 2, 4, 8]


def test_a_replica_is_the_service_or_the_service_with_a_number():
    assert is_replica_of("staging", "staging") and is_replica_of("staging-2", "staging")
    assert is_replica_of("thesis-delta-3", "thesis-delta")
    assert not is_replica_of("thesis-delta", "thesis") and not is_replica_of("staging-x", "staging")
    assert not is_replica_of(None, "staging") and not is_replica_of("gateway", "staging")


@pytest.mark.parametrize(("arguments", "said"), [
    ({"quota": 0.0}, "above 0"),
    ({"quota": 3.0}, "at most 2"),
    ({"quota": 0.01}, "--quota 0.01: a service process needs at least 0.03 of a core; raise --quota to at least 0.03"),
    ({"service": "review"}, "can be swept"),
    ({"max_replicas": 6}, "power of two"),
    ({"max_replicas": 32}, "cannot hold"),
    ({"quota": 0.2}, "cannot hold"),
    ({"rounds": 0}, "--rounds must be at least 1"),
])
def test_what_cannot_run_is_refused_with_the_reason(arguments, said):
    with pytest.raises(PlanError, match=said):
        make_plan(**{"quota": None, "service": None, "cores": 2, **arguments})


def test_a_held_service_stays_at_its_replicas_in_every_point_and_is_not_swept():
    plan = make_plan(quota=None, service=None, cores=2, hold=parse_hold("staging=1, review=2"))
    assert [p.service for p in plan.points] == ["gateway"] * 3 + ["relay"] * 3 + ["projection"] * 3
    assert all(p.replicas["staging"] == 1 and p.replicas["review"] == 2 for p in plan.points)
    relay_4 = next(p for p in plan.points if p.service == "relay" and p.count == 4)
    assert relay_4.replicas["gateway"] == 4 and relay_4.replicas["projection"] == 4 and relay_4.partitions == 4
    assert plan.hold == {"staging": 1, "review": 2} and plan.largest < 2
    assert plan.quota >= make_plan(quota=None, service=None, cores=2).quota, "fewer processes, no smaller a quota"
    assert parse_hold(None) == {} and parse_hold("") == {}


@pytest.mark.parametrize(("hold", "arguments", "said"), [
    ("webhooks=1", {}, "the services that can be held are gateway, staging, relay, projection, review"),
    ("staging", {}, "give SERVICE=REPLICAS"),
    ("staging=one", {}, "give SERVICE=REPLICAS"),
    ("staging=0", {}, "at least 1 replica"),
    ("staging=1,staging=2", {}, "staging is held twice"),
    ("relay=1", {"service": "relay"}, "relay is the service swept"),
    ("review=8", {}, "at most at --max-replicas (4)"),
])
def test_a_hold_that_cannot_be_followed_is_refused_with_the_reason(hold, arguments, said):
    with pytest.raises(PlanError, match=re.escape(said)):
        make_plan(**{"quota": None, "service": None, "cores": 2, "hold": parse_hold(hold), **arguments})


def test_a_point_is_its_median_window_with_every_windows_errors():
    def window(calls: float, errors: int, kinds: dict[str, int]) -> dict:
        return {"callsPerSecond": calls, "p99Ms": 1000 / calls, "errors": errors, "errorKinds": kinds}

    point = median_window([window(40.0, 1, {"timeout": 1}), window(55.0, 0, {}), window(31.0, 2, {"timeout": 1,
                                                                                                   "unavailable": 1})])
    assert point["callsPerSecond"] == 40.0 and point["p99Ms"] == 25.0, "the middle window's figures, together"
    assert point["windowsCallsPerSecond"] == [40.0, 55.0, 31.0]
    assert point["errors"] == 3 and point["errorKinds"] == {"timeout": 2, "unavailable": 1}
    assert median_window([window(50.0, 0, {}), window(30.0, 0, {})])["callsPerSecond"] == 30.0, "the lower middle"


def test_the_projections_drain_is_read_from_its_inbox_from_the_first_transaction_to_the_last():
    # (seconds after the relays resumed, events applied in transactions started then): the first a second late
    applied = [(1.0, 50), (1.5, 100), (2.0, 100), (3.0, 150), (4.0, 100)]
    figures = projection_figures(applied, backlog=500)
    assert figures["applied"] == 500 and figures["eventsPerSecond"] == 150.0  # 450 after the first in 3 s
    assert figures["wholeBacklogPerSecond"] == 125.0 and "partitions" not in figures and "published" not in figures
    assert projection_figures([], backlog=0)["eventsPerSecond"] is None


def test_the_relays_drain_is_read_per_partition_from_its_first_events_marked_to_its_last():
    # (partition, seconds after the relays resumed, events marked then): partition 0 starts late (its relay took
    # two seconds to come back) and finishes last; partition 1 finishes early, its relay then idle.
    passes = [(0, 2.0, 100), (1, 0.5, 100), (1, 1.5, 400), (0, 3.0, 500), (1, 2.5, 500), (0, 4.0, 500),
              (0, 5.0, 500)]
    figures = drain_figures(passes, backlog=2600)
    assert [(p["partition"], p["events"], p["firstSeconds"], p["seconds"], p["eventsPerSecond"])
            for p in figures["partitions"]] == [(0, 1600, 2.0, 5.0, 500.0), (1, 1000, 0.5, 2.5, 450.0)]
    assert figures["eventsPerSecond"] == 950.0  # what the two publish while each has work
    assert figures["wholeBacklogPerSecond"] == 520.0 and figures["drainSeconds"] == 5.0  # 2,600 in 5 s
    # 10% gone at 1.5 s (500 of 2,600), 60% at 3.0 s (1,600): 1,100 more in 1.5 s
    assert figures["tenToSixtyPerSecond"] == 733.3
    assert figures["published"] == 2600 and figures["backlog"] == 2600


def test_a_drain_of_one_pass_is_read_from_the_resume():
    figures = drain_figures([(0, 0.8, 400)], backlog=400)
    assert figures["eventsPerSecond"] == 500.0 and figures["tenToSixtyPerSecond"] is None


def point(service: str, replicas: int, calls: float, capacity: float | None = None) -> dict:
    shares = {service: 0.97, "gateway": 0.5, "postgres": 0.2}
    measured = {"service": service, "replicas": replicas, "callsPerSecond": calls, "p99Ms": 900.0,
                "eventsPerSecond": calls, "projectedPerSecond": 0.0, "cpuShare": shares, "bottleneck": service}
    if capacity is not None:
        measured["capacity"] = {"backlog": 2000, "eventsPerSecond": capacity, "cpuShare": shares}
    return measured


def test_each_doubling_has_its_speedup_efficiency_and_calls_change_and_the_tables_show_them():
    measured = sweeps([point("staging", 1, 40.0), point("staging", 2, 76.0), point("staging", 4, 130.0),
                       point("relay", 1, 100.0, 80.0), point("relay", 2, 99.0, 152.0)])
    staging, relay = measured
    assert [(d["speedup"], d["efficiency"]) for d in staging["doublings"]] == [(1.9, 0.95), (1.71, 0.86)]
    assert relay["measure"] == "events/s (capacity)"
    assert relay["doublings"][0]["speedup"] == 1.9 and relay["doublings"][0]["callsChange"] == -0.01
    report = {"cores": 2, "quotas": {"service": 0.04, "postgres": 0.32, "nats-server": 0.16, "load": 0.32},
              "largestTotalQuota": 1.72, "agents": 64, "cases": 16, "seconds": 15, "heldAt": 4, "sweeps": measured,
              "machineBefore": {"loadAverage1m": 0.3}, "machineAfter": {"loadAverage1m": 1.9}}
    console = Console(width=250, record=True)
    console.print(quota_table(report))
    console.print(sweep_table(report))
    text = console.export_text()
    assert "0.32" in text and "1.90×" in text and "0.86" in text and "staging 97%" in text
    assert any("relay (events/s (capacity)): 1→2 1.90×" in line and "calls/s -1%" in line
               for line in summary_lines(report))


def test_the_relays_whole_backlog_rate_and_its_speedup_are_shown_beside_the_summed_partition_rates():
    # The run of 2026-12-06 12:17: partition rates summed 843.5 -> 1550.7 (1.84x), the whole backlog 709 -> 1,199.
    one, two = point("relay", 1, 55.3, 843.5), point("relay", 2, 55.1, 1550.7)
    one["capacity"]["wholeBacklogPerSecond"], two["capacity"]["wholeBacklogPerSecond"] = 709.0, 1199.0
    (relay,) = sweeps([one, two])
    assert relay["doublings"][0]["speedup"] == 1.84 and relay["doublings"][0]["wholeBacklogSpeedup"] == 1.69
    report = {"sweeps": [relay], "machineBefore": {"loadAverage1m": 0.3}, "machineAfter": {"loadAverage1m": 1.0},
              "cores": 2}
    console = Console(width=300, record=True)
    console.print(sweep_table(report))
    text = console.export_text()
    assert "whole backlog/s" in text and "1199.0" in text
    assert "1→2 1.84× (efficiency 0.92, whole backlog 1.69×, calls/s -0%" in summary_lines(report)[0]
    staging = sweeps([point("staging", 1, 19.0), point("staging", 2, 36.0)])[0]
    assert staging["doublings"][0]["wholeBacklogSpeedup"] is None
    assert "whole backlog" not in summary_lines({**report, "sweeps": [staging]})[0]


def test_the_bench_cases_fall_evenly_on_the_relay_partitions():
    from collections import Counter

    from services.cli.bench.scaleout import spread
    from services.relay.partitions import partition_of

    cases = spread("r1", 16, 4)
    assert len(set(cases)) == 16
    assert Counter(partition_of(f"case:{c}", 4) for c in cases) == {0: 4, 1: 4, 2: 4, 3: 4}


def test_a_point_that_could_not_be_measured_is_reported_with_why_and_the_others_are_kept():
    error = ExceptionGroup("agents", [RuntimeError("get_workspace was refused (unavailable)")])
    broken = {"service": "projection", "replicas": 1, **failed(error)}
    measured = sweeps([broken, point("projection", 2, 30.0, 210.0), point("projection", 4, 31.0, 400.0)])
    (projection,) = measured
    assert [d["speedup"] for d in projection["doublings"]] == [None, 1.9]
    report = {"sweeps": measured, "machineBefore": {"loadAverage1m": 0.3}, "machineAfter": {"loadAverage1m": 1.0},
              "cores": 2}
    console = Console(width=300, record=True)
    console.print(sweep_table(report))
    assert "not measured: RuntimeError: get_workspace was refused (unavailable)" in console.export_text()
    assert "1→2 —" in summary_lines(report)[0]


def test_a_doubling_of_a_service_that_is_not_the_bottleneck_says_which_one_is():
    def held(replicas: int, calls: float) -> dict:
        measured = point("relay", replicas, calls, capacity=300.0 * replicas)
        return {**measured, "bottleneck": "staging", "cpuShare": {"staging": 0.98, "relay": 0.2}}

    (relay,) = sweeps([held(1, 19.0), held(2, 19.5)])
    (doubling,) = relay["doublings"]
    assert doubling["sweptIsBottleneck"] is False and doubling["bottlenecks"] == ["staging", "staging"]
    report = {"sweeps": [relay], "machineBefore": {"loadAverage1m": 0.3}, "machineAfter": {"loadAverage1m": 1.0},
              "cores": 2, "held": {"staging": 1}}
    assert "calls/s +3%; not the bottleneck: staging)" in summary_lines(report)[0]
    staging = sweeps([point("staging", 1, 19.0), point("staging", 2, 36.0)])[0]
    assert staging["doublings"][0]["sweptIsBottleneck"] is True
    assert "not the bottleneck" not in summary_lines({**report, "sweeps": [staging]})[0]
