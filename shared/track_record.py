"""Scoring resolved predictions (docs/review-checks.md): each confidence stated as a probability that the
prediction comes true; the Brier score is the mean of (probability - outcome)², outcome 1 for true and 0 for
false (void resolutions are not scored); the calibration table says, per confidence, how many resolved and
how many came true."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

PROBABILITY = {"established": 0.95, "supported": 0.75, "disputed": 0.5, "unknown": 0.5, "contradicted": 0.1}
SCORED = ("true", "false")


def scored(resolved: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (confidence, outcome) pairs that count: true or false, never void."""
    return [(confidence, outcome) for confidence, outcome in resolved if outcome in SCORED]


def brier(resolved: Iterable[tuple[str, str]]) -> float | None:
    pairs = scored(resolved)
    if not pairs:
        return None
    total = sum((PROBABILITY[confidence] - (1.0 if outcome == "true" else 0.0)) ** 2 for confidence, outcome in pairs)
    return round(total / len(pairs), 6)


def calibration(resolved: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """One row per confidence that has a scored prediction, strongest stated probability first."""
    rows: dict[str, dict[str, Any]] = {}
    for confidence, outcome in scored(resolved):
        row = rows.setdefault(confidence, {"confidence": confidence, "probability": PROBABILITY[confidence],
                                           "n": 0, "true": 0})
        row["n"] += 1
        row["true"] += outcome == "true"
    for row in rows.values():
        row["observed"] = round(row["true"] / row["n"], 6)
    return sorted(rows.values(), key=lambda r: (-r["probability"], r["confidence"]))
