"""Bearer tokens: issued once, stored as SHA-256 digests, revocable; roles decide what a caller may do."""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from shared import id_prefix
from shared.contracts import Actor
from shared.db.queries import ids_between
from shared.db.session import Database
from shared.db.tables import agents, api_tokens, cases
from shared.errors import Forbidden, InvalidArgument, NotFound, Unauthenticated
from shared.outage import outage

ROLES = ("agent", "reviewer", "admin", "subscriber")
TOKEN_PREFIX = "tl_"
TOKENS_HINT = "list them with threadline token list"


@dataclass(frozen=True)
class Principal:
    token_id: str
    name: str
    role: str

    def actor(self) -> Actor:
        return Actor(name=self.name, role=self.role, token_id=self.token_id)


def digest(token: str) -> bytes:
    # Tokens carry 256 random bits, so a fast digest is enough: nothing to brute-force.
    return hashlib.sha256(token.encode()).digest()


def new_token(role: str) -> str:
    """`tl_<role>_<256 random bits>`: the role is readable at a glance (and by secret scanners)."""
    return f"{TOKEN_PREFIX}{role}_{secrets.token_urlsafe(32)}"


def bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def a_token(*roles: str) -> str:
    """'an agent token', 'a reviewer or admin token': roles named with their article."""
    return f"{'an' if roles[0][0] in 'aeiou' else 'a'} {' or '.join(roles)} token"


def require_role(principal: Principal, *roles: str) -> None:
    if principal.role not in roles:
        raise Forbidden(
            f"{a_token(principal.role)} cannot do this; it needs {a_token(*roles)}",
            hint="ask an admin for a token with the right role",
        )


class TokenStore:
    """Issues, revokes and checks tokens (the gateway's own table), with a short lookup cache."""

    def __init__(self, db: Database, cache_seconds: float = 2.0) -> None:
        self.db = db
        self.cache_seconds = cache_seconds
        self._cache: dict[bytes, tuple[float, Principal | None]] = {}

    async def authenticate(self, authorization: str | None) -> Principal:
        token = bearer(authorization)
        if token is None:
            raise Unauthenticated(
                "missing bearer token", hint="send the header 'Authorization: Bearer <token>'"
            )
        key = digest(token)
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < self.cache_seconds:
            principal = cached[1]
        else:
            try:
                # One prepared statement on the plain pool: every agent call that misses the cache pays it.
                async with self.db.connection() as connection:
                    row = await connection.fetchrow(
                        "SELECT token_id::text AS token_id, name, role FROM api_tokens "
                        "WHERE token_hash = $1 AND revoked_at IS NULL", key)
            except Exception as error:
                if (unavailable := outage(error, "gateway")) is not None:
                    raise unavailable from error
                raise
            principal = Principal(row["token_id"], row["name"], row["role"]) if row else None
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now, principal)
        if principal is None:
            raise Unauthenticated("the bearer token is not valid (unknown or revoked)",
                                  hint="use a current token; an admin can issue a new one")
        return principal

    async def issue(self, *, role: str, name: str, created_by: str, case_id: str | None = None) -> dict[str, Any]:
        if role not in ROLES:
            raise InvalidArgument(f"unknown role {role!r}", field="role", hint=f"use one of: {', '.join(ROLES)}")
        if not name.strip() or len(name) > 100:  # blanks only: a name nobody can tell apart in `token list`
            raise InvalidArgument("name must be 1–100 characters, not blanks only", field="name",
                                  hint="name the agent or person")
        if case_id is not None and role != "agent":
            raise InvalidArgument("only agent tokens have an active case", field="caseId",
                                  hint="omit caseId for reviewer and admin tokens")
        token = new_token(role)
        token_id = str(uuid.uuid4())
        async with self.db.transaction() as connection:
            if case_id is not None:
                await _assign(connection, name, case_id)
            await connection.execute(
                insert(api_tokens).values(
                    token_id=token_id, name=name, role=role, token_hash=digest(token), created_by=created_by
                )
            )
        return {"token": token, "tokenId": token_id, "role": role, "name": name, "caseId": case_id}

    async def revoke(self, token_id: str) -> dict[str, Any]:
        """Revoke the token `token_id` names: its whole id, or a unique start of it as `token list` prints it."""
        async with self.db.transaction() as connection:
            whole = await id_prefix.resolve(token_id, partial(ids_between, connection, api_tokens.c.token_id),
                                            what="token", field="tokenId", hint=TOKENS_HINT)
            row = (
                await connection.execute(
                    update(api_tokens)
                    .where(api_tokens.c.token_id == whole)
                    .values(revoked_at=func.coalesce(api_tokens.c.revoked_at, func.now()))
                    .returning(api_tokens.c.token_id, api_tokens.c.name, api_tokens.c.revoked_at)
                )
            ).first()
        if row is None:
            raise NotFound(f"there is no token {token_id!r}", field="tokenId", hint=TOKENS_HINT)
        self._cache.clear()
        return {"tokenId": row.token_id, "name": row.name, "revokedAt": row.revoked_at.isoformat()}

    async def list(self) -> list[dict[str, Any]]:
        async with self.db.engine.connect() as connection:
            rows = await connection.execute(
                select(api_tokens.c.token_id, api_tokens.c.name, api_tokens.c.role, api_tokens.c.created_by,
                       api_tokens.c.created_at, api_tokens.c.revoked_at).order_by(api_tokens.c.created_at)
            )
            return [
                {
                    "tokenId": r.token_id,
                    "name": r.name,
                    "role": r.role,
                    "createdBy": r.created_by,
                    "createdAt": r.created_at.isoformat(),
                    "revokedAt": r.revoked_at.isoformat() if r.revoked_at else None,
                }
                for r in rows
            ]

    async def assign(self, agent_name: str, case_id: str) -> dict[str, Any]:
        async with self.db.transaction() as connection:
            await _assign(connection, agent_name, case_id)
        return {"agent": agent_name, "caseId": case_id}


async def _assign(connection: Any, agent_name: str, case_id: str) -> None:
    exists = (await connection.execute(select(cases.c.case_id).where(cases.c.case_id == case_id))).first()
    if exists is None:
        raise NotFound(f"there is no case {case_id!r}", field="caseId", hint="create the case first")
    statement = pg_insert(agents).values(name=agent_name, assigned_case_id=case_id)
    await connection.execute(
        statement.on_conflict_do_update(
            index_elements=[agents.c.name], set_={"assigned_case_id": case_id, "updated_at": func.now()}
        )
    )
