"""How the review page prints what it shows people: times with their zone, and agent-supplied records
without the frame markers agents need (the page marks them with a box instead; autoescaping still applies)."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.untrusted import unframe


def when(value: object) -> str:
    """An ISO time as `2026-11-01 10:32:05 UTC`: in UTC, the zone written out (naive times are UTC)."""
    if not value:
        return ""
    try:
        moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    moment = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def grounding_text(value: dict | None) -> str:
    """A claim's grounding as `primary · 2 origins`."""
    if not value:
        return ""
    origins = value.get("independentOrigins", 0)
    return f"{value.get('grounding')} · {origins} origin{'' if origins == 1 else 's'}"


FILTERS = {"when": when, "unframed": unframe}
