"""`bench stage --plot FILE`: calls/s and p99 against the number of agents, one line per target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.cli.bench.stats import TARGETS

COLOURS = {"threadline": "#c0392b", "direct": "#2471a3", "echo": "#7f8c8d"}


def series(sweep: list[dict[str, Any]], target: str, measure: str) -> tuple[list[int], list[float]]:
    points = [(p["agents"], p["medians"][target][measure]) for p in sweep
              if target in p["medians"] and p["medians"][target][measure] is not None]
    return [a for a, _ in points], [v for _, v in points]


def doubling_axes(axes: Any, ticks: list[int], xlabel: str, ylabel: str, legend_size: str | None = None) -> None:
    """Axes over doublings (1, 2, 4, …) on a log-2 scale, from zero up, with a grid and a legend."""
    axes.set_xscale("log", base=2)
    axes.set_xticks(ticks, [str(t) for t in ticks])
    axes.minorticks_off()
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=legend_size)


def draw(sweep: list[dict[str, Any]], path: Path, title: str) -> Path:
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("--plot needs matplotlib: pip install 'threadline[bench]' (make bench does)") from None
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (throughput, latency) = pyplot.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for target in TARGETS:
        style = {"color": COLOURS[target], "marker": "o", "label": target}
        throughput.plot(*series(sweep, target, "callsPerSecond"), **style)
        latency.plot(*series(sweep, target, "p99Ms"), **style)
    agents = sorted({p["agents"] for p in sweep})
    for axes, label in ((throughput, "stage_claims calls/s"), (latency, "p99 latency (ms)")):
        doubling_axes(axes, agents, "concurrent agents (official MCP client)", label)
    figure.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return path
