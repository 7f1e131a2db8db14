"""Which case each agent most recently discovered with get_workspace: the gateway keeps it, in PostgreSQL.

Calls that name a case (`expectedCaseId`) act only on that case; the gateway tells the service which one
it is with the command. A short per-replica cache spares a lookup per call; a discovery made through
another replica reaches this one within the cache's lifetime (THREADLINE_AUTH_CACHE_SECONDS).
"""

from __future__ import annotations

import time

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from shared.db.session import Database
from shared.db.tables import agent_discoveries

CACHE_LIMIT = 10_000


class Discoveries:
    def __init__(self, db: Database, cache_seconds: float = 2.0) -> None:
        self.db = db
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, str | None]] = {}

    async def record(self, agent: str, case_id: str, revision: int) -> None:
        statement = pg_insert(agent_discoveries).values(agent_name=agent, case_id=case_id, revision=revision)
        async with self.db.transaction() as connection:
            await connection.execute(statement.on_conflict_do_update(
                index_elements=[agent_discoveries.c.agent_name],
                set_={"case_id": case_id, "revision": revision, "discovered_at": func.now()},
            ))
        self._remember(agent, case_id)

    async def of(self, agent: str) -> str | None:
        cached = self._cache.get(agent)
        if cached is not None and time.monotonic() - cached[0] < self.cache_seconds:
            return cached[1]
        async with self.db.engine.connect() as connection:
            case_id = (await connection.execute(
                select(agent_discoveries.c.case_id).where(agent_discoveries.c.agent_name == agent)
            )).scalar_one_or_none()
        self._remember(agent, case_id)
        return case_id

    def _remember(self, agent: str, case_id: str | None) -> None:
        if len(self._cache) > CACHE_LIMIT:
            self._cache.clear()
        self._cache[agent] = (time.monotonic(), case_id)
