"""Migration 0020 recomputes the duplicate keys of indexed claims, ledger and pending, by `normalise` as it reads
accents now (as search does: Łódź as lodz, ガス not カス), and its downgrade by the rule before."""

from __future__ import annotations

import json
import uuid

from sqlalchemy import text

from services.cli.bench.search_corpus import Claim
from services.cli.bench.search_fill import fill_case
from services.projection.search_index import IndexRow, SqlSearchIndex
from shared.db.migrate import downgrade, upgrade
from shared.db.session import Database
from shared.search_text import duplicate_key, normalise

LEDGER = [Claim("c-lodz", "Heat pumps in Łódź cut emissions by 12.50%."), Claim("c-oslo", "Heat pumps in Oslo cut 9%."),
          Claim("c-seoul", "서울의 열펌프 보급이 늘었다")]
PENDING = {"id": "c-gas", "text": "ガスの価格", "kind": "observation", "confidence": "supported", "sourceIds": ["s-00000"],
           "transformationNote": "Quoted.", "proposalRationale": "Restates nothing."}
# The keys `normalise` wrote before 0020 (it dropped every combining mark and kept Ł, so ガ was カ and 서 was ㅅㅓ).
BEFORE = {"c-lodz": "heat pumps in łodz cut emissions by 12 5 percent", "c-oslo": "heat pumps in oslo cut 9 percent",
          "c-seoul": "\u1109\u1165\u110b\u116e\u11af\u110b\u1174 \u110b\u1167\u11af\u1111\u1165\u11b7\u1111\u1173 "
                     "\u1107\u1169\u1100\u1173\u11b8\u110b\u1175 \u1102\u1173\u11af\u110b\u1165\u11bb\u1103\u1161",
          "c-gas": "カスの価格"}
KEYS = "SELECT record_id, dup_key FROM search_records WHERE case_id = 'dups' AND kind = 'claim'"


async def index_pending(connection, case_id: str, kind: str, item_id: str, payload: dict, headline: str,
                        dup_key: str) -> None:
    """A pending item in a proposal of its own, indexed as the projection indexes one, with this duplicate key."""
    proposal = str(uuid.uuid4())
    await connection.execute(text(
        "INSERT INTO proposals (proposal_id, case_id, kind, pinned_revision, agent_name, item_count) "
        "VALUES (:p, :c, :k, 1, 'agent', 1)"), {"p": proposal, "c": case_id, "k": f"{kind}s"})
    await connection.execute(text(
        "INSERT INTO proposal_items (proposal_id, item_id, position, payload) "
        "VALUES (:p, :i, 0, CAST(:payload AS jsonb))"), {"p": proposal, "i": item_id, "payload": json.dumps(payload)})
    await SqlSearchIndex(connection).add(case_id, [IndexRow(kind, item_id, proposal, "pending", headline, headline,
                                                            dup_key)])


async def test_claims_duplicate_keys_are_recomputed_as_search_reads_accents_and_back(servers):
    url = await servers.create_database()
    db = Database.from_url(url, pool_size=1)
    try:
        await upgrade(db.engine)
        await fill_case(db, "dups", LEDGER)  # through the ledger's write path, as the schema is now
        await downgrade(db.engine, "0019")
        async with db.engine.begin() as connection:
            await index_pending(connection, "dups", "claim", "c-gas", PENDING, PENDING["text"],
                                duplicate_key("claim", PENDING))
            for record_id, key in BEFORE.items():  # the keys as the projection wrote them before 0020
                await connection.execute(text("UPDATE search_records SET dup_key = :k WHERE case_id = 'dups' "
                                              "AND record_id = :r"), {"k": key, "r": record_id})

        async def keys() -> dict[str, str]:
            async with db.engine.connect() as connection:
                return dict((await connection.execute(text(KEYS))).all())

        assert await keys() == BEFORE
        await upgrade(db.engine)
        now = await keys()
        assert now == {c.claim_id: normalise(c.text) for c in LEDGER} | {"c-gas": normalise(PENDING["text"])}
        assert now["c-lodz"] == "heat pumps in lodz cut emissions by 12 5 percent" and now["c-gas"] == "ガスの価格"
        assert now["c-seoul"] == "서울의 열펌프 보급이 늘었다" and now["c-oslo"] == BEFORE["c-oslo"]

        await downgrade(db.engine, "0019")
        assert await keys() == BEFORE
    finally:
        await db.dispose()
        await servers.drop_database(url)
