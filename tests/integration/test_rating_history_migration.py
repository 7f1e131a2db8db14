"""Migration 0012 backfills the rating history: every re-rating the change log records, at its revision, and
each current rating the log does not name — so a case rated before the migration reads back as of any revision."""

from __future__ import annotations

import json

from sqlalchemy import text

from shared.db.migrate import upgrade
from shared.db.session import create_engine

CLAIM = ("INSERT INTO claims (case_id, claim_id, text, kind, confidence, transformation_note, decided_by, decided_at, "
         "revision) VALUES ('c1', :id, 't', :kind, 'supported', 'n', 'r', now(), 1)")
LOG = ("INSERT INTO change_log (case_id, revision, actor, summary, changes) "
       "VALUES ('c1', :revision, 'r', 's', CAST(:changes AS jsonb))")
RATING = ("INSERT INTO evidence_health (case_id, claim_id, health, lost, revision) "
          "VALUES ('c1', :id, :health, CAST(:lost AS jsonb), :revision)")


def rated(claim_id: str, health: str, *lost: str) -> dict:
    return {"claimId": claim_id, "health": health, "lost": [{"record": "source", "id": s} for s in lost]}


async def test_the_rating_history_is_backfilled_from_the_change_log_and_the_current_ratings(servers):
    url = await servers.create_database()
    engine = create_engine(url, pool_size=1)
    try:
        await upgrade(engine, "0009")
        async with engine.begin() as connection:
            await connection.execute(text(
                "INSERT INTO cases (case_id, title, question, created_by, revision) VALUES ('c1', 't', 'q', 'x', 4)"))
            for claim_id, kind in (("a", "observation"), ("v", "verdict"), ("old", "observation")):
                await connection.execute(text(CLAIM), {"id": claim_id, "kind": kind})
            await connection.execute(text(LOG), {"revision": 1, "changes": json.dumps({"rerated": []})})
            await connection.execute(text(LOG), {"revision": 2, "changes": json.dumps(
                {"rerated": [rated("a", "unsupported", "s1"), rated("v", "weakened", "s1")]})})
            await connection.execute(text(LOG), {"revision": 3, "changes": json.dumps({"retired": []})})
            await connection.execute(text(LOG), {"revision": 4, "changes": json.dumps(
                {"rerated": [rated("v", "weakened", "s1", "s2")]})})
            # Ratings as evidence_health keeps them: the last one of each claim; `old` was rated before the log said so.
            for claim_id, health, lost, revision in (("a", "unsupported", ["s1"], 2), ("v", "weakened", ["s1", "s2"], 4),
                                                     ("old", "unsupported", ["s0"], 1)):
                await connection.execute(text(RATING), {"id": claim_id, "health": health, "revision": revision,
                                                        "lost": json.dumps([{"record": "source", "id": s} for s in lost])})
        await upgrade(engine)
        async with engine.connect() as connection:
            rows = (await connection.execute(text(
                "SELECT claim_id, revision, health, lost FROM rating_history ORDER BY claim_id, revision"))).all()
        assert [(r.claim_id, r.revision, r.health, [x["id"] for x in r.lost]) for r in rows] == [
            ("a", 2, "unsupported", ["s1"]),
            ("old", 1, "unsupported", ["s0"]),
            ("v", 2, "weakened", ["s1"]),
            ("v", 4, "weakened", ["s1", "s2"]),
        ]
    finally:
        await engine.dispose()
        await servers.drop_database(url)
