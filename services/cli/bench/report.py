"""The tables the benchmarks print at the end (rich), built from their JSON reports."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from services.cli.bench.stats import OUTCOMES, SCALE_MEASURES, reference_name
from shared.events import EventType


def figure(value: Any, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def times(value: float | None) -> str:
    return figure(value, "×", 2)


def stage_tables(report: dict[str, Any]) -> list[Table]:
    processes = ", ".join(f"{name}={count}" for name, count in sorted((report.get("replicas") or {}).items()))
    rounds = Table(title=f"bench stage: {report['agents']} agents, {report['seconds']:g} s per run"
                         + (f" (processes: {processes})" if processes else ""), title_justify="left")
    for column in ("round", "target", "calls/s", "p50 ms", "p99 ms", "errors", "bench CPU"):
        rounds.add_column(column, justify="left" if column == "target" else "right")
    for index, runs in enumerate(report["rounds"], start=1):
        for run in runs:
            rounds.add_row(str(index), run["target"], figure(run["callsPerSecond"]), figure(run["p50Ms"]),
                           figure(run["p99Ms"]), _errors(run), figure(run["clientCpu"], digits=2))
    medians = Table(title="medians over the rounds", title_justify="left")
    for column in ("target", "calls/s", "p50 ms", "p99 ms", "errors"):
        medians.add_column(column, justify="left" if column == "target" else "right")
    for target, measured in report["medians"].items():
        medians.add_row(target, figure(measured["callsPerSecond"]), figure(measured["p50Ms"]),
                        figure(measured["p99Ms"]), str(measured["errors"]))
    ratios = Table(title="ratios of the medians (and each round's calls/s ratio)", title_justify="left")
    for column in ("ratio", "calls/s", "p99", "by round"):
        ratios.add_column(column, justify="left" if column == "ratio" else "right")
    for pair, measured in report["ratios"].items():
        by_round = " ".join(times(r.get(pair)) for r in report["roundRatios"])
        ratios.add_row(pair, times(measured["callsPerSecond"]), times(measured["p99Ms"]), by_round)
    tables = [rounds, medians, ratios, *cpu_table(report["medians"])]
    if report.get("sweep"):
        sweep = Table(title="by number of agents (medians)", title_justify="left")
        for column in ("agents", "target", "rounds", "calls/s", "p99 ms", "errors"):
            sweep.add_column(column, justify="left" if column == "target" else "right")
        for point in report["sweep"]:
            for target, measured in point["medians"].items():
                sweep.add_row(str(point["agents"]), target, str(measured["runs"]),
                              figure(measured["callsPerSecond"]), figure(measured["p99Ms"]), str(measured["errors"]))
        tables.append(sweep)
    return tables


def cpu_table(medians: dict[str, dict[str, Any]]) -> list[Table]:
    """CPU ms per call of every process, per target (medians over the rounds); none if nothing was measured."""
    measured = {target: m["cpuMsPerCall"] for target, m in medians.items() if m.get("cpuMsPerCall")}
    if not measured:
        return []
    table = Table(title="CPU ms per call, each process (medians over the rounds)", title_justify="left")
    table.add_column("process")
    for target in measured:
        table.add_column(target, justify="right")
    names = list(dict.fromkeys(name for cpu in measured.values() for name in cpu))
    for name in names:
        table.add_row(name, *(figure(cpu.get(name), digits=2) for cpu in measured.values()))
    table.add_row("total", *(figure(sum(v for v in cpu.values() if v is not None), digits=2)
                             for cpu in measured.values()))
    return [table]


def _errors(run: dict[str, Any]) -> str:
    if not run["errors"]:
        return "0"
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(run["errorKinds"].items()))
    return f"{run['errors']} ({kinds})"


def scale_tables(report: dict[str, Any]) -> list[Table]:
    reference = report["sizes"][0].get("referenceClaims") if report["sizes"] else None
    table = Table(title=f"bench scale: one case filled by stage + accept, {report['claimsPerCycle']} claims a cycle",
                  caption=f"(…) and ×: a fresh {reference}-claim case, timed turn about", caption_justify="left",
                  title_justify="left")
    columns = ("claims", "summary ms", "×", "scope=claims ms", "×", "decision ms", "×", "cycles/s", "× first")
    for column in columns:
        table.add_column(column, justify="right")
    for point in report["sizes"]:
        cells = [str(point["claims"])]
        for measure in SCALE_MEASURES:
            cells += [f"{figure(point[measure])} ({figure(point.get(reference_name(measure)))})",
                      times(point[f"{measure}Ratio"])]
        table.add_row(*cells, figure(point["fillRate"], digits=2), times(point["fillRateRatio"]))
    edges = report["edgeRates"]
    rates = Table(title="fill rate at both ends", title_justify="left")
    rates.add_column("claims", justify="left")
    rates.add_column("cycles/s", justify="right")
    rates.add_row(f"first {edges['claims']}", figure(edges["first"], digits=2))
    rates.add_row(f"last {edges['claims']}", figure(edges["last"], digits=2))
    rates.add_row("last/first", times(edges["lastOverFirst"]))
    return [table, rates]


def agents_table(report: dict[str, Any]) -> Table:
    table = Table(title=(f"bench agents: {report['agents']} agents, think {report['think']:g} s, "
                         f"{report['reviewers']} reviewers, {report['seconds']:g} s"), title_justify="left")
    table.add_column("stage calls")
    table.add_column("count", justify="right")
    table.add_column("share", justify="right")
    calls = report["stageCalls"]
    for outcome in OUTCOMES:
        share = f"{100 * report[outcome] / calls:.1f}%" if calls else "—"
        label = {"stale": "refused as stale", "replayed": "replayed (replayed: true)",
                 "other": "other errors"}.get(outcome, outcome)
        table.add_row(label, str(report[outcome]), share)
    table.add_row("all", str(calls), "")
    for kind, count in sorted(report["otherKinds"].items()):
        table.add_row(f"  other: {kind}", str(count), "")
    table.add_section()
    decided = report["reviewing"]
    table.add_row("reviewers' decisions", str(decided["decisions"]), "")
    table.add_row("reviewers' refusals", str(decided["refused"]), "")
    for outcome, count in sorted(report["repeats"].items()):
        table.add_row(f"identical repeats {outcome}", str(count), "")
    return table


def events_table(report: dict[str, Any]) -> Table:
    table = Table(title=f"bench events: commit → subscriber latency of {EventType.LEDGER_CHANGED.value}", title_justify="left")
    for column in ("phase", "decisions", "decisions/s", "p50", "p90", "p99", "max"):
        table.add_column(column, justify="left" if column == "phase" else "right")
    for phase in report["phases"]:
        table.add_row(phase["phase"], str(phase["decisions"]), figure(phase["decisionsPerSecond"]),
                      *(figure(phase[key], " ms", 2) for key in ("p50Ms", "p90Ms", "p99Ms", "maxMs")))
    return table
