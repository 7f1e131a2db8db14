"""Migration 0025 backfills the retirements from the change log: each retirement's note, its reviewer and time, the
records it named with who staged each, the links that ended with them — so notes written before the upgrade reach
agents after it; a decision whose superseded verdict's links were retired is no retirement."""

from __future__ import annotations

import json
import uuid

from sqlalchemy import text

from shared.db.migrate import downgrade, fill_retirements, upgrade
from shared.db.session import create_engine

SOURCE = ("INSERT INTO sources (case_id, source_id, publisher, title, url, url_key, publication_date, snapshot_date, "
          "type, authority, evidence_text, provenance_note, staged_by, decided_by, decided_at, revision, status) "
          "VALUES ('c1', :id, 'p', 't', 'u', 'u', '2026-01-01', '2026-01-01', 'primary', 'a', 'e', 'n', :by, 'r', "
          "now(), 1, 'retired')")
CLAIM = ("INSERT INTO claims (case_id, claim_id, text, kind, confidence, transformation_note, staged_by, decided_by, "
         "decided_at, revision, status) VALUES ('c1', :id, 't', 'observation', 'supported', 'n', :by, 'r', now(), 1, "
         "'retired')")
LOG = ("INSERT INTO change_log (case_id, revision, decision_id, actor, summary, changes, at) "
       "VALUES ('c1', CAST(:revision AS bigint), CAST(:decision AS uuid), :actor, 's', CAST(:changes AS jsonb), timestamptz '2026-02-01' "
       "+ make_interval(mins => CAST(:revision AS int)))")


def ended(record: str, record_id: str, note: str) -> dict[str, str]:
    return {"record": record, "id": record_id, "note": note}


async def test_the_retirements_are_backfilled_from_the_change_log(servers):
    url = await servers.create_database()
    engine = create_engine(url, pool_size=1)
    try:
        await upgrade(engine, "0024")
        async with engine.begin() as connection:
            await connection.execute(text(
                "INSERT INTO cases (case_id, title, question, created_by, revision) VALUES ('c1', 't', 'q', 'x', 4)"))
            for source_id, by in (("press-release", "agent-a"), ("recorded", None)):
                await connection.execute(text(SOURCE), {"id": source_id, "by": by})
            await connection.execute(text(CLAIM), {"id": "c-old", "by": "agent-b"})
            logged = [
                (1, None, "rita", {"retired": []}),
                (2, None, "rita", {"retired": [ended("source", "press-release", "bad source: misquotes the study"),
                                               ended("source", "recorded", "bad source: misquotes the study")]}),
                (3, str(uuid.uuid4()), "rita", {"retired": [ended("relation", "r9", "its claim v1 was superseded")]}),
                (4, None, "sam", {"retired": [ended("claim", "c-old", "Restated by c-new."),
                                              ended("relation", "r1", "its claim c-old was retired"),
                                              ended("group", "g1", "its claim c-old was retired")]}),
            ]
            for revision, decision, actor, changes in logged:
                await connection.execute(text(LOG), {"revision": revision, "decision": decision, "actor": actor,
                                                     "changes": json.dumps(changes)})
        await upgrade(engine)
        async with engine.connect() as connection:
            rows = (await connection.execute(text(
                "SELECT revision, reviewer, note, records, ended, staged_by, at FROM retirements ORDER BY revision"
            ))).all()
        assert [(r.revision, r.reviewer, r.note, r.records, r.ended, sorted(r.staged_by)) for r in rows] == [
            (2, "rita", "bad source: misquotes the study",
             [{"record": "source", "id": "press-release", "stagedBy": "agent-a"},
              {"record": "source", "id": "recorded", "stagedBy": None}], [], ["agent-a"]),
            (4, "sam", "Restated by c-new.", [{"record": "claim", "id": "c-old", "stagedBy": "agent-b"}],
             [{"record": "relation", "id": "r1"}, {"record": "group", "id": "g1"}], ["agent-b"]),
        ]
        assert [r.at.minute for r in rows] == [2, 4]  # the time the change log gives the revision
        # A previous release, still running during a rollout, retires without the row: `threadline migrate` keeps it.
        async with engine.begin() as connection:
            await connection.execute(text(LOG), {"revision": 5, "decision": None, "actor": "rita", "changes": json.dumps(
                {"retired": [ended("source", "recorded", "Old pod's note.")]})})
        assert await fill_retirements(engine) == 1
        assert await fill_retirements(engine) == 0
        async with engine.connect() as connection:
            assert await connection.scalar(text("SELECT note FROM retirements WHERE revision = 5")) == "Old pod's note."
        await downgrade(engine, "0024")
        async with engine.connect() as connection:
            assert await connection.scalar(text("SELECT to_regclass('retirements')")) is None
    finally:
        await engine.dispose()
        await servers.drop_database(url)
