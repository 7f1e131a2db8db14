"""Possible duplicates of a staged claim are its case's nearest claims, read from the case's claim index nearest
first, whatever the planner knows of the table: finding them does not read every claim of the case."""

from __future__ import annotations

from sqlalchemy import text

from shared.db.migrate import upgrade
from shared.db.session import create_engine

CLAIMS = 5000
INSERT = """
INSERT INTO search_records (case_id, kind, record_id, proposal_id, status, headline, body, plain, dup_key)
SELECT :case, 'claim', 'c' || n, '', CASE WHEN n % 3 = 0 THEN 'retired' ELSE 'canonical' END, 'h', 'b', 'b',
       'the grid ' || md5(n::text) || ' by ' || (n % 40 + 1990)
FROM generate_series(1, :n) AS n
"""


async def test_the_nearest_claims_of_a_large_case_are_found_without_reading_the_case(servers):
    url = await servers.create_database()
    engine = create_engine(url, pool_size=1)
    try:
        await upgrade(engine)
        async with engine.begin() as connection:  # not analysed yet, as a table that just grew is not
            await connection.execute(text(INSERT), {"case": "big", "n": CLAIMS})
            await connection.execute(text(INSERT), {"case": "other", "n": CLAIMS})  # the same texts, another case
            key = (await connection.execute(text("SELECT dup_key FROM search_records WHERE record_id = 'c10'"))).scalar()
            alike = f"{key[:-4]}2030"  # the same claim, another year
            await connection.execute(text(
                "INSERT INTO search_records (case_id, kind, record_id, proposal_id, status, headline, body, plain, "
                "dup_key) VALUES ('big', 'claim', 'pending-1', 'p1', 'pending', 'h', 'b', 'b', :alike)"), {"alike": alike})
        similar = f"threadline_similar_claims('big', ARRAY['{key}'], 0.7, 5)"
        async with engine.connect() as connection:
            found = (await connection.execute(text(f"SELECT record_id, status, similarity FROM {similar}"))).all()
            plan = (await connection.execute(text(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM {similar}"))
                    ).scalar()
    finally:
        await engine.dispose()
        await servers.drop_database(url)
    assert [(record, status) for record, status, _ in found] == [("c10", "canonical"), ("pending-1", "pending")]
    assert found[0][2] == 1.0 and 0.7 <= found[1][2] < 1.0
    # Reading every claim of the case costs about a buffer per claim of the case (1,058 here before 0018); the
    # index, a few per level walked (138).
    top = plan[0]["Plan"]
    buffers = top["Shared Hit Blocks"] + top["Shared Read Blocks"]
    assert buffers < CLAIMS / 20, f"{buffers} buffers read to find the claims like one among {CLAIMS}"
