"""A query parameter the route does not take is refused, not ignored: `?asof=3` read as no `asOf` at all would
answer with the case as it is now, as if it were the case at revision 3."""

from __future__ import annotations

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from shared import problems
from shared.errors import InvalidArgument


def _taken(route: APIRoute) -> tuple[str, ...]:
    """The query parameters a route reads, its dependencies' included, by the names callers send."""
    names: list[str] = []
    pending: list[Dependant] = [route.dependant]
    while pending:
        dependant = pending.pop()
        names += [field.alias for field in dependant.query_params if field.alias not in names]
        pending += dependant.dependencies
    return tuple(sorted(names, key=str.lower))


def refuse_unknown_query(request: Request) -> None:
    """Every query parameter the request carries is one its route takes (checked once the caller is known, so a
    stranger is told to authenticate, not which parameters there are)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.query_params:
        return
    taken = _taken(route)
    unknown = [name for name in dict.fromkeys(request.query_params.keys()) if name not in taken]
    if not unknown:
        return
    hint = f"this route takes {', '.join(taken)}" if taken else "this route takes no query parameters"
    raise InvalidArgument.of([problems.Problem(_field(name), "is not a parameter of this route",
                                               _closest(name, taken) or hint)
                              for name in unknown[:problems.MAX_PROBLEMS]])


def _field(name: str) -> str:
    return name if len(name) <= problems.EXCERPT_CHARS else f"{name[:problems.EXCERPT_CHARS]}…"


def _closest(name: str, taken: tuple[str, ...]) -> str | None:
    """`asof` or `as_of` for `asOf`: the parameter meant, when only case or underscores differ."""
    folded = name.replace("_", "").replace("-", "").lower()
    meant = next((known for known in taken if known.lower() == folded), None)
    return f"did you mean {meant}? (names are case-sensitive)" if meant else None
