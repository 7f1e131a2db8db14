"""The `threadline bench scaleout` command (registered on `threadline bench` by services/cli/main.py)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer


def scaleout(
    quota: Annotated[float | None, typer.Option(help="Cores each service process may use (a cgroup's "
                                                     "cpu.cfs_quota_us); default: the most at which every quota and "
                                                     "the load generator fit the machine's cores.")] = None,
    service: Annotated[str | None, typer.Option(help="Sweep only this service: staging, gateway, relay or "
                                                     "projection (default: each in turn).")] = None,
    max_replicas: Annotated[int, typer.Option(help="Double the swept service's replicas up to this many; the "
                                                   "others are held at it.")] = 4,
    hold: Annotated[str | None, typer.Option(help="Hold services at fewer replicas, e.g. staging=1: that service "
                                                  "is then the bottleneck, and the sweep shows what doubling one "
                                                  "that is not does to throughput (gateway, staging, relay, "
                                                  "projection, review).")] = None,
    agents: Annotated[int, typer.Option(help="Concurrent agents staging (official MCP client).")] = 64,
    seconds: Annotated[float, typer.Option(help="Seconds per measured window.")] = 15.0,
    cases: Annotated[int, typer.Option(help="Cases the agents are spread over.")] = 16,
    rounds: Annotated[int, typer.Option(help="Measured windows per point, one after another on the same system; "
                                             "a point's figures are its median window's.")] = 3,
    plot: Annotated[Path | None, typer.Option("--plot", help="Draw speedup and calls/s against replicas (PNG).")] = None,
    cgroup_root: Annotated[Path, typer.Option(help="Where the cgroup v1 controllers are mounted.")] = Path(
        "/sys/fs/cgroup"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout (progress stays on "
                                                         "stderr).")] = False,
) -> None:
    """Each service's replicas doubled (1, 2, 4) with every process confined to a CPU quota: calls/s, events/s,
    p99, the efficiency of each doubling and where the bottleneck sits. Starts its own system (embedded servers)."""
    from services.cli.bench.cgroups import CgroupError, check_writable
    from services.cli.bench.scaleout_plan import PlanError, make_plan, parse_hold

    try:
        plan = make_plan(quota=quota, service=service, max_replicas=max_replicas, agents=agents, seconds=seconds,
                         cases=cases, rounds=rounds, cgroup_root=cgroup_root, hold=parse_hold(hold))
        if plot is not None:
            from services.cli.bench.scaleout_report import check_plot

            check_plot(plot)
        check_writable(cgroup_root)
    except (PlanError, CgroupError) as error:
        typer.secho(f"error: {error}", fg="red", err=True)
        raise typer.Exit(2) from None
    # Only a run that will start needs the load generator and the report (the MCP client, matplotlib: seconds of
    # imports), so a refusal comes at once.
    from rich.console import Console

    from services.cli.bench.scaleout import run_scaleout
    from services.cli.bench.scaleout_report import draw, quota_table, summary_lines, sweep_table
    from services.cli.running import run

    # Ctrl-C (even where the shell started the bench with SIGINT ignored) and a TERM both stop and clean up.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    console = Console(stderr=True)
    try:
        report = run(run_scaleout(plan, console))
    except KeyboardInterrupt:
        typer.secho("interrupted: every process and cgroup of the run was stopped and removed", fg="yellow",
                    err=True)
        raise typer.Exit(130) from None
    if plot is not None:
        report["plot"] = str(plot)
    # The figures first: a plot that fails now (a full disk, say) costs the picture, not the run.
    if as_json:
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        out = Console(width=None if sys.stdout.isatty() else 200)
        out.print(quota_table(report))
        out.print(sweep_table(report))
        for line in summary_lines(report):
            out.print(line)
    if plot is None:
        return
    try:
        draw(report, plot)
    except (OSError, RuntimeError) as error:
        typer.secho(f"error: the plot was not drawn: {error}", fg="red", err=True)
        raise typer.Exit(1) from None
    if not as_json:
        out.print(f"plot: {report['plot']}")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("scaleout")(scaleout)
