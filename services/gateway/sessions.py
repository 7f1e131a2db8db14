"""Review UI sessions: the cookie holds a random session id; the session itself is stored, expiring and revocable.

Only the id's SHA-256 digest is stored, next to the token the reviewer signed in with: revoking that token,
signing out, or the session's age ends it, and the bearer token itself never reaches the browser again.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from sqlalchemy import delete, func, insert, or_, update

from services.gateway.auth import Principal, digest
from shared.db.session import Database
from shared.db.tables import ui_sessions

SESSION_LIFETIME = timedelta(hours=12)


class UiSessions:
    def __init__(self, db: Database, lifetime: timedelta = SESSION_LIFETIME) -> None:
        self.db = db
        self.lifetime = lifetime

    async def open(self, principal: Principal) -> str:
        """A new session for the signed-in reviewer; the id returned is what the cookie holds."""
        session_id = secrets.token_urlsafe(32)
        async with self.db.transaction() as connection:
            # The same reviewer's ended sessions go as a new one starts: the table holds live ones only.
            await connection.execute(delete(ui_sessions).where(
                ui_sessions.c.token_id == principal.token_id,
                or_(ui_sessions.c.expires_at < func.now(), ui_sessions.c.revoked_at.is_not(None))))
            await connection.execute(insert(ui_sessions).values(
                session_hash=digest(session_id), token_id=principal.token_id,
                expires_at=func.now() + self.lifetime))
        return session_id

    async def principal(self, session_id: str) -> Principal | None:
        """Who a live session belongs to: none once it expired, was closed, or its token was revoked."""
        async with self.db.connection() as connection:
            row = await connection.fetchrow(
                "SELECT t.token_id::text AS token_id, t.name, t.role FROM ui_sessions s "
                "JOIN api_tokens t ON t.token_id = s.token_id "
                "WHERE s.session_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now() "
                "AND t.revoked_at IS NULL", digest(session_id))
        return Principal(row["token_id"], row["name"], row["role"]) if row else None

    async def close(self, session_id: str) -> None:
        async with self.db.transaction() as connection:
            await connection.execute(
                update(ui_sessions)
                .where(ui_sessions.c.session_hash == digest(session_id), ui_sessions.c.revoked_at.is_(None))
                .values(revoked_at=func.now()))
