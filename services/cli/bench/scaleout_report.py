"""`bench scaleout`'s tables and plot: each sweep's points, each doubling's efficiency, the bottleneck."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from services.cli.bench.plot import doubling_axes
from services.cli.bench.report import figure, times
from services.cli.bench.scaleout_plan import PlanError, is_replica_of

COLOURS = {"staging": "#c0392b", "gateway": "#2471a3", "relay": "#27ae60", "projection": "#8e44ad"}


def quota_table(report: dict[str, Any]) -> Table:
    quotas = report["quotas"]
    table = Table(title=f"bench scaleout: CPU quotas (cgroup cpu.cfs_quota_us) on {report['cores']} cores; "
                        f"{report['agents']} agents over {report['cases']} cases, {report['seconds']:g} s per "
                        f"window; the other services held at {report['heldAt']} replicas{held_note(report)}",
                  title_justify="left")
    for column in ("process", "cores each"):
        table.add_column(column, justify="left" if column == "process" else "right")
    table.add_row("each service replica and `up`", f"{quotas['service']:g}")
    for name in ("postgres", "nats-server", "load"):
        table.add_row("load generator (the bench)" if name == "load" else name, f"{quotas[name]:g}")
    table.add_row("all together, largest point", f"{report['largestTotalQuota']:g}")
    return table


def held_note(report: dict[str, Any]) -> str:
    held = report.get("held") or {}
    return f" ({', '.join(f'{name} at {n}' for name, n in held.items())})" if held else ""


def sweep_table(report: dict[str, Any]) -> Table:
    table = Table(title="replicas doubled, one service at a time", title_justify="left")
    for column in ("service", "replicas", "calls/s", "p99 ms", "events/s", "projected/s", "capacity events/s",
                   "whole backlog/s", "speedup", "efficiency", "bottleneck (CPU / quota)", "its own CPU / quota"):
        table.add_column(column, justify="left" if column in ("service", "bottleneck (CPU / quota)") else "right")
    for sweep in report["sweeps"]:
        doublings = {d["to"]: d for d in sweep["doublings"]}
        for point in sweep["points"]:
            doubling = doublings.get(point["replicas"], {})
            capacity = point.get("capacity") or {}
            table.add_row(sweep["service"], str(point["replicas"]), figure(point["callsPerSecond"]),
                          figure(point["p99Ms"], digits=0), figure(point["eventsPerSecond"]),
                          figure(point["projectedPerSecond"]), figure(capacity.get("eventsPerSecond")),
                          figure(capacity.get("wholeBacklogPerSecond")), times(doubling.get("speedup")), figure(doubling.get("efficiency"), digits=2),
                          f"not measured: {point['failed']}" if point.get("failed")
                          else f"{point['bottleneck']} {point['cpuShare'][point['bottleneck']]:.0%}",
                          own_share(point))
    return table


def own_share(point: dict[str, Any]) -> str:
    """The swept service's replicas' CPU over their quota (in the capacity window for relay and projection)."""
    shares = (point.get("capacity") or point).get("cpuShare", {})
    mine = [v for name, v in shares.items() if is_replica_of(name, point["service"])]
    return " ".join(f"{v:.0%}" for v in mine) or "—"


def summary_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for sweep in report["sweeps"]:
        steps = ", ".join(f"{d['from']}→{d['to']} {times(d['speedup'])} (efficiency {figure(d['efficiency'], digits=2)}"
                          f"{_whole_backlog(d)}, calls/s {_signed(d['callsChange'])}{_not_bottleneck(d)})"
                          for d in sweep["doublings"])
        lines.append(f"{sweep['service']} ({sweep['measure']}): {steps}")
    before, after = report["machineBefore"], report["machineAfter"]
    lines.append(f"load average before {before['loadAverage1m']}, after {after['loadAverage1m']} "
                 f"({report['cores']} cores)")
    return lines


def _whole_backlog(doubling: dict[str, Any]) -> str:
    """Beside the relay's speedup of summed partition rates: that of the whole backlog over the whole drain."""
    speedup = doubling.get("wholeBacklogSpeedup")
    return "" if speedup is None else f", whole backlog {times(speedup)}"


def _not_bottleneck(doubling: dict[str, Any]) -> str:
    """Beside a doubling of a service that was not the bottleneck at either point: which group was."""
    if doubling.get("sweptIsBottleneck", True) or not all(doubling.get("bottlenecks") or [None]):
        return ""
    return f"; not the bottleneck: {' then '.join(dict.fromkeys(doubling['bottlenecks']))}"


def _signed(change: float | None) -> str:
    return "—" if change is None else f"{change:+.0%}"


NO_MATPLOTLIB = "--plot needs matplotlib: pip install 'threadline[bench]' (make bench does)"


def check_plot(path: Path) -> None:
    """Refuse a plot that could not be drawn before a run of many minutes starts: matplotlib must import and the
    file must be writable (its folder is made, as draw() would; a file made only to try is removed again)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlanError(NO_MATPLOTLIB) from None
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab"):
            pass
    except OSError as error:
        raise PlanError(f"--plot {path}: cannot write it ({error.strerror or error})") from None
    if not existed:
        path.unlink()


def draw(report: dict[str, Any], path: Path) -> Path:
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError(NO_MATPLOTLIB) from None
    matplotlib.use("Agg")
    from matplotlib import pyplot

    from services.cli.bench.scaleout import throughput

    figure_, (speedups, calls) = pyplot.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    counts: set[int] = set()
    for sweep in report["sweeps"]:
        points = [(p["replicas"], throughput(p), p["callsPerSecond"]) for p in sweep["points"]]
        base = points[0][1]
        style = {"color": COLOURS.get(sweep["service"]), "marker": "o", "label": f"{sweep['service']} "
                 f"({sweep['measure']})"}
        if base:
            speedups.plot([r for r, _, _ in points], [(t or 0) / base for _, t, _ in points], **style)
        calls.plot([r for r, _, _ in points], [c or 0 for _, _, c in points], **{**style, "label": sweep["service"]})
        counts.update(r for r, _, _ in points)
    ticks = sorted(counts)
    speedups.plot(ticks, ticks, color="#7f8c8d", linestyle="--", label="ideal")
    for axes, label in ((speedups, "throughput / throughput at 1 replica"), (calls, "stage_claims calls/s")):
        doubling_axes(axes, ticks, "replicas of the service swept (the others held)", label, legend_size="small")
    quotas = report["quotas"]
    figure_.suptitle(f"bench scaleout: {quotas['service']:g} cores per service process, PostgreSQL "
                     f"{quotas['postgres']:g}, NATS {quotas['nats-server']:g}, load {quotas['load']:g} "
                     f"({report['cores']} cores)")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure_.savefig(path, dpi=110)
    pyplot.close(figure_)
    return path
