"""Rules of reading the ledger back at a revision: which revisions a case has, and a record's status then. Pure."""

from __future__ import annotations

from shared.errors import InvalidArgument

ACTIVE = "active"


def check_as_of(as_of: int, revision: int, field: str = "asOf") -> None:
    """A case can be read at any revision from 0 to the one it has now."""
    if as_of < 0 or as_of > revision:
        raise InvalidArgument(
            f"{field} {as_of} is not a revision of this case: it has revisions 0 to {revision}",
            field=field, hint=f"give {field} between 0 and {revision}, or leave it out for the case as it is now")


def check_range(start: int, end: int, revision: int) -> None:
    """A diff runs from an earlier revision to a later one (or the same), both revisions of the case."""
    problems = []
    for field, value in (("from", start), ("to", end)):
        if value < 0 or value > revision:
            problems.append({"field": field, "message": f"{value} is not a revision of this case (0 to {revision})",
                             "hint": f"give {field} between 0 and {revision}"})
    if not problems and start > end:
        problems.append({"field": "from", "message": f"from {start} is after to {end}",
                         "hint": "give the earlier revision as from and the later one as to"})
    if problems:
        first = problems[0]
        raise InvalidArgument(f"{first['field']}: {first['message']}", field=first["field"], hint=first["hint"],
                              problems=problems)


def status_at(status: str, ended_revision: int | None, revision: int) -> str:
    """A record's status at `revision`: active until the revision that retired or superseded it."""
    return status if ended_revision is not None and ended_revision <= revision else ACTIVE
