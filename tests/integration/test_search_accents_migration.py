"""Migration 0019 indexes existing search rows without their accents, exactly as the projection indexes new ones
(their text, its words and the case's word counts), and its downgrade indexes them as written again."""

from __future__ import annotations

from sqlalchemy import text

from services.projection.search_index import IndexRow, SqlSearchIndex
from shared.db.migrate import downgrade, upgrade
from shared.db.session import create_engine

ROWS = [IndexRow("claim", "c-heat", "", "canonical", "Heat pumps in Zürich", "Heat pumps in Zürich cut emissions", None),
        IndexRow("source", "s-nestle", "", "canonical", "Annual review", "Annual review\nNestlé S.A.", None),
        IndexRow("claim", "c-plain", "p1", "pending", "Plain words", "Plain words, the heat of Zurich", None),
        IndexRow("group", "g-baltic", "", "retired", "Łódź", "Łódź and Øresund\nStraße", None)]
BEFORE_0019 = ["""
INSERT INTO search_records (case_id, kind, record_id, proposal_id, status, headline, body)
SELECT 'old', * FROM unnest(CAST(:kinds AS text[]), CAST(:ids AS text[]), CAST(:proposals AS text[]),
                            CAST(:statuses AS text[]), CAST(:headlines AS text[]), CAST(:bodies AS text[]))
""", """
INSERT INTO search_words (case_id, word, n)
SELECT case_id, word, count(*) FROM search_records, unnest(tsvector_to_array(tsv)) AS word GROUP BY case_id, word
""", "INSERT INTO search_words (case_id, word, n) VALUES ('old', 'gone', 0)"]
INDEX = "SELECT kind, record_id, proposal_id, headline, body, {plain} tsv::text FROM search_records " \
        "WHERE case_id = :c ORDER BY kind, record_id"
WORDS = "SELECT word, n FROM search_words WHERE case_id = :c AND n <> 0 ORDER BY word"


async def read(engine, case_id: str, plain: bool = True) -> tuple[list[tuple], list[tuple]]:  # noqa: ANN001
    async with engine.connect() as connection:
        index = (await connection.execute(text(INDEX.format(plain="plain," if plain else "")), {"c": case_id})).all()
        words = (await connection.execute(text(WORDS), {"c": case_id})).all()
    return [tuple(r) for r in index], [tuple(w) for w in words]


async def test_existing_rows_are_indexed_without_accents_as_the_projection_indexes_them_and_back(servers):
    url = await servers.create_database()
    engine = create_engine(url, pool_size=1)
    try:
        await upgrade(engine, "0018")
        async with engine.begin() as connection:  # rows and word counts as the projection wrote them before 0019
            for statement in BEFORE_0019:
                await connection.execute(text(statement), {
                    "kinds": [r.kind for r in ROWS], "ids": [r.record_id for r in ROWS],
                    "proposals": [r.proposal_id for r in ROWS], "statuses": [r.status for r in ROWS],
                    "headlines": [r.headline for r in ROWS], "bodies": [r.body for r in ROWS]})
        written = await read(engine, "old", plain=False)
        assert ("zurich", 1) in written[1] and ("zürich", 1) in written[1] and ("nestlé", 1) in written[1]

        await upgrade(engine)
        async with engine.begin() as connection:
            await SqlSearchIndex(connection).add("new", ROWS)
        migrated, projected = await read(engine, "old"), await read(engine, "new")
        assert migrated == projected
        index, words = migrated
        assert [plain for *_, plain, _ in index] == [
            "Heat pumps in Zurich cut emissions", "Plain words, the heat of Zurich", "Lodz and Oresund\nStrasse",
            "Annual review\nNestle S.A."]
        assert [body for _, _, _, _, body, _, _ in index] == [r.body for r in (ROWS[0], ROWS[2], ROWS[3], ROWS[1])]
        assert {("zurich", 2), ("nestl", 1), ("lodz", 1), ("oresund", 1)} <= set(words)
        assert all(w.isascii() for w, _ in words)

        await downgrade(engine, "0018")
        assert await read(engine, "old", plain=False) == written
    finally:
        await engine.dispose()
        await servers.drop_database(url)
