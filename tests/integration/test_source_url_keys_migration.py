"""Migration 0023 stores each ledger source's URL key (`sources.url_key`, by `normalise_url`: tracking parameters
dropped, the others sorted) and recomputes the duplicate keys of indexed sources, ledger and pending, by the same
rule; its downgrade recomputes them by the rule before and drops the column. 0024 lets a source have no key (the release
before 0023 writes none) and keys those it finds, as `threadline migrate` does after the migrations."""

from __future__ import annotations

from sqlalchemy import text

from services.cli.bench.search_corpus import Claim
from services.cli.bench.search_fill import fill_case
from shared.db.migrate import downgrade, fill_url_keys, upgrade
from shared.db.session import Database
from shared.search_text import normalise_url
from tests.factories import source_item
from tests.integration.test_duplicate_keys_migration import index_pending

LEDGER = [Claim(f"c{n}", f"Heat pumps cut emissions, register {n}.") for n in range(51)]  # 3 sources
URLS = {"s-00000": "https://www.x.org/grid-outlook/?utm_source=x&fbclid=1", "s-00001": "https://x.org:443/a?year=2024&page=2",
        "s-00002": "https://x.org:8443/b"}
PENDING = source_item("s-new", url="http://x.org/grid-outlook?utm_medium=email#top")
# The keys `normalise_url` wrote before 0023 (the query kept as written).
BEFORE = {"s-00000": "x.org/grid-outlook?utm_source=x&fbclid=1", "s-00001": "x.org/a?year=2024&page=2",
          "s-00002": "x.org:8443/b", "s-new": "x.org/grid-outlook?utm_medium=email"}
AFTER = {"s-00000": "x.org/grid-outlook", "s-00001": "x.org/a?page=2&year=2024", "s-00002": "x.org:8443/b",
         "s-new": "x.org/grid-outlook"}
DUP_KEYS = ("SELECT record_id, dup_key FROM search_records WHERE case_id = 'urls' AND kind = 'source' "
            "AND record_id NOT LIKE 'm-%'")
# More sources than the migration reads at a time (its batch, 2000), copies of s-00002 at IPv6 hosts, indexed.
MANY = {f"m-{n:05d}": f"https://[2001:db8::{n}]:8080/p?utm_source=x&b={n}" for n in range(1, 2101)}
MANY_BEFORE = {record: f"2001:db8::{n}:8080/p?utm_source=x&b={n}" for n, record in enumerate(MANY, start=1)}
COPIES = """
INSERT INTO {table} ({columns}) SELECT {columns} FROM (
    SELECT (jsonb_populate_record(NULL::{table}, to_jsonb(t) || jsonb_build_object({changed}))).*
    FROM {table} t, generate_series(1, {count}) n WHERE t.case_id = 'urls' AND t.{key} = 's-00002' {more}) copies
"""
WRITABLE = ("SELECT string_agg(column_name, ', ') FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = :t AND is_generated = 'NEVER'")
MANY_ID = "'m-' || lpad(n::text, 5, '0')"
MANY_SOURCES = COPIES.format(
    table="sources", key="source_id", count=len(MANY), more="", columns="{columns}",
    changed=f"'source_id', {MANY_ID}, 'url', 'https://[2001:db8::' || n || ']\\:8080/p?utm_source=x&b=' || n")
MANY_RECORDS = COPIES.format(
    table="search_records", key="record_id", count=len(MANY), more="AND t.kind = 'source'", columns="{columns}",
    changed=f"'record_id', {MANY_ID}, 'dup_key', '2001:db8::' || n || '\\:8080/p?utm_source=x&b=' || n")
MANY_DUP_KEYS = "SELECT record_id, dup_key FROM search_records WHERE case_id = 'urls' AND record_id LIKE 'm-%'"
COLUMN = ("SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() "
          "AND table_name = 'sources' AND column_name = 'url_key'")


async def test_sources_url_keys_are_stored_and_their_duplicate_keys_recomputed_without_tracking_and_back(servers):
    url = await servers.create_database()
    db = Database.from_url(url, pool_size=1)
    try:
        await upgrade(db.engine)
        await fill_case(db, "urls", LEDGER)  # through the ledger's write path, which needs url_key
        await downgrade(db.engine, "0022")
        async with db.engine.begin() as connection:
            for source_id, address in URLS.items():
                await connection.execute(text("UPDATE sources SET url = :u WHERE case_id = 'urls' AND source_id = :s"),
                                         {"u": address, "s": source_id})
            await index_pending(connection, "urls", "source", "s-new", PENDING, PENDING["title"], BEFORE["s-new"])
            for record_id, key in BEFORE.items():  # the keys as the projection wrote them before 0023
                await connection.execute(text("UPDATE search_records SET dup_key = :k WHERE case_id = 'urls' "
                                              "AND kind = 'source' AND record_id = :r"), {"k": key, "r": record_id})
            for table, copies in (("sources", MANY_SOURCES), ("search_records", MANY_RECORDS)):
                columns = (await connection.execute(text(WRITABLE), {"t": table})).scalar_one()
                await connection.execute(text(copies.replace("{columns}", columns)))

        async def read(query: str) -> dict[str, str]:
            async with db.engine.connect() as connection:
                return dict((await connection.execute(text(query))).all())

        assert await read(DUP_KEYS) == BEFORE
        assert await read(MANY_DUP_KEYS) == MANY_BEFORE
        await upgrade(db.engine)
        assert await read(DUP_KEYS) == AFTER == {s: normalise_url(u) for s, u in (URLS | {"s-new": PENDING["url"]}).items()}
        assert await read("SELECT source_id, url_key FROM sources WHERE case_id = 'urls'") == {
            s: AFTER[s] for s in URLS} | {s: normalise_url(u) for s, u in MANY.items()}
        assert await read(MANY_DUP_KEYS) == {s: normalise_url(u) for s, u in MANY.items()}
        assert normalise_url(MANY["m-00001"]) == "[2001:db8::1]:8080/p?b=1"

        await downgrade(db.engine, "0022")
        assert await read(DUP_KEYS) == BEFORE
        assert await read(MANY_DUP_KEYS) == MANY_BEFORE
        async with db.engine.connect() as connection:
            assert (await connection.execute(text(COLUMN))).scalar() == 0
    finally:
        await db.dispose()
        await servers.drop_database(url)


# A source as the release before 0023 writes it: no url_key (0024 lets it, so that release keeps working beside this).
PREVIOUS_RELEASE = """
INSERT INTO sources (case_id, source_id, publisher, title, url, publication_date, snapshot_date, type, authority,
                     evidence_text, provenance_note, decided_by, decided_at, revision)
VALUES ('urls', :s, 'Agency', 'Outlook', :u, '2024-01-01', '2024-02-01', 'primary', 'Its own.', 'Figures.', 'Kept.',
        'rita', now(), 1)
"""
OLD = {"s-old": "https://www.x.org/old/?utm_source=x&b=2&a=1", "s-later": "https://[::1]:8080/later?z=1&fbclid=2"}
NULLABLE = ("SELECT is_nullable FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'sources' AND column_name = 'url_key'")


async def test_a_source_written_without_url_key_by_the_previous_release_is_kept_at_head_keyed_and_back(servers):
    url = await servers.create_database()
    db = Database.from_url(url, pool_size=1)

    async def url_key(source_id: str) -> str | None:
        async with db.engine.connect() as connection:
            return (await connection.execute(text("SELECT url_key FROM sources WHERE case_id = 'urls' "
                                                  "AND source_id = :s"), {"s": source_id})).scalar_one()

    async def nullable() -> str:
        async with db.engine.connect() as connection:
            return (await connection.execute(text(NULLABLE))).scalar_one()

    try:
        await upgrade(db.engine)
        await fill_case(db, "urls", LEDGER)
        async with db.engine.begin() as connection:
            await connection.execute(text(PREVIOUS_RELEASE), {"s": "s-old", "u": OLD["s-old"]})
        assert await url_key("s-old") is None and await nullable() == "YES"

        await downgrade(db.engine, "0023")  # keys it by 0023's rule, then NOT NULL again
        assert await url_key("s-old") == "x.org/old?a=1&b=2" and await nullable() == "NO"
        await upgrade(db.engine)
        assert await nullable() == "YES"
        async with db.engine.begin() as connection:
            await connection.execute(text(PREVIOUS_RELEASE), {"s": "s-later", "u": OLD["s-later"]})
        assert await fill_url_keys(db.engine) == 1  # what `threadline migrate` runs after the migrations
        assert await url_key("s-later") == normalise_url(OLD["s-later"]) == "[::1]:8080/later?z=1"
        assert await fill_url_keys(db.engine) == 0
    finally:
        await db.dispose()
        await servers.drop_database(url)
