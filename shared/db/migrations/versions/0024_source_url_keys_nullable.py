"""`sources.url_key` may be NULL, so that the previous release, which writes sources without one, keeps working
beside this one during a rollout and after a rollback (0023 made it NOT NULL with no default: an old review pod
accepting a source failed).

A NULL key means the source was written by the previous release and not keyed since. The review check
`source-url-restaged` still finds it as a URL twin: it reads the case's active sources without a key too and
normalises their URLs itself (shared/review_check_facts.py). `threadline migrate` keys them (shared/db/migrate.py,
`fill_url_keys`, idempotent: a no-op when none is missing), as this upgrade does with 0023's rule, frozen there
(a migration does not change with the code). The downgrade keys any still missing, then makes the column NOT
NULL again.
"""

from importlib import import_module

import sqlalchemy as sa
from alembic import op

revision, down_revision = '0024', '0023'

_0023 = import_module("shared.db.migrations.versions.0023_source_url_keys")
_UNKEYED = "SELECT case_id, source_id, url FROM sources WHERE url_key IS NULL LIMIT :batch"
_SET_URL_KEYS = """
UPDATE sources s SET url_key = u.url_key
FROM unnest(CAST(:case_ids AS text[]), CAST(:ids AS text[]), CAST(:keys AS text[])) AS u(case_id, source_id, url_key)
WHERE s.case_id = u.case_id AND s.source_id = u.source_id AND s.url_key IS NULL
"""


def _fill() -> None:
    """Key the sources without a key, a batch at a time (each batch keyed is not read again)."""
    connection = op.get_bind()
    while rows := connection.execute(sa.text(_UNKEYED), {"batch": _0023._BATCH}).all():
        connection.execute(sa.text(_SET_URL_KEYS), {
            "case_ids": [r.case_id for r in rows], "ids": [r.source_id for r in rows],
            "keys": [_0023._new(r.url) for r in rows]})


def upgrade() -> None:
    op.alter_column('sources', 'url_key', existing_type=sa.Text(), nullable=True)
    _fill()


def downgrade() -> None:
    _fill()
    op.alter_column('sources', 'url_key', existing_type=sa.Text(), nullable=False)
