"""The gateway's connections (PostgreSQL, NATS) and the stores on them, shared by its HTTP and stdio transports."""

from __future__ import annotations

from dataclasses import dataclass

from faststream.nats import NatsBroker

from services.gateway.auth import TokenStore
from services.gateway.discoveries import Discoveries
from services.gateway.sessions import UiSessions
from shared.db.session import Database
from shared.messaging import ServiceClient, create_broker, stop_broker
from shared.nats_auth import GATEWAY
from shared.settings import Settings
from shared.subjects import Subjects


@dataclass
class Gateway:
    settings: Settings
    db: Database
    broker: NatsBroker
    client: ServiceClient
    tokens: TokenStore
    discoveries: Discoveries
    sessions: UiSessions

    @classmethod
    def connect(cls, settings: Settings) -> Gateway:
        db = Database.from_url(
            settings.resolved_database_url(), pool_size=settings.db_pool_size, application_name="threadline-gateway",
            transaction_pooler=settings.database_transaction_pooler,
        )
        broker = create_broker(settings, role=GATEWAY, name="threadline-gateway")
        client = ServiceClient(broker, Subjects(settings.nats_prefix), settings.request_timeout, presume_running=True)
        return cls(settings, db, broker, client, TokenStore(db, settings.auth_cache_seconds),
                   Discoveries(db, settings.auth_cache_seconds), UiSessions(db))

    async def start(self) -> None:
        await self.broker.start()

    async def stop(self) -> None:
        await stop_broker(self.broker)
        await self.db.dispose()
