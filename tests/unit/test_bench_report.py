"""The benchmarks' printed tables, the anchors' answers and scratch-table names, and the plot."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from services.cli.bench.anchors import checked, scratch_table_ddl, staged_answer
from services.cli.bench.calls import stage_claims_args
from services.cli.bench.report import agents_table, figure, scale_tables, stage_tables, times
from services.cli.bench.stats import stage_report, with_scale_ratios
from services.cli.bench.system import replicas
from shared.spec import spec_tools, validate_arguments


def rendered(*tables) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    for table in tables:
        console.print(table)
    return console.file.getvalue()


def stage_run(target: str, rate: float, p99: float, errors: dict | None = None) -> dict:
    errors = errors or {}
    return {"target": target, "agents": 64, "calls": int(rate * 15), "seconds": 15.0, "callsPerSecond": rate,
            "p50Ms": p99 / 3, "p99Ms": p99, "errors": sum(errors.values()), "errorKinds": errors, "clientCpu": 0.4}


def test_figures_print_a_dash_for_unknown_values():
    assert figure(None) == "—"
    assert figure(12.345) == "12.3"
    assert figure(3) == "3"
    assert times(0.314) == "0.31×" and times(None) == "—"


def test_the_stage_tables_show_every_run_the_medians_and_the_ratios():
    rounds = [[stage_run("threadline", 121.0, 600.0, {"stale_revision": 2}), stage_run("direct", 400.0, 280.0),
               stage_run("echo", 680.0, 125.0)]]
    report = {"agents": 64, "seconds": 15.0, "replicas": {"staging": 2, "gateway": 1}, **stage_report(rounds),
              "sweep": [{"agents": 1, "medians": {"echo": {"runs": 1, "callsPerSecond": 300.0, "p99Ms": 5.0,
                                                            "errors": 0}}}]}
    text = rendered(*stage_tables(report))
    assert "64 agents, 15 s per run (processes: gateway=1, staging=2)" in text
    assert "2 (stale_revision 2)" in text
    assert "threadline/direct" in text and "0.30×" in text and "2.14×" in text
    assert "threadline/echo" in text and "0.18×" in text
    assert "by number of agents" in text and "300.0" in text


def test_the_scale_table_shows_each_size_beside_its_reference_with_the_ratios_and_the_edge_rates():
    sizes = with_scale_ratios([
        {"claims": 100, "referenceClaims": 100, "summaryMs": 12.6, "referenceSummaryMs": 12.6,
         "claimsScopeMs": 23.0, "referenceClaimsScopeMs": 23.0, "decisionMs": 30.0, "referenceDecisionMs": 30.0,
         "fillRate": 9.8},
        {"claims": 3000, "referenceClaims": 100, "summaryMs": 23.0, "referenceSummaryMs": 12.6,
         "claimsScopeMs": 73.0, "referenceClaimsScopeMs": 23.0, "decisionMs": 70.0, "referenceDecisionMs": 35.0,
         "fillRate": 3.6},
    ])
    report = {"claimsPerCycle": 4, "sizes": sizes,
              "edgeRates": {"claims": 300, "first": 9.5, "last": 3.4, "lastOverFirst": 0.36}}
    text = rendered(*scale_tables(report))
    assert "a fresh 100-claim case" in text
    assert "3000" in text and "23.0 (12.6)" in text and "1.83×" in text and "3.17×" in text
    assert "70.0 (35.0)" in text and "2.00×" in text and "0.37×" in text
    assert "first 300" in text and "9.50" in text and "last 300" in text and "0.36×" in text


def test_the_agents_table_gives_each_outcome_its_share():
    report = {"agents": 8, "think": 1.5, "seconds": 25.0, "reviewers": 2, "stageCalls": 128, "stored": 50,
              "stale": 78, "replayed": 0, "other": 0, "otherKinds": {}, "repeats": {"stored": 3},
              "reviewing": {"decisions": 50, "refused": 4}}
    text = rendered(agents_table(report))
    assert "refused as stale" in text and "60.9%" in text and "39.1%" in text
    assert "reviewers' decisions" in text and "reviewers' refusals" in text
    assert "identical repeats stored" in text


def test_the_bench_stages_arguments_the_spec_schema_accepts_and_anchors_answer_like_threadline():
    stage_claims = next(t for t in spec_tools() if t.name == "stage_claims")
    arguments = stage_claims_args("bench-stage-abc-1", 3, ["c1-a0-k0-0", "c1-a0-k0-1"], ["bench-stage-abc-1-s0"])
    validate_arguments(stage_claims, arguments)
    answer = staged_answer(arguments, "0b0d9a4e-7c1e-4a43-9d2a-9d7d0b9b7a10")
    assert answer["pinnedRevision"] == 3 and [i["itemId"] for i in answer["items"]] == ["c1-a0-k0-0", "c1-a0-k0-1"]
    assert {"proposalId", "pinnedRevision", "workspaceRevision"} <= set(answer)


def test_only_the_benchs_own_scratch_tables_reach_sql():
    assert checked("threadline_bench_0a1b2c3d") == "threadline_bench_0a1b2c3d"
    assert scratch_table_ddl("threadline_bench_x1").startswith("CREATE TABLE threadline_bench_x1 (")
    for name in ("proposals", "threadline_bench_x; DROP TABLE cases", "threadline_bench_"):
        with pytest.raises(ValueError):
            checked(name)


def test_the_plot_draws_calls_and_p99_against_agents(tmp_path):
    from services.cli.bench.plot import draw, series

    sweep = [{"agents": a, "medians": {t: {"runs": 1, "callsPerSecond": rate * a ** 0.5, "p99Ms": 2.0 * a,
                                           "errors": 0} for t, rate in (("threadline", 80), ("echo", 400))}}
             for a in (1, 16, 64)]
    assert series(sweep, "threadline", "callsPerSecond") == ([1, 16, 64], [80.0, 320.0, 640.0])
    assert series(sweep, "direct", "p99Ms") == ([], [])
    path = draw(sweep, tmp_path / "plot.png", "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_replicas_are_counted_per_service_from_runtime_json():
    runtime = {"services": {"gateway": {}, "gateway-2": {}, "staging": {}, "staging-2": {}, "staging-3": {},
                            "thesis-delta": {}, "thesis-delta-2": {}, "relay": {}}}
    assert replicas(runtime) == {"gateway": 2, "staging": 3, "thesis-delta": 2, "relay": 1}
    assert replicas({"httpUrl": "http://127.0.0.1:8700"}) is None
