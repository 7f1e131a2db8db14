"""The schema the migrations build is the one the table definitions declare, and 0009 backfills closures."""

from __future__ import annotations

import uuid

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from shared.db.migrate import upgrade
from shared.db.session import create_engine
from shared.db.tables import metadata


async def test_the_migrations_build_exactly_the_declared_tables(servers):
    url = await servers.create_database()
    engine = create_engine(url, pool_size=1)
    try:
        await upgrade(engine)
        async with engine.connect() as connection:
            drift = await connection.run_sync(
                lambda sync: compare_metadata(MigrationContext.configure(sync), metadata))
        assert drift == [], f"the migrations and shared/db tables disagree: {drift}"
    finally:
        await engine.dispose()
        await servers.drop_database(url)


PROPOSALS = {  # proposal → each item's outcome (None: undecided)
    "pending": ["accepted", None],
    "accepted": ["accepted", "accepted"],
    "rejected": ["rejected"],
    "partially_accepted": ["rejected", "accepted"],
    "untouched": [None],
}


async def test_the_closures_migration_closes_each_proposal_already_fully_decided(servers):
    url = await servers.create_database()
    engine = create_engine(url, pool_size=1)
    ids = {name: str(uuid.uuid4()) for name in PROPOSALS}
    try:
        await upgrade(engine, "0008")
        async with engine.begin() as connection:
            await connection.execute(text(
                "INSERT INTO cases (case_id, title, question, created_by) VALUES ('c1', 't', 'q', 'x')"))
            for name, outcomes in PROPOSALS.items():
                await connection.execute(text(
                    "INSERT INTO proposals (proposal_id, case_id, kind, pinned_revision, agent_name, item_count) "
                    "VALUES (:p, 'c1', 'claims', 0, 'a', :n)"), {"p": ids[name], "n": len(outcomes)})
                for position, outcome in enumerate(outcomes):
                    await connection.execute(text(
                        "INSERT INTO proposal_items (proposal_id, item_id, position, payload) "
                        "VALUES (:p, :i, :n, '{}')"), {"p": ids[name], "i": f"i{position}", "n": position})
                    if outcome is None:
                        continue
                    decision = str(uuid.uuid4())
                    await connection.execute(text(
                        "INSERT INTO decisions (decision_id, proposal_id, case_id, reviewer, decided_at) "
                        "VALUES (:d, :p, 'c1', 'r', timestamptz '2026-01-01' + make_interval(mins => :n))"),
                        {"d": decision, "p": ids[name], "n": position})
                    await connection.execute(text(
                        "INSERT INTO item_decisions (proposal_id, item_id, decision_id, outcome) "
                        "VALUES (:p, :i, :d, :o)"), {"p": ids[name], "i": f"i{position}", "d": decision, "o": outcome})
        await upgrade(engine)
        async with engine.connect() as connection:
            closed = {r.proposal_id: (r.status, r.closed_at.minute) for r in await connection.execute(
                text("SELECT proposal_id::text, status, closed_at FROM closed_proposals"))}
        by_id = {ids[name]: name for name in PROPOSALS}
        assert {by_id[p]: status for p, (status, _) in closed.items()} == {
            "accepted": "accepted", "rejected": "rejected", "partially_accepted": "partially_accepted"}
        # Closed when the last of its items was decided.
        assert closed[ids["accepted"]][1] == 1 and closed[ids["rejected"]][1] == 0
    finally:
        await engine.dispose()
        await servers.drop_database(url)
