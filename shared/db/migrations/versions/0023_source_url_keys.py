"""Sources' URLs keyed one way: `sources.url_key`, and sources' `dup_key` recomputed by the new `normalise_url`.

`shared/search_text.normalise_url` now drops tracking parameters from the query (`utm_*`, `fbclid`, ...) and sorts
the others, so `https://x.org/a?utm_source=x` is `https://x.org/a`. It is the one rule: the review check
`source-url-restaged` read the ledger through an SQL copy of another (ports kept, the query part of the path),
computed for every active source of the case on each check. The ledger now stores each source's key, written
with the row, in `sources.url_key`, indexed by case; the search index's keys of sources (`search_records.dup_key`,
which staging's possible duplicates compare) are recomputed by the same rule: a ledger source's from `sources`,
a pending source's from its proposal item, as the projection read them. The downgrade recomputes them by the
old rule and drops the column.
"""

from collections.abc import Iterator
from urllib.parse import urlsplit

import sqlalchemy as sa
from alembic import op

revision, down_revision = '0023', '0022'

_BATCH = 2000  # rows read, and written, at a time: a large database is never held in memory whole
# Sources' search records a page at a time, after a key (case_id, record_id, proposal_id), with the URL each was
# keyed from: a ledger source's (proposal_id '') from `sources`, a pending one's from its proposal item.
_SOURCE_URLS = """
SELECT r.case_id, r.record_id, r.proposal_id, r.dup_key,
       CASE WHEN r.proposal_id = '' THEN s.url ELSE i.payload ->> 'url' END AS url
FROM search_records r
LEFT JOIN sources s ON r.proposal_id = '' AND s.case_id = r.case_id AND s.source_id = r.record_id
LEFT JOIN proposal_items i ON r.proposal_id <> '' AND i.proposal_id::text = r.proposal_id
                          AND i.payload ->> 'id' = r.record_id
WHERE r.kind = 'source' AND (s.source_id IS NOT NULL OR i.proposal_id IS NOT NULL)
  AND (r.case_id, r.record_id, r.proposal_id) > (:case_id, :record_id, :proposal_id)
ORDER BY r.case_id, r.record_id, r.proposal_id
LIMIT :batch
"""
_SOURCES = """
SELECT case_id, source_id, url FROM sources WHERE (case_id, source_id) > (:case_id, :source_id)
ORDER BY case_id, source_id LIMIT :batch
"""
_SET_DUP_KEYS = """
UPDATE search_records r SET dup_key = u.dup_key
FROM unnest(CAST(:case_ids AS text[]), CAST(:ids AS text[]), CAST(:proposals AS text[]), CAST(:keys AS text[]))
  AS u(case_id, record_id, proposal_id, dup_key)
WHERE r.case_id = u.case_id AND r.kind = 'source' AND r.record_id = u.record_id AND r.proposal_id = u.proposal_id
"""
_SET_URL_KEYS = """
UPDATE sources s SET url_key = u.url_key
FROM unnest(CAST(:case_ids AS text[]), CAST(:ids AS text[]), CAST(:keys AS text[])) AS u(case_id, source_id, url_key)
WHERE s.case_id = u.case_id AND s.source_id = u.source_id
"""

# shared/search_text as of this revision (a migration does not change with the code).
_TRACKING = frozenset({"fbclid", "gclid", "dclid", "msclkid", "mc_cid", "mc_eid", "igshid", "_ga"})


def _tracking(parameter: str) -> bool:
    name = parameter.partition("=")[0].lower()
    return name.startswith("utm_") or name in _TRACKING


def _host(url: str, *, bracketed: bool) -> tuple[str, str, str]:
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower().removeprefix("www.")
    if bracketed and ":" in host:  # an IPv6 host: `[::1]:8080` and `[::1:8080]` differ
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port and port not in (80, 443):
        host = f"{host}:{port}"
    return host, parts.path.rstrip("/"), parts.query


def _new(url: str) -> str:
    host, path, query = _host(url, bracketed=True)
    query = "&".join(sorted(p for p in query.split("&") if p and not _tracking(p)))
    return f"{host}{path}" + (f"?{query}" if query else "")


def _old(url: str) -> str:
    """The rule before this revision: the query kept as written, an IPv6 host without its brackets."""
    host, path, query = _host(url, bracketed=False)
    return f"{host}{path}" + (f"?{query}" if query else "")


def _pages(query: str, **first: str) -> Iterator[list]:
    """The rows of `query` a batch at a time, each page after the last row of the one before (keyset: `first`
    names the key's columns, at their lowest)."""
    connection, after = op.get_bind(), first
    while rows := connection.execute(sa.text(query), {**after, "batch": _BATCH}).all():
        yield rows
        after = {column: getattr(rows[-1], column) for column in first}


def _recompute_dup_keys(rule) -> None:  # noqa: ANN001
    connection = op.get_bind()
    for page in _pages(_SOURCE_URLS, case_id="", record_id="", proposal_id=""):
        chunk = [r for r in page if rule(r.url or "") != r.dup_key]
        if chunk:
            connection.execute(sa.text(_SET_DUP_KEYS), {
                "case_ids": [r.case_id for r in chunk], "ids": [r.record_id for r in chunk],
                "proposals": [r.proposal_id for r in chunk], "keys": [rule(r.url or "") for r in chunk]})


def upgrade() -> None:
    connection = op.get_bind()
    op.add_column('sources', sa.Column('url_key', sa.Text(), nullable=True))
    for chunk in _pages(_SOURCES, case_id="", source_id=""):
        connection.execute(sa.text(_SET_URL_KEYS), {
            "case_ids": [r.case_id for r in chunk], "ids": [r.source_id for r in chunk],
            "keys": [_new(r.url) for r in chunk]})
    op.alter_column('sources', 'url_key', nullable=False)
    op.create_index('ix_sources_url_key', 'sources', ['case_id', 'url_key'])
    _recompute_dup_keys(_new)


def downgrade() -> None:
    _recompute_dup_keys(_old)
    op.drop_index('ix_sources_url_key', table_name='sources')
    op.drop_column('sources', 'url_key')
