"""Which pages of the review UI a role may open: links to the others are not shown, and opening one
answers a page that says why (services/gateway/templates/forbidden.html), not a bare refusal."""

from __future__ import annotations

from services.gateway.auth import Principal
from shared.errors import Forbidden

# Pages (by path prefix) only some of the review roles may open, with what they are, for the refusal.
RESTRICTED: dict[str, tuple[tuple[str, ...], str]] = {
    "/ui/webhooks": (("admin",), "Webhooks (receivers of change events and their delivery logs)"),
}


def _rule(path: str) -> tuple[tuple[str, ...], str] | None:
    return next((rule for prefix, rule in RESTRICTED.items() if path == prefix or path.startswith(prefix + "/")),
                None)


def may_open(principal: Principal | None, path: str) -> bool:
    rule = _rule(path)
    return rule is None or (principal is not None and principal.role in rule[0])


class NotForYourRole(Forbidden):
    """A signed-in reviewer opened a page their role may not open."""

    def __init__(self, principal: Principal, path: str, roles: tuple[str, ...], what: str) -> None:
        needed = " or ".join(roles)
        super().__init__(f"{what} are for {needed} tokens; you are signed in as {principal.name} "
                         f"({principal.role})", hint=f"sign in with an {needed} token to open {path}")
        self.path, self.roles, self.what, self.principal = path, roles, what, principal


def require(principal: Principal, path: str) -> None:
    """Refuse, with a page that says why, a role that may not open `path`."""
    rule = _rule(path)
    if rule is not None and principal.role not in rule[0]:
        raise NotForYourRole(principal, path, *rule)
