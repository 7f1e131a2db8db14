"""Ids given by their first characters, as the review page and the CLI show them (8 of a UUID's 36).

A prefix covers one range of UUIDs, which an index reads in order; it names a record when exactly one
id in that range starts with it. No match is `not_found`, several are refused listing the candidates. Pure but for
`resolve`, which reads the range through the caller's own query.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence

from shared.errors import InvalidArgument, NotFound

LAYOUT = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"  # where a UUID's dashes stand
CANDIDATES_SHOWN = 10  # an ambiguous prefix is refused naming this many ids at most


def full_uuid(raw: str) -> str | None:
    """The UUID `raw` spells out whole (any case, with its dashes), or None."""
    if len(raw) != len(LAYOUT):
        return None
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        return None


def uuid_range(prefix: str) -> tuple[str, str] | None:
    """The least and the greatest UUID that start with `prefix`, or None when no UUID can."""
    text = prefix.lower()
    if not text or len(text) > len(LAYOUT):
        return None
    for ch, slot in zip(text, LAYOUT, strict=False):
        if (slot == "-") != (ch == "-") or (ch != "-" and ch not in "0123456789abcdef"):
            return None
    digits = text.replace("-", "")
    return str(uuid.UUID(digits.ljust(32, "0"))), str(uuid.UUID(digits.ljust(32, "f")))


def the_one(prefix: str, candidates: Sequence[str], *, what: str, field: str, hint: str) -> str:
    """The one id among `candidates` (those in the prefix's range, up to CANDIDATES_SHOWN + 1) that starts
    with `prefix`; a refusal naming the field when none or several do."""
    matching = [c for c in candidates if c.startswith(prefix.lower())]
    if not matching:
        raise NotFound(f"there is no {what} {prefix!r}", field=field, hint=hint)
    if len(matching) > 1:
        shown = ", ".join(matching[:CANDIDATES_SHOWN])
        more = " and more" if len(matching) > CANDIDATES_SHOWN else ""
        raise InvalidArgument(
            f"{prefix!r} is the start of several {what} ids: {shown}{more}", field=field,
            hint="give more of the id's characters, enough to name one")
    return matching[0]


IdsBetween = Callable[[str, str, int], Awaitable[Sequence[str]]]  # (low, high, limit) -> the ids between, in order


async def resolve(raw: str, ids_between: IdsBetween, *, what: str, field: str, hint: str,
                  missing: str | None = None) -> str:
    """The whole id `raw` names: itself when spelled out, else the one id it is a unique prefix of; refused when it
    starts none or several, and `not_found` (with `missing` as its message, if given) when no UUID can start with it."""
    if whole := full_uuid(raw):
        return whole
    span = uuid_range(raw)
    if span is None:
        raise NotFound(missing or f"there is no {what} {raw!r}", field=field, hint=hint)
    return the_one(raw, await ids_between(*span, CANDIDATES_SHOWN + 1), what=what, field=field, hint=hint)
