"""The arithmetic of the benchmarks, free of I/O: percentiles, medians, ratios, round orders and rates."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

TARGETS = ("threadline", "direct", "echo")
RATIOS = (("threadline", "direct"), ("threadline", "echo"))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank q-quantile (0 ≤ q ≤ 1) of the values; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def round_order(round_index: int, targets: Sequence[str] = TARGETS) -> list[str]:
    """Targets in the order one round measures them: reversed every other round, so drift hits all alike."""
    return list(targets) if round_index % 2 == 0 else list(reversed(targets))


@dataclass
class Run:
    """One target measured once: the latency of each call answered, and what failed."""

    target: str
    agents: int
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    client_cpu: float | None = None

    def record(self, latency_ms: float, error: str | None = None) -> None:
        if error is None:
            self.latencies_ms.append(latency_ms)
        else:
            self.errors[error] += 1

    @property
    def calls_per_second(self) -> float | None:
        return len(self.latencies_ms) / self.seconds if self.seconds > 0 else None

    def summary(self) -> dict[str, Any]:
        """Calls/s and percentiles count only calls answered without error; errors are counted apart."""
        return {
            "target": self.target,
            "agents": self.agents,
            "calls": len(self.latencies_ms),
            "seconds": rounded(self.seconds),
            "callsPerSecond": rounded(self.calls_per_second, 1),
            "p50Ms": rounded(percentile(self.latencies_ms, 0.50), 1),
            "p99Ms": rounded(percentile(self.latencies_ms, 0.99), 1),
            "errors": sum(self.errors.values()),
            "errorKinds": dict(self.errors),
            "clientCpu": rounded(self.client_cpu),
        }


def medians(runs: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per target, the median calls/s, p50 and p99 of its runs and the sum of their errors."""
    by_target: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_target.setdefault(run["target"], []).append(run)
    return {
        target: {
            "runs": len(measured),
            "callsPerSecond": rounded(median(r["callsPerSecond"] for r in measured), 1),
            "p50Ms": rounded(median(r["p50Ms"] for r in measured), 1),
            "p99Ms": rounded(median(r["p99Ms"] for r in measured), 1),
            "errors": sum(r["errors"] for r in measured),
            **({"cpuMsPerCall": median_cpu(measured)} if any(r.get("cpuMsPerCall") for r in measured) else {}),
        }
        for target, measured in by_target.items()
    }


def median_cpu(runs: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Per process, the median of its CPU ms per call over the runs that measured it."""
    names = dict.fromkeys(name for r in runs for name in (r.get("cpuMsPerCall") or {}))
    return {name: rounded(median(r["cpuMsPerCall"].get(name) for r in runs if r.get("cpuMsPerCall")))
            for name in names}


def ratios(summary: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """threadline/direct and threadline/echo of calls/s (higher is better) and of p99 (lower is better)."""
    out: dict[str, dict[str, float | None]] = {}
    for numerator, denominator in RATIOS:
        if numerator in summary and denominator in summary:
            top, bottom = summary[numerator], summary[denominator]
            out[f"{numerator}/{denominator}"] = {
                "callsPerSecond": rounded(ratio(top["callsPerSecond"], bottom["callsPerSecond"])),
                "p99Ms": rounded(ratio(top["p99Ms"], bottom["p99Ms"])),
            }
    return out


def round_ratios(rounds: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, float | None]]:
    """Each round's own threadline/direct and threadline/echo calls/s: pairs measured minutes apart at most."""
    out = []
    for runs in rounds:
        by_target = {r["target"]: r for r in runs}
        out.append({
            f"{n}/{d}": rounded(ratio(by_target[n]["callsPerSecond"], by_target[d]["callsPerSecond"]))
            for n, d in RATIOS if n in by_target and d in by_target
        })
    return out


def stage_report(rounds: Sequence[Sequence[dict[str, Any]]]) -> dict[str, Any]:
    """The rounds, each target's medians over them, and the ratios of those medians."""
    summary = medians(run for runs in rounds for run in runs)
    return {"rounds": [list(runs) for runs in rounds], "medians": summary, "ratios": ratios(summary),
            "roundRatios": round_ratios(rounds)}


def parse_counts(text: str) -> list[int]:
    """'1,16,64' → [1, 16, 64]: positive, distinct, ascending."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"{text!r} is not a comma-separated list of whole numbers") from None
    if not counts or counts[0] < 1:
        raise ValueError(f"{text!r} must list positive whole numbers")
    return counts


def scale_sizes(steps: Sequence[int], claims: int) -> list[int]:
    """The sizes a scale run reports at: the steps below the final size, then the final size."""
    return sorted({s for s in steps if 0 < s < claims} | {claims})


@dataclass(frozen=True)
class Cycle:
    """One stage + accept cycle of a scale run: the claims in the case after it, and how long it took."""

    claims: int
    seconds: float
    decision_ms: float


def fill_rate(cycles: Sequence[Cycle]) -> float | None:
    """Cycles per second of fill time (the probes between sizes are not fill time)."""
    spent = sum(c.seconds for c in cycles)
    return len(cycles) / spent if spent > 0 else None


def edge_rates(cycles: Sequence[Cycle], window: int) -> dict[str, Any]:
    """The fill rate of the first and the last `window` claims, and last/first."""
    if not cycles:
        return {"claims": window, "first": None, "last": None, "lastOverFirst": None}
    total = cycles[-1].claims
    first = fill_rate([c for c in cycles if c.claims <= window])
    last = fill_rate([c for c in cycles if c.claims > total - window])
    return {"claims": window, "first": rounded(first), "last": rounded(last),
            "lastOverFirst": rounded(ratio(last, first))}


SCALE_MEASURES = ("summaryMs", "claimsScopeMs", "decisionMs")


def reference_name(measure: str) -> str:
    """The name of the reference case's figure for a scale measure: `summaryMs` → `referenceSummaryMs`."""
    return f"reference{measure[0].upper()}{measure[1:]}"


def with_scale_ratios(checkpoints: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each size's measures with their ratio (`…Ratio`) to the reference case's, taken in the same moments
    (`referenceSummaryMs`, …); the fill rate's to the first size's."""
    if not checkpoints:
        return []
    first = checkpoints[0]
    out = []
    for point in checkpoints:
        extra = {f"{m}Ratio": rounded(ratio(point[m], point.get(reference_name(m))))
                 for m in SCALE_MEASURES}
        out.append({**point, **extra, "fillRateRatio": rounded(ratio(point["fillRate"], first["fillRate"]))})
    return out


OUTCOMES = ("stored", "stale", "replayed", "other")


def outcome_of(result: dict[str, Any] | None, error_code: str | None) -> str:
    """How a stage call ended: stored, refused as stale, replayed (an identical repeat), or other."""
    if error_code == "stale_revision":
        return "stale"
    if error_code is not None:
        return "other"
    return "replayed" if (result or {}).get("replayed") is True else "stored"


def agents_report(outcomes: Counter[str], other: Counter[str]) -> dict[str, Any]:
    calls = sum(outcomes[o] for o in OUTCOMES)
    return {
        "stageCalls": calls,
        **{o: outcomes[o] for o in OUTCOMES},
        "otherKinds": dict(other),
        "staleShare": rounded(ratio(outcomes["stale"], calls), 3),
    }
