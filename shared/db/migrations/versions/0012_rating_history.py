"""Rating history: every re-rating at the revision that made it, so a case reads back as of any revision.

Backfilled from the change log (each revision's `rerated` entries), then from the current ratings for any
claim the log does not name.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0012', '0009'

BACKFILL = ["""
INSERT INTO rating_history (case_id, claim_id, revision, health, lost)
SELECT l.case_id, r.value->>'claimId', l.revision, r.value->>'health', COALESCE(r.value->'lost', '[]'::jsonb)
FROM change_log l, jsonb_array_elements(COALESCE(l.changes->'rerated', '[]'::jsonb)) AS r(value)
WHERE EXISTS (SELECT 1 FROM claims c WHERE c.case_id = l.case_id AND c.claim_id = r.value->>'claimId')
ON CONFLICT DO NOTHING
""", """
INSERT INTO rating_history (case_id, claim_id, revision, health, lost)
SELECT e.case_id, e.claim_id, e.revision, e.health, e.lost FROM evidence_health e
WHERE NOT EXISTS (SELECT 1 FROM rating_history h WHERE h.case_id = e.case_id AND h.claim_id = e.claim_id)
ON CONFLICT DO NOTHING
"""]


def upgrade() -> None:
    op.create_table('rating_history',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('claim_id', sa.Text(), nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.Column('health', sa.Text(), nullable=False),
    sa.Column('lost', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.CheckConstraint("health IN ('unsupported', 'weakened')", name=op.f('ck_rating_history_health_known')),
    sa.ForeignKeyConstraint(['case_id', 'claim_id'], ['claims.case_id', 'claims.claim_id'],
                            name=op.f('fk_rating_history_case_id_claim_id_claims')),
    sa.PrimaryKeyConstraint('case_id', 'claim_id', 'revision', name=op.f('pk_rating_history'))
    )
    for statement in BACKFILL:
        op.execute(statement)


def downgrade() -> None:
    op.drop_table('rating_history')
