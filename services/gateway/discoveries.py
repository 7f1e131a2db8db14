"""Which case each agent most recently discovered with get_workspace: the gateway keeps it, in PostgreSQL.

Calls that name a case (`expectedCaseId`) act only on that case; the gateway tells the service which one
it is with the command. A short per-replica cache spares a lookup per call; a discovery made through
another replica reaches this one within the cache's lifetime (THREADLINE_AUTH_CACHE_SECONDS).
"""

from __future__ import annotations

import time

from shared.db.session import Database

CACHE_LIMIT = 10_000


class Discoveries:
    def __init__(self, db: Database, cache_seconds: float = 2.0) -> None:
        self.db = db
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, str | None]] = {}

    async def record(self, agent: str, case_id: str, revision: int) -> None:
        cached = self._cache.get(agent)
        if cached is not None and cached[1] == case_id and time.monotonic() - cached[0] < self.cache_seconds:
            return  # recorded moments ago: repeating get_workspace on one case writes nothing
        async with self.db.connection() as connection:
            await connection.execute(
                "INSERT INTO agent_discoveries (agent_name, case_id, revision) VALUES ($1, $2, $3) "
                "ON CONFLICT (agent_name) DO UPDATE SET case_id = $2, revision = $3, discovered_at = now()",
                agent, case_id, revision)
        self._remember(agent, case_id)

    async def of(self, agent: str) -> str | None:
        cached = self._cache.get(agent)
        if cached is not None and time.monotonic() - cached[0] < self.cache_seconds:
            return cached[1]
        async with self.db.connection() as connection:
            case_id = await connection.fetchval("SELECT case_id FROM agent_discoveries WHERE agent_name = $1", agent)
        self._remember(agent, case_id)
        return case_id

    def _remember(self, agent: str, case_id: str | None) -> None:
        if len(self._cache) > CACHE_LIMIT:
            self._cache.clear()
        self._cache[agent] = (time.monotonic(), case_id)
