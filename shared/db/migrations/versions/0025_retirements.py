"""Retirements: one row per retirement with the reviewer's note, the records named (and who staged each) and the
links that ended with them, written in the retirement's transaction, so agents read why a record was retired
(guidance, inspect_sources, inspect_claims) without reading the change log.

Backfilled from the change log: a revision no decision made whose `retired` entries name a source or a claim is a
retirement (a superseded verdict's links are retired by a decision); the records named are its sources and claims,
the relations and groups after them the links that ended with them. Who staged each record is read from the ledger.
A previous release still running during a rollout retires without the row; `threadline migrate` adds those
(shared/db/migrate.py, `fill_retirements`, which runs this backfill again; idempotent).
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0025', '0024'

BACKFILL = """
INSERT INTO retirements (case_id, revision, reviewer, note, records, ended, staged_by, at)
SELECT l.case_id, l.revision, l.actor,
       coalesce((SELECT e.value->>'note' FROM jsonb_array_elements(l.changes->'retired') e
                 WHERE e.value->>'record' IN ('source', 'claim') LIMIT 1), ''),
       (SELECT jsonb_agg(jsonb_build_object('record', e.value->>'record', 'id', e.value->>'id',
                                            'stagedBy', coalesce(s.staged_by, c.staged_by)) ORDER BY e.n)
        FROM jsonb_array_elements(l.changes->'retired') WITH ORDINALITY e(value, n)
        LEFT JOIN sources s ON e.value->>'record' = 'source' AND s.case_id = l.case_id AND s.source_id = e.value->>'id'
        LEFT JOIN claims c ON e.value->>'record' = 'claim' AND c.case_id = l.case_id AND c.claim_id = e.value->>'id'
        WHERE e.value->>'record' IN ('source', 'claim')),
       (SELECT coalesce(jsonb_agg(jsonb_build_object('record', e.value->>'record', 'id', e.value->>'id') ORDER BY e.n),
                        '[]'::jsonb)
        FROM jsonb_array_elements(l.changes->'retired') WITH ORDINALITY e(value, n)
        WHERE e.value->>'record' NOT IN ('source', 'claim')),
       (SELECT coalesce(array_agg(DISTINCT coalesce(s.staged_by, c.staged_by))
                            FILTER (WHERE coalesce(s.staged_by, c.staged_by) IS NOT NULL), '{}')
        FROM jsonb_array_elements(l.changes->'retired') e
        LEFT JOIN sources s ON e.value->>'record' = 'source' AND s.case_id = l.case_id AND s.source_id = e.value->>'id'
        LEFT JOIN claims c ON e.value->>'record' = 'claim' AND c.case_id = l.case_id AND c.claim_id = e.value->>'id'),
       l.at
FROM change_log l
WHERE l.decision_id IS NULL AND jsonb_typeof(l.changes->'retired') = 'array'
  AND EXISTS (SELECT 1 FROM jsonb_array_elements(l.changes->'retired') e WHERE e.value->>'record' IN ('source', 'claim'))
ON CONFLICT DO NOTHING
"""


def upgrade() -> None:
    op.create_table('retirements',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.Column('reviewer', sa.Text(), nullable=False),
    sa.Column('note', sa.Text(), nullable=False),
    sa.Column('records', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('ended', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('staged_by', postgresql.ARRAY(sa.Text()), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_retirements_case_id_cases')),
    sa.PrimaryKeyConstraint('case_id', 'revision', name=op.f('pk_retirements'))
    )
    op.execute(BACKFILL)


def downgrade() -> None:
    op.drop_table('retirements')
